package service

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/alert"
	"github.com/axhq/ax/service/endpoint"
)

// Alerts (service/alert), as the service's callers name them.
const (
	// Timeline events the alert worker appends to the failed execution.
	EventAlertSent   = alert.EventSent
	EventAlertFailed = alert.EventFailed
	// Alert types (the "type" of an alert's body).
	AlertExecutionFailed    = alert.ExecutionFailed
	AlertExecutionSLAMissed = alert.ExecutionSLAMissed
	AlertExecutionRecovered = alert.ExecutionRecovered
	// Alert formats of an endpoint (Endpoint.Format): ax's signed JSON
	// body, or a Slack incoming-webhook body ({"text": …}).
	AlertFormatAx    = endpoint.FormatAx
	AlertFormatSlack = endpoint.FormatSlack
	// AlertListMax bounds the rows one of the alert lists returns.
	AlertListMax = alert.ListMax
)

type (
	// Alert is an alert to send: the execution it is about and where to
	// send it.
	Alert = alert.Message
	// ExecutionSLAMiss is an execution recorded as not succeeded by its
	// task's SLA deadline.
	ExecutionSLAMiss = alert.SLAMiss
	// AlertRun is a workflow run that needs attention: one that missed
	// its workflow's SLA, or one that is blocked.
	AlertRun = alert.Run
	// FailedExecution is an execution failed for good with its task's or
	// its workflow's name.
	FailedExecution = alert.Failed
)

// Alert loads the alert a job's args name (alert.Load). ErrNotFound means
// the execution no longer exists.
func (s *Deliveries) Alert(ctx context.Context, args AlertArgs) (Alert, error) {
	a, err := alert.Load(ctx, s.pool, args.TenantID, args.ExecutionID, args.Type)
	a.Failures = args.Failures
	return a, err
}

// alertsFailure is the rule of alert_after_failures: a task's failed
// execution that is its consecutive-th in a row is alerted when that is
// at least after (every failure from the after-th on, until a success
// ends the streak).
func alertsFailure(consecutive, after int) bool {
	return consecutive >= max(after, 1)
}

// queueRecovered queues the execution.recovered alert of the success
// executionID when the failure streak it ended (rec, from
// db.ResetTaskFailures) had an alerted failure and the task still has an
// alert endpoint, in the transaction that recorded the success; it
// reports whether it queued one. A streak is ended once, so its
// recovered alert is queued once.
func queueRecovered(ctx context.Context, tx db.Tx, enq *Enqueuer, alertMaxAttempts int, tenant, executionID string, rec db.Recovery) (bool, error) {
	alertTo := zeroIfNil(rec.AlertEndpointID)
	if !rec.Alerted || alertTo == "" {
		return false, nil
	}
	_, err := enq.insertMany(ctx, tx, []river.InsertManyParams{{
		Args:       AlertArgs{TenantID: tenant, ExecutionID: executionID, Type: AlertExecutionRecovered, Failures: rec.Failures},
		InsertOpts: &river.InsertOpts{Queue: QueueAlert, MaxAttempts: alertMaxAttempts},
	}})
	if err != nil {
		return false, err
	}
	ev := db.DeliveryEvent{Type: EventAlertQueued, Data: map[string]any{
		"endpoint_id": alertTo, "type": AlertExecutionRecovered, "failures": rec.Failures,
	}}
	return true, storeError(db.InsertDeliveryEvents(ctx, tx, tenant, executionID, []db.DeliveryEvent{ev}), "record recovered alert")
}

// AlertResult records on the execution's timeline what became of its alert
// (alert.RecordResult).
func (s *Deliveries) AlertResult(ctx context.Context, tenant, executionID string, sent bool, statusCode int, latency time.Duration, errorClass, message string) error {
	return alert.RecordResult(ctx, s.pool, tenant, executionID, sent, statusCode, latency, errorClass, message)
}

// SLAMisses returns up to limit of a tenant's recorded execution SLA
// misses, newest execution first (alert.SLAMisses).
func (s *Executions) SLAMisses(ctx context.Context, tenant string, limit int) ([]ExecutionSLAMiss, error) {
	return alert.SLAMisses(ctx, s.pool, tenant, limit)
}

// SLAMissedRuns returns up to limit of a tenant's workflow runs recorded as
// missing their workflow's SLA, newest first (alert.SLAMissedRuns).
func (s *Workflows) SLAMissedRuns(ctx context.Context, tenant string, limit int) ([]AlertRun, error) {
	return alert.SLAMissedRuns(ctx, s.pool, tenant, limit)
}

// BlockedRuns returns up to limit of a tenant's blocked workflow runs,
// newest first (alert.BlockedRuns).
func (s *Workflows) BlockedRuns(ctx context.Context, tenant string, limit int) ([]AlertRun, error) {
	return alert.BlockedRuns(ctx, s.pool, tenant, limit)
}

// FailedSince returns up to limit (at most AlertListMax) of a tenant's
// executions that failed for good at or after since, newest first
// (alert.FailedSince).
func (s *Executions) FailedSince(ctx context.Context, tenant string, since time.Time, limit int) ([]FailedExecution, error) {
	return alert.FailedSince(ctx, s.pool, tenant, since, limit)
}
