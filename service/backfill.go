package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/schedule"
)

// Backfill reruns.
const (
	RerunMissing = "missing"
	RerunFailed  = "failed"
	RerunAll     = "all"
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
	// Inputs override a workflow's input defaults for the backfill's
	// runs (a workflow backfill only; an undeclared name is a 422).
	Inputs Inputs
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
	// Inputs are a workflow backfill's input overrides (nil: none).
	Inputs Inputs
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

// schedule loads the target's schedule with its calendars, and checks
// inputs (overrides) against what it declares: the overrides' JSON ("":
// none) is returned for the backfill to keep.
func (s *Backfills) schedule(ctx context.Context, tx db.Tx, tenant string, t backfillTarget, inputs Inputs,
) (*schedule.Schedule, string, error) {
	if t.workflowID != "" {
		row, err := db.GetWorkflow(ctx, tx, tenant, t.workflowID, false)
		if err != nil {
			return nil, "", storeError(err, "load workflow")
		}
		w, err := workflowFromRow(row)
		if err != nil {
			return nil, "", err
		}
		overrides, err := mergeInputs(w.Inputs, inputs)
		if err != nil {
			return nil, "", err
		}
		if w.Schedule == nil {
			return nil, "", fieldError("workflow", "the workflow has no schedule, so it has no slots to backfill: trigger runs instead")
		}
		sched, err := workflowSchedule(ctx, tx, tenant, w, false)
		return sched, overrides, err
	}
	if len(inputs) > 0 {
		return nil, "", fieldError("inputs", "only a workflow backfill takes inputs")
	}
	row, err := apiTask(db.GetTask(ctx, tx, tenant, t.taskID, false))
	if err != nil {
		return nil, "", storeError(err, "load task")
	}
	task := taskFromRow(row)
	sched, err := parseSchedule(task.Schedule, task.CreatedAt)
	if err != nil {
		return nil, "", err
	}
	sched, err = s.tasks.withCalendars(ctx, tx, tenant, sched, false)
	return sched, "", err
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
		return nil, storeError(err, "read slot states")
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
		sched, overrides, err := s.schedule(ctx, tx, tenant, target, in.Inputs)
		if err != nil {
			return err
		}
		// A backfill runs slots that have passed: one to come is the
		// scheduler's to fire at its time (a backfill would send it now,
		// early, and the scheduler's fire of it would then be dropped).
		now, err := db.Now(ctx, tx)
		if err != nil {
			return storeError(err, "read the database clock")
		}
		if in.To.After(now) {
			return fieldError("to", fmt.Sprintf("lies in the future (the database clock says %s): a backfill runs past slots; "+
				"the scheduler fires the ones to come at their time", now.UTC().Format(time.RFC3339)))
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
		b, err := db.InsertBackfill(ctx, tx, db.Backfill{
			TenantID: tenant, ID: NewID(), TaskID: target.taskID,
			WorkflowID: target.workflowID, From: in.From, To: in.To, Rerun: in.Rerun, MaxConcurrency: int32(in.MaxConcurrency),
			Inputs: overrides,
		}, run)
		if err != nil {
			return storeError(err, "store backfill")
		}
		if out, err = backfillFromRow(b); err != nil {
			return err
		}
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
	return out, plan, storeError(err, "create backfill")
}

// slotAction decides what rerun does with a slot whose latest execution
// is l (has false: none): a slot still unfinished is always kept.
func slotAction(rerun string, l db.SlotState, has bool) (action string, round int) {
	switch {
	case !has:
		return SlotCreate, 1
	case lifecycle.ExecUnfinished.Has(l.State):
		return SlotKeep, int(l.Round)
	case rerun == RerunAll,
		rerun == RerunFailed && lifecycle.ExecRetryable.Has(l.State):
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
	b, err := backfillFromRow(row)
	if err != nil || row.State != BackfillRunning {
		return b, err
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
		c, err := db.CountBackfillRuns(ctx, q, b.TenantID, b.ID)
		return c, storeError(err, "count backfill runs")
	}
	c, err := db.CountBackfill(ctx, q, b.TenantID, b.ID)
	return c, storeError(err, "count backfill executions")
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
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListBackfills(ctx, s.pool, tenant, db.BackfillFilter{
		TaskID: f.TaskID, WorkflowID: f.WorkflowID, State: f.State,
		Before: page.After, Limit: page.Limit + 1,
	})
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
	var (
		done          ended
		runsCancelled int // pending runs: none of their nodes has fired
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done, runsCancelled = nil, 0
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
			runsCancelled = int(n)
			changes["workflow_id"], changes["cancelled_runs"] = row.WorkflowID, n
		} else {
			n, err := db.CancelBackfillPending(ctx, tx, tenant, row.TaskID, id, "the backfill was cancelled")
			if err != nil {
				return err
			}
			done.add(ExecCancelled, n)
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
		return Backfill{}, storeError(err, "cancel backfill")
	}
	done.report(s.tasks.cfg.Metrics)
	for range runsCancelled {
		s.tasks.cfg.Metrics.WorkflowRunFinished(RunCancelled)
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
		return 0, storeError(err, "list running backfills")
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
	var done ended
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		created, done = 0, nil
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
			created, err = s.pump(ctx, tx, b, s.workflowSlots(ctx, tx, b))
		} else {
			created, err = s.pump(ctx, tx, b, s.taskSlots(ctx, tx, b, &done))
		}
		return err
	})
	if err != nil {
		return created, storeError(err, "pump backfill")
	}
	done.report(s.tasks.cfg.Metrics)
	return created, nil
}

// backfillRoom is the concurrency check of every backfill, a task's or a
// workflow's: how many more of its slots a pump pass may start — its
// max_concurrency less those of its executions (runs) still unfinished,
// and none while its task (workflow) is paused.
func backfillRoom(maxConcurrency int32, unfinished int, paused bool) int {
	if paused {
		return 0
	}
	return max(int(maxConcurrency)-unfinished, 0)
}

// backfillOutcome is the state a backfill ends in once every slot was
// started and none is unfinished: failed when any of its executions
// (runs) did not succeed.
func backfillOutcome(c db.BackfillCounts) string {
	if c.Failed > 0 {
		return BackfillFailed
	}
	return BackfillSucceeded
}

// backfillSlots is what a pump pass needs of a backfill's target, a task
// or a workflow.
type backfillSlots struct {
	target backfillTarget
	// load reads whether the target is paused (ErrNotFound: it is gone).
	load func() (paused bool, err error)
	// unfinished counts the backfill's unfinished executions (runs).
	unfinished func() (int, error)
	// start creates round of the slot at; false: another backfill
	// created that round of the slot just now.
	start func(at time.Time, round int32) (bool, error)
	// started ends a pass that created n (enqueues, starts).
	started func(n int) error
}

// pump is one pass over backfill b, locked by the caller, through its
// target's slots: while fewer than max_concurrency of what it created are
// unfinished (backfillRoom) it starts its next slots, each decided again
// now (slotAction: since the backfill was planned, the slot may have run),
// and records its progress; one whose slots are all started and finished
// ends (backfillOutcome), and one whose target is gone is cancelled.
func (s *Backfills) pump(ctx context.Context, tx db.Tx, b db.Backfill, k backfillSlots) (int, error) {
	paused, err := k.load()
	if errors.Is(err, ErrNotFound) {
		return 0, s.finish(ctx, tx, b, BackfillCancelled)
	}
	if err != nil {
		return 0, err
	}
	unfinished, err := k.unfinished()
	if err != nil {
		return 0, err
	}
	room := backfillRoom(b.MaxConcurrency, unfinished, paused)
	if room == 0 {
		return 0, nil
	}
	slots, err := db.BackfillSlots(ctx, tx, b.TenantID, b.ID, int(b.NextIndex), room)
	if err != nil {
		return 0, storeError(err, "read backfill slots")
	}
	if len(slots) == 0 {
		if unfinished > 0 {
			return 0, nil
		}
		return 0, s.finish(ctx, tx, b, "")
	}
	byTime, err := latestStates(ctx, tx, b.TenantID, k.target, slots[0], slots[len(slots)-1].Add(time.Microsecond)) // timestamptz: microseconds
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
		ok, err := k.start(at, int32(round))
		if err != nil {
			return 0, err
		}
		if !ok {
			dropped++
			continue
		}
		created++
	}
	if err := k.started(created); err != nil {
		return 0, err
	}
	return created, storeError(db.AdvanceBackfill(ctx, tx, b.TenantID, b.ID, int(b.NextIndex)+len(slots), created, dropped),
		"advance backfill")
}

// taskSlots runs a task backfill's slots as executions (trigger backfill,
// in the bulk lane, due now: a backfill's slot has passed). A templated
// task's payload is rendered for each slot (its own business date); a
// slot whose template fails is created failed, unsent (done counts it).
func (s *Backfills) taskSlots(ctx context.Context, tx db.Tx, b db.Backfill, done *ended) backfillSlots {
	var (
		task     db.Task
		jobs     []river.InsertManyParams
		zero     time.Time
		renderer payload.Renderer
	)
	return backfillSlots{
		target: backfillTarget{taskID: b.TaskID},
		load: func() (bool, error) {
			var err error
			task, err = db.GetTask(ctx, tx, b.TenantID, b.TaskID, false)
			renderer = payload.ForTask(task)
			return task.State == TaskPaused, storeError(err, "load task")
		},
		unfinished: func() (int, error) {
			n, err := db.CountBackfillUnfinished(ctx, tx, b.TenantID, b.TaskID, b.ID)
			return n, storeError(err, "count unfinished backfill executions")
		},
		start: func(at time.Time, round int32) (bool, error) {
			e := db.NewBackfillExecution{ID: NewID(), ScheduledFor: at, Round: round}
			var unsent error
			if renderer.Active() {
				e.Payload, unsent = renderer.Render(payload.Fire{
					ExecutionID: e.ID, ScheduledFor: at, Round: int(round),
					Trigger: TriggerBackfill,
				})
			}
			ok, err := db.InsertBackfillExecution(ctx, tx, b.TenantID, b.TaskID, b.ID, e)
			if err != nil {
				return false, storeError(err, "insert backfill execution")
			}
			if ok && unsent != nil {
				return true, failUnsent(ctx, tx, s.enq, []unsentFire{{
					TenantID: b.TenantID, ID: e.ID, TaskID: b.TaskID,
					Reason: unsent.Error(),
				}}, done)
			}
			if ok {
				jobs = append(jobs, deliverInsert(b.TenantID, e.ID, task.EndpointID, zero, int(task.Priority), int(task.MaxAttempts), zero, 0, QueueDeliverBulk))
			}
			return ok, nil
		},
		started: func(int) error {
			if len(jobs) == 0 {
				return nil
			}
			_, err := s.enq.insertMany(ctx, tx, jobs)
			return err
		},
	}
}

// workflowSlots runs a workflow backfill's slots as runs (trigger
// backfill) of the workflow's current version; they wait for
// max_active_runs like any other run.
func (s *Backfills) workflowSlots(ctx context.Context, tx db.Tx, b db.Backfill) backfillSlots {
	var w db.Workflow
	return backfillSlots{
		target: backfillTarget{workflowID: b.WorkflowID},
		load: func() (bool, error) {
			var err error
			w, err = db.GetWorkflow(ctx, tx, b.TenantID, b.WorkflowID, false)
			return w.State == WorkflowPaused, storeError(err, "load workflow")
		},
		unfinished: func() (int, error) {
			c, err := db.CountBackfillRuns(ctx, tx, b.TenantID, b.ID)
			return int(c.Unfinished), storeError(err, "count backfill runs")
		},
		start: func(at time.Time, round int32) (bool, error) {
			id := b.ID
			ok, err := db.InsertWorkflowRun(ctx, tx, db.WorkflowRun{
				TenantID: b.TenantID, ID: NewID(), WorkflowID: b.WorkflowID,
				Version: w.Version, ScheduledFor: at, Round: round, Trigger: TriggerBackfill, BackfillID: &id, Inputs: b.Inputs,
			})
			return ok, storeError(err, "insert workflow run")
		},
		started: func(n int) error {
			if n == 0 {
				return nil
			}
			return (runEngine{enq: s.enq, metrics: s.tasks.cfg.Metrics, graphs: &s.graphs}).promote(ctx, tx, b.TenantID, b.WorkflowID)
		},
	}
}

// finish ends backfill b in state with its final counts; "": the state
// its outcome makes it (backfillOutcome).
func (s *Backfills) finish(ctx context.Context, tx db.Tx, b db.Backfill, state string) error {
	c, err := countBackfill(ctx, tx, b)
	if err != nil {
		return err
	}
	if state == "" {
		state = backfillOutcome(c)
	}
	_, err = db.FinishBackfill(ctx, tx, b.TenantID, b.ID, state, c)
	return storeError(err, "finish backfill")
}

func backfillFromRow(r db.Backfill) (Backfill, error) {
	b := Backfill{
		ID: r.ID, TaskID: r.TaskID, WorkflowID: r.WorkflowID, From: r.From.UTC(), To: r.To.UTC(), Rerun: r.Rerun, MaxConcurrency: int(r.MaxConcurrency),
		State: r.State, Total: int(r.Total), Created: int(r.Created), Succeeded: int(r.Succeeded), Failed: int(r.Failed),
		CreatedAt: r.CreatedAt.UTC(), FinishedAt: utcPtr(r.FinishedAt),
	}
	if r.Inputs != "" {
		in, err := decodeInputs(r.Inputs)
		if err != nil {
			return Backfill{}, err
		}
		b.Inputs = in
	}
	return b, nil
}
