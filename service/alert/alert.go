// Package alert holds an execution's alerts as the alert worker sends
// them (Load) and records what became of them (RecordResult), and the
// lists of what needs a person's attention (SLAMisses, SLAMissedRuns,
// BlockedRuns, FailedSince). Queueing alerts is service's, in the transactions that
// record what they are about.
package alert

import (
	"cmp"
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/endpoint"
	"github.com/axhq/ax/service/errs"
)

// Timeline events the alert worker appends to the failed execution.
const (
	EventSent   = "alert_sent"
	EventFailed = "alert_failed"
)

// Alert types (the "type" of an alert's body).
const (
	ExecutionFailed    = "execution.failed"
	ExecutionSLAMissed = "execution.sla_missed"
	// ExecutionRecovered is about the first success of a task after a
	// failure that was alerted (ExecutionFailed).
	ExecutionRecovered = "execution.recovered"
)

// Message is an alert to send: the execution it is about and where to
// send it.
type Message struct {
	// Type is ExecutionFailed, ExecutionSLAMissed or ExecutionRecovered.
	Type string
	// Format is the alert endpoint's format (endpoint.FormatAx or
	// endpoint.FormatSlack).
	Format string
	// SLAFinishWithin and SLADueAt describe a missed SLA.
	SLAFinishWithin time.Duration
	SLADueAt        *time.Time
	// Failures is, in an ExecutionRecovered alert, how many failed
	// executions in a row the success ended (the job's args carry it:
	// the task's count is zero by then).
	Failures int

	ExecutionID    string
	TaskID         string
	TaskName       string
	TaskState      string
	ScheduledFor   time.Time
	Trigger        string
	State          string
	Attempts       int
	LastStatusCode *int
	LastError      string
	ErrorClass     string
	FinishedAt     *time.Time

	EndpointID string
	URL        string
	Method     string
	Headers    map[string]string
	Timeout    time.Duration
	Keys       [][]byte
	// Skip, when set, says why the alert must not be sent (the alert
	// endpoint was removed from the task, deleted or disabled).
	Skip string
}

// Load loads the alert of type alertType ("": ExecutionFailed) for an
// execution. errs.ErrNotFound means the execution no longer exists.
func Load(ctx context.Context, q db.Querier, tenant, executionID, alertType string) (Message, error) {
	row, err := db.GetAlert(ctx, q, tenant, executionID)
	if err != nil {
		return Message{}, errs.Store(err, "load alert for execution "+executionID)
	}
	a := Message{
		ExecutionID: row.ExecutionID, TaskID: row.TaskID, TaskName: zeroIfNil(row.TaskName), TaskState: zeroIfNil(row.TaskState),
		ScheduledFor: row.ScheduledFor.UTC(), Trigger: row.Trigger, State: row.State, Attempts: row.Attempts,
		LastStatusCode: row.LastStatusCode, LastError: zeroIfNil(row.LastError), ErrorClass: zeroIfNil(row.LastErrorClass),
		FinishedAt: utcPtr(row.FinishedAt), Type: cmp.Or(alertType, ExecutionFailed),
		Format: cmp.Or(zeroIfNil(row.EndpointFormat), endpoint.FormatAx), SLADueAt: utcPtr(row.SLADueAt),
		SLAFinishWithin: time.Duration(zeroIfNil(row.SLAFinishWithinMS)) * time.Millisecond,
	}
	switch {
	case !row.EndpointFound:
		a.Skip = "the task has no alert endpoint any more"
		return a, nil
	case !zeroIfNil(row.EndpointEnabled):
		a.Skip = "the alert endpoint is disabled"
		return a, nil
	}
	ep := endpoint.Endpoint{
		ID: zeroIfNil(row.EndpointID), Secret: zeroIfNil(row.Secret), PreviousSecret: zeroIfNil(row.PreviousSecret),
		PreviousSecretExpiresAt: row.PreviousSecretExp,
	}
	keys, err := ep.SigningKeys(row.Now)
	if err != nil {
		return Message{}, err
	}
	a.EndpointID, a.URL, a.Method, a.Headers, a.Keys = ep.ID, zeroIfNil(row.EndpointURL), zeroIfNil(row.EndpointMethod), row.EndpointHeaders, keys
	a.Timeout = time.Duration(zeroIfNil(row.EndpointTimeoutMS)) * time.Millisecond
	return a, nil
}

// RecordResult records on the execution's timeline what became of its
// alert: alert_sent, or alert_failed with the reason when it was given up.
func RecordResult(ctx context.Context, q db.Querier, tenant, executionID string, sent bool, statusCode int, latency time.Duration, errorClass, message string) error {
	ev := db.DeliveryEvent{Type: EventSent, ErrorClass: nilIfEmpty(errorClass), Message: nilIfEmpty(message)}
	if !sent {
		ev.Type = EventFailed
	}
	if statusCode != 0 {
		ev.StatusCode = &statusCode
	}
	if latency > 0 {
		ms := int(latency.Milliseconds())
		ev.LatencyMS = &ms
	}
	return errs.Store(db.InsertDeliveryEvents(ctx, q, tenant, executionID, []db.DeliveryEvent{ev}), "record alert result")
}

func zeroIfNil[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
