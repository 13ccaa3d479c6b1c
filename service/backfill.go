package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/schedule"
)

// Backfill reruns.
const (
	RerunMissing = "missing"
	RerunFailed  = "failed"
	RerunAll     = "all"
)

// Backfill states.
const (
	BackfillRunning   = "running"
	BackfillSucceeded = "succeeded"
	BackfillFailed    = "failed"
	BackfillCancelled = "cancelled"
)

// Backfill slot actions (a dry run's answer).
const (
	SlotCreate = "create" // no execution yet: round 1
	SlotRerun  = "rerun"  // a new round of a slot that has executions
	SlotKeep   = "keep"   // left as it is
)

// Backfill limits.
const (
	BackfillSlotsMax           = 10_000
	BackfillConcurrencyMax     = 100
	BackfillConcurrencyDefault = 4
	// backfillPumpBatch bounds the running backfills one pump pass visits.
	backfillPumpBatch = 100
)

// BackfillInput is a backfill request.
type BackfillInput struct {
	From, To       time.Time
	Rerun          string // "" means missing
	MaxConcurrency int    // 0 means BackfillConcurrencyDefault
	DryRun         bool
}

// BackfillSlot is what a backfill does with one slot.
type BackfillSlot struct {
	ScheduledFor time.Time
	Round        int
	Action       string
}

// Backfill re-runs a range of a task's slots (executions) or of a
// workflow's slots (runs).
type Backfill struct {
	// TaskID or WorkflowID names what it runs; the other is "".
	ID, TaskID, WorkflowID string
	From, To               time.Time
	Rerun                  string
	MaxConcurrency         int
	State                  string
	// Total is the number of slots the backfill runs; Created how many
	// executions (runs, for a workflow) it has created so far; Succeeded
	// and Failed count those that ended so (failed: failed, cancelled or
	// skipped).
	Total, Created, Succeeded, Failed int
	CreatedAt                         time.Time
	FinishedAt                        *time.Time
}

// Backfills creates and drives backfills. A backfill's slots are fixed
// when it is created; Pump creates their executions in order, at most
// max_concurrency unfinished at once, each pass in one transaction with
// the backfill's progress, so a restart resumes where it stopped and
// never creates a slot's round twice (the unique slot key decides between
// concurrent backfills).
type Backfills struct {
	pool  *db.Pool
	enq   *Enqueuer
	tasks *Tasks
	wake  chan struct{}
	// graphs are the workflow versions its runs' starts read.
	graphs graphCache
}

// NewBackfills returns a Backfills.
func NewBackfills(pool *db.Pool, enq *Enqueuer, tasks *Tasks) *Backfills {
	return &Backfills{pool: pool, enq: enq, tasks: tasks, wake: make(chan struct{}, 1)}
}

// Wake asks the pump loop for a pass soon (a backfill was created or one
// of its executions finished). It never blocks.
func (s *Backfills) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Woken is signalled by Wake.
func (s *Backfills) Woken() <-chan struct{} { return s.wake }

func (in BackfillInput) validate() (BackfillInput, error) {
	var ve ValidationError
	if in.From.IsZero() {
		ve.Add("from", "is required: an RFC 3339 time")
	}
	if in.To.IsZero() {
		ve.Add("to", "is required: an RFC 3339 time")
	}
	if !in.From.IsZero() && !in.To.IsZero() && !in.From.Before(in.To) {
		ve.Add("to", "must be after from")
	}
	if in.Rerun == "" {
		in.Rerun = RerunMissing
	}
	if !contains([]string{RerunMissing, RerunFailed, RerunAll}, in.Rerun) {
		ve.Add("rerun", "must be missing, failed or all")
	}
	if in.MaxConcurrency == 0 {
		in.MaxConcurrency = BackfillConcurrencyDefault
	}
	if in.MaxConcurrency < 1 || in.MaxConcurrency > BackfillConcurrencyMax {
		ve.Add("max_concurrency", fmt.Sprintf("must be 1 to %d", BackfillConcurrencyMax))
	}
	return in, ve.Err()
}

// Create plans a backfill of the task's slots in [From, To): the
// schedule's fire times there (calendars, start_at and end_at applied;
// the task's creation time is no bound), oldest first. A dry run returns
// the plan and stores nothing; otherwise the backfill is stored and its
// slots are run by Pump.
func (s *Backfills) Create(ctx context.Context, tenant, taskID string, in BackfillInput) (Backfill, []BackfillSlot, error) {
	return s.create(ctx, tenant, backfillTarget{taskID: taskID}, in)
}

// CreateForWorkflow is Create for a workflow: each slot of its schedule
// in [From, To) starts one run (trigger backfill), a re-run of a slot
// with round = latest + 1; at most MaxConcurrency of its runs are
// unfinished at once.
func (s *Backfills) CreateForWorkflow(ctx context.Context, tenant, workflowID string, in BackfillInput) (Backfill, []BackfillSlot, error) {
	return s.create(ctx, tenant, backfillTarget{workflowID: workflowID}, in)
}

// backfillTarget is what a backfill runs: a task or a workflow.
type backfillTarget struct{ taskID, workflowID string }

func (t backfillTarget) id() string {
	if t.workflowID != "" {
		return t.workflowID
	}
	return t.taskID
}

// schedule loads the target's schedule with its calendars.
func (s *Backfills) schedule(ctx context.Context, tx db.Tx, tenant string, t backfillTarget) (*schedule.Schedule, error) {
	if t.workflowID != "" {
		row, err := db.GetWorkflow(ctx, tx, tenant, t.workflowID, false)
		if err != nil {
			return nil, storeError(err, "load workflow")
		}
		w, err := workflowFromRow(row)
		if err != nil {
			return nil, err
		}
		if w.Schedule == nil {
			return nil, fieldError("workflow", "the workflow has no schedule, so it has no slots to backfill: trigger runs instead")
		}
		return workflowSchedule(ctx, tx, tenant, w, false)
	}
	row, err := apiTask(db.GetTask(ctx, tx, tenant, t.taskID, false))
	if err != nil {
		return nil, storeError(err, "load task")
	}
	task := taskFromRow(row)
	sched, err := parseSchedule(task.Schedule, task.CreatedAt)
	if err != nil {
		return nil, err
	}
	return s.tasks.withCalendars(ctx, tx, tenant, sched, false)
}

// latestStates returns the latest execution (run) of each of the
// target's slots in [from, to), a run's state as an execution's (a
// blocked run is unfinished, as a running one).
func latestStates(ctx context.Context, q db.Querier, tenant string, t backfillTarget, from, to time.Time) (map[int64]db.SlotState, error) {
	var (
		latest []db.SlotState
		err    error
	)
	if t.workflowID != "" {
		latest, err = db.LatestRunSlotStates(ctx, q, tenant, t.workflowID, from, to)
	} else {
		latest, err = db.LatestSlotStates(ctx, q, tenant, t.taskID, from, to)
	}
	if err != nil {
		return nil, err
	}
	byTime := make(map[int64]db.SlotState, len(latest))
	for _, l := range latest {
		if l.State == RunBlocked {
			l.State = ExecRunning
		}
		byTime[l.ScheduledFor.UnixNano()] = l
	}
	return byTime, nil
}

func (s *Backfills) create(ctx context.Context, tenant string, target backfillTarget, in BackfillInput) (Backfill, []BackfillSlot, error) {
	if !validID(target.id()) {
		return Backfill{}, nil, ErrNotFound
	}
	in, err := in.validate()
	if err != nil {
		return Backfill{}, nil, err
	}
	var (
		out  Backfill
		plan []BackfillSlot
	)
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sched, err := s.schedule(ctx, tx, tenant, target)
		if err != nil {
			return err
		}
		var slots []time.Time
		for at, ok := sched.Next(in.From.Add(-time.Nanosecond)); ok && at.Before(in.To); at, ok = sched.Next(at) {
			if len(slots) == BackfillSlotsMax {
				return fieldError("to", fmt.Sprintf("the range holds more than %d slots; split it into several backfills", BackfillSlotsMax))
			}
			slots = append(slots, at)
		}
		byTime, err := latestStates(ctx, tx, tenant, target, in.From, in.To)
		if err != nil {
			return err
		}
		plan = make([]BackfillSlot, 0, len(slots))
		var run []time.Time
		for _, at := range slots {
			l, has := byTime[at.UnixNano()]
			action, round := slotAction(in.Rerun, l, has)
			plan = append(plan, BackfillSlot{ScheduledFor: at, Round: round, Action: action})
			if action != SlotKeep {
				run = append(run, at)
			}
		}
		if in.DryRun {
			return nil
		}
		b, err := db.InsertBackfill(ctx, tx, db.Backfill{TenantID: tenant, ID: NewID(), TaskID: target.taskID,
			WorkflowID: target.workflowID, From: in.From, To: in.To, Rerun: in.Rerun, MaxConcurrency: int32(in.MaxConcurrency)}, run)
		if err != nil {
			return storeError(err, "store backfill")
		}
		out = backfillFromRow(b)
		resource := ResourceTask
		if target.workflowID != "" {
			resource = ResourceWorkflow
		}
		return recordAudit(ctx, tx, tenant, AuditBackfill, resource, strings.ToLower(target.id()), map[string]any{
			"backfill_id": b.ID, "from": in.From.UTC().Format(time.RFC3339Nano), "to": in.To.UTC().Format(time.RFC3339Nano),
			"rerun": in.Rerun, "max_concurrency": in.MaxConcurrency, "total": b.Total,
		})
	})
	if err == nil && !in.DryRun {
		s.Wake()
	}
	return out, plan, err
}

// slotAction decides what rerun does with a slot whose latest execution
// is l (has false: none): a slot still unfinished is always kept.
func slotAction(rerun string, l db.SlotState, has bool) (action string, round int) {
	switch {
	case !has:
		return SlotCreate, 1
	case l.State == ExecPending || l.State == ExecRunning || l.State == ExecRetrying:
		return SlotKeep, int(l.Round)
	case rerun == RerunAll,
		rerun == RerunFailed && (l.State == ExecFailed || l.State == ExecCancelled):
		return SlotRerun, int(l.Round) + 1
	}
	return SlotKeep, int(l.Round)
}

// Get returns one backfill with its current counts.
func (s *Backfills) Get(ctx context.Context, tenant, id string) (Backfill, error) {
	if !validID(id) {
		return Backfill{}, ErrNotFound
	}
	row, err := db.GetBackfill(ctx, s.pool, tenant, id, false)
	if err != nil {
		return Backfill{}, storeError(err, "load backfill")
	}
	return s.withCounts(ctx, row)
}

// withCounts returns a running backfill with its executions counted now
// (a finished one keeps its final counts).
func (s *Backfills) withCounts(ctx context.Context, row db.Backfill) (Backfill, error) {
	b := backfillFromRow(row)
	if row.State != BackfillRunning {
		return b, nil
	}
	c, err := countBackfill(ctx, s.pool, row)
	if err != nil {
		return Backfill{}, storeError(err, "count backfill")
	}
	b.Succeeded, b.Failed = int(c.Succeeded), int(c.Failed)
	return b, nil
}

// countBackfill counts a backfill's executions, or its runs for a
// workflow's, by outcome.
func countBackfill(ctx context.Context, q db.Querier, b db.Backfill) (db.BackfillCounts, error) {
	if b.WorkflowID != "" {
		return db.CountBackfillRuns(ctx, q, b.TenantID, b.ID)
	}
	return db.CountBackfill(ctx, q, b.TenantID, b.ID)
}

// BackfillFilter narrows List.
type BackfillFilter struct {
	TaskID     string
	WorkflowID string
	State      string
}

// List returns a page of backfills, newest first.
func (s *Backfills) List(ctx context.Context, tenant string, f BackfillFilter, page Page) ([]Backfill, string, error) {
	var ve ValidationError
	if f.TaskID != "" && !validID(f.TaskID) {
		ve.Add("task_id", "must be a task id")
	}
	if f.WorkflowID != "" && !validID(f.WorkflowID) {
		ve.Add("workflow_id", "must be a workflow id")
	}
	if f.State != "" && !contains([]string{BackfillRunning, BackfillSucceeded, BackfillFailed, BackfillCancelled}, f.State) {
		ve.Add("state", "must be running, succeeded, failed or cancelled")
	}
	if err := ve.Err(); err != nil {
		return nil, "", err
	}
	if err := page.check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListBackfills(ctx, s.pool, tenant, db.BackfillFilter{TaskID: f.TaskID, WorkflowID: f.WorkflowID, State: f.State,
		Before: page.After, Limit: page.Limit + 1})
	if err != nil {
		return nil, "", storeError(err, "list backfills")
	}
	items, next := pageOf(rows, page.Limit, func(r db.Backfill) db.Backfill { return r }, func(r db.Backfill) string { return r.ID })
	out := make([]Backfill, 0, len(items))
	for _, r := range items {
		b, err := s.withCounts(ctx, r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, b)
	}
	return out, next, nil
}

// Cancel stops a running backfill: it creates nothing more, and its
// executions that have not started are cancelled (running ones finish).
// Cancelling a finished backfill changes nothing.
func (s *Backfills) Cancel(ctx context.Context, tenant, id string) (Backfill, error) {
	if !validID(id) {
		return Backfill{}, ErrNotFound
	}
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, err := db.GetBackfillForUpdate(ctx, tx, tenant, id)
		if err != nil {
			return storeError(err, "load backfill")
		}
		if row.State != BackfillRunning {
			return nil
		}
		changes := map[string]any{}
		if row.WorkflowID != "" {
			// A run not started yet is cancelled; started ones go on.
			n, err := db.CancelBackfillRuns(ctx, tx, tenant, id)
			if err != nil {
				return err
			}
			changes["workflow_id"], changes["cancelled_runs"] = row.WorkflowID, n
		} else {
			n, err := db.CancelBackfillPending(ctx, tx, tenant, row.TaskID, id, "the backfill was cancelled")
			if err != nil {
				return err
			}
			changes["task_id"], changes["cancelled_executions"] = row.TaskID, n
		}
		c, err := countBackfill(ctx, tx, row)
		if err != nil {
			return err
		}
		if _, err = db.FinishBackfill(ctx, tx, tenant, id, BackfillCancelled, c); err != nil {
			return err
		}
		return recordAudit(ctx, tx, tenant, AuditCancel, ResourceBackfill, id, changes)
	})
	if err != nil {
		return Backfill{}, err
	}
	return s.Get(ctx, tenant, id)
}

// Pump makes one pass over the running backfills: each creates executions
// for its next slots while it has fewer than max_concurrency unfinished,
// and one whose slots are all created and finished ends. It returns how
// many executions it created.
func (s *Backfills) Pump(ctx context.Context) (int, error) {
	refs, err := db.RunningBackfills(ctx, s.pool, backfillPumpBatch)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, r := range refs {
		n, err := s.pumpOne(ctx, r.TenantID, r.ID)
		if err != nil {
			return total, fmt.Errorf("backfill %s: %w", r.ID, err)
		}
		total += n
	}
	return total, nil
}

// pumpOne advances one backfill in one transaction; a backfill another
// replica is pumping is skipped.
func (s *Backfills) pumpOne(ctx context.Context, tenant, id string) (int, error) {
	created := 0
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		created = 0
		b, err := db.GetBackfill(ctx, tx, tenant, id, true)
		if err = storeError(err, "load backfill"); errors.Is(err, ErrNotFound) {
			return nil // another replica holds it
		}
		if err != nil {
			return err
		}
		if b.State != BackfillRunning {
			return nil
		}
		if b.WorkflowID != "" {
			created, err = s.pumpWorkflow(ctx, tx, b)
			return err
		}
		task, err := db.GetTask(ctx, tx, tenant, b.TaskID, false)
		if err = storeError(err, "load task"); errors.Is(err, ErrNotFound) {
			return s.finish(ctx, tx, b, BackfillCancelled)
		}
		if err != nil {
			return err
		}
		unfinished, err := db.CountBackfillUnfinished(ctx, tx, tenant, b.TaskID, id)
		if err != nil {
			return err
		}
		room := int(b.MaxConcurrency) - unfinished
		if task.State == TaskPaused || room <= 0 {
			return nil
		}
		slots, err := db.BackfillSlots(ctx, tx, tenant, id, int(b.NextIndex), room)
		if err != nil {
			return err
		}
		if len(slots) == 0 {
			if unfinished == 0 {
				c, err := db.CountBackfill(ctx, tx, tenant, id)
				if err != nil {
					return err
				}
				state := BackfillSucceeded
				if c.Failed > 0 {
					state = BackfillFailed
				}
				_, err = db.FinishBackfill(ctx, tx, tenant, id, state, c)
				return err
			}
			return nil
		}
		byTime, err := latestStates(ctx, tx, tenant, backfillTarget{taskID: b.TaskID}, slots[0], slots[len(slots)-1].Add(time.Microsecond)) // timestamptz: microseconds
		if err != nil {
			return err
		}
		var (
			jobs    []river.InsertManyParams
			dropped int
			zero    time.Time // due now: a backfill's slot has passed
		)
		for _, at := range slots {
			l, has := byTime[at.UnixNano()]
			// Decided again now: since the backfill was planned, the slot
			// may have run (the scheduler, another backfill).
			action, round := slotAction(b.Rerun, l, has)
			if action == SlotKeep {
				dropped++
				continue
			}
			e := db.NewBackfillExecution{ID: NewID(), ScheduledFor: at, Round: int32(round)}
			ok, err := db.InsertBackfillExecution(ctx, tx, tenant, b.TaskID, id, e)
			if err != nil {
				return err
			}
			if !ok { // another backfill created this round of the slot just now
				dropped++
				continue
			}
			created++
			jobs = append(jobs, deliverInsert(tenant, e.ID, task.EndpointID, zero, int(task.Priority), int(task.MaxAttempts), zero, 0, QueueDeliverBulk))
		}
		if len(jobs) > 0 {
			if _, err := s.enq.insertMany(ctx, tx, jobs); err != nil {
				return err
			}
		}
		return db.AdvanceBackfill(ctx, tx, tenant, id, int(b.NextIndex)+len(slots), created, dropped)
	})
	return created, err
}

// pumpWorkflow is pumpOne's pass over a workflow backfill, b locked by
// the caller: it starts a run for each next slot while fewer than
// max_concurrency of its runs are unfinished (a paused workflow gets no
// new run), with the current version, in the transaction that advances
// the backfill. The runs wait for max_active_runs like any other.
func (s *Backfills) pumpWorkflow(ctx context.Context, tx db.Tx, b db.Backfill) (int, error) {
	w, err := db.GetWorkflow(ctx, tx, b.TenantID, b.WorkflowID, false)
	if err = storeError(err, "load workflow"); errors.Is(err, ErrNotFound) {
		return 0, s.finish(ctx, tx, b, BackfillCancelled)
	}
	if err != nil {
		return 0, err
	}
	c, err := db.CountBackfillRuns(ctx, tx, b.TenantID, b.ID)
	if err != nil {
		return 0, err
	}
	room := int(b.MaxConcurrency) - int(c.Unfinished)
	if w.State == WorkflowPaused || room <= 0 {
		return 0, nil
	}
	slots, err := db.BackfillSlots(ctx, tx, b.TenantID, b.ID, int(b.NextIndex), room)
	if err != nil {
		return 0, err
	}
	if len(slots) == 0 {
		if c.Unfinished == 0 {
			state := BackfillSucceeded
			if c.Failed > 0 {
				state = BackfillFailed
			}
			_, err = db.FinishBackfill(ctx, tx, b.TenantID, b.ID, state, c)
		}
		return 0, err
	}
	target := backfillTarget{workflowID: b.WorkflowID}
	byTime, err := latestStates(ctx, tx, b.TenantID, target, slots[0], slots[len(slots)-1].Add(time.Microsecond))
	if err != nil {
		return 0, err
	}
	created, dropped := 0, 0
	for _, at := range slots {
		l, has := byTime[at.UnixNano()]
		action, round := slotAction(b.Rerun, l, has)
		if action == SlotKeep {
			dropped++
			continue
		}
		id := b.ID
		ok, err := db.InsertWorkflowRun(ctx, tx, db.WorkflowRun{TenantID: b.TenantID, ID: NewID(), WorkflowID: b.WorkflowID,
			Version: w.Version, ScheduledFor: at, Round: int32(round), Trigger: TriggerBackfill, BackfillID: &id})
		if err != nil {
			return 0, storeError(err, "insert workflow run")
		}
		if !ok { // another backfill started this round of the slot just now
			dropped++
			continue
		}
		created++
	}
	if created > 0 {
		if err := (runEngine{enq: s.enq, metrics: s.tasks.cfg.Metrics, graphs: &s.graphs}).promote(ctx, tx, b.TenantID, b.WorkflowID); err != nil {
			return 0, err
		}
	}
	return created, db.AdvanceBackfill(ctx, tx, b.TenantID, b.ID, int(b.NextIndex)+len(slots), created, dropped)
}

func (s *Backfills) finish(ctx context.Context, tx db.Tx, b db.Backfill, state string) error {
	c, err := countBackfill(ctx, tx, b)
	if err != nil {
		return err
	}
	_, err = db.FinishBackfill(ctx, tx, b.TenantID, b.ID, state, c)
	return err
}

func backfillFromRow(r db.Backfill) Backfill {
	return Backfill{
		ID: r.ID, TaskID: r.TaskID, WorkflowID: r.WorkflowID, From: r.From.UTC(), To: r.To.UTC(), Rerun: r.Rerun, MaxConcurrency: int(r.MaxConcurrency),
		State: r.State, Total: int(r.Total), Created: int(r.Created), Succeeded: int(r.Succeeded), Failed: int(r.Failed),
		CreatedAt: r.CreatedAt.UTC(), FinishedAt: utcPtr(r.FinishedAt),
	}
}
