package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/metrics"
)

// Execution triggers.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
	TriggerRetry    = "retry"
	// TriggerBackfill: created by a backfill (POST /v1/tasks/{id}/backfill).
	TriggerBackfill = "backfill"
	// TriggerEvent: fired by an event (POST /v1/events) matching the
	// task's event schedule.
	TriggerEvent = "event"
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
	EventRetried          = "retried"
	EventReconciled       = "reconciled"
)

// Execution is one fire of a task, or of a workflow step.
type Execution struct {
	ID string
	// TaskID is the task the execution fires; "" for a workflow step's,
	// which WorkflowID, WorkflowRunID and Node name (a step is sent by a
	// task of the workflow's own, which the API never shows: its id would
	// lead nowhere).
	TaskID         string
	ScheduledFor   time.Time
	Trigger        string
	DedupKey       string
	State          string
	Attempts       int
	Late           bool
	LastStatusCode *int
	LastError      string
	LastErrorClass string
	CreatedAt      time.Time
	// StartedAt is when its latest attempt started, FirstStartedAt its
	// first.
	StartedAt      *time.Time
	FirstStartedAt *time.Time
	FinishedAt     *time.Time
	// Round is 1 for a slot's first fire and one more for each backfill
	// that re-ran the slot.
	Round      int
	BackfillID string
	// EventID is the event that fired it (trigger event).
	EventID string
	// WorkflowID, WorkflowRunID and Node name a workflow step's run and
	// node; Shard is the shard (0 unless sharded).
	WorkflowID, WorkflowRunID, Node string
	Shard                           int
	// Held: an operator holds the pending execution; it does not start
	// until it is released (Executions.Hold, Executions.Release).
	Held   bool
	Events []Event
}

// Event is one step on an execution's timeline.
type Event struct {
	Type       string
	At         time.Time
	Attempt    *int
	StatusCode *int
	LatencyMS  *int
	ErrorClass string
	Message    string
	Data       map[string]any
}

// DedupKeyMax is the longest dedup key of a manual trigger, in characters.
const DedupKeyMax = 128

// ExecutionDetail is an execution as operators see it: the execution and
// the delivery state they act on.
type ExecutionDetail struct {
	Execution
	// CancelRequested: a cancel arrived while the execution was running;
	// its worker finishes it as cancelled.
	CancelRequested bool
	// NextAttemptAt is when a retrying execution's next attempt is due.
	NextAttemptAt *time.Time
	// Output and Progress: the latest callback attempt's completion
	// output and last heartbeat progress (callback completion mode); for
	// a workflow node in response mode, Output is its 2xx JSON answer.
	Output   json.RawMessage
	Progress json.RawMessage
}

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

// ExecutionFilter narrows List. Since and Until bound scheduled_for
// (Since inclusive, Until exclusive).
type ExecutionFilter struct {
	TaskID string
	State  string
	Since  *time.Time
	Until  *time.Time
	// Held: only held executions (which are pending).
	Held bool
}

// List returns a page of executions, newest first (by id, i.e. by
// creation). State failed is the dead-letter set.
func (s *Executions) List(ctx context.Context, tenant string, f ExecutionFilter, page Page) ([]ExecutionDetail, string, error) {
	var ve ValidationError
	if f.TaskID != "" && !validID(f.TaskID) {
		ve.Add("task_id", "must be a task id")
	}
	if states := lifecycle.Executions.States(); f.State != "" && !states.Has(f.State) {
		ve.Add("state", "must be one of "+strings.Join(states.States(), ", "))
	}
	if f.Held && f.State != "" && f.State != ExecPending {
		ve.Add("held", "held executions are pending: combine held with state pending or none")
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		ve.Add("until", "must be after since")
	}
	if err := ve.Err(); err != nil {
		return nil, "", err
	}
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListExecutions(ctx, s.pool, tenant, db.ExecutionFilter{
		TaskID: f.TaskID, State: f.State, Since: f.Since, Until: f.Until, Before: page.After, Limit: page.Limit + 1,
		Held: f.Held,
	})
	if err != nil {
		return nil, "", storeError(err, "list executions")
	}
	out, next := pageOf(rows, page.Limit, func(r db.Execution) ExecutionDetail { return executionDetailOf(r, nil) },
		func(e ExecutionDetail) string { return e.ID })
	return out, next, nil
}

// Get returns one execution with its timeline.
func (s *Executions) Get(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	if !validID(id) {
		return ExecutionDetail{}, ErrNotFound
	}
	row, err := db.GetExecution(ctx, s.pool, tenant, id, false)
	if err != nil {
		return ExecutionDetail{}, storeError(err, "load execution")
	}
	d, err := s.withEvents(ctx, s.pool, row)
	if err != nil {
		return ExecutionDetail{}, err
	}
	cb, err := db.GetExecutionCallback(ctx, s.pool, tenant, id)
	if err = storeError(err, "load callback"); err != nil && !errors.Is(err, ErrNotFound) {
		return ExecutionDetail{}, err
	}
	d.Output, d.Progress = cb.Output, cb.Progress
	if d.Output == nil && row.WorkflowRunID != nil {
		// A workflow node in response mode keeps its JSON answer.
		if d.Output, err = db.GetExecutionOutput(ctx, s.pool, tenant, id); err != nil {
			return ExecutionDetail{}, storeError(err, "load execution output")
		}
	}
	return d, nil
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
		var (
			ok  bool
			err error
			// now: the execution is cancelled at once (not a cancel
			// requested of a running one, which its worker ends).
			now = true
		)
		done = nil
		if !lifecycle.ExecUnfinished.Has(row.State) {
			return conflictf("the execution is %s; only pending, retrying and running executions can be cancelled", row.State)
		}
		if err := checkExec([]string{row.State}, ExecCancelled); err != nil {
			return err
		}
		switch {
		case lifecycle.ExecIdle.Has(row.State):
			ok, err = db.CancelExecution(ctx, tx, tenant, id, "cancelled through the API", []string{row.State})
		case row.State == ExecRunning:
			var orphaned, waiting bool
			if waiting, err = db.EndCallbacks(ctx, tx, tenant, row.ID); err != nil {
				return err
			}
			if !waiting {
				if _, orphaned, err = db.GetOrphanedExecution(ctx, tx, tenant, row.ID, reconcileLeaseCeiling); err != nil {
					return err
				}
			}
			switch {
			case waiting:
				// No worker holds it: the wait ends with the cancel (the
				// token can no longer act).
				ok, err = db.CancelExecution(ctx, tx, tenant, id,
					"cancelled through the API while waiting for the receiver's callback", []string{ExecRunning})
			case orphaned:
				ok, err = db.CancelExecution(ctx, tx, tenant, id,
					"cancelled through the API (no job was delivering the execution)", []string{ExecRunning})
			default:
				ok, err = db.RequestExecutionCancel(ctx, tx, tenant, id)
				now = false
			}
		}
		if err != nil {
			return err
		}
		if !ok { // the row is locked: cannot happen
			return conflictf("the execution changed state; try again")
		}
		if now {
			done.add(ExecCancelled, 1)
		}
		// Even when a job cannot be cancelled (a worker just picked it
		// up), the worker re-checks the execution and sends nothing.
		jobs, err := db.ExecutionJobs(ctx, tx, DeliverArgs{}.Kind(), tenant, id, row.RiverJobID)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if rivertype.JobState(j.State) == rivertype.JobStateCompleted {
				continue
			}
			if err := s.enq.cancelTx(ctx, tx, j.ID); err != nil {
				return err
			}
		}
		return nil
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
		if out, err = s.withEvents(ctx, tx, row); err != nil {
			return err
		}
		changes := map[string]any{}
		if row.State != before.State {
			changes["state"] = map[string]any{"old": before.State, "new": row.State}
		}
		if row.CancelRequested != before.CancelRequested {
			changes["cancel_requested"] = map[string]any{"old": before.CancelRequested, "new": row.CancelRequested}
		}
		if wasHeld, held := heldOf(before), heldOf(row); wasHeld != held {
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
		case heldOf(row):
			return conflictf("the execution is held; release it (POST /v1/executions/%s/release) to start it", row.ID)
		case lifecycle.ExecUnfinished.Has(row.State):
			return s.retryUnfinished(ctx, tx, tenant, row)
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
		if err := s.releaseJobs(ctx, tx, tenant, row); err != nil {
			return err
		}
		// row.ID is the canonical (lower-case) id: the job's args and
		// River's unique key must not depend on how the caller spelled it.
		jobID, err := s.enqueueNow(ctx, tx, tenant, row.ID, task)
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

// retryUnfinished is Retry of an execution that is not final.
func (s *Executions) retryUnfinished(ctx context.Context, tx db.Tx, tenant string, row db.Execution) error {
	o, orphaned, err := db.GetOrphanedExecution(ctx, tx, tenant, row.ID, reconcileLeaseCeiling)
	if err != nil {
		return storeError(err, "load orphaned execution")
	}
	if orphaned {
		data := map[string]any{"previous_state": row.State}
		ok, err := resumeOrphan(ctx, tx, s.enq, o, EventRetried, "retried through the API: no job was delivering the execution", data)
		if err == nil && !ok {
			return conflictf("the execution changed state; try again")
		}
		return err
	}
	if row.State != ExecRetrying {
		return conflictf("the execution is %s and being delivered; it cannot be retried until it ends", row.State)
	}
	ok, err := db.HurryRetry(ctx, tx, tenant, row.ID)
	if err != nil {
		return storeError(err, "hurry retry")
	}
	if !ok { // the row is locked: cannot happen
		return conflictf("the execution changed state; try again")
	}
	jobs, err := db.ExecutionJobs(ctx, tx, DeliverArgs{}.Kind(), tenant, row.ID, row.RiverJobID)
	if err != nil {
		return storeError(err, "list execution jobs")
	}
	for _, j := range jobs {
		switch rivertype.JobState(j.State) {
		case rivertype.JobStateScheduled, rivertype.JobStateRetryable:
			if err := s.enq.retryNowTx(ctx, tx, j.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// releaseJobs frees the River unique slot of an execution's deliver job
// (DeliverArgs are unique by execution, and a completed job keeps its slot
// until River's cleaner deletes it) so that a new job can be inserted: a
// completed job is deleted (the execution's own timeline keeps the
// history), a queued one is cancelled. A running job means a worker is
// still finishing the previous delivery: a conflict.
func (s *Executions) releaseJobs(ctx context.Context, tx db.Tx, tenant string, row db.Execution) error {
	jobs, err := db.ExecutionJobs(ctx, tx, DeliverArgs{}.Kind(), tenant, row.ID, row.RiverJobID)
	if err != nil {
		return storeError(err, "list execution jobs")
	}
	for _, j := range jobs {
		switch rivertype.JobState(j.State) {
		case rivertype.JobStateRunning:
			return conflictf("the previous delivery of this execution is still finishing; retry shortly")
		case rivertype.JobStateCompleted:
			err = s.enq.deleteTx(ctx, tx, j.ID)
		default:
			err = s.enq.cancelTx(ctx, tx, j.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TriggerInput is a manual fire of a task.
type TriggerInput struct {
	// Payload overrides the task's payload for this execution; nil means
	// the task's.
	Payload []byte
	// DedupKey, when set, makes the trigger idempotent per task: the same
	// key returns the execution it first created.
	DedupKey string
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
	if err := in.validate(); err != nil {
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
			if err := checkEndpointEnabled(ctx, tx, tenant, task.EndpointID); err != nil {
				return err
			}
			var failed []unsentFire
			for i, id := range append([]string{e.ID}, e.ShardIDs...) {
				if i < len(unsent) && unsent[i] != "" {
					failed = append(failed, unsentFire{TenantID: tenant, ID: id, TaskID: task.ID, Reason: unsent[i]})
					continue
				}
				if _, err := s.enqueueNow(ctx, tx, tenant, id, task); err != nil {
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
		if out, err = s.withEvents(ctx, tx, row); err != nil {
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

// checkEndpointEnabled is a conflict naming the endpoint when it is
// disabled (by a client, or by ax after a 410 Gone): a fire sent to it is
// cancelled before it leaves.
func checkEndpointEnabled(ctx context.Context, q db.Querier, tenant, endpointID string) error {
	ep, err := db.GetEndpoint(ctx, q, tenant, endpointID, false)
	if err != nil {
		return storeError(err, "load endpoint "+endpointID)
	}
	if ep.Enabled {
		return nil
	}
	why := ""
	if ep.DisabledReason != nil && *ep.DisabledReason != "" {
		why = " (" + *ep.DisabledReason + ")"
	}
	return conflictf("the task's endpoint %q (%s) is disabled%s: enable it (PATCH /v1/endpoints/%s {\"enabled\": true}) "+
		"before triggering", ep.Name, ep.ID, why, ep.ID)
}

func (in TriggerInput) validate() error {
	var ve ValidationError
	if in.Payload != nil {
		switch {
		case len(in.Payload) > PayloadMaxDefault:
			ve.Add("payload", fmt.Sprintf("must be at most %d bytes", PayloadMaxDefault))
		case !json.Valid(in.Payload):
			ve.Add("payload", "must be valid JSON")
		}
	}
	if in.DedupKey != "" && !validDedupKey(in.DedupKey) {
		ve.Add("dedup_key", fmt.Sprintf("must be 1 to %d printable characters", DedupKeyMax))
	}
	return ve.Err()
}

func validDedupKey(k string) bool {
	return k != "" && utf8.ValidString(k) && utf8.RuneCountInString(k) <= DedupKeyMax &&
		!strings.ContainsFunc(k, func(r rune) bool { return !unicode.IsPrint(r) })
}

// enqueueNow inserts an execution's deliver job, available at once, with
// the task's priority and attempt budget, and returns its id.
func (s *Executions) enqueueNow(ctx context.Context, tx db.Tx, tenant, executionID string, task db.Task) (int64, error) {
	var now time.Time // scheduled for now: not a scheduled job
	res, err := s.enq.insertMany(ctx, tx, []river.InsertManyParams{
		deliverInsert(tenant, executionID, task.EndpointID, now, int(task.Priority), int(task.MaxAttempts), now, 0, QueueDeliver),
	})
	if err != nil {
		return 0, err
	}
	if res[0].UniqueSkippedAsDuplicate {
		return 0, conflictf("a delivery of this execution is already queued")
	}
	return res[0].Job.ID, nil
}

func (s *Executions) withEvents(ctx context.Context, q db.Querier, row db.Execution) (ExecutionDetail, error) {
	events, err := db.ListExecutionEvents(ctx, q, row)
	if err != nil {
		return ExecutionDetail{}, storeError(err, "list execution events")
	}
	return executionDetailOf(row, events), nil
}

func executionDetailOf(r db.Execution, events []db.ExecutionEvent) ExecutionDetail {
	d := ExecutionDetail{
		Execution: Execution{
			ID: r.ID, ScheduledFor: r.ScheduledFor.UTC(), Trigger: r.Trigger, DedupKey: strValue(r.DedupKey),
			State: r.State, Attempts: int(r.Attempts), Late: r.Late, LastStatusCode: intValue(r.LastStatusCode),
			LastError: strValue(r.LastError), LastErrorClass: strValue(r.LastErrorClass), CreatedAt: r.CreatedAt.UTC(),
			StartedAt: utcPtr(r.StartedAt), FirstStartedAt: utcPtr(r.FirstStartedAt), FinishedAt: utcPtr(r.FinishedAt), Round: int(r.Round), BackfillID: strValue(r.BackfillID),
			WorkflowID: strValue(r.WorkflowID), WorkflowRunID: strValue(r.WorkflowRunID), Node: strValue(r.Node),
			Shard: int(r.Shard), Held: heldOf(r), EventID: strValue(r.EventID),
		},
		CancelRequested: r.CancelRequested,
		NextAttemptAt:   utcPtr(r.NextAttemptAt),
	}
	if r.WorkflowRunID == nil {
		d.TaskID = r.TaskID
	}
	if events != nil {
		d.Events = make([]Event, 0, len(events))
		for _, ev := range events {
			d.Events = append(d.Events, Event{
				Type: ev.Type, At: ev.At.UTC(), Attempt: intValue(ev.Attempt), StatusCode: intValue(ev.StatusCode),
				LatencyMS: intValue(ev.LatencyMS), ErrorClass: strValue(ev.ErrorClass), Message: strValue(ev.Message), Data: ev.Data,
			})
		}
	}
	return d
}

func strValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func intValue(n *int32) *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}

// SkipReason is the last_error of a slot skipped through the API.
const SkipReason = "skipped by request"

// Skip records a future slot of the task's schedule as skipped: the
// scheduler will not fire it. A slot already materialised that has not
// started is moved to skipped; one that started → ConflictError. A time
// that is not a slot of the schedule (calendars applied), or one that has
// passed → ValidationError. Skipping a skipped slot again returns it.
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
		cals, err := loadCalendars(ctx, tx, tenant, sched.CalendarIDs(), false)
		if err != nil {
			return err
		}
		sched = sched.Excluding(cals)
		if next, ok := sched.Next(at.Add(-time.Nanosecond)); !ok || !next.Equal(at) {
			msg := "is not a slot of the task's schedule"
			if ok {
				msg += "; the next slot from there is " + next.UTC().Format(time.RFC3339Nano)
			}
			return fieldError("scheduled_for", msg)
		}
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		if !at.After(now) {
			msg := "has passed: only a future slot can be skipped; the schedule has no slot ahead"
			if next, ok := sched.Next(now); ok {
				msg = "has passed: only a future slot can be skipped; the next slot is " + next.UTC().Format(time.RFC3339Nano)
			}
			return fieldError("scheduled_for", msg)
		}
		ids := make([]string, t.Shards) // one execution per shard
		for i := range ids {
			ids[i] = NewID()
		}
		id, changed, err := db.SkipSlot(ctx, tx, tenant, taskID, ids, at, SkipReason)
		if err != nil {
			return err
		}
		if changed > 0 {
			done.add(ExecSkipped, int64(changed))
		}
		if id == "" {
			return conflictf("the slot %s has already started or finished", at.UTC().Format(time.RFC3339Nano))
		}
		e, err := db.GetExecution(ctx, tx, tenant, id, false)
		if err != nil {
			return storeError(err, "load skipped execution")
		}
		if err := recordAudit(ctx, tx, tenant, AuditSkip, ResourceTask, taskID, map[string]any{
			"scheduled_for": at.UTC().Format(time.RFC3339Nano), "execution_id": id,
		}); err != nil {
			return err
		}
		out, err = s.withEvents(ctx, tx, e)
		return err
	})
	if err != nil {
		return ExecutionDetail{}, storeError(err, "skip slot")
	}
	done.report(s.cfg.Metrics)
	return out, nil
}
