package service

import (
	"context"
	"errors"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/execution"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/metrics"
)

// Execution triggers (service/execution).
const (
	TriggerSchedule = execution.TriggerSchedule
	TriggerManual   = execution.TriggerManual
	TriggerRetry    = execution.TriggerRetry
	TriggerBackfill = execution.TriggerBackfill
	TriggerEvent    = execution.TriggerEvent
)

// Execution event types on the timeline.
const (
	EventFired            = "fired"
	EventMissed           = "missed"
	EventSkipped          = "skipped"
	EventCancelled        = "cancelled"
	EventAttemptStarted   = "attempt_started"
	EventAttemptSucceeded = "attempt_succeeded"
	EventAttemptFailed    = "attempt_failed"
	EventRetryScheduled   = "retry_scheduled"
	EventRescued          = "rescued"
	EventSucceeded        = "succeeded"
	EventFailed           = "failed"
	EventEndpointDisabled = "endpoint_disabled"
	EventTaskPaused       = "task_paused"
	EventAlertQueued      = "alert_queued"
	EventRetried          = execution.EventRetried
	EventReconciled       = "reconciled"
	EventHeld             = execution.EventHeld
	EventReleased         = execution.EventReleased
)

// DedupKeyMax is the longest dedup key of a manual trigger, in characters.
const DedupKeyMax = execution.DedupKeyMax

// An execution as operators see it (service/execution).
type (
	// Execution is one fire of a task, or of a workflow step.
	Execution = execution.Execution
	// Event is one step on an execution's timeline.
	Event = execution.Event
	// ExecutionDetail is an execution and the delivery state operators
	// act on.
	ExecutionDetail = execution.Detail
	// ExecutionFilter narrows Executions.List.
	ExecutionFilter = execution.Filter
	// TriggerInput is a manual fire of a task.
	TriggerInput = execution.TriggerInput
)

// Executions lets tenants inspect executions, cancel and retry them, and
// fire tasks by hand.
type Executions struct {
	pool *db.Pool
	enq  *Enqueuer
	cfg  ExecutionsConfig
	// graphs are the workflow versions its retries and cancels advance.
	graphs graphCache
}

// ExecutionsConfig configures Executions.
type ExecutionsConfig struct {
	// Metrics, when set, counts the executions a cancel or a skip ends
	// (ax_executions_finished_total) and the workflow runs that a change
	// of one of their executions ends (ax_workflow_runs_total).
	Metrics *metrics.Metrics
	// FetchAhead makes the job of an execution released before its slot
	// due this long before the slot, as the scheduler's are
	// (SchedulerConfig.FetchAhead). Default 0.
	FetchAhead time.Duration
}

// NewExecutions returns an Executions backed by pool, enqueuing deliveries
// with enq.
func NewExecutions(pool *db.Pool, enq *Enqueuer, cfg ExecutionsConfig) *Executions {
	return &Executions{pool: pool, enq: enq, cfg: cfg}
}

// List returns a page of executions, newest first (execution.List).
func (s *Executions) List(ctx context.Context, tenant string, f ExecutionFilter, page Page) ([]ExecutionDetail, string, error) {
	return execution.List(ctx, s.pool, tenant, f, page)
}

// Get returns one execution with its timeline (execution.Get).
func (s *Executions) Get(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	return execution.Get(ctx, s.pool, tenant, id)
}

// Cancel cancels an execution. A pending or retrying one becomes cancelled
// at once and its River deliver job is cancelled (a deliver_batch job,
// which carries others, is left to find it cancelled); a running one is
// flagged cancel_requested and its deliver job's context is cancelled (a
// batch job watches the flag of its executions in flight), and the worker
// finishes it as cancelled (if the attempt completes first, it keeps that
// outcome). A running execution that no live job carries (a fault left it;
// see Scheduler.Reconcile) has no worker to finish it: it becomes
// cancelled at once. Cancelling a running execution again is a no-op; any
// other state is a conflict.
func (s *Executions) Cancel(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	var done ended
	out, err := s.change(ctx, tenant, id, AuditCancel, &done, func(tx db.Tx, row db.Execution) error {
		done = nil
		now, err := execution.Cancel(ctx, tx, s.enq.Enqueuer, s.jobs(), tenant, row)
		if now {
			done.add(ExecCancelled, 1)
		}
		return err
	})
	if err != nil {
		return ExecutionDetail{}, err
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// change runs fn on the execution locked in a transaction and returns the
// execution as fn left it, with its events; the request is audited as
// action. done tallies the executions its run's advance ends, for the
// caller to report after the commit.
func (s *Executions) change(ctx context.Context, tenant, id, action string, done *ended,
	fn func(db.Tx, db.Execution) error,
) (ExecutionDetail, error) {
	if !validID(id) {
		return ExecutionDetail{}, ErrNotFound
	}
	var out ExecutionDetail
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, err := db.GetExecution(ctx, tx, tenant, id, true)
		if err != nil {
			return storeError(err, "load execution")
		}
		if err := fn(tx, row); err != nil {
			return err
		}
		if row.WorkflowRunID != nil { // a node's execution: its run may move on
			if err := (runEngine{enq: s.enq, metrics: s.cfg.Metrics, graphs: &s.graphs, ended: done}).advanceRun(ctx, tx, tenant, *row.WorkflowRunID); err != nil {
				return err
			}
		}
		before := row
		if row, err = db.GetExecution(ctx, tx, tenant, id, false); err != nil {
			return storeError(err, "load execution")
		}
		if out, err = execution.WithEvents(ctx, tx, row); err != nil {
			return err
		}
		changes := map[string]any{}
		if row.State != before.State {
			changes["state"] = map[string]any{"old": before.State, "new": row.State}
		}
		if row.CancelRequested != before.CancelRequested {
			changes["cancel_requested"] = map[string]any{"old": before.CancelRequested, "new": row.CancelRequested}
		}
		if wasHeld, held := execution.Held(before), execution.Held(row); wasHeld != held {
			changes["held"] = map[string]any{"old": wasHeld, "new": held}
		}
		return recordAudit(ctx, tx, tenant, action, ResourceExecution, row.ID, changes)
	})
	return out, storeError(err, action+" execution")
}

// Retry sends an execution again, with the same id (the webhook's
// idempotency key):
//   - a failed or cancelled one becomes pending with its last outcome
//     cleared and a fresh retry budget (its attempt numbers keep counting)
//     and gets a new deliver job available at once;
//   - a retrying one makes its next attempt now;
//   - a pending, running or retrying one that no live job carries (a fault
//     left it; see Scheduler.Reconcile) gets a new job now, which resumes
//     it.
//
// A pending or running execution being delivered is a conflict, as are
// skipped (the slot was deliberately not fired) and succeeded ones, an
// execution whose task was deleted, a scheduled execution of a paused task
// (the worker would cancel it), and one whose previous delivery job is
// still running.
func (s *Executions) Retry(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	var done ended
	out, err := s.change(ctx, tenant, id, AuditRetry, &done, func(tx db.Tx, row db.Execution) error {
		switch {
		case lifecycle.ExecRetryable.Has(row.State):
			if err := checkExec([]string{row.State}, ExecPending); err != nil {
				return err
			}
		case execution.Held(row):
			return conflictf("the execution is held; release it (POST /v1/executions/%s/release) to start it", row.ID)
		case lifecycle.ExecUnfinished.Has(row.State):
			return execution.RetryUnfinished(ctx, tx, s.enq.Enqueuer, s.jobs(), tenant, row)
		default:
			return conflictf("the execution is %s; only failed, cancelled, retrying and stuck executions can be retried", row.State)
		}
		task, err := db.GetTask(ctx, tx, tenant, row.TaskID, false)
		if err = storeError(err, "load task"); errors.Is(err, ErrNotFound) {
			return conflictf("the execution's task was deleted")
		}
		if err != nil {
			return err
		}
		if task.State == TaskPaused && row.Trigger != TriggerManual {
			// The deliver worker cancels such an execution of a paused task.
			return conflictf("the task is paused; resume it before retrying its scheduled executions")
		}
		if row.LastErrorClass != nil && *row.LastErrorClass == ErrorClassTemplate {
			if err := rerender(ctx, tx, task, row); err != nil {
				return err
			}
		}
		if err := execution.ReleaseJobs(ctx, tx, s.enq.Enqueuer, tenant, row); err != nil {
			return err
		}
		// row.ID is the canonical (lower-case) id: the job's args and
		// River's unique key must not depend on how the caller spelled it.
		jobID, err := execution.EnqueueNow(ctx, tx, s.enq.Enqueuer, tenant, row.ID, task)
		if err != nil {
			return err
		}
		ok, err := db.RetryExecution(ctx, tx, tenant, row.ID, row.State, jobID)
		if err != nil {
			return storeError(err, "retry execution", onConstraint(db.ConstraintExecutionSlot,
				conflictf("the task's schedule changed and another execution fires this slot now")))
		}
		if !ok { // the row is locked: cannot happen
			return conflictf("the execution changed state; try again")
		}
		return nil
	})
	if err != nil {
		return ExecutionDetail{}, err
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// Trigger fires a task now: a pending execution with trigger manual,
// scheduled for the database's now, and its deliver job, in one
// transaction. Active, paused and completed tasks can be triggered (a
// manual fire is an explicit request; the schedule is not consulted). With
// a DedupKey already used for the task, the execution that key created is
// returned (whatever its payload and state) and nothing is enqueued. With
// a context that carries a transaction (db.WithTx: a request with an
// Idempotency-Key) the transaction is a savepoint of it.
func (s *Executions) Trigger(ctx context.Context, tenant, taskID string, in TriggerInput) (ExecutionDetail, error) {
	if !validID(taskID) {
		return ExecutionDetail{}, ErrNotFound
	}
	if err := in.Validate(PayloadMaxDefault); err != nil {
		return ExecutionDetail{}, err
	}
	var (
		out  ExecutionDetail
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		// Not locked: the scheduler claims tasks with SKIP LOCKED, and a
		// lock here would make it skip this task for a tick.
		task, err := apiTask(db.GetTask(ctx, tx, tenant, taskID, false))
		if err != nil {
			return storeError(err, "load task")
		}
		e := db.ManualExecution{TenantID: tenant, ID: NewID(), TaskID: taskID, Payload: in.Payload}
		for range max(task.Shards, 1) - 1 { // a sharded task fires every shard
			e.ShardIDs = append(e.ShardIDs, NewID())
		}
		if in.DedupKey != "" {
			e.DedupKey = &in.DedupKey
		}
		// A templated task renders its payload for this instant, unless
		// the trigger overrides it (an override is sent as it is).
		unsent, err := renderManual(ctx, tx, task, in.Payload == nil, &e)
		if err != nil {
			return err
		}
		created, err := db.InsertManualExecution(ctx, tx, e)
		if err != nil {
			return err
		}
		var row db.Execution
		if created {
			// Its delivery would be cancelled at once: say so now. (A
			// dedup key used before still returns its execution.)
			if err := execution.CheckEndpointEnabled(ctx, tx, tenant, task.EndpointID); err != nil {
				return err
			}
			var failed []unsentFire
			for i, id := range append([]string{e.ID}, e.ShardIDs...) {
				if i < len(unsent) && unsent[i] != "" {
					failed = append(failed, unsentFire{TenantID: tenant, ID: id, TaskID: task.ID, Reason: unsent[i]})
					continue
				}
				if _, err := execution.EnqueueNow(ctx, tx, s.enq.Enqueuer, tenant, id, task); err != nil {
					return err
				}
			}
			if err := failUnsent(ctx, tx, s.enq, failed, &done); err != nil {
				return err
			}
			row, err = db.GetExecution(ctx, tx, tenant, e.ID, false)
		} else {
			row, err = db.GetExecutionByDedupKey(ctx, tx, tenant, taskID, in.DedupKey)
		}
		if err != nil {
			return storeError(err, "load triggered execution")
		}
		if out, err = execution.WithEvents(ctx, tx, row); err != nil {
			return err
		}
		changes := map[string]any{"execution_id": row.ID, "created": created}
		if in.DedupKey != "" {
			changes["dedup_key"] = in.DedupKey
		}
		if in.Payload != nil {
			changes["payload"] = auditBytes(in.Payload)
		}
		return recordAudit(ctx, tx, tenant, AuditTrigger, ResourceTask, task.ID, changes)
	})
	if err != nil {
		return out, storeError(err, "trigger task")
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// jobs are the River attempts and lease ceiling of the deliver jobs an
// action inserts (handOffMaxAttempts, reconcileLeaseCeiling).
func (s *Executions) jobs() execution.Jobs {
	return execution.Jobs{MaxAttempts: handOffMaxAttempts, LeaseCeiling: reconcileLeaseCeiling}
}

// Hold holds a pending execution: it does not start until it is
// released (execution.Hold). A held execution can be cancelled.
func (s *Executions) Hold(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	var done ended
	out, err := s.change(ctx, tenant, id, AuditHold, &done, func(tx db.Tx, row db.Execution) error {
		return execution.Hold(ctx, tx, tenant, row)
	})
	if err != nil {
		return ExecutionDetail{}, err
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// Release lets a held execution start, at its slot when that is still
// ahead, else now, with a new deliver job (execution.Release).
func (s *Executions) Release(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	var done ended
	out, err := s.change(ctx, tenant, id, AuditRelease, &done, func(tx db.Tx, row db.Execution) error {
		return execution.Release(ctx, tx, s.enq.Enqueuer, tenant, row, s.cfg.FetchAhead, handOffMaxAttempts, reconcileLeaseCeiling)
	})
	if err != nil {
		return ExecutionDetail{}, err
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// firingLateness is how late a fire was (execution.Lateness).
func firingLateness(trigger string, late bool, scheduledFor time.Time, firstStarted *time.Time) (time.Duration, bool) {
	return execution.Lateness(trigger, late, scheduledFor, firstStarted)
}

// SkipReason is the last_error of a slot skipped through the API.
const SkipReason = execution.SkipReason

// Skip records a future slot of the task's schedule as skipped: the
// scheduler will not fire it (execution.Skip). A slot already
// materialised that has not started is moved to skipped; one that started
// → ConflictError. A time that is not a slot of the schedule (calendars
// applied), or one that has passed → ValidationError. Skipping a skipped
// slot again returns it.
func (s *Executions) Skip(ctx context.Context, tenant, taskID string, at time.Time) (ExecutionDetail, error) {
	if !validID(taskID) {
		return ExecutionDetail{}, ErrNotFound
	}
	var (
		out  ExecutionDetail
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		row, err := apiTask(db.GetTask(ctx, tx, tenant, taskID, false))
		if err != nil {
			return storeError(err, "load task")
		}
		t := taskFromRow(row)
		sched, err := parseSchedule(t.Schedule, t.CreatedAt)
		if err != nil {
			return err
		}
		var changed int
		out, changed, err = execution.Skip(ctx, tx, tenant, taskID, sched, t.Shards, at)
		done.add(ExecSkipped, int64(changed))
		return err
	})
	if err != nil {
		return ExecutionDetail{}, storeError(err, "skip slot")
	}
	done.report(s.cfg.Metrics)
	return out, nil
}
