package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/limits"
)

// OutcomeKind is what one sent attempt came to: jobs' classification of a
// response (jobs.Classify) and what Finish decides from. The zero value is
// deliberately none of them.
type OutcomeKind uint8

// Outcome kinds.
const (
	// OutcomeSucceeded: the receiver accepted the webhook (a 2xx).
	OutcomeSucceeded OutcomeKind = iota + 1
	// OutcomeRetry: a failure that may pass; try again after a backoff.
	OutcomeRetry
	// OutcomePermanent: a failure retrying cannot fix.
	OutcomePermanent
)

// String names the kind as the outcome label of
// ax_delivery_attempts_total does: success, retry, permanent.
func (k OutcomeKind) String() string {
	switch k {
	case OutcomeSucceeded:
		return "success"
	case OutcomeRetry:
		return "retry"
	case OutcomePermanent:
		return "permanent"
	}
	return fmt.Sprintf("OutcomeKind(%d)", k)
}

// Outcome is what one sent attempt came to.
type Outcome struct {
	Kind OutcomeKind
	// CutByCancel: the attempt was cut short because a cancel of the
	// execution was requested.
	CutByCancel bool
	// StatusCode is 0 when no response was received.
	StatusCode int
	Latency    time.Duration
	// ErrorClass is a stable class of the failure (jobs' ErrorClass
	// constants); empty on success.
	ErrorClass string
	// Error describes the failure; empty on success.
	Error string
	// Excerpt is the start of the response body; it is truncated to
	// DeliveriesConfig.ExcerptMax.
	Excerpt string
	// RetryAfter is the wait the receiver asked for (Retry-After); 0:
	// none. The task's max backoff caps it (RetryPolicy.Delay).
	RetryAfter time.Duration
	// DisableEndpoint asks to disable EndpointID (a 410 Gone).
	DisableEndpoint bool
	// EndpointID is the endpoint the attempt was sent to.
	EndpointID string
	// HandOff is set when a batch job (DeliverBatchArgs) made the attempt:
	// a retry then continues as a DeliverArgs job of its own, inserted
	// with the retrying transition and due when the retry is.
	HandOff *HandOff
	// WorkflowRun: the execution is a workflow node's (Delivery.WorkflowRunID
	// is set). Its success takes the row-by-row path, so that the run
	// advances in the transaction that records it; Finish then does not
	// offer it to the batched statement, which would leave it anyway
	// (finishDecision.Batch).
	WorkflowRun bool
	// Detached is set for the outcome of an accepted callback attempt (a
	// completion or a timeout): the River job that sent it has ended, so a
	// retry gets a deliver job of its own.
	Detached bool
	// Output and NoOutput are set for a workflow node's attempt in
	// response mode that succeeded (ResponseOutput): Output is its
	// response body, kept as the node's output, or NoOutput says why it
	// has none (an event of its timeline). Neither: not a node's response.
	Output   json.RawMessage
	NoOutput string
}

// failure is the text recorded for a failed attempt.
func (o Outcome) failure() string {
	if o.Error != "" {
		return o.Error
	}
	return o.ErrorClass
}

// HandOff is how a batch job's execution continues on its own.
type HandOff struct {
	// Priority is the River priority of the job that continues it, and
	// Queue its queue (the batch's lane; "": the main lane).
	Priority int
	Queue    string
}

// Finished is the execution's state after Finish.
type Finished struct {
	// State is succeeded, retrying, failed or cancelled.
	State string
	// Attempt is the attempt that was recorded.
	Attempt int
	// RetryDelay is the wait before the next attempt when State is
	// retrying: the receiver's Retry-After or the task's backoff
	// (RetryPolicy.Delay).
	RetryDelay time.Duration
	// TaskPaused is set when this failure paused the task
	// (pause_after_failures).
	TaskPaused bool
	// AlertQueued is set when an alert job was enqueued: a failure's, or
	// the recovered alert of a success that ended an alerted streak.
	AlertQueued bool

	// released: the outcome gave back the execution's permit.
	released bool
	// ended counts the executions this outcome ended (itself, and the
	// pending ones an auto-pause cancelled).
	ended ended
}

// Finish records the outcome of River attempt lease as decideFinish
// decides, in one transaction, fenced on state = running and
// lease_attempt = lease: a late outcome from an attempt a newer run took
// over is rejected with ErrConflict and changes nothing. A success also
// resets the task's consecutive failures; a failure counts one more, pauses
// the task when it reaches pause_after_failures (its pending executions are
// cancelled) and enqueues an alert when the task has an alert endpoint and
// alert_after_failures is reached; a success that ends a streak with an
// alerted failure enqueues an execution.recovered alert; a 410 also
// disables the endpoint.
//
// Successes are batched with concurrent ones into one statement
// (db.SucceedsWithoutDecision); a success the batch did not record (or a
// failed batch) takes the row-by-row path, which reports the conflict.
func (s *Deliveries) Finish(ctx context.Context, tenant, executionID string, lease int, out Outcome) (Finished, error) {
	if mayBatchFinish(out) {
		r, err := s.successes.Do(ctx, db.DeliverySuccess{
			DeliveryKey: db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: tenant, ID: executionID}, Lease: lease},
			StatusCode:  out.StatusCode, LatencyMS: int(out.Latency.Milliseconds()),
		})
		if s.count(r.ok, err) {
			return Finished{State: ExecSucceeded, Attempt: r.attempts}, nil
		}
	}
	if mayBatchStep(out) { // a workflow node's: workflow_step.go
		if fin, ok := s.finishStep(ctx, tenant, executionID, lease, out); ok {
			return fin, nil
		}
	}
	return s.finishRow(ctx, tenant, executionID, lease, out)
}

// finishRow is Finish's row-by-row path: it locks the execution, reads the
// facts, asks decideFinish and applies the verdict.
func (s *Deliveries) finishRow(ctx context.Context, tenant, executionID string, lease int, out Outcome) (Finished, error) {
	var fin Finished
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, err := db.GetDeliveryOutcome(ctx, tx, tenant, executionID)
		if err = storeError(err, "load execution "+executionID); errors.Is(err, ErrNotFound) {
			return conflictf("execution %s is not running under attempt %d; its outcome is not recorded", executionID, lease)
		}
		if err != nil {
			return err
		}
		fin, err = s.finish(ctx, tx, tenant, executionID, lease, row, out)
		return err
	})
	if err != nil {
		return Finished{}, storeError(err, "record outcome")
	}
	s.released(fin)
	fin.ended.report(s.cfg.Metrics)
	return fin, nil
}

// released wakes the dispatcher when a committed outcome gave a permit
// back: the deliveries held behind it may start.
func (s *Deliveries) released(fins ...Finished) {
	for _, f := range fins {
		if f.released {
			s.cfg.Limits.Wake()
			return
		}
	}
}

// finishFactsOf reads the facts of decideFinish from a locked row.
func (s *Deliveries) finishFactsOf(row db.DeliveryOutcome, lease int) finishFacts {
	return finishFacts{
		State: row.State, LeaseAttempt: row.LeaseAttempt, Attempts: row.Attempts, AttemptsBase: row.AttemptsBase,
		CancelRequested: row.CancelRequested, Lease: lease, WorkflowRun: row.WorkflowRunID != nil, TaskFound: row.TaskFound,
		MaxAttempts: int(zeroIfNil(row.MaxAttempts)),
		Retry: RetryPolicy{
			MaxAttempts:    int(zeroIfNil(row.MaxAttempts)),
			InitialBackoff: time.Duration(zeroIfNil(row.InitialBackoffMS)) * time.Millisecond,
			MaxBackoff:     time.Duration(zeroIfNil(row.MaxBackoffMS)) * time.Millisecond,
		},
		Jitter:    s.cfg.Rand(),
		Permitted: row.Permitted,
	}
}

// finish applies decideFinish's verdict to the locked row.
func (s *Deliveries) finish(ctx context.Context, tx db.Tx, tenant, executionID string, lease int, row db.DeliveryOutcome, out Outcome) (Finished, error) {
	dec := decideFinish(s.finishFactsOf(row, lease), out)
	attempt := row.Attempts
	fin := Finished{Attempt: attempt}
	var status *int
	if out.StatusCode != 0 {
		status = &out.StatusCode
	}
	latency := int(out.Latency.Milliseconds())
	end := db.DeliveryEnd{
		TenantID: tenant, ID: executionID, From: []string{ExecRunning}, Lease: &lease, StatusCode: status,
		// An accepted callback attempt keeps the status of its 2xx.
		KeepStatusCode: out.Detached && status == nil,
	}
	if dec.Release {
		released, err := limits.Release(ctx, tx, tenant, executionID)
		if err != nil {
			return Finished{}, err
		}
		fin.released = released
	}

	switch dec.Verdict {
	case finishStale:
		return Finished{}, conflictf("execution %s: %s", executionID, dec.Reason)

	case finishSucceed:
		end.To = ExecSucceeded
		events, output := successWrites(row, out)
		if err := s.transition(ctx, tx, end, events); err != nil {
			return Finished{}, err
		}
		if output != nil { // before the run advances: the nodes it fires may read it
			if err := db.SetExecutionOutput(ctx, tx, tenant, executionID, output); err != nil {
				return Finished{}, storeError(err, "store node output")
			}
		}
		if row.TaskFailures > 0 || row.TaskFailureAlerted { // most successes follow successes: no write then
			rec, err := db.ResetTaskFailures(ctx, tx, tenant, row.TaskID)
			if err = storeError(err, "reset task failures"); err != nil && !errors.Is(err, ErrNotFound) {
				return Finished{}, err
			}
			if err == nil {
				if fin.AlertQueued, err = queueRecovered(ctx, tx, s.enqueuer, s.cfg.AlertMaxAttempts, tenant, executionID, rec); err != nil {
					return Finished{}, err
				}
			}
		}
		if err := s.advanceWorkflow(ctx, tx, tenant, row.WorkflowRunID, &fin.ended); err != nil {
			return Finished{}, err
		}
		fin.State = ExecSucceeded
		fin.ended.add(ExecSucceeded, 1)
		return fin, nil
	}

	failure := out.failure()
	events := []db.DeliveryEvent{{
		Type: EventAttemptFailed, Attempt: &attempt, StatusCode: status, LatencyMS: &latency,
		ErrorClass: nilIfEmpty(out.ErrorClass), Message: nilIfEmpty(attemptMessage(failure, out.Excerpt, s.cfg.ExcerptMax)),
	}}
	end.Error, end.ErrorClass = &failure, nilIfEmpty(out.ErrorClass)

	switch dec.Verdict {
	case finishCancel:
		end.To = ExecCancelled
		events = append(events, db.DeliveryEvent{Type: EventCancelled, Attempt: &attempt, Message: &dec.Reason})
		if err := s.transition(ctx, tx, end, events); err != nil {
			return Finished{}, err
		}
		if err := s.advanceWorkflow(ctx, tx, tenant, row.WorkflowRunID, &fin.ended); err != nil {
			return Finished{}, err
		}
		fin.State = ExecCancelled
		fin.ended.add(ExecCancelled, 1)
		return fin, nil

	case finishRetry:
		end.To, end.NextAttemptIn = ExecRetrying, &dec.Delay
		maxAttempts := int(zeroIfNil(row.MaxAttempts))
		events = append(events, db.DeliveryEvent{
			Type: EventRetryScheduled, Attempt: &attempt,
			Message: refTo(fmt.Sprintf("attempt %d of %d in %s", attempt+1, maxAttempts, dec.Delay.Round(time.Millisecond))),
			Data:    map[string]any{"delay_ms": dec.Delay.Milliseconds(), "reason": dec.Reason, "next_attempt": attempt + 1},
		})
		if err := s.transition(ctx, tx, end, events); err != nil {
			return Finished{}, err
		}
		switch {
		case out.HandOff != nil:
			ref := ExecutionRef{TenantID: tenant, ExecutionID: executionID, EndpointID: out.EndpointID}
			if err := s.handOff(ctx, tx, []ExecutionRef{ref}, lease, out.HandOff.Priority, time.Now().Add(dec.Delay),
				out.HandOff.Queue); err != nil {
				return Finished{}, err
			}
		case out.Detached:
			if err := s.retryDetached(ctx, tx, tenant, executionID, lease, int(zeroIfNil(row.Priority)), time.Now().Add(dec.Delay)); err != nil {
				return Finished{}, err
			}
		}
		fin.State, fin.RetryDelay = ExecRetrying, dec.Delay
		return fin, nil
	}

	end.To = ExecFailed
	events = append(events, db.DeliveryEvent{
		Type: EventFailed, Attempt: &attempt, StatusCode: status,
		ErrorClass: nilIfEmpty(out.ErrorClass), Message: &dec.Reason,
	})
	if err := s.transition(ctx, tx, end, events); err != nil {
		return Finished{}, err
	}
	if out.DisableEndpoint && out.EndpointID != "" {
		msg := fmt.Sprintf("the endpoint answered %d Gone; it was disabled and receives nothing until re-enabled", out.StatusCode)
		disabled, err := db.DisableEndpoint(ctx, tx, tenant, out.EndpointID, msg)
		if err != nil {
			return Finished{}, storeError(err, "disable endpoint")
		}
		if disabled {
			ev := db.DeliveryEvent{
				Type: EventEndpointDisabled, Attempt: &attempt, StatusCode: status, Message: &msg,
				Data: map[string]any{"endpoint_id": out.EndpointID},
			}
			if err := db.InsertDeliveryEvents(ctx, tx, tenant, executionID, []db.DeliveryEvent{ev}); err != nil {
				return Finished{}, storeError(err, "record endpoint disabled")
			}
		}
	}
	after, err := s.afterFailure(ctx, tx, tenant, executionID, row.TaskID)
	if err != nil {
		return Finished{}, err
	}
	if err := s.advanceWorkflow(ctx, tx, tenant, row.WorkflowRunID, &fin.ended); err != nil {
		return Finished{}, err
	}
	fin.State, fin.TaskPaused, fin.AlertQueued = ExecFailed, after.paused, after.alerted
	fin.ended.add(ExecFailed, 1)
	fin.ended.add(ExecCancelled, after.cancelled)
	return fin, nil
}

// successWrites returns what a success of the execution row writes
// besides its end: its events in order, and the output a node keeps (nil:
// none). The step batch writes the same (Deliveries.recordSteps).
func successWrites(row db.DeliveryOutcome, out Outcome) ([]db.DeliveryEvent, json.RawMessage) {
	attempt := row.Attempts
	var status *int
	if out.StatusCode != 0 {
		status = &out.StatusCode
	}
	latency := int(out.Latency.Milliseconds())
	events := []db.DeliveryEvent{{Type: EventAttemptSucceeded, Attempt: &attempt, StatusCode: status, LatencyMS: &latency}}
	nodeOutput := row.WorkflowRunID != nil && (out.Output != nil || out.NoOutput != "")
	if nodeOutput && out.NoOutput != "" {
		events = append(events, db.DeliveryEvent{Type: EventNoOutput, Attempt: &attempt, Message: &out.NoOutput})
	}
	events = append(events, db.DeliveryEvent{Type: EventSucceeded, Attempt: &attempt, StatusCode: status})
	if !nodeOutput {
		return events, nil
	}
	return events, out.Output
}

// advanceWorkflow advances the workflow run of an execution that just
// ended (runID nil: not a node's execution; nothing to do), in the
// transaction that ended it; done tallies the executions the advance
// ends, reported with the caller's after the commit.
func (s *Deliveries) advanceWorkflow(ctx context.Context, tx db.Tx, tenant string, runID *string, done *ended) error {
	if runID == nil {
		return nil
	}
	if later := advanceLater(ctx); later != nil { // a step batch advances it once (workflow_step.go)
		later[db.RunRef{TenantID: tenant, ID: *runID}] = struct{}{}
		return nil
	}
	return runEngine{enq: s.enqueuer, metrics: s.cfg.Metrics, graphs: &s.graphs, ended: done}.advanceRun(ctx, tx, tenant, *runID)
}

// transition applies a fenced transition and appends events; no matching
// row is ErrConflict.
func (s *Deliveries) transition(ctx context.Context, tx db.Tx, end db.DeliveryEnd, events []db.DeliveryEvent) error {
	if err := checkExec(end.From, end.To); err != nil {
		return err
	}
	ok, err := db.EndDelivery(ctx, tx, end)
	if err != nil {
		return storeError(err, "end delivery")
	}
	if !ok {
		return conflictf("execution %s → %s: the execution changed under its lock", end.ID, end.To)
	}
	return storeError(db.InsertDeliveryEvents(ctx, tx, end.TenantID, end.ID, events), "record end")
}

// failureEffects are what a failure did to its task: paused it
// (cancelling that many pending executions), queued an alert.
type failureEffects struct {
	paused, alerted bool
	cancelled       int64
}

// afterFailure runs the consequences of a failed execution on its task:
// one more consecutive failure, the auto-pause, the alert (from the
// task's alert_after_failures-th failure in a row: alertsFailure).
func (s *Deliveries) afterFailure(ctx context.Context, tx db.Tx, tenant, executionID, taskID string) (failureEffects, error) {
	return afterFailure(ctx, tx, s.enqueuer, s.cfg.AlertMaxAttempts, tenant, executionID, taskID)
}

// afterFailure is Deliveries.afterFailure for any failure (a template's
// that failed its execution unsent, too): alerts queued through enq with
// alertMaxAttempts attempts.
func afterFailure(ctx context.Context, tx db.Tx, enq *Enqueuer, alertMaxAttempts int, tenant, executionID, taskID string) (failureEffects, error) {
	var fx failureEffects
	tf, err := db.AddTaskFailure(ctx, tx, tenant, taskID)
	if err = storeError(err, "count task failure"); errors.Is(err, ErrNotFound) {
		return fx, nil // the task is gone: nothing to pause or alert
	}
	if err != nil {
		return fx, err
	}
	var events []db.DeliveryEvent
	if limit := int(zeroIfNil(tf.PauseAfterFailures)); limit > 0 && tf.Consecutive >= limit && tf.State == TaskActive {
		paused, err := db.AutoPauseTask(ctx, tx, tenant, taskID)
		if err != nil {
			return fx, storeError(err, "pause task")
		}
		if paused {
			reason := fmt.Sprintf("the task was paused after %d consecutive failed executions (pause_after_failures)", tf.Consecutive)
			// Fires still ahead stay pending: if the task is still paused
			// at their slot, their start cancels them (Tasks.Pause).
			n, err := db.CancelPendingExecutions(ctx, tx, tenant, taskID, true, reason)
			if err != nil {
				return fx, storeError(err, "cancel pending executions")
			}
			if err := db.NotifyTaskChanged(ctx, tx); err != nil {
				return fx, storeError(err, "notify task change")
			}
			events = append(events, db.DeliveryEvent{
				Type: EventTaskPaused, Message: &reason,
				Data: map[string]any{"consecutive_failures": tf.Consecutive, "cancelled_pending": n},
			})
			fx.paused, fx.cancelled = true, n
		}
	}
	if alertTo := zeroIfNil(tf.AlertEndpointID); alertTo != "" && alertsFailure(tf.Consecutive, tf.AlertAfterFailures) {
		if !tf.FailureAlerted {
			if err := db.MarkFailureAlerted(ctx, tx, tenant, taskID); err != nil {
				return fx, storeError(err, "mark failure alerted")
			}
		}
		_, err := enq.insertMany(ctx, tx, []river.InsertManyParams{{
			Args:       AlertArgs{TenantID: tenant, ExecutionID: executionID},
			InsertOpts: &river.InsertOpts{Queue: QueueAlert, MaxAttempts: alertMaxAttempts},
		}})
		if err != nil {
			return fx, err
		}
		events = append(events, db.DeliveryEvent{Type: EventAlertQueued, Data: map[string]any{"endpoint_id": alertTo}})
		fx.alerted = true
	}
	return fx, storeError(db.InsertDeliveryEvents(ctx, tx, tenant, executionID, events), "record failure effects")
}
