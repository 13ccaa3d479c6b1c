// Package backfill re-runs a range of past slots of a task (its
// executions) or of a workflow (its runs): a backfill's plan, fixed when it
// is created, and the pump that runs it at most max_concurrency at a time
// (docs/architecture.md, "Calendars, skipped slots, backfills and
// rounds"). service hands it what belongs to tasks and workflows: their
// schedules, the failing of a fire whose template fails, the start of a
// workflow's runs.
package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/queue"
	"github.com/axhq/ax/service/resource"
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
	SlotsMax           = 10_000
	ConcurrencyMax     = 100
	ConcurrencyDefault = 4
	// pumpBatch bounds the running backfills one pump pass visits.
	pumpBatch = 100
)

// Input is a backfill request.
type Input struct {
	From, To       time.Time
	Rerun          string // "" means missing
	MaxConcurrency int    // 0 means ConcurrencyDefault
	DryRun         bool
	// Inputs override a workflow's input defaults for the backfill's
	// runs (a workflow backfill only; an undeclared name is a 422).
	Inputs map[string]json.RawMessage
}

// Slot is what a backfill does with one slot.
type Slot struct {
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
	Inputs map[string]json.RawMessage
}

// Backfills creates and drives backfills. A backfill's slots are fixed
// when it is created; Pump creates their executions in order, at most
// max_concurrency unfinished at once, each pass in one transaction with
// the backfill's progress, so a restart resumes where it stopped and
// never creates a slot's round twice (the unique slot key decides between
// concurrent backfills).
type Backfills struct {
	cfg  Config
	pool *db.Pool
	wake chan struct{}
}

// Config is what Backfills is handed: the database, the River client, the
// metrics, and what service knows of tasks and workflows.
type Config struct {
	Pool     *db.Pool
	Enqueuer *queue.Enqueuer
	// Metrics counts the executions and runs that end (nil: none).
	Metrics *metrics.Metrics
	// Schedule loads, in tx, the schedule of what a backfill runs with its
	// calendars. For a workflow it checks inputs against the inputs the
	// workflow declares and returns their JSON ("": none) for the
	// backfill to keep; a task takes none.
	Schedule func(ctx context.Context, tx db.Tx, tenant string, t Target, inputs map[string]json.RawMessage) (*schedule.Schedule, string, error)
	// DecodeInputs reads the inputs' JSON that Schedule returned.
	DecodeInputs func(doc string) (map[string]json.RawMessage, error)
	// FailUnsent fails, in tx, a task's execution just created whose
	// payload's template failed to render (reason), as the scheduler's
	// fires fail; the function it returns reports what ended once tx
	// committed.
	FailUnsent func(ctx context.Context, tx db.Tx, tenant, executionID, taskID, reason string) (func(), error)
	// Promote starts, in tx, the workflow's pending runs that its
	// max_active_runs lets start; the function it returns reports what
	// ended (nodes failed unsent) once tx committed.
	Promote func(ctx context.Context, tx db.Tx, tenant, workflowID string) (func(), error)
}

// New returns a Backfills.
func New(cfg Config) *Backfills {
	return &Backfills{cfg: cfg, pool: cfg.Pool, wake: make(chan struct{}, 1)}
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

func (in Input) validate() (Input, error) {
	var ve errs.ValidationError
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
	if !slices.Contains([]string{RerunMissing, RerunFailed, RerunAll}, in.Rerun) {
		ve.Add("rerun", "must be missing, failed or all")
	}
	if in.MaxConcurrency == 0 {
		in.MaxConcurrency = ConcurrencyDefault
	}
	if in.MaxConcurrency < 1 || in.MaxConcurrency > ConcurrencyMax {
		ve.Add("max_concurrency", fmt.Sprintf("must be 1 to %d", ConcurrencyMax))
	}
	return in, ve.Err()
}

// Create plans a backfill of the task's slots in [From, To): the
// schedule's fire times there (calendars, start_at and end_at applied;
// the task's creation time is no bound), oldest first. A dry run returns
// the plan and stores nothing; otherwise the backfill is stored and its
// slots are run by Pump.
func (s *Backfills) Create(ctx context.Context, tenant, taskID string, in Input) (Backfill, []Slot, error) {
	return s.create(ctx, tenant, Target{TaskID: taskID}, in)
}

// CreateForWorkflow is Create for a workflow: each slot of its schedule
// in [From, To) starts one run (trigger backfill), a re-run of a slot
// with round = latest + 1; at most MaxConcurrency of its runs are
// unfinished at once.
func (s *Backfills) CreateForWorkflow(ctx context.Context, tenant, workflowID string, in Input) (Backfill, []Slot, error) {
	return s.create(ctx, tenant, Target{WorkflowID: workflowID}, in)
}

// Target is what a backfill runs: a task or a workflow (the other is "").
type Target struct{ TaskID, WorkflowID string }

func (t Target) id() string {
	if t.WorkflowID != "" {
		return t.WorkflowID
	}
	return t.TaskID
}

// latestStates returns the latest execution (run) of each of the
// target's slots in [from, to), a run's state as an execution's (a
// blocked run is unfinished, as a running one).
func latestStates(ctx context.Context, q db.Querier, tenant string, t Target, from, to time.Time) (map[int64]db.SlotState, error) {
	var (
		latest []db.SlotState
		err    error
	)
	if t.WorkflowID != "" {
		latest, err = db.LatestRunSlotStates(ctx, q, tenant, t.WorkflowID, from, to)
	} else {
		latest, err = db.LatestSlotStates(ctx, q, tenant, t.TaskID, from, to)
	}
	if err != nil {
		return nil, errs.Store(err, "read slot states")
	}
	byTime := make(map[int64]db.SlotState, len(latest))
	for _, l := range latest {
		if l.State == lifecycle.RunBlocked {
			l.State = lifecycle.ExecRunning
		}
		byTime[l.ScheduledFor.UnixNano()] = l
	}
	return byTime, nil
}

func (s *Backfills) create(ctx context.Context, tenant string, target Target, in Input) (Backfill, []Slot, error) {
	if !resource.ValidID(target.id()) {
		return Backfill{}, nil, errs.ErrNotFound
	}
	in, err := in.validate()
	if err != nil {
		return Backfill{}, nil, err
	}
	var (
		out  Backfill
		plan []Slot
	)
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sched, overrides, err := s.cfg.Schedule(ctx, tx, tenant, target, in.Inputs)
		if err != nil {
			return err
		}
		// A backfill runs slots that have passed: one to come is the
		// scheduler's to fire at its time (a backfill would send it now,
		// early, and the scheduler's fire of it would then be dropped).
		now, err := db.Now(ctx, tx)
		if err != nil {
			return errs.Store(err, "read the database clock")
		}
		if in.To.After(now) {
			return errs.Field("to", fmt.Sprintf("lies in the future (the database clock says %s): a backfill runs past slots; "+
				"the scheduler fires the ones to come at their time", now.UTC().Format(time.RFC3339)))
		}
		var slots []time.Time
		for at, ok := sched.Next(in.From.Add(-time.Nanosecond)); ok && at.Before(in.To); at, ok = sched.Next(at) {
			if len(slots) == SlotsMax {
				return errs.Field("to", fmt.Sprintf("the range holds more than %d slots; split it into several backfills", SlotsMax))
			}
			slots = append(slots, at)
		}
		byTime, err := latestStates(ctx, tx, tenant, target, in.From, in.To)
		if err != nil {
			return err
		}
		plan = make([]Slot, 0, len(slots))
		var run []time.Time
		for _, at := range slots {
			l, has := byTime[at.UnixNano()]
			action, round := slotAction(in.Rerun, l, has)
			plan = append(plan, Slot{ScheduledFor: at, Round: round, Action: action})
			if action != SlotKeep {
				run = append(run, at)
			}
		}
		if in.DryRun {
			return nil
		}
		b, err := db.InsertBackfill(ctx, tx, db.Backfill{
			TenantID: tenant, ID: resource.NewID(), TaskID: target.TaskID,
			WorkflowID: target.WorkflowID, From: in.From, To: in.To, Rerun: in.Rerun, MaxConcurrency: int32(in.MaxConcurrency),
			Inputs: overrides,
		}, run)
		if err != nil {
			return errs.Store(err, "store backfill")
		}
		if out, err = s.fromRow(b); err != nil {
			return err
		}
		typ := audit.ResourceTask
		if target.WorkflowID != "" {
			typ = audit.ResourceWorkflow
		}
		return audit.Record(ctx, tx, tenant, audit.Backfill, typ, strings.ToLower(target.id()), map[string]any{
			"backfill_id": b.ID, "from": in.From.UTC().Format(time.RFC3339Nano), "to": in.To.UTC().Format(time.RFC3339Nano),
			"rerun": in.Rerun, "max_concurrency": in.MaxConcurrency, "total": b.Total,
		})
	})
	if err == nil && !in.DryRun {
		s.Wake()
	}
	return out, plan, errs.Store(err, "create backfill")
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
	if !resource.ValidID(id) {
		return Backfill{}, errs.ErrNotFound
	}
	row, err := db.GetBackfill(ctx, s.pool, tenant, id, false)
	if err != nil {
		return Backfill{}, errs.Store(err, "load backfill")
	}
	return s.withCounts(ctx, row)
}

// withCounts returns a running backfill with its executions counted now
// (a finished one keeps its final counts).
func (s *Backfills) withCounts(ctx context.Context, row db.Backfill) (Backfill, error) {
	b, err := s.fromRow(row)
	if err != nil || row.State != lifecycle.BackfillRunning {
		return b, err
	}
	c, err := count(ctx, s.pool, row)
	if err != nil {
		return Backfill{}, errs.Store(err, "count backfill")
	}
	b.Succeeded, b.Failed = int(c.Succeeded), int(c.Failed)
	return b, nil
}

// count counts a backfill's executions, or its runs for a workflow's, by
// outcome.
func count(ctx context.Context, q db.Querier, b db.Backfill) (db.BackfillCounts, error) {
	if b.WorkflowID != "" {
		c, err := db.CountBackfillRuns(ctx, q, b.TenantID, b.ID)
		return c, errs.Store(err, "count backfill runs")
	}
	c, err := db.CountBackfill(ctx, q, b.TenantID, b.ID)
	return c, errs.Store(err, "count backfill executions")
}

// Filter narrows List.
type Filter struct {
	TaskID     string
	WorkflowID string
	State      string
}

// List returns a page of backfills, newest first.
func (s *Backfills) List(ctx context.Context, tenant string, f Filter, page resource.Page) ([]Backfill, string, error) {
	var ve errs.ValidationError
	if f.TaskID != "" && !resource.ValidID(f.TaskID) {
		ve.Add("task_id", "must be a task id")
	}
	if f.WorkflowID != "" && !resource.ValidID(f.WorkflowID) {
		ve.Add("workflow_id", "must be a workflow id")
	}
	if f.State != "" && !slices.Contains([]string{
		lifecycle.BackfillRunning, lifecycle.BackfillSucceeded, lifecycle.BackfillFailed, lifecycle.BackfillCancelled,
	}, f.State) {
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
		return nil, "", errs.Store(err, "list backfills")
	}
	items, next := resource.PageOf(rows, page.Limit, func(r db.Backfill) db.Backfill { return r }, func(r db.Backfill) string { return r.ID })
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
	if !resource.ValidID(id) {
		return Backfill{}, errs.ErrNotFound
	}
	var (
		execsCancelled int
		runsCancelled  int // pending runs: none of their nodes has fired
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		execsCancelled, runsCancelled = 0, 0
		row, err := db.GetBackfillForUpdate(ctx, tx, tenant, id)
		if err != nil {
			return errs.Store(err, "load backfill")
		}
		if row.State != lifecycle.BackfillRunning {
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
			execsCancelled = int(n)
			changes["task_id"], changes["cancelled_executions"] = row.TaskID, n
		}
		c, err := count(ctx, tx, row)
		if err != nil {
			return err
		}
		if _, err = db.FinishBackfill(ctx, tx, tenant, id, lifecycle.BackfillCancelled, c); err != nil {
			return err
		}
		return audit.Record(ctx, tx, tenant, audit.Cancel, audit.ResourceBackfill, id, changes)
	})
	if err != nil {
		return Backfill{}, errs.Store(err, "cancel backfill")
	}
	s.cfg.Metrics.ExecutionsFinished(lifecycle.ExecCancelled, execsCancelled)
	for range runsCancelled {
		s.cfg.Metrics.WorkflowRunFinished(lifecycle.RunCancelled)
	}
	return s.Get(ctx, tenant, id)
}

// Pump makes one pass over the running backfills: each creates executions
// for its next slots while it has fewer than max_concurrency unfinished,
// and one whose slots are all created and finished ends. It returns how
// many executions it created.
func (s *Backfills) Pump(ctx context.Context) (int, error) {
	refs, err := db.RunningBackfills(ctx, s.pool, pumpBatch)
	if err != nil {
		return 0, errs.Store(err, "list running backfills")
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
	var done []func() // report what the pass's failed fires ended
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		created, done = 0, nil
		b, err := db.GetBackfill(ctx, tx, tenant, id, true)
		if err = errs.Store(err, "load backfill"); errors.Is(err, errs.ErrNotFound) {
			return nil // another replica holds it
		}
		if err != nil {
			return err
		}
		if b.State != lifecycle.BackfillRunning {
			return nil
		}
		if b.WorkflowID != "" {
			created, err = s.pump(ctx, tx, b, s.workflowSlots(ctx, tx, b, &done))
		} else {
			created, err = s.pump(ctx, tx, b, s.taskSlots(ctx, tx, b, &done))
		}
		return err
	})
	if err != nil {
		return created, errs.Store(err, "pump backfill")
	}
	for _, report := range done {
		report()
	}
	return created, nil
}

// room is the concurrency check of every backfill, a task's or a
// workflow's: how many more of its slots a pump pass may start — its
// max_concurrency less those of its executions (runs) still unfinished,
// and none while its task (workflow) is paused.
func room(maxConcurrency int32, unfinished int, paused bool) int {
	if paused {
		return 0
	}
	return max(int(maxConcurrency)-unfinished, 0)
}

// outcome is the state a backfill ends in once every slot was
// started and none is unfinished: failed when any of its executions
// (runs) did not succeed.
func outcome(c db.BackfillCounts) string {
	if c.Failed > 0 {
		return lifecycle.BackfillFailed
	}
	return lifecycle.BackfillSucceeded
}

// targetSlots is what a pump pass needs of a backfill's target, a task or
// a workflow.
type targetSlots struct {
	target Target
	// load reads whether the target is paused (errs.ErrNotFound: it is
	// gone).
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
// unfinished (room) it starts its next slots, each decided again
// now (slotAction: since the backfill was planned, the slot may have run),
// and records its progress; one whose slots are all started and finished
// ends (outcome), and one whose target is gone is cancelled.
func (s *Backfills) pump(ctx context.Context, tx db.Tx, b db.Backfill, k targetSlots) (int, error) {
	paused, err := k.load()
	if errors.Is(err, errs.ErrNotFound) {
		return 0, s.finish(ctx, tx, b, lifecycle.BackfillCancelled)
	}
	if err != nil {
		return 0, err
	}
	unfinished, err := k.unfinished()
	if err != nil {
		return 0, err
	}
	n := room(b.MaxConcurrency, unfinished, paused)
	if n == 0 {
		return 0, nil
	}
	slots, err := db.BackfillSlots(ctx, tx, b.TenantID, b.ID, int(b.NextIndex), n)
	if err != nil {
		return 0, errs.Store(err, "read backfill slots")
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
	return created, errs.Store(db.AdvanceBackfill(ctx, tx, b.TenantID, b.ID, int(b.NextIndex)+len(slots), created, dropped),
		"advance backfill")
}

// taskSlots runs a task backfill's slots as executions (trigger backfill,
// in the bulk lane, due now: a backfill's slot has passed). A templated
// task's payload is rendered for each slot (its own business date); a
// slot whose template fails is created failed, unsent (done reports it).
func (s *Backfills) taskSlots(ctx context.Context, tx db.Tx, b db.Backfill, done *[]func()) targetSlots {
	var (
		task     db.Task
		jobs     []river.InsertManyParams
		zero     time.Time
		renderer payload.Renderer
	)
	return targetSlots{
		target: Target{TaskID: b.TaskID},
		load: func() (bool, error) {
			var err error
			task, err = db.GetTask(ctx, tx, b.TenantID, b.TaskID, false)
			renderer = payload.ForTask(task)
			return task.State == lifecycle.TaskPaused, errs.Store(err, "load task")
		},
		unfinished: func() (int, error) {
			n, err := db.CountBackfillUnfinished(ctx, tx, b.TenantID, b.TaskID, b.ID)
			return n, errs.Store(err, "count unfinished backfill executions")
		},
		start: func(at time.Time, round int32) (bool, error) {
			e := db.NewBackfillExecution{ID: resource.NewID(), ScheduledFor: at, Round: round}
			var unsent error
			if renderer.Active() {
				e.Payload, unsent = renderer.Render(payload.Fire{
					ExecutionID: e.ID, ScheduledFor: at, Round: int(round),
					Trigger: lifecycle.TriggerBackfill,
				})
			}
			ok, err := db.InsertBackfillExecution(ctx, tx, b.TenantID, b.TaskID, b.ID, e)
			if err != nil {
				return false, errs.Store(err, "insert backfill execution")
			}
			if ok && unsent != nil {
				report, err := s.cfg.FailUnsent(ctx, tx, b.TenantID, e.ID, b.TaskID, unsent.Error())
				if err != nil {
					return false, err
				}
				*done = append(*done, report)
				return true, nil
			}
			if ok {
				jobs = append(jobs, queue.DeliverInsert(b.TenantID, e.ID, task.EndpointID, zero, int(task.Priority), int(task.MaxAttempts),
					zero, 0, queue.DeliverBulk))
			}
			return ok, nil
		},
		started: func(int) error {
			if len(jobs) == 0 {
				return nil
			}
			_, err := s.cfg.Enqueuer.Enqueue(ctx, tx, jobs)
			return err
		},
	}
}

// workflowSlots runs a workflow backfill's slots as runs (trigger
// backfill) of the workflow's current version; they wait for
// max_active_runs like any other run.
func (s *Backfills) workflowSlots(ctx context.Context, tx db.Tx, b db.Backfill, done *[]func()) targetSlots {
	var w db.Workflow
	return targetSlots{
		target: Target{WorkflowID: b.WorkflowID},
		load: func() (bool, error) {
			var err error
			w, err = db.GetWorkflow(ctx, tx, b.TenantID, b.WorkflowID, false)
			return w.State == lifecycle.WorkflowPaused, errs.Store(err, "load workflow")
		},
		unfinished: func() (int, error) {
			c, err := db.CountBackfillRuns(ctx, tx, b.TenantID, b.ID)
			return int(c.Unfinished), errs.Store(err, "count backfill runs")
		},
		start: func(at time.Time, round int32) (bool, error) {
			id := b.ID
			ok, err := db.InsertWorkflowRun(ctx, tx, db.WorkflowRun{
				TenantID: b.TenantID, ID: resource.NewID(), WorkflowID: b.WorkflowID,
				Version: w.Version, ScheduledFor: at, Round: round, Trigger: lifecycle.TriggerBackfill, BackfillID: &id, Inputs: b.Inputs,
			})
			return ok, errs.Store(err, "insert workflow run")
		},
		started: func(n int) error {
			if n == 0 {
				return nil
			}
			report, err := s.cfg.Promote(ctx, tx, b.TenantID, b.WorkflowID)
			if err == nil {
				*done = append(*done, report)
			}
			return err
		},
	}
}

// finish ends backfill b in state with its final counts; "": the state
// its outcome makes it (outcome).
func (s *Backfills) finish(ctx context.Context, tx db.Tx, b db.Backfill, state string) error {
	c, err := count(ctx, tx, b)
	if err != nil {
		return err
	}
	if state == "" {
		state = outcome(c)
	}
	_, err = db.FinishBackfill(ctx, tx, b.TenantID, b.ID, state, c)
	return errs.Store(err, "finish backfill")
}

func (s *Backfills) fromRow(r db.Backfill) (Backfill, error) {
	b := Backfill{
		ID: r.ID, TaskID: r.TaskID, WorkflowID: r.WorkflowID, From: r.From.UTC(), To: r.To.UTC(), Rerun: r.Rerun, MaxConcurrency: int(r.MaxConcurrency),
		State: r.State, Total: int(r.Total), Created: int(r.Created), Succeeded: int(r.Succeeded), Failed: int(r.Failed),
		CreatedAt: r.CreatedAt.UTC(), FinishedAt: utcPtr(r.FinishedAt),
	}
	if r.Inputs != "" {
		in, err := s.cfg.DecodeInputs(r.Inputs)
		if err != nil {
			return Backfill{}, err
		}
		b.Inputs = in
	}
	return b, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
