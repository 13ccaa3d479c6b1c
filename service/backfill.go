package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
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

// Backfill re-runs a range of a task's slots.
type Backfill struct {
	ID, TaskID     string
	From, To       time.Time
	Rerun          string
	MaxConcurrency int
	State          string
	// Total is the number of slots the backfill runs; Created how many
	// executions it has created so far; Succeeded and Failed count those
	// that ended so (failed: failed, cancelled or skipped).
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
	if !validID(taskID) {
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
		row, err := apiTask(db.GetTask(ctx, tx, tenant, taskID, false))
		if err != nil {
			return storeError(err, "load task")
		}
		t := taskFromRow(row)
		sched, err := ParseSchedule(t.Schedule, t.CreatedAt)
		if err != nil {
			return err
		}
		if sched, err = s.tasks.withCalendars(ctx, tx, tenant, sched, false); err != nil {
			return err
		}
		var slots []time.Time
		for at, ok := sched.Next(in.From.Add(-time.Nanosecond)); ok && at.Before(in.To); at, ok = sched.Next(at) {
			if len(slots) == BackfillSlotsMax {
				return fieldError("to", fmt.Sprintf("the range holds more than %d slots; split it into several backfills", BackfillSlotsMax))
			}
			slots = append(slots, at)
		}
		latest, err := db.LatestSlotStates(ctx, tx, tenant, taskID, in.From, in.To)
		if err != nil {
			return err
		}
		byTime := make(map[int64]db.SlotState, len(latest))
		for _, l := range latest {
			byTime[l.ScheduledFor.UnixNano()] = l
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
		b, err := db.InsertBackfill(ctx, tx, db.Backfill{TenantID: tenant, ID: NewID(), TaskID: taskID, From: in.From, To: in.To,
			Rerun: in.Rerun, MaxConcurrency: int32(in.MaxConcurrency)}, run)
		if err != nil {
			return storeError(err, "store backfill")
		}
		out = backfillFromRow(b)
		return recordAudit(ctx, tx, tenant, AuditBackfill, ResourceTask, taskID, map[string]any{
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
	c, err := db.CountBackfill(ctx, s.pool, row.TenantID, row.ID)
	if err != nil {
		return Backfill{}, storeError(err, "count backfill")
	}
	b.Succeeded, b.Failed = int(c.Succeeded), int(c.Failed)
	return b, nil
}

// BackfillFilter narrows List.
type BackfillFilter struct {
	TaskID string
	State  string
}

// List returns a page of backfills, newest first.
func (s *Backfills) List(ctx context.Context, tenant string, f BackfillFilter, page Page) ([]Backfill, string, error) {
	var ve ValidationError
	if f.TaskID != "" && !validID(f.TaskID) {
		ve.Add("task_id", "must be a task id")
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
	rows, err := db.ListBackfills(ctx, s.pool, tenant, db.BackfillFilter{TaskID: f.TaskID, State: f.State, Before: page.After, Limit: page.Limit + 1})
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
		if _, err := db.CancelBackfillPending(ctx, tx, tenant, row.TaskID, id, "the backfill was cancelled"); err != nil {
			return err
		}
		c, err := db.CountBackfill(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		if _, err = db.FinishBackfill(ctx, tx, tenant, id, BackfillCancelled, c); err != nil {
			return err
		}
		return recordAudit(ctx, tx, tenant, AuditCancel, ResourceBackfill, id, map[string]any{"task_id": row.TaskID})
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
		latest, err := db.LatestSlotStates(ctx, tx, tenant, b.TaskID, slots[0], slots[len(slots)-1].Add(time.Microsecond)) // timestamptz: microseconds
		if err != nil {
			return err
		}
		byTime := make(map[int64]db.SlotState, len(latest))
		for _, l := range latest {
			byTime[l.ScheduledFor.UnixNano()] = l
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
			jobs = append(jobs, deliverInsert(tenant, e.ID, zero, int(task.Priority), int(task.MaxAttempts), zero, 0, QueueDeliverBulk))
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

func (s *Backfills) finish(ctx context.Context, tx db.Tx, b db.Backfill, state string) error {
	c, err := db.CountBackfill(ctx, tx, b.TenantID, b.ID)
	if err != nil {
		return err
	}
	_, err = db.FinishBackfill(ctx, tx, b.TenantID, b.ID, state, c)
	return err
}

func backfillFromRow(r db.Backfill) Backfill {
	return Backfill{
		ID: r.ID, TaskID: r.TaskID, From: r.From.UTC(), To: r.To.UTC(), Rerun: r.Rerun, MaxConcurrency: int(r.MaxConcurrency),
		State: r.State, Total: int(r.Total), Created: int(r.Created), Succeeded: int(r.Succeeded), Failed: int(r.Failed),
		CreatedAt: r.CreatedAt.UTC(), FinishedAt: utcPtr(r.FinishedAt),
	}
}
