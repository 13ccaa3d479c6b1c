package service

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/endpoint"
)

// Timeline events the alert worker appends to the failed execution.
const (
	EventAlertSent   = "alert_sent"
	EventAlertFailed = "alert_failed"
)

// Alert types (the "type" of an alert's body).
const (
	AlertExecutionFailed    = "execution.failed"
	AlertExecutionSLAMissed = "execution.sla_missed"
)

// Alert formats of an endpoint (Endpoint.Format).
const (
	// AlertFormatAx: ax's signed JSON body.
	AlertFormatAx = endpoint.FormatAx
	// AlertFormatSlack: a Slack incoming-webhook body ({"text": …}).
	AlertFormatSlack = endpoint.FormatSlack
)

// Alert is an alert to send: the execution it is about and where to send
// it.
type Alert struct {
	// Type is AlertExecutionFailed or AlertExecutionSLAMissed.
	Type string
	// Format is the alert endpoint's format.
	Format string
	// SLAFinishWithin and SLADueAt describe a missed SLA.
	SLAFinishWithin time.Duration
	SLADueAt        *time.Time

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

// Alert loads the failure alert for an execution. ErrNotFound means the
// execution no longer exists.
func (s *Deliveries) Alert(ctx context.Context, tenant, executionID, alertType string) (Alert, error) {
	row, err := db.GetAlert(ctx, s.pool, tenant, executionID)
	if err != nil {
		return Alert{}, storeError(err, "load alert for execution "+executionID)
	}
	a := Alert{
		ExecutionID: row.ExecutionID, TaskID: row.TaskID, TaskName: zeroIfNil(row.TaskName), TaskState: zeroIfNil(row.TaskState),
		ScheduledFor: row.ScheduledFor.UTC(), Trigger: row.Trigger, State: row.State, Attempts: row.Attempts,
		LastStatusCode: row.LastStatusCode, LastError: zeroIfNil(row.LastError), ErrorClass: zeroIfNil(row.LastErrorClass),
		FinishedAt: utcPtr(row.FinishedAt), Type: cmpOr(alertType, AlertExecutionFailed),
		Format: cmpOr(zeroIfNil(row.EndpointFormat), AlertFormatAx), SLADueAt: utcPtr(row.SLADueAt),
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
	ep := endpointOf(row.JoinedEndpoint)
	keys, err := ep.SigningKeys(row.Now)
	if err != nil {
		return Alert{}, err
	}
	a.EndpointID, a.URL, a.Method, a.Headers, a.Keys = ep.ID, zeroIfNil(row.EndpointURL), zeroIfNil(row.EndpointMethod), row.EndpointHeaders, keys
	a.Timeout = time.Duration(zeroIfNil(row.EndpointTimeoutMS)) * time.Millisecond
	return a, nil
}

// AlertResult records on the execution's timeline what became of its alert:
// alert_sent, or alert_failed with the reason when it was given up.
func (s *Deliveries) AlertResult(ctx context.Context, tenant, executionID string, sent bool, statusCode int, latency time.Duration, errorClass, message string) error {
	ev := db.DeliveryEvent{Type: EventAlertSent, ErrorClass: nilIfEmpty(errorClass), Message: nilIfEmpty(message)}
	if !sent {
		ev.Type = EventAlertFailed
	}
	if statusCode != 0 {
		ev.StatusCode = &statusCode
	}
	if latency > 0 {
		ms := int(latency.Milliseconds())
		ev.LatencyMS = &ms
	}
	return storeError(db.InsertDeliveryEvents(ctx, s.pool, tenant, executionID, []db.DeliveryEvent{ev}), "record alert result")
}
