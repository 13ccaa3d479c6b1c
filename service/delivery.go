package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
)

// Timeline events the alert worker appends to the failed execution.
const (
	EventAlertSent   = "alert_sent"
	EventAlertFailed = "alert_failed"
)

// ErrorClassInterrupted is the error class of an execution failed because
// its last attempt was interrupted (a crash) and it has no attempt left.
const ErrorClassInterrupted = "interrupted"

// Deliveries defaults. See DeliveriesConfig.
const (
	QueueWaitMaxDefault     = time.Hour
	ExcerptMaxDefault       = 512
	AlertMaxAttemptsDefault = 8
)

// DeliveriesConfig configures Deliveries. Zero fields take the defaults.
type DeliveriesConfig struct {
	// QueueWaitMax is how long an execution of an overlap_policy "queue"
	// task waits for the previous one before it is skipped. Default 1 h.
	QueueWaitMax time.Duration
	// ExcerptMax caps the response excerpt kept in an attempt_failed
	// event's message, in bytes. Default 512.
	ExcerptMax int
	// AlertMaxAttempts bounds the River attempts of one failure alert
	// (River's default backoff: 1 s, 16 s, 81 s, … about 1.3 h for 8).
	// Default 8.
	AlertMaxAttempts int
}

// WithDefaults returns c with every zero field set to its default.
func (c DeliveriesConfig) WithDefaults() DeliveriesConfig {
	if c.QueueWaitMax <= 0 {
		c.QueueWaitMax = QueueWaitMaxDefault
	}
	if c.ExcerptMax <= 0 {
		c.ExcerptMax = ExcerptMaxDefault
	}
	if c.AlertMaxAttempts <= 0 {
		c.AlertMaxAttempts = AlertMaxAttemptsDefault
	}
	return c
}

// Deliveries runs the execution state machine for the deliver and alert
// workers (DESIGN.md "Execution state machine", "Delivering"). Each method
// is one short transaction and never spans an HTTP call; every transition
// is a conditional UPDATE fenced on the execution's state and the River
// attempt that owns it (lease_attempt), and one that matches no row is
// reported as ErrConflict, never forced.
type Deliveries struct {
	pool     *pgxpool.Pool
	enqueuer *Enqueuer
	cfg      DeliveriesConfig
	// starts and successes batch the common case of Begin and Finish
	// (db.StartPendingDeliveries, db.SucceedDeliveries).
	starts    *batcher[db.DeliveryKey, startResult]
	successes *batcher[db.DeliverySuccess, successResult]
	batched   atomic.Int64 // Begins and Finishes a batch completed
	batchErrs atomic.Int64 // Begins and Finishes whose batch failed
}

// BatchStats counts Begins and Finishes by path: Batched completed in a
// batched statement; Failed were carried by a batch that failed and took
// the row-by-row path (a deadlock with a concurrent pause, a lost
// connection). The rest took the row-by-row path because they needed a
// decision.
type BatchStats struct {
	Batched, Failed int64
}

// BatchStats returns the counts since NewDeliveries.
func (s *Deliveries) BatchStats() BatchStats {
	return BatchStats{Batched: s.batched.Load(), Failed: s.batchErrs.Load()}
}

// count records how a batched call went and reports whether it completed.
func (s *Deliveries) count(ok bool, err error) bool {
	switch {
	case err != nil:
		s.batchErrs.Add(1)
	case ok:
		s.batched.Add(1)
	}
	return err == nil && ok
}

type startResult struct {
	row db.DeliveryRow
	ok  bool
}

type successResult struct {
	attempts int
	ok       bool
}

// Batching of the deliver worker's two statements: at most deliveryBatchMax
// executions per statement, and at most startFlushers (successFlushers)
// start (success) statements in flight at once. Each statement has a fixed
// cost in the database (its executor, its constraints, its commit) worth
// a dozen rows; fewer in flight make each carry more. A start delays its
// webhook, so two run at once; a success only records what was sent (its
// send slot is free already), so one at a time lets them gather.
const (
	deliveryBatchMax = 256
	startFlushers    = 2
	successFlushers  = 1
)

// NewDeliveries returns Deliveries on pool; enqueuer inserts alert jobs in
// the transaction that fails an execution. The pool may commit without
// waiting for the WAL flush (synchronous_commit off; cmd/server does): the
// deliver job's River state decides re-runs, and River's later synchronous
// commit flushes these transitions.
func NewDeliveries(pool *pgxpool.Pool, enqueuer *Enqueuer, cfg DeliveriesConfig) *Deliveries {
	s := &Deliveries{pool: pool, enqueuer: enqueuer, cfg: cfg.WithDefaults()}
	s.starts = newBatcher(deliveryBatchMax, startFlushers, s.startPending)
	s.successes = newBatcher(deliveryBatchMax, successFlushers, s.recordSuccesses)
	return s
}

func (s *Deliveries) startPending(ctx context.Context, keys []db.DeliveryKey) ([]startResult, error) {
	started, err := db.StartPendingDeliveries(ctx, s.pool, keys)
	if err != nil {
		return nil, err
	}
	res := make([]startResult, len(keys))
	for i := range keys {
		res[i].row, res[i].ok = started[i]
	}
	return res, nil
}

func (s *Deliveries) recordSuccesses(ctx context.Context, oks []db.DeliverySuccess) ([]successResult, error) {
	// One transaction: a success is never visible before its task's
	// failure count is reset, or a failure of the task's next execution
	// recorded in between would count on from the old count (and could
	// pause the task).
	var done map[int]int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		done, err = db.SucceedDeliveries(ctx, tx, oks)
		return err
	})
	if err != nil {
		return nil, err
	}
	res := make([]successResult, len(oks))
	for i := range oks {
		res[i].attempts, res[i].ok = done[i]
	}
	return res, nil
}

// Action is what the worker should do after Begin.
type Action int

// Actions.
const (
	// ActionSend: the execution is running for this attempt; send it and
	// call Finish.
	ActionSend Action = iota + 1
	// ActionDone: nothing to send; the execution is (or was already)
	// final, or a newer attempt owns it.
	ActionDone
	// ActionWait: overlap policy "queue" and the previous execution is
	// unfinished; come back later without consuming an attempt.
	ActionWait
)

// Delivery is one attempt to send, or the reason there is none.
type Delivery struct {
	Action Action
	// State is the execution's state after Begin.
	State string
	// Reason explains ActionDone and ActionWait.
	Reason string
	// Ended is set when this Begin moved the execution to its final State
	// (cancelled, skipped, or failed without sending).
	Ended bool

	TenantID     string
	ExecutionID  string
	TaskID       string
	TaskName     string
	EndpointID   string
	ScheduledFor time.Time
	Trigger      string
	// Attempt is the attempt number sent as X-Ax-Attempt: 1 for the
	// first, one more per retry and per run resumed after an interruption.
	Attempt int
	// Lease is the River attempt that owns the execution; pass it to Finish.
	Lease int
	// Resumed is set when this run took over a running execution whose
	// previous run was interrupted (a crash or a shutdown).
	Resumed bool

	URL     string
	Method  string
	Headers map[string]string
	Timeout time.Duration
	// Payload is the body, byte for byte: the execution's override or the
	// task's payload.
	Payload []byte
	// Keys sign the request: the current secret first, then the previous
	// one during a rotation overlap.
	Keys  [][]byte
	Retry RetryPolicy
}

// Begin decides and records the start of River attempt lease of an
// execution, in one transaction:
//
//   - a final execution, or one a newer attempt owns: ActionDone;
//   - a deleted task, a disabled endpoint, a paused task (unless the
//     execution was triggered manually) or a requested cancel: cancelled;
//   - overlap (pending executions only): "skip" with an unfinished
//     execution before it, or "queue" with two, is skipped; "queue" with
//     one waits (ActionWait) up to QueueWaitMax, then is skipped;
//   - a run that would exceed the task's max_attempts (a run resumed after
//     an interruption, or a retry after max_attempts was lowered) is failed
//     without sending, which keeps max_attempts 1 at most once across
//     crashes and shutdowns;
//   - otherwise the execution becomes running under lease and the
//     Delivery carries everything the sender needs.
//
// The common case (a pending execution that needs none of these decisions)
// is batched with concurrent Begins into one statement; everything else,
// and any execution a failed batch carried, takes the row-by-row path.
func (s *Deliveries) Begin(ctx context.Context, tenant, executionID string, lease int) (Delivery, error) {
	return s.BeginJob(ctx, tenant, executionID, lease, 0)
}

// BeginJob is Begin for River job jobID: an execution whose river_job_id
// names another job (a job it was handed off to, or the job of an API
// retry) belongs to that job, and this one gets ActionDone.
func (s *Deliveries) BeginJob(ctx context.Context, tenant, executionID string, lease int, jobID int64) (Delivery, error) {
	key := db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: tenant, ID: executionID}, Lease: lease, JobID: jobID}
	if r, err := s.starts.do(ctx, key); s.count(r.ok, err) {
		d := deliveryFromRow(r.row, lease)
		keys, err := endpointOf(r.row.JoinedEndpoint).SigningKeys(r.row.Now)
		if err != nil {
			return Delivery{}, err
		}
		d.Action, d.Attempt, d.Keys = ActionSend, r.row.Attempts, keys
		return d, nil
	}
	var d Delivery
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := db.GetDeliveryForUpdate(ctx, tx, tenant, executionID)
		if errors.Is(err, db.ErrNoRows) {
			return fmt.Errorf("execution %s: %w", executionID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load execution %s: %w", executionID, err)
		}
		d, err = s.begin(ctx, tx, row, lease, jobID)
		return err
	})
	if err != nil {
		return Delivery{}, err
	}
	return d, nil
}

func (s *Deliveries) begin(ctx context.Context, tx pgx.Tx, row db.DeliveryRow, lease int, jobID int64) (Delivery, error) {
	d := deliveryFromRow(row, lease)
	done := func(reason string) (Delivery, error) {
		d.Action, d.Reason = ActionDone, reason
		return d, nil
	}
	switch {
	case jobID != 0 && row.RiverJobID != nil && *row.RiverJobID != jobID:
		return done(fmt.Sprintf("River job %d delivers the execution", *row.RiverJobID))
	case row.State == ExecRunning && row.LeaseAttempt > lease:
		return done(fmt.Sprintf("attempt %d is stale: River attempt %d owns the execution", lease, row.LeaseAttempt))
	case row.State == ExecRetrying && row.LeaseAttempt >= lease:
		return done(fmt.Sprintf("attempt %d is stale: the execution is retrying after River attempt %d", lease, row.LeaseAttempt))
	case row.State != ExecPending && row.State != ExecRetrying && row.State != ExecRunning:
		return done("the execution is " + row.State)
	}
	resumed := row.State == ExecRunning
	var events []db.DeliveryEvent
	if resumed {
		events = append(events, db.DeliveryEvent{
			Type: EventRescued, Attempt: &row.Attempts,
			Message: refTo(fmt.Sprintf("attempt %d was interrupted (a crash or a shutdown) before its outcome was recorded; "+
				"resuming with the same idempotency key", row.Attempts)),
		})
	}

	if reason := cancelReason(row); reason != "" {
		if err := s.end(ctx, tx, row, lease, ExecCancelled, reason, "", append(events, db.DeliveryEvent{Type: EventCancelled, Message: &reason})); err != nil {
			return Delivery{}, err
		}
		d.State, d.Ended = ExecCancelled, true
		return done(reason)
	}

	if row.State == ExecPending && row.EarlierUnfinished > 0 {
		policy := zeroIfNil(row.OverlapPolicy)
		waited := row.Now.Sub(row.ScheduledFor)
		switch {
		case policy == OverlapQueue && row.EarlierUnfinished == 1 && waited <= s.cfg.QueueWaitMax:
			d.Action, d.Reason = ActionWait, "waiting for the previous execution to finish (overlap_policy queue)"
			return d, nil
		case policy == OverlapQueue && row.EarlierUnfinished == 1:
			return s.skip(ctx, tx, row, d, fmt.Sprintf("waited more than %s for the previous execution (overlap_policy queue)", s.cfg.QueueWaitMax))
		case policy == OverlapQueue:
			return s.skip(ctx, tx, row, d, "another execution is already queued behind the unfinished one (overlap_policy queue)")
		case policy == OverlapSkip:
			return s.skip(ctx, tx, row, d, "the previous execution is unfinished (overlap_policy skip)")
		}
	}

	next := row.Attempts + 1
	if row.State == ExecPending {
		next = 1
	}
	if maxAttempts := int(zeroIfNil(row.MaxAttempts)); next > maxAttempts {
		reason, class := fmt.Sprintf("attempts exhausted (max_attempts %d)", maxAttempts), ""
		if resumed {
			reason, class = reason+"; the last attempt was interrupted before its outcome was recorded", ErrorClassInterrupted
		}
		events = append(events, db.DeliveryEvent{Type: EventFailed, Attempt: &row.Attempts, ErrorClass: nilIfEmpty(class), Message: &reason})
		if err := s.end(ctx, tx, row, lease, ExecFailed, reason, class, events); err != nil {
			return Delivery{}, err
		}
		if _, err := s.afterFailure(ctx, tx, row.TenantID, row.ID, row.TaskID); err != nil {
			return Delivery{}, err
		}
		d.State, d.Ended = ExecFailed, true
		return done(reason)
	}

	attempts, ok, err := db.StartDelivery(ctx, tx, row.TenantID, row.ID, lease)
	if err != nil {
		return Delivery{}, err
	}
	if !ok {
		return Delivery{}, fmt.Errorf("start execution %s attempt %d: %w", row.ID, lease, ErrConflict)
	}
	events = append(events, db.DeliveryEvent{Type: EventAttemptStarted, Attempt: &attempts})
	if err := db.InsertDeliveryEvents(ctx, tx, row.TenantID, row.ID, events); err != nil {
		return Delivery{}, err
	}
	keys, err := endpointOf(row.JoinedEndpoint).SigningKeys(row.Now)
	if err != nil {
		return Delivery{}, err
	}
	d.Action, d.State, d.Attempt, d.Resumed, d.Keys = ActionSend, ExecRunning, attempts, resumed, keys
	return d, nil
}

// cancelReason says why an execution must not be sent, or "".
func cancelReason(row db.DeliveryRow) string {
	switch {
	case row.CancelRequested:
		return "cancel requested"
	case !row.TaskFound:
		return "the task was deleted"
	case zeroIfNil(row.TaskState) == TaskPaused && row.Trigger != TriggerManual:
		return "the task is paused"
	case !row.EndpointFound:
		return "the task's endpoint no longer exists"
	case !zeroIfNil(row.EndpointEnabled):
		return "the endpoint is disabled"
	}
	return ""
}

func (s *Deliveries) skip(ctx context.Context, tx pgx.Tx, row db.DeliveryRow, d Delivery, reason string) (Delivery, error) {
	ev := db.DeliveryEvent{Type: EventSkipped, Message: &reason, Data: map[string]any{"overlap_policy": zeroIfNil(row.OverlapPolicy)}}
	if err := s.end(ctx, tx, row, 0, ExecSkipped, reason, "", []db.DeliveryEvent{ev}); err != nil {
		return Delivery{}, err
	}
	d.Action, d.State, d.Reason, d.Ended = ActionDone, ExecSkipped, reason, true
	return d, nil
}

// end moves the locked execution row to a final state from the state Begin
// read, without an attempt of its own, and appends events.
func (s *Deliveries) end(ctx context.Context, tx pgx.Tx, row db.DeliveryRow, lease int, to, reason, class string, events []db.DeliveryEvent) error {
	e := db.DeliveryEnd{
		TenantID: row.TenantID, ID: row.ID, From: []string{row.State}, To: to, Error: &reason, KeepStatusCode: true,
	}
	if class != "" {
		e.ErrorClass = &class
	}
	if row.State == ExecRunning {
		e.MaxLease = &lease
	}
	ok, err := db.EndDelivery(ctx, tx, e)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("execution %s %s → %s: %w", row.ID, row.State, to, ErrConflict)
	}
	return db.InsertDeliveryEvents(ctx, tx, row.TenantID, row.ID, events)
}

// Outcome kinds of one sent attempt.
const (
	// OutcomeSucceeded: the receiver accepted the webhook.
	OutcomeSucceeded = "succeeded"
	// OutcomeRetry: a failure worth retrying.
	OutcomeRetry = "retry"
	// OutcomePermanent: a failure retrying cannot fix.
	OutcomePermanent = "permanent"
	// OutcomeCancelled: the attempt was cut short by a cancel.
	OutcomeCancelled = "cancelled"
)

// Outcome is what one sent attempt came to.
type Outcome struct {
	// Kind is one of the Outcome constants.
	Kind string
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
	// RetryDelay is the wait before the next attempt (OutcomeRetry).
	RetryDelay time.Duration
	// RetryReason says where RetryDelay comes from, e.g. "backoff" or
	// "retry_after".
	RetryReason string
	// DisableEndpoint asks to disable EndpointID (a 410 Gone).
	DisableEndpoint bool
	// EndpointID is the endpoint the attempt was sent to.
	EndpointID string
	// HandOff is set when a batch job (DeliverBatchArgs) made the attempt:
	// a retry then continues as a DeliverArgs job of its own, inserted
	// with the retrying transition and due when the retry is.
	HandOff *HandOff
}

// HandOff is how a batch job's execution continues on its own.
type HandOff struct {
	// Priority is the River priority of the job that continues it.
	Priority int
}

// Finished is the execution's state after Finish.
type Finished struct {
	// State is succeeded, retrying, failed or cancelled.
	State string
	// Attempt is the attempt that was recorded.
	Attempt int
	// RetryDelay is the wait before the next attempt when State is retrying.
	RetryDelay time.Duration
	// TaskPaused is set when this failure paused the task
	// (pause_after_failures).
	TaskPaused bool
	// AlertQueued is set when an alert job was enqueued.
	AlertQueued bool
}

// Finish records the outcome of River attempt lease in one transaction,
// fenced on state = running and lease_attempt = lease: a late outcome
// from an attempt a newer run took over is rejected with ErrConflict and
// changes nothing.
//
//   - success: succeeded (even when a cancel was requested meanwhile: the
//     receiver has it), and the task's consecutive failures reset;
//   - a cancel requested while running, or an OutcomeCancelled: cancelled;
//   - retryable with attempts left: retrying, next_attempt_at set;
//   - permanent or exhausted: failed; the task counts one more
//     consecutive failure and is paused when it reaches
//     pause_after_failures (its pending executions are cancelled); an
//     alert job is enqueued when the task has an alert endpoint;
//   - a 410 also disables the endpoint.
//
// Successes are batched with concurrent ones into one statement; a success
// the batch did not record (or a failed batch) takes the row-by-row path,
// which reports the conflict.
func (s *Deliveries) Finish(ctx context.Context, tenant, executionID string, lease int, out Outcome) (Finished, error) {
	if out.Kind == OutcomeSucceeded {
		r, err := s.successes.do(ctx, db.DeliverySuccess{
			DeliveryKey: db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: tenant, ID: executionID}, Lease: lease},
			StatusCode:  out.StatusCode, LatencyMS: int(out.Latency.Milliseconds()),
		})
		if s.count(r.ok, err) {
			return Finished{State: ExecSucceeded, Attempt: r.attempts}, nil
		}
	}
	var fin Finished
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		owner, err := db.GetDeliveryOwner(ctx, tx, tenant, executionID, lease)
		if errors.Is(err, db.ErrNoRows) {
			return fmt.Errorf("execution %s is not running under attempt %d; its outcome is not recorded: %w",
				executionID, lease, ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("load execution %s: %w", executionID, err)
		}
		fin, err = s.finish(ctx, tx, tenant, executionID, lease, owner, out)
		return err
	})
	if err != nil {
		return Finished{}, err
	}
	return fin, nil
}

func (s *Deliveries) finish(ctx context.Context, tx pgx.Tx, tenant, executionID string, lease int, owner db.DeliveryOwner, out Outcome) (Finished, error) {
	fin := Finished{Attempt: owner.Attempts}
	attempt := owner.Attempts
	var events []db.DeliveryEvent
	var status *int
	if out.StatusCode != 0 {
		status = &out.StatusCode
	}
	latency := int(out.Latency.Milliseconds())
	end := db.DeliveryEnd{TenantID: tenant, ID: executionID, From: []string{ExecRunning}, Lease: &lease, StatusCode: status}

	if out.Kind == OutcomeSucceeded {
		events = append(events,
			db.DeliveryEvent{Type: EventAttemptSucceeded, Attempt: &attempt, StatusCode: status, LatencyMS: &latency},
			db.DeliveryEvent{Type: EventSucceeded, Attempt: &attempt, StatusCode: status})
		end.To = ExecSucceeded
		if err := s.transition(ctx, tx, end, events); err != nil {
			return Finished{}, err
		}
		if owner.TaskFailures > 0 { // most successes follow successes: no write then
			if err := db.ResetTaskFailures(ctx, tx, tenant, owner.TaskID); err != nil {
				return Finished{}, err
			}
		}
		fin.State = ExecSucceeded
		return fin, nil
	}

	failure := out.Error
	if failure == "" {
		failure = out.ErrorClass
	}
	events = append(events, db.DeliveryEvent{
		Type: EventAttemptFailed, Attempt: &attempt, StatusCode: status, LatencyMS: &latency,
		ErrorClass: nilIfEmpty(out.ErrorClass), Message: nilIfEmpty(attemptMessage(failure, out.Excerpt, s.cfg.ExcerptMax)),
	})
	end.Error, end.ErrorClass = &failure, nilIfEmpty(out.ErrorClass)
	maxAttempts := int(zeroIfNil(owner.MaxAttempts))

	switch {
	case out.Kind == OutcomeCancelled || owner.CancelRequested || !owner.TaskFound:
		reason := "cancel requested"
		if !owner.TaskFound && !owner.CancelRequested && out.Kind != OutcomeCancelled {
			reason = "the task was deleted"
		}
		end.To = ExecCancelled
		events = append(events, db.DeliveryEvent{Type: EventCancelled, Attempt: &attempt, Message: &reason})
		if err := s.transition(ctx, tx, end, events); err != nil {
			return Finished{}, err
		}
		fin.State = ExecCancelled
		return fin, nil

	case out.Kind == OutcomeRetry && attempt < maxAttempts:
		delay := max(out.RetryDelay, 0)
		end.To, end.NextAttemptIn = ExecRetrying, &delay
		reason := out.RetryReason
		if reason == "" {
			reason = "backoff"
		}
		events = append(events, db.DeliveryEvent{
			Type: EventRetryScheduled, Attempt: &attempt,
			Message: refTo(fmt.Sprintf("attempt %d of %d in %s", attempt+1, maxAttempts, delay.Round(time.Millisecond))),
			Data:    map[string]any{"delay_ms": delay.Milliseconds(), "reason": reason, "next_attempt": attempt + 1},
		})
		if err := s.transition(ctx, tx, end, events); err != nil {
			return Finished{}, err
		}
		if out.HandOff != nil {
			ref := ExecutionRef{TenantID: tenant, ExecutionID: executionID}
			if err := s.handOff(ctx, tx, []ExecutionRef{ref}, lease, out.HandOff.Priority, time.Now().Add(delay)); err != nil {
				return Finished{}, err
			}
		}
		fin.State, fin.RetryDelay = ExecRetrying, delay
		return fin, nil
	}

	end.To = ExecFailed
	reason := "permanent failure: " + failure
	if out.Kind == OutcomeRetry {
		reason = fmt.Sprintf("attempts exhausted (max_attempts %d): %s", maxAttempts, failure)
	}
	events = append(events, db.DeliveryEvent{Type: EventFailed, Attempt: &attempt, StatusCode: status, ErrorClass: nilIfEmpty(out.ErrorClass), Message: &reason})
	if err := s.transition(ctx, tx, end, events); err != nil {
		return Finished{}, err
	}
	if out.DisableEndpoint && out.EndpointID != "" {
		msg := fmt.Sprintf("the endpoint answered %d Gone; it was disabled and receives nothing until re-enabled", out.StatusCode)
		disabled, err := db.DisableEndpoint(ctx, tx, tenant, out.EndpointID, msg)
		if err != nil {
			return Finished{}, err
		}
		if disabled {
			ev := db.DeliveryEvent{Type: EventEndpointDisabled, Attempt: &attempt, StatusCode: status, Message: &msg,
				Data: map[string]any{"endpoint_id": out.EndpointID}}
			if err := db.InsertDeliveryEvents(ctx, tx, tenant, executionID, []db.DeliveryEvent{ev}); err != nil {
				return Finished{}, err
			}
		}
	}
	after, err := s.afterFailure(ctx, tx, tenant, executionID, owner.TaskID)
	if err != nil {
		return Finished{}, err
	}
	fin.State, fin.TaskPaused, fin.AlertQueued = ExecFailed, after.paused, after.alerted
	return fin, nil
}

// HandOff inserts, in one transaction, a DeliverArgs job for each of refs
// that continues it outside its batch job, available at at (at once when
// zero), with leases above leaseBase — the batch's own lease, so that the
// new job's attempts are newer than the batch's — and records the job as
// the execution's (river_job_id): from then on the batch, run again or
// not, leaves the execution alone. An execution that already has a live
// or completed deliver job keeps it (the jobs are unique per execution)
// and that job is recorded instead; the job's Begin decides what an
// execution still needs, which may be nothing.
func (s *Deliveries) HandOff(ctx context.Context, refs []ExecutionRef, leaseBase, priority int, at time.Time) error {
	if len(refs) == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return s.handOff(ctx, tx, refs, leaseBase, priority, at)
	})
}

func (s *Deliveries) handOff(ctx context.Context, tx pgx.Tx, refs []ExecutionRef, leaseBase, priority int, at time.Time) error {
	seen := make(map[ExecutionRef]bool, len(refs))
	params := make([]river.InsertManyParams, 0, len(refs))
	owned := make([]db.ExecutionRef, 0, len(refs))
	for _, r := range refs {
		if seen[r] { // the same key twice aborts a unique InsertMany
			continue
		}
		seen[r] = true
		params = append(params, handOffInsert(r, leaseBase, priority, at))
		owned = append(owned, db.ExecutionRef{TenantID: r.TenantID, ID: r.ExecutionID})
	}
	res, err := s.enqueuer.insertMany(ctx, tx, params)
	if err != nil {
		return err
	}
	jobIDs := make([]int64, len(res))
	for i, r := range res {
		jobIDs[i] = r.Job.ID
	}
	return db.SetExecutionJobs(ctx, tx, owned, jobIDs)
}

// CancelRequested returns the ids of those of refs that are running with
// a cancel requested through the API.
func (s *Deliveries) CancelRequested(ctx context.Context, refs []ExecutionRef) ([]string, error) {
	in := make([]db.ExecutionRef, len(refs))
	for i, r := range refs {
		in[i] = db.ExecutionRef{TenantID: r.TenantID, ID: r.ExecutionID}
	}
	return db.CancelRequested(ctx, s.pool, in)
}

// transition applies a fenced transition and appends events; no matching
// row is ErrConflict.
func (s *Deliveries) transition(ctx context.Context, tx pgx.Tx, end db.DeliveryEnd, events []db.DeliveryEvent) error {
	ok, err := db.EndDelivery(ctx, tx, end)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("execution %s → %s: %w", end.ID, end.To, ErrConflict)
	}
	return db.InsertDeliveryEvents(ctx, tx, end.TenantID, end.ID, events)
}

type failureEffects struct{ paused, alerted bool }

// afterFailure runs the consequences of a failed execution on its task:
// one more consecutive failure, the auto-pause, the alert.
func (s *Deliveries) afterFailure(ctx context.Context, tx pgx.Tx, tenant, executionID, taskID string) (failureEffects, error) {
	var fx failureEffects
	tf, err := db.AddTaskFailure(ctx, tx, tenant, taskID)
	if errors.Is(err, db.ErrNoRows) {
		return fx, nil // the task is gone: nothing to pause or alert
	}
	if err != nil {
		return fx, fmt.Errorf("count task failure: %w", err)
	}
	var events []db.DeliveryEvent
	if limit := int(zeroIfNil(tf.PauseAfterFailures)); limit > 0 && tf.Consecutive >= limit && tf.State == TaskActive {
		paused, err := db.AutoPauseTask(ctx, tx, tenant, taskID)
		if err != nil {
			return fx, err
		}
		if paused {
			reason := fmt.Sprintf("the task was paused after %d consecutive failed executions (pause_after_failures)", tf.Consecutive)
			// Fires still ahead stay pending: if the task is still paused
			// at their slot, their start cancels them (Tasks.Pause).
			n, err := db.CancelPendingExecutions(ctx, tx, tenant, taskID, true, reason)
			if err != nil {
				return fx, err
			}
			if err := notifyTaskChanged(ctx, tx); err != nil {
				return fx, err
			}
			events = append(events, db.DeliveryEvent{Type: EventTaskPaused, Message: &reason,
				Data: map[string]any{"consecutive_failures": tf.Consecutive, "cancelled_pending": n}})
			fx.paused = true
		}
	}
	if alertTo := zeroIfNil(tf.AlertEndpointID); alertTo != "" {
		_, err := s.enqueuer.insertMany(ctx, tx, []river.InsertManyParams{{
			Args:       AlertArgs{TenantID: tenant, ExecutionID: executionID},
			InsertOpts: &river.InsertOpts{Queue: QueueAlert, MaxAttempts: s.cfg.AlertMaxAttempts},
		}})
		if err != nil {
			return fx, err
		}
		events = append(events, db.DeliveryEvent{Type: EventAlertQueued, Data: map[string]any{"endpoint_id": alertTo}})
		fx.alerted = true
	}
	return fx, db.InsertDeliveryEvents(ctx, tx, tenant, executionID, events)
}

// Alert is a failure alert to send: the failed execution and where to send
// it.
type Alert struct {
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
func (s *Deliveries) Alert(ctx context.Context, tenant, executionID string) (Alert, error) {
	row, err := db.GetAlert(ctx, s.pool, tenant, executionID)
	if errors.Is(err, db.ErrNoRows) {
		return Alert{}, fmt.Errorf("execution %s: %w", executionID, ErrNotFound)
	}
	if err != nil {
		return Alert{}, fmt.Errorf("load alert for execution %s: %w", executionID, err)
	}
	a := Alert{
		ExecutionID: row.ExecutionID, TaskID: row.TaskID, TaskName: zeroIfNil(row.TaskName), TaskState: zeroIfNil(row.TaskState),
		ScheduledFor: row.ScheduledFor.UTC(), Trigger: row.Trigger, State: row.State, Attempts: row.Attempts,
		LastStatusCode: row.LastStatusCode, LastError: zeroIfNil(row.LastError), ErrorClass: zeroIfNil(row.LastErrorClass),
		FinishedAt: utcPtr(row.FinishedAt),
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
	return db.InsertDeliveryEvents(ctx, s.pool, tenant, executionID, []db.DeliveryEvent{ev})
}

func deliveryFromRow(row db.DeliveryRow, lease int) Delivery {
	d := Delivery{
		State: row.State, TenantID: row.TenantID, ExecutionID: row.ID, TaskID: row.TaskID, TaskName: zeroIfNil(row.TaskName),
		EndpointID: zeroIfNil(row.EndpointID), ScheduledFor: row.ScheduledFor.UTC(), Trigger: row.Trigger,
		Attempt: row.Attempts, Lease: lease, URL: zeroIfNil(row.EndpointURL), Method: zeroIfNil(row.EndpointMethod),
		Headers: row.EndpointHeaders, Payload: row.Payload,
		Retry: RetryPolicy{
			MaxAttempts:    int(zeroIfNil(row.MaxAttempts)),
			InitialBackoff: time.Duration(zeroIfNil(row.InitialBackoffMS)) * time.Millisecond,
			MaxBackoff:     time.Duration(zeroIfNil(row.MaxBackoffMS)) * time.Millisecond,
		},
	}
	if d.Payload == nil {
		d.Payload = row.TaskPayload
	}
	d.Timeout = time.Duration(zeroIfNil(row.EndpointTimeoutMS)) * time.Millisecond
	if row.TaskTimeoutMS != nil {
		d.Timeout = time.Duration(*row.TaskTimeoutMS) * time.Millisecond
	}
	return d
}

func endpointOf(row db.JoinedEndpoint) Endpoint {
	return Endpoint{ID: zeroIfNil(row.EndpointID), Secret: zeroIfNil(row.Secret), PreviousSecret: zeroIfNil(row.PreviousSecret),
		PreviousSecretExpiresAt: row.PreviousSecretExp}
}

// attemptMessage is an attempt_failed event's message: the failure, then
// the start of the response body, cut to at most limit bytes on a rune
// boundary.
func attemptMessage(failure, excerpt string, limit int) string {
	msg := failure
	if excerpt = strings.TrimSpace(excerpt); excerpt != "" {
		msg += ": " + excerpt
	}
	return truncateUTF8(msg, limit)
}

// truncateUTF8 cuts s to at most limit bytes without splitting a rune,
// marking a cut with "…" (counted in the limit).
func truncateUTF8(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := max(limit-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

func zeroIfNil[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func refTo[T any](v T) *T { return &v }

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
