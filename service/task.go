package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/preview"
	"github.com/axhq/ax/service/resource"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/template"
	"github.com/axhq/ax/service/union"
)

// Overlap policies: what a fire does while the previous execution is unfinished.
const (
	OverlapAllow = "allow"
	OverlapSkip  = "skip"
	OverlapQueue = "queue"
)

// Misfire policies: what happens to slots missed during downtime or a backlog.
const (
	MisfireFireOnce = "fire_once"
	MisfireFireAll  = "fire_all"
	MisfireSkip     = "skip"
)

// Task limits and defaults.
const (
	PriorityDefault       = 2
	MaxAttemptsDefault    = 5
	MaxAttemptsMax        = 100
	InitialBackoffDefault = time.Second
	MaxBackoffDefault     = 10 * time.Minute
	BackoffMin            = 100 * time.Millisecond
	BackoffMax            = 7 * 24 * time.Hour
	PayloadMaxDefault     = 256 << 10
	PauseAfterFailuresMax = 1000
	// AlertAfterFailuresDefault: every failed execution alerts; at most
	// AlertAfterFailuresMax.
	AlertAfterFailuresDefault = 1
	AlertAfterFailuresMax     = 1000
	// TaskWakeWithin: a new task wakes the scheduler loops only when its
	// first slot is this close. The loops look at the tasks table at least
	// every second (jobs.PollCeilingDefault) and claim a slot LookAhead
	// (4 s) before it is due, so a slot further off is claimed in time
	// anyway; a notification is a signal to every listening replica at
	// each commit, and most tasks are created far ahead of their first
	// slot.
	TaskWakeWithin = 30 * time.Second
)

// The forms of names and label keys (service/resource).
const (
	NamePattern     = resource.NamePattern
	LabelKeyPattern = resource.LabelKeyPattern
	// LabelFilterRule is the message of a label filter ParseLabelFilter
	// refuses.
	LabelFilterRule = resource.LabelFilterRule
	// nameRule is the message of a name that does not match NamePattern.
	nameRule = resource.NameRule
)

var taskNamePattern = regexp.MustCompile(NamePattern)

// RetryPolicy bounds delivery retries. MaxAttempts 1 means never retry.
type RetryPolicy struct {
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// Task is a schedule, a payload and an endpoint: what the client set
// (TaskInput, with defaults applied) and what the server keeps.
type Task struct {
	TaskInput
	ID               string
	State            string
	NextRunAt        *time.Time
	MissedCount      int64
	ConsecutiveFails int
	Version          int
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// TaskInput is what a client may set on a task. Zero values take defaults.
type TaskInput struct {
	Name       string
	EndpointID string
	Schedule   schedule.Spec
	// Payload is the exact JSON the webhook body carries, or, with
	// PayloadTemplate, its template.
	Payload []byte
	// PayloadTemplate: each JSON string of Payload is a text/template
	// rendered when an execution is created (service/template,
	// docs/templates.md).
	PayloadTemplate bool
	Priority        int
	// Timeout per delivery attempt; 0 means the endpoint's.
	Timeout            time.Duration
	Retry              RetryPolicy
	OverlapPolicy      string
	MisfirePolicy      string
	Labels             map[string]string
	AlertEndpointID    string
	PauseAfterFailures int
	// AlertAfterFailures: failure alerts start at the Nth failed execution
	// in a row (1..AlertAfterFailuresMax; 0: AlertAfterFailuresDefault).
	AlertAfterFailures int
	// Shards fires this many executions per slot (1..ShardsMax; 0: 1).
	Shards int
	// Completion: how an attempt ends (zero: a 2xx ends it).
	Completion Completion
	// SLA: when an execution should have succeeded (zero: none).
	SLA SLA
}

// Input returns the client-settable fields of t, the starting point of a
// partial update.
func (t Task) Input() TaskInput { return t.TaskInput }

// TasksConfig configures Tasks.
type TasksConfig struct {
	// PayloadMax caps a task's payload in bytes. Defaults to PayloadMaxDefault.
	PayloadMax int
	// OnceLateMax is how far in the past a once task's run_at may lie when
	// the task is created or its schedule changed: further is a 422 (it
	// would fire at once as a late catch-up, which is rarely meant).
	// Defaults to MisfireThresholdDefault, the lateness beyond which a fire
	// counts as a misfire.
	OnceLateMax time.Duration
	// Clock, when set, gives Create and Preview the database's clock
	// without a round trip while its estimate is fresh and was made from a
	// fast round trip (DBClock.Now; the scheduler loop keeps it:
	// SchedulerConfig.Clock); otherwise they ask the database.
	Clock *DBClock
	// Limits, when set, refuses a create past the tenant's max_tasks
	// (a *QuotaError).
	Limits *Limits
	// Metrics, when set, counts the workflow runs that the services built
	// on these Tasks end: Calendars (a calendar change cancels the runs
	// of slots it now excludes) and Backfills (ax_workflow_runs_total).
	Metrics *metrics.Metrics
}

// Tasks manages tasks.
type Tasks struct {
	pool *db.Pool
	cfg  TasksConfig
}

// NewTasks returns a Tasks backed by pool.
func NewTasks(pool *db.Pool, cfg TasksConfig) *Tasks {
	if cfg.PayloadMax <= 0 {
		cfg.PayloadMax = PayloadMaxDefault
	}
	if cfg.OnceLateMax <= 0 {
		cfg.OnceLateMax = MisfireThresholdDefault
	}
	return &Tasks{pool: pool, cfg: cfg}
}

// Create validates in and stores a new active task with its first slot
// (from the database's clock: TasksConfig.Clock's estimate, or a query),
// waking the scheduler loops when that slot is near (TaskWakeWithin): one
// round trip with a fresh clock estimate, the insert and its notification
// one statement. With a context that carries a transaction (db.WithTx:
// a request with an Idempotency-Key) the insert joins it.
func (s *Tasks) Create(ctx context.Context, tenant string, in TaskInput) (Task, error) {
	in = in.withDefaults()
	if s.cfg.Limits.Effective(tenant).MaxTasks > 0 {
		// A count quota: checked under the tenant's row lock in the
		// insert's transaction.
		var out Task
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			if err := s.cfg.Limits.checkTaskQuota(ctx, tx, tenant); err != nil {
				return err
			}
			var err error
			out, err = s.create(db.WithTx(ctx, s.pool, tx), tenant, in)
			return err
		})
		return out, storeError(err, "create task")
	}
	if len(union.CalendarIDs(in.Schedule)) > 0 {
		// The calendars' dates decide the first slot: read them, and keep
		// them from changing or going away, in the insert's transaction.
		var out Task
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			var err error
			out, err = s.create(db.WithTx(ctx, s.pool, tx), tenant, in)
			return err
		})
		return out, storeError(err, "create task")
	}
	return s.create(ctx, tenant, in)
}

func (s *Tasks) create(ctx context.Context, tenant string, in TaskInput) (Task, error) {
	now, err := s.now(ctx)
	if err != nil {
		return Task{}, err
	}
	sched, err := s.validate(in, now)
	if err != nil {
		return Task{}, err
	}
	if err := s.checkOnceLate(sched, now); err != nil {
		return Task{}, err
	}
	q := db.Using(ctx, s.pool)
	if sched, err = s.withCalendars(ctx, q, tenant, sched, true); err != nil {
		return Task{}, err
	}
	next, err := firstRun(sched, now)
	if err != nil {
		return Task{}, err
	}
	row := taskRow(tenant, NewID(), in)
	// The schedule was planned from now: an interval task's slots are
	// anchored on its creation time (created_at), which must be the same
	// instant, not the insert's own now() a round trip later.
	row.State, row.NextRunAt, row.CreatedAt = TaskActive, next, now
	wake := next != nil && next.Sub(now) <= TaskWakeWithin
	// The audit record goes in the insert's own statement: computed from
	// the row as the insert stores it, it is what a read gives back.
	rec, audited, err := auditRecord(ctx, tenant, AuditCreate, ResourceTask, row.ID,
		auditCreated(taskFromRow(db.StoredTask(row)).Input()))
	if err != nil {
		return Task{}, err
	}
	if audited {
		row, err = db.InsertTaskAudited(ctx, q, row, wake, rec)
	} else {
		row, err = db.InsertTask(ctx, q, row, wake)
	}
	if err != nil {
		return Task{}, s.insertError(err, in)
	}
	return taskFromRow(row), nil
}

// withCalendars returns sched with the calendars its spec excludes
// applied, read with q (locked against a change or delete with share).
func (s *Tasks) withCalendars(ctx context.Context, q db.Querier, tenant string, sched *schedule.Schedule, share bool) (*schedule.Schedule, error) {
	ids := sched.CalendarIDs()
	if len(ids) == 0 {
		return sched, nil
	}
	cals, err := loadCalendars(ctx, q, tenant, ids, share)
	if err != nil {
		return nil, union.CalendarFields(err, sched.Spec(), ids)
	}
	return sched.Excluding(cals), nil
}

// recalendar reschedules a task, locked by the caller's transaction, whose
// calendar changed: as a schedule patch does, its pending executions whose
// slots the calendars now exclude are cancelled, its next slot is
// recomputed from now, and its version moves on (the scheduler re-reads
// the schedule).
func (s *Tasks) recalendar(ctx context.Context, tx db.Tx, tenant, id string, done *ended) error {
	row, err := apiTask(db.GetTask(ctx, tx, tenant, id, true))
	if err != nil {
		return storeError(err, "load task")
	}
	t := taskFromRow(row)
	sched, err := parseSchedule(t.Schedule, t.CreatedAt)
	if err != nil {
		return err
	}
	if sched, err = s.withCalendars(ctx, tx, tenant, sched, false); err != nil {
		return err
	}
	if err := s.reschedule(ctx, tx, tenant, id, sched, done); err != nil {
		return err
	}
	if row.State == TaskActive || row.State == TaskCompleted {
		now, err := db.Now(ctx, tx)
		if err != nil {
			return storeError(err, "read the database clock")
		}
		row.State, row.NextRunAt = TaskActive, nil
		if spec := sched.Spec(); spec.Type == schedule.Once && spec.RunAt != nil && spec.RunAt.Before(now) {
			row.State = TaskCompleted // its one slot has passed; a calendar change does not fire it again
		} else if next, ok := sched.Next(now); ok {
			row.NextRunAt = &next
		} else {
			row.State = TaskCompleted
		}
	}
	_, err = db.UpdateTask(ctx, tx, row)
	return storeError(err, "update task")
}

// now returns the database's clock: the estimate while it is fresh, else
// a query.
func (s *Tasks) now(ctx context.Context) (time.Time, error) {
	if t, ok := s.cfg.Clock.Now(time.Now()); ok {
		return t, nil
	}
	q := db.Using(ctx, s.pool)
	if q != s.pool || s.cfg.Clock == nil {
		// In a transaction now() is its start, not a reading to learn from.
		t, err := db.Now(ctx, q)
		return t, storeError(err, "read the database clock")
	}
	// The reading teaches the estimate (timed on a held connection, so a
	// wait for one is not taken for a slow round trip): under load, when
	// the scheduler loop's own readings wait for the busy pool, one create
	// in clockSampleMaxAge asks, not every one.
	t, sent, received, err := db.NowTimed(ctx, s.pool)
	if err == nil {
		s.cfg.Clock.Observe(sent, t, received)
	}
	return t, storeError(err, "read the database clock")
}

// Get returns one task.
func (s *Tasks) Get(ctx context.Context, tenant, id string) (Task, error) {
	if !validID(id) {
		return Task{}, ErrNotFound
	}
	row, err := apiTask(db.GetTask(ctx, s.pool, tenant, id, false))
	if err != nil {
		return Task{}, storeError(err, "load task")
	}
	return taskFromRow(row), nil
}

// ParseLabelFilter reads a label filter, key:value or key=value
// (resource.ParseLabelFilter).
func ParseLabelFilter(s string) (key, value string, ok bool) { return resource.ParseLabelFilter(s) }

// TaskFilter narrows List.
type TaskFilter struct {
	State  string
	Labels map[string]string
	// NamePrefix keeps the tasks whose name starts with it ("" for any).
	NamePrefix string
}

// List returns a page of tasks, newest first.
func (s *Tasks) List(ctx context.Context, tenant string, f TaskFilter, page Page) ([]Task, string, error) {
	var ve ValidationError
	if f.State != "" && f.State != TaskActive && f.State != TaskPaused && f.State != TaskCompleted {
		ve.Add("state", "must be active, paused or completed")
	}
	if err := ve.Err(); err != nil {
		return nil, "", err
	}
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListTasks(ctx, s.pool, tenant, db.TaskFilter{State: f.State, Labels: f.Labels, NamePrefix: f.NamePrefix, Before: page.After, Limit: page.Limit + 1})
	if err != nil {
		return nil, "", storeError(err, "list tasks")
	}
	out, next := pageOf(rows, page.Limit, taskFromRow, func(t Task) string { return t.ID })
	return out, next, nil
}

// Update applies change to the task's current input under a row lock,
// validates and stores the result. When the schedule changes, next_run_at
// is recomputed from now and executions materialised for the old schedule
// but not started are cancelled, except those whose slot is a slot of the
// new schedule too (reschedule).
func (s *Tasks) Update(ctx context.Context, tenant, id string, change func(*TaskInput) error) (Task, error) {
	if !validID(id) {
		return Task{}, ErrNotFound
	}
	var (
		out  Task
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		row, err := apiTask(db.GetTask(ctx, tx, tenant, id, true))
		if err != nil {
			return storeError(err, "load task")
		}
		cur := taskFromRow(row)
		in := cur.Input()
		if err := change(&in); err != nil {
			return err
		}
		in = in.withDefaults()
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		sched, err := s.validate(in, cur.CreatedAt)
		if err != nil {
			return err
		}
		if sched, err = s.withCalendars(ctx, tx, tenant, sched, true); err != nil {
			return err
		}
		upd := taskRow(tenant, id, in)
		upd.State, upd.NextRunAt, upd.ConsecutiveFailures = row.State, row.NextRunAt, row.ConsecutiveFailures
		if !sameSchedule(cur.Schedule, sched.Spec()) {
			if err := s.checkOnceLate(sched, now); err != nil {
				return err
			}
			if err := s.reschedule(ctx, tx, tenant, id, sched, &done); err != nil {
				return err
			}
			if row.State != TaskPaused {
				next, err := firstRun(sched, now)
				if err != nil {
					return err
				}
				upd.State, upd.NextRunAt = TaskActive, next
			}
		}
		if row, err = db.UpdateTask(ctx, tx, upd); err != nil {
			return s.insertError(err, in)
		}
		out = taskFromRow(row)
		if out.PayloadTemplate && (!cur.PayloadTemplate || !bytes.Equal(cur.Payload, out.Payload)) {
			if err := renderUnsent(ctx, tx, row); err != nil {
				return err
			}
		}
		changes := auditDiff(cur.Input(), out.Input())
		if out.State != cur.State {
			changes["state"] = map[string]any{"old": cur.State, "new": out.State}
		}
		if err := recordAudit(ctx, tx, tenant, AuditUpdate, ResourceTask, out.ID, changes); err != nil {
			return err
		}
		return db.NotifyTaskChanged(ctx, tx)
	})
	if err != nil {
		return Task{}, storeError(err, "update task")
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// reschedule deals with the executions a task's schedule change leaves
// behind: the pending executions of slots the new schedule sched also has
// stay (they fire as they would have); the other pending ones are
// cancelled, and give their slots up, so that a later change back to a
// schedule with their instants fires them anew (db.CancelRescheduledExecutions).
// Either way the scheduler then materialises the new schedule from now, and
// every slot of it fires once: a kept execution is the slot's execution.
// done counts the executions cancelled.
func (s *Tasks) reschedule(ctx context.Context, tx db.Tx, tenant, id string, sched *schedule.Schedule, done *ended) error {
	pending, err := db.PendingScheduledExecutions(ctx, tx, tenant, id)
	if err != nil {
		return storeError(err, "list pending executions")
	}
	var keep []string
	for _, p := range pending {
		if next, ok := sched.Next(p.ScheduledFor.Add(-time.Nanosecond)); ok && next.Equal(p.ScheduledFor) {
			keep = append(keep, p.ID)
		}
	}
	n, err := db.CancelRescheduledExecutions(ctx, tx, tenant, id, keep, "the task's schedule changed")
	done.add(ExecCancelled, n)
	return storeError(err, "cancel rescheduled executions")
}

// Delete deletes a task and cancels its executions that have not started.
// Execution history is kept.
func (s *Tasks) Delete(ctx context.Context, tenant, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	var done ended
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		ok, err := db.DeleteTask(ctx, tx, tenant, id)
		if err != nil {
			return storeError(err, "delete task")
		}
		if !ok {
			return ErrNotFound
		}
		n, err := db.CancelPendingExecutions(ctx, tx, tenant, id, false, "the task was deleted")
		if err != nil {
			return err
		}
		done.add(ExecCancelled, n)
		return recordAudit(ctx, tx, tenant, AuditDelete, ResourceTask, strings.ToLower(id),
			map[string]any{"cancelled_executions": n})
	})
	if err == nil {
		done.report(s.cfg.Metrics)
	}
	return storeError(err, "delete task")
}

// Pause stops new slots and cancels the executions whose slot has come and
// that have not started. Those materialised for slots still ahead stay
// pending: if the task is still paused at its slot, an execution's start
// cancels it (Deliveries.Begin); if it was resumed, it is sent. Cancelling
// them now would lose them on a quick resume, since their slots keep
// their (task, slot) key. A paused task stays paused; a completed one
// cannot be paused.
func (s *Tasks) Pause(ctx context.Context, tenant, id string) (Task, error) {
	var done ended
	t, err := s.setState(ctx, tenant, id, AuditPause, func(tx db.Tx, row *db.Task, _ time.Time) error {
		done = nil
		switch row.State {
		case TaskPaused:
			return nil
		case TaskCompleted:
			return conflictf("a completed task cannot be paused")
		}
		row.State = TaskPaused
		n, err := db.CancelPendingExecutions(ctx, tx, row.TenantID, row.ID, true, "the task was paused")
		if err != nil {
			return err
		}
		done.add(ExecCancelled, n)
		// Fires queued for slots still ahead are cancelled too, and give
		// their slots up (as a schedule change does), so that lists and
		// stats show at once what will happen: nothing fires while the
		// task is paused, and a resume before those slots fires them anew.
		n, err = db.CancelRescheduledExecutions(ctx, tx, row.TenantID, row.ID, nil, "the task was paused")
		done.add(ExecCancelled, n)
		return err
	})
	if err != nil {
		return Task{}, err
	}
	done.report(s.cfg.Metrics)
	return t, nil
}

// Resume reactivates a paused task from now: slots missed while it was
// paused are not fired; executions materialised before the pause for
// slots still ahead are sent at their slots (Pause).
func (s *Tasks) Resume(ctx context.Context, tenant, id string) (Task, error) {
	return s.setState(ctx, tenant, id, AuditResume, func(_ db.Tx, row *db.Task, now time.Time) error {
		switch row.State {
		case TaskActive:
			return nil
		case TaskCompleted:
			return conflictf("a completed task cannot be resumed; change its schedule instead")
		}
		sched, err := parseSchedule(taskFromRow(*row).Schedule, row.CreatedAt)
		if err != nil {
			return err
		}
		row.State, row.ConsecutiveFailures = TaskActive, 0
		if next, ok := sched.Next(now); ok {
			row.NextRunAt = &next
		} else {
			row.State, row.NextRunAt = TaskCompleted, nil
		}
		return nil
	})
}

// setState applies change to the locked task and stores it when its state
// changed; the request is audited as action either way.
func (s *Tasks) setState(ctx context.Context, tenant, id, action string, change func(db.Tx, *db.Task, time.Time) error) (Task, error) {
	if !validID(id) {
		return Task{}, ErrNotFound
	}
	var out Task
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, err := apiTask(db.GetTask(ctx, tx, tenant, id, true))
		if err != nil {
			return storeError(err, "load task")
		}
		before := row.State
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		if err := change(tx, &row, now); err != nil {
			return err
		}
		changes := map[string]any{}
		if row.State == before {
			out = taskFromRow(row)
			return recordAudit(ctx, tx, tenant, action, ResourceTask, out.ID, changes)
		}
		changes["state"] = map[string]any{"old": before, "new": row.State}
		if row, err = db.UpdateTask(ctx, tx, row); err != nil {
			return storeError(err, "update task")
		}
		out = taskFromRow(row)
		if err := recordAudit(ctx, tx, tenant, action, ResourceTask, out.ID, changes); err != nil {
			return err
		}
		return db.NotifyTaskChanged(ctx, tx)
	})
	return out, storeError(err, action+" task")
}

// Preview returns the task's next n fire times after now: the slots that
// fire, computed by the same code the scheduler uses, leaving out those
// that will not (Skipped: skipped on request, or whose queued execution was
// cancelled), the slots its calendars removed in the same span, and its
// parsed schedule. A paused task fires nothing: its preview is Paused,
// without fires (resuming it fires its schedule's slots from then on).
func (s *Tasks) Preview(ctx context.Context, tenant, id string, n int) (TaskPreview, error) {
	t, err := s.Get(ctx, tenant, id)
	if err != nil {
		return TaskPreview{}, err
	}
	sched, err := parseSchedule(t.Schedule, t.CreatedAt)
	if err != nil {
		return TaskPreview{}, err
	}
	if sched, err = s.withCalendars(ctx, s.pool, tenant, sched, false); err != nil {
		return TaskPreview{}, err
	}
	if t.State == TaskPaused {
		return TaskPreview{Paused: true, Schedule: sched}, nil
	}
	if t.Schedule.Type == schedule.Event {
		return TaskPreview{Schedule: sched, Event: t.Schedule.Event}, nil
	}
	now, err := s.now(ctx)
	if err != nil {
		return TaskPreview{}, err
	}
	return preview.Task(ctx, s.pool, tenant, id, sched, now, n)
}

func (in TaskInput) withDefaults() TaskInput {
	if len(in.Payload) == 0 {
		in.Payload = []byte("{}")
	}
	if in.Priority == 0 {
		in.Priority = PriorityDefault
	}
	if in.Retry.MaxAttempts == 0 {
		in.Retry.MaxAttempts = MaxAttemptsDefault
	}
	if in.Retry.InitialBackoff == 0 {
		in.Retry.InitialBackoff = InitialBackoffDefault
	}
	if in.Retry.MaxBackoff == 0 {
		in.Retry.MaxBackoff = max(MaxBackoffDefault, in.Retry.InitialBackoff)
	}
	if in.OverlapPolicy == "" {
		in.OverlapPolicy = OverlapAllow
	}
	if in.MisfirePolicy == "" {
		in.MisfirePolicy = MisfireFireOnce
	}
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	if in.Shards == 0 {
		in.Shards = 1
	}
	if in.AlertAfterFailures == 0 {
		in.AlertAfterFailures = AlertAfterFailuresDefault
	}
	if in.Schedule.Timezone == "" {
		in.Schedule.Timezone = "UTC"
	}
	return in
}

// validate checks every field and parses the schedule.
func (s *Tasks) validate(in TaskInput, anchor time.Time) (*schedule.Schedule, error) {
	var ve ValidationError
	if !taskNamePattern.MatchString(in.Name) {
		ve.Add("name", nameRule)
	}
	if !validID(in.EndpointID) {
		ve.Add("endpoint_id", "must be the id of one of your endpoints")
	}
	sched, err := parseSchedule(in.Schedule, anchor)
	if err != nil {
		if se, ok := err.(*ValidationError); ok { // parseSchedule returns it unwrapped
			ve.Fields = append(ve.Fields, se.Fields...)
		} else {
			return nil, err
		}
	}
	switch {
	case len(in.Payload) > s.cfg.PayloadMax:
		ve.Add("payload", fmt.Sprintf("must be at most %d bytes", s.cfg.PayloadMax))
	case !json.Valid(in.Payload):
		ve.Add("payload", "must be valid JSON")
	case in.PayloadTemplate:
		// An event-triggered task's template may read .event….
		checkPayloadTemplate(&ve, "payload", in.Payload, template.Scope{Event: in.Schedule.Type == schedule.Event})
	}
	if in.Priority < 1 || in.Priority > 4 {
		ve.Add("priority", "must be 1 (highest) to 4")
	}
	if in.Timeout != 0 {
		validateTimeout(&ve, "timeout_ms", in.Timeout)
	}
	r := in.Retry
	if r.MaxAttempts < 1 || r.MaxAttempts > MaxAttemptsMax {
		ve.Add("retry.max_attempts", fmt.Sprintf("must be 1 to %d (1 means never retry)", MaxAttemptsMax))
	}
	if r.InitialBackoff < BackoffMin || r.InitialBackoff > BackoffMax {
		ve.Add("retry.initial_backoff_ms", fmt.Sprintf("must be %d to %d", BackoffMin.Milliseconds(), BackoffMax.Milliseconds()))
	}
	if r.MaxBackoff < BackoffMin || r.MaxBackoff > BackoffMax {
		ve.Add("retry.max_backoff_ms", fmt.Sprintf("must be %d to %d", BackoffMin.Milliseconds(), BackoffMax.Milliseconds()))
	} else if r.MaxBackoff < r.InitialBackoff {
		ve.Add("retry.max_backoff_ms", "must be at least retry.initial_backoff_ms")
	}
	if !contains([]string{OverlapAllow, OverlapSkip, OverlapQueue}, in.OverlapPolicy) {
		ve.Add("overlap_policy", "must be allow, skip or queue")
	}
	if !contains([]string{MisfireFireOnce, MisfireFireAll, MisfireSkip}, in.MisfirePolicy) {
		ve.Add("misfire_policy", "must be fire_once, fire_all or skip")
	}
	resource.CheckLabels(&ve, in.Labels)
	if in.AlertEndpointID != "" && !validID(in.AlertEndpointID) {
		ve.Add("alert_endpoint_id", "must be the id of one of your endpoints")
	}
	if in.Shards < 0 || in.Shards > ShardsMax {
		ve.Add("shards", fmt.Sprintf("must be 1 to %d", ShardsMax))
	} else if in.Shards > 1 && in.OverlapPolicy != OverlapAllow {
		// The shards of a slot are unfinished together by design.
		ve.Add("shards", "more than one shard needs overlap_policy allow")
	}
	if in.PauseAfterFailures < 0 || in.PauseAfterFailures > PauseAfterFailuresMax {
		ve.Add("pause_after_failures", fmt.Sprintf("must be 0 (never) to %d", PauseAfterFailuresMax))
	}
	if in.AlertAfterFailures < 0 || in.AlertAfterFailures > AlertAfterFailuresMax { // 0: the default
		ve.Add("alert_after_failures", fmt.Sprintf("must be 1 (every failure) to %d", AlertAfterFailuresMax))
	}
	validateCompletion(&ve, in.Completion)
	validateSLA(&ve, in.SLA)
	if err := ve.Err(); err != nil {
		return nil, err
	}
	return sched, nil
}

// checkOnceLate refuses a once schedule whose run_at lies further in the
// past than OnceLateMax.
func (s *Tasks) checkOnceLate(sched *schedule.Schedule, now time.Time) error {
	spec := sched.Spec()
	if spec.Type == schedule.Once && spec.RunAt != nil && spec.RunAt.Before(now.Add(-s.cfg.OnceLateMax)) {
		return fieldError("schedule.run_at", fmt.Sprintf("lies more than %s in the past (it is %s); a task of schedule type once fires at a time to come",
			s.cfg.OnceLateMax, now.Sub(*spec.RunAt).Truncate(time.Second)))
	}
	return nil
}

// firstRun is the first slot of a new or rescheduled task: a once task's
// run_at even when it has passed (it then fires at once, late), otherwise
// the first fire time after now.
func firstRun(sched *schedule.Schedule, now time.Time) (*time.Time, error) {
	spec := sched.Spec()
	if spec.Type == schedule.Event {
		return nil, nil // no time slots: events fire it (FireEvent)
	}
	if spec.Type == schedule.Once && spec.RunAt != nil {
		t := spec.RunAt.UTC()
		return &t, nil
	}
	next, ok, err := sched.NextErr(now)
	if err != nil {
		return nil, scheduleError(err)
	}
	if !ok {
		switch {
		case spec.EndAt != nil && !spec.EndAt.After(now):
			return nil, fieldError("schedule.end_at", "the schedule has no fire time left (end_at has passed)")
		case spec.EndAt != nil:
			return nil, fieldError("schedule.end_at", "the schedule has no fire time between now and end_at")
		default:
			// Only a cron year field ends a schedule without an end_at (or,
			// under the vixie DST policy, an expression whose every match
			// is a wall clock that does not exist).
			return nil, fieldError("schedule.cron", "the schedule has no fire time left after now (check the year field)")
		}
	}
	return &next, nil
}

// insertError explains constraint violations of a task write.
func (s *Tasks) insertError(err error, in TaskInput) error {
	return storeError(err, "store task",
		onConstraint(db.ConstraintTaskName, conflictf("a task named %q already exists", in.Name)),
		onConstraint(db.ConstraintTaskEndpoint, fieldError("endpoint_id", "no such endpoint")),
		onConstraint(db.ConstraintTaskAlertEndpoint, fieldError("alert_endpoint_id", "no such endpoint")))
}

func sameSchedule(a, b schedule.Spec) bool {
	eqTime := func(x, y *time.Time) bool {
		return (x == nil && y == nil) || (x != nil && y != nil && x.Equal(*y))
	}
	return a.Type == b.Type && a.Cron == b.Cron && a.Timezone == b.Timezone && a.IntervalSeconds == b.IntervalSeconds &&
		eqTime(a.RunAt, b.RunAt) && eqTime(a.StartAt, b.StartAt) && eqTime(a.EndAt, b.EndAt) &&
		slices.Equal(a.ExcludeCalendars, b.ExcludeCalendars) &&
		a.Dialect == b.Dialect && a.DSTPolicy == b.DSTPolicy && a.Event == b.Event &&
		slices.EqualFunc(a.Schedules, b.Schedules, sameSchedule)
}

func taskRow(tenant, id string, in TaskInput) db.Task {
	r := db.Task{
		TenantID: tenant, ID: id, Name: in.Name, EndpointID: in.EndpointID, ScheduleType: in.Schedule.Type,
		Timezone: in.Schedule.Timezone, RunAt: in.Schedule.RunAt, StartAt: in.Schedule.StartAt, EndAt: in.Schedule.EndAt,
		Payload: in.Payload, Priority: int16(in.Priority), MaxAttempts: int32(in.Retry.MaxAttempts),
		InitialBackoffMS: in.Retry.InitialBackoff.Milliseconds(), MaxBackoffMS: in.Retry.MaxBackoff.Milliseconds(),
		OverlapPolicy: in.OverlapPolicy, MisfirePolicy: in.MisfirePolicy, Labels: in.Labels,
		ExcludeCalendars: in.Schedule.ExcludeCalendars,
		// Interval and once tasks store the defaults, and ignore them.
		ScheduleDialect: schedule.DialectStandard, DSTPolicy: schedule.DSTVixie,
		Shards: int32(max(in.Shards, 1)), PayloadTemplate: in.PayloadTemplate,
	}
	if in.Schedule.Type == schedule.Cron {
		r.ScheduleDialect = cmp.Or(in.Schedule.Dialect, schedule.DialectStandard)
		r.DSTPolicy = cmp.Or(in.Schedule.DSTPolicy, schedule.DSTVixie)
	}
	if in.Schedule.Cron != "" {
		c := strings.TrimSpace(in.Schedule.Cron)
		r.Cron = &c
	}
	if in.Schedule.IntervalSeconds != 0 {
		v := in.Schedule.IntervalSeconds
		r.IntervalSeconds = &v
	}
	if in.Schedule.Type == schedule.Event {
		r.ScheduleEvent = refTo(in.Schedule.Event)
	}
	if in.Timeout != 0 {
		ms := int32(in.Timeout.Milliseconds())
		r.TimeoutMS = &ms
	}
	if in.AlertEndpointID != "" {
		a := in.AlertEndpointID
		r.AlertEndpointID = &a
	}
	if in.PauseAfterFailures != 0 {
		n := int32(in.PauseAfterFailures)
		r.PauseAfterFailures = &n
	}
	r.AlertAfterFailures = int32(max(in.AlertAfterFailures, AlertAfterFailuresDefault)) // validated: at most AlertAfterFailuresMax
	r.CompletionMode = CompletionResponse
	if in.Completion.Callback() {
		r.CompletionMode = CompletionCallback
		r.CompletionTimeoutMS = refTo(in.Completion.Timeout.Milliseconds())
		if in.Completion.HeartbeatTimeout > 0 {
			r.HeartbeatTimeoutMS = refTo(in.Completion.HeartbeatTimeout.Milliseconds())
		}
	}
	if in.SLA.FinishWithin > 0 {
		r.SLAFinishWithinMS = refTo(in.SLA.FinishWithin.Milliseconds())
	}
	if in.Schedule.Type == schedule.Union {
		union.SetColumns(&r, in.Schedule)
	}
	return r
}

func taskFromRow(r db.Task) Task {
	t := Task{
		TaskInput: TaskInput{
			Name: r.Name, EndpointID: r.EndpointID,
			Schedule: schedule.Spec{
				Type: r.ScheduleType, Timezone: r.Timezone, RunAt: utcPtr(r.RunAt), StartAt: utcPtr(r.StartAt), EndAt: utcPtr(r.EndAt),
				ExcludeCalendars: r.ExcludeCalendars,
			},
			Payload: r.Payload, PayloadTemplate: r.PayloadTemplate, Priority: int(r.Priority),
			Retry: RetryPolicy{
				MaxAttempts: int(r.MaxAttempts), InitialBackoff: time.Duration(r.InitialBackoffMS) * time.Millisecond,
				MaxBackoff: time.Duration(r.MaxBackoffMS) * time.Millisecond,
			},
			OverlapPolicy: r.OverlapPolicy, MisfirePolicy: r.MisfirePolicy, Labels: r.Labels, Shards: int(max(r.Shards, 1)),
			AlertAfterFailures: int(max(r.AlertAfterFailures, AlertAfterFailuresDefault)),
		},
		ID: r.ID, State: r.State, NextRunAt: utcPtr(r.NextRunAt), MissedCount: r.MissedCount,
		ConsecutiveFails: int(r.ConsecutiveFailures), Version: int(r.Version), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if r.Cron != nil {
		t.Schedule.Cron = *r.Cron
	}
	if r.ScheduleType == schedule.Cron {
		t.Schedule.Dialect, t.Schedule.DSTPolicy = r.ScheduleDialect, r.DSTPolicy
	}
	if r.IntervalSeconds != nil {
		t.Schedule.IntervalSeconds = *r.IntervalSeconds
	}
	if spec, ok := union.Spec(r.ScheduleUnion); ok {
		t.Schedule = spec
	}
	if r.ScheduleEvent != nil {
		t.Schedule.Event = *r.ScheduleEvent
	}
	if r.TimeoutMS != nil {
		t.Timeout = time.Duration(*r.TimeoutMS) * time.Millisecond
	}
	if r.AlertEndpointID != nil {
		t.AlertEndpointID = *r.AlertEndpointID
	}
	if r.PauseAfterFailures != nil {
		t.PauseAfterFailures = int(*r.PauseAfterFailures)
	}
	if r.CompletionMode == CompletionCallback {
		t.Completion = Completion{
			Mode:             CompletionCallback,
			Timeout:          time.Duration(zeroIfNil(r.CompletionTimeoutMS)) * time.Millisecond,
			HeartbeatTimeout: time.Duration(zeroIfNil(r.HeartbeatTimeoutMS)) * time.Millisecond,
		}
	}
	if r.SLAFinishWithinMS != nil {
		t.SLA.FinishWithin = time.Duration(*r.SLAFinishWithinMS) * time.Millisecond
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	return t
}

// apiTask hides the tasks that deliver workflow nodes from the task API:
// such a task is not found. It takes db.GetTask's results and translates
// its error (storeError).
func apiTask(row db.Task, err error) (db.Task, error) {
	if err != nil {
		return row, storeError(err, "load task")
	}
	if row.WorkflowID != nil {
		return db.Task{}, ErrNotFound
	}
	return row, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
