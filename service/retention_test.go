package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/retention"
	"github.com/axhq/ax/service/schedule"
)

// idAt returns a UUIDv7 minted at t, as service.NewID would have then.
func idAt(t time.Time) string {
	id := service.NewID()
	ms := t.UnixMilli()
	return fmt.Sprintf("%08x-%04x", uint64(ms)>>16, uint64(ms)&0xffff) + id[13:]
}

// oldExec is an execution fixture for the retention tests.
type oldExec struct {
	tenant, task string
	created      time.Time // its id's time, and created_at
	finished     *time.Time
	state        string
	trigger      string
	slot         time.Time // scheduled_for; default created
	events       int
}

// insert writes e with its events and returns its id.
func (f *fixture) insertExec(t *testing.T, e oldExec) string {
	t.Helper()
	id := idAt(e.created)
	if e.trigger == "" {
		e.trigger = service.TriggerManual
	}
	if e.slot.IsZero() {
		e.slot = e.created
	}
	var lastError *string
	if e.state == service.ExecFailed || e.state == service.ExecCancelled || e.state == service.ExecSkipped {
		msg := "x"
		lastError = &msg
	}
	f.exec(t, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, created_at, finished_at, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, e.tenant, id, e.task, e.slot, e.trigger, e.state, e.created, e.finished, lastError)
	for range e.events {
		f.exec(t, `INSERT INTO execution_events (tenant_id, execution_id, type, at) VALUES ($1, $2, 'attempt_failed', $3)`,
			e.tenant, id, e.created)
	}
	return id
}

func (f *fixture) exists(t *testing.T, id string) bool {
	t.Helper()
	return f.count(t, `SELECT count(*) FROM executions WHERE id = $1`, id) == 1
}

// TestRetentionRemovesFinishedHistory: finished executions older than the
// retention go with their events, in batches and across tenants; the
// unfinished, the recent, the recently finished and the latest scheduled
// execution of each existing task stay; so do recent audit records.
func TestRetentionRemovesFinishedHistory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "other"))
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "kept", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 3 * * *"},
	})
	require.NoError(t, err)

	now := time.Now().UTC()
	long := now.Add(-40 * 24 * time.Hour)
	longAgo := func(d time.Duration) *time.Time { t := long.Add(d); return &t }
	recently := now.Add(-time.Hour)
	gone, kept := map[string]string{}, map[string]string{}
	for i, state := range []string{service.ExecSucceeded, service.ExecFailed, service.ExecCancelled, service.ExecSkipped} {
		for _, tenant := range []string{f.tenant, "other"} {
			gone[state+" "+tenant] = f.insertExec(t, oldExec{
				tenant: tenant, task: uuid.NewString(),
				created: long.Add(time.Duration(i) * time.Minute), finished: longAgo(time.Hour), state: state, events: 2,
			})
		}
	}
	for i, state := range []string{service.ExecPending, service.ExecRunning, service.ExecRetrying} {
		kept[state] = f.insertExec(t, oldExec{
			tenant: f.tenant, task: uuid.NewString(),
			created: long.Add(time.Duration(i) * time.Second), state: state, events: 1,
		})
	}
	kept["recent"] = f.insertExec(t, oldExec{
		tenant: f.tenant, task: uuid.NewString(), created: recently,
		finished: &recently, state: service.ExecSucceeded, events: 1,
	})
	kept["finished recently"] = f.insertExec(t, oldExec{
		tenant: f.tenant, task: uuid.NewString(), created: long,
		finished: &recently, state: service.ExecFailed, events: 1,
	})
	// A task's scheduled executions: all but the latest go, and so does
	// the latest of a task that no longer exists.
	gone["older slot"] = f.insertExec(t, oldExec{
		tenant: f.tenant, task: task.ID, created: long,
		finished: longAgo(0), state: service.ExecSucceeded, trigger: service.TriggerSchedule, events: 1,
	})
	kept["latest slot"] = f.insertExec(t, oldExec{
		tenant: f.tenant, task: task.ID, created: long.Add(time.Hour),
		finished: longAgo(time.Hour), state: service.ExecSucceeded, trigger: service.TriggerSchedule,
	})
	gone["a manual fire after the latest slot"] = f.insertExec(t, oldExec{
		tenant: f.tenant, task: task.ID,
		created: long.Add(2 * time.Hour), finished: longAgo(2 * time.Hour), state: service.ExecSucceeded,
	})
	gone["latest slot of a deleted task"] = f.insertExec(t, oldExec{
		tenant: f.tenant, task: uuid.NewString(),
		created: long, finished: longAgo(0), state: service.ExecSucceeded, trigger: service.TriggerSchedule,
	})
	dbtest.SyncUnfinished(t, f.pool)

	f.exec(t, `INSERT INTO audit_log (tenant_id, id, at, action, resource_type, resource_id)
		SELECT $1, gen_random_uuid(), now() - make_interval(days => g), 'update', 'task', 'x' FROM generate_series(1, 120) g`, f.tenant)

	var total retention.Result
	r := retention.New(f.pool, retention.Config{Executions: 30 * 24 * time.Hour, Audit: 90 * 24 * time.Hour, Batch: 3})
	for range 100 {
		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		total.Executions += res.Executions
		total.Events += res.Events
		total.Audit += res.Audit
		if !res.More {
			break
		}
	}
	for name, id := range gone {
		require.False(t, f.exists(t, id), "%s: removed", name)
	}
	for name, id := range kept {
		require.True(t, f.exists(t, id), "%s: kept", name)
	}
	require.EqualValues(t, len(gone), total.Executions)
	require.EqualValues(t, 2*8+1, total.Events, "two events of each old final execution, one of the older slot")
	require.Zero(t, f.count(t, `SELECT count(*) FROM execution_events v
		WHERE NOT EXISTS (SELECT 1 FROM executions e WHERE e.tenant_id = v.tenant_id AND e.id = v.execution_id)`),
		"no event outlives its execution")
	require.Equal(t, len(kept)-1, f.count(t, `SELECT count(*) FROM execution_events`),
		"the kept executions keep their events")
	require.EqualValues(t, 120-89, total.Audit, "audit records older than 90 days")
	require.Equal(t, 89, f.count(t, `SELECT count(*) FROM audit_log`))

	// Nothing left: another sweep removes nothing.
	res, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, retention.Result{}, res)
}

// TestRetentionSkipsHeldExecutions: an execution another transaction holds
// (an API retry reopening it) is left alone, and the sweep does not wait
// for it.
func TestRetentionSkipsHeldExecutions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	long := time.Now().Add(-40 * 24 * time.Hour)
	held := f.insertExec(t, oldExec{
		tenant: f.tenant, task: uuid.NewString(), created: long, finished: &long,
		state: service.ExecFailed,
	})
	free := f.insertExec(t, oldExec{
		tenant: f.tenant, task: uuid.NewString(), created: long.Add(time.Second),
		finished: &long, state: service.ExecFailed,
	})
	holder, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `UPDATE executions SET state = 'pending', last_error = NULL WHERE id = $1`, held)
	require.NoError(t, err)

	r := retention.New(f.pool, retention.Config{})
	res, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Executions)
	require.False(t, f.exists(t, free))
	require.True(t, f.exists(t, held))
	// The holder reopened it: still not removed once committed.
	_, err = holder.Exec(ctx, `INSERT INTO unfinished_executions SELECT tenant_id, task_id, scheduled_for, id FROM executions WHERE id = $1`, held)
	require.NoError(t, err)
	require.NoError(t, holder.Commit(ctx))
	res, err = r.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Executions)
	require.True(t, f.exists(t, held))
}

// TestExpiredSlotsDoNotFireAgain: the scheduler's dedup of a slot is the
// task's next_run_at cursor, which only moves forward; the unique slot
// index is its backstop. With the history of a task's fired slots removed
// (all but its latest scheduled execution), further passes fire only new
// slots. A once task whose one slot fired keeps that execution, so
// changing its schedule away and back to the same past instant does not
// fire it again.
func TestExpiredSlotsDoNotFireAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.scheduler(service.SchedulerConfig{})
	// Retention of a millisecond: everything final is expired at once.
	r := retention.New(f.pool, retention.Config{Executions: time.Millisecond})
	finishAll := func() {
		f.exec(t, `UPDATE executions SET state = 'succeeded', finished_at = now() - interval '1 hour'
			WHERE state IN ('pending', 'running', 'retrying')`)
		dbtest.SyncUnfinished(t, f.pool)
	}
	sweep := func() int64 {
		time.Sleep(5 * time.Millisecond) // the ids of this instant are below the horizon
		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		return res.Executions
	}

	// An every-second task whose first slots were missed: fire_all fires
	// each of them.
	start := time.Now().UTC().Truncate(time.Second).Add(-20 * time.Second)
	f.insertTasks(t, 1, 1, start, service.MisfireFireAll)
	var task string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT id::text FROM tasks`).Scan(&task))
	_, err := s.Tick(ctx)
	require.NoError(t, err)
	fired := f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task)
	require.Greater(t, fired, 20, "the missed slots and those ahead")
	var latest time.Time
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT max(scheduled_for) FROM executions WHERE task_id = $1`, task).Scan(&latest))
	finishAll()
	require.EqualValues(t, fired-1, sweep(), "all but the latest slot's execution")

	// Passes after the expiry, until the task's next slots come due and
	// fire: its cursor is past every expired slot.
	var cursor time.Time
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT next_run_at FROM tasks WHERE id = $1`, task).Scan(&cursor))
	require.True(t, cursor.After(latest), "the cursor moved past the fired slots")
	for deadline := time.Now().Add(40 * time.Second); f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task) == 1; {
		require.True(t, time.Now().Before(deadline), "the task fires again")
		_, err := s.Tick(ctx)
		require.NoError(t, err)
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND scheduled_for <= $2`, task, latest),
		"no expired slot fired again")
	require.Zero(t, f.count(t, `SELECT count(*) FROM (SELECT scheduled_for FROM executions WHERE task_id = $1
		GROUP BY 1 HAVING count(*) > 1) d`, task))

	// A once task fired at a past instant: its execution is the task's
	// latest scheduled one and survives retention; back to the same
	// instant after another schedule, the slot does not fire again.
	runAt := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	once := schedule.Spec{Type: schedule.Once, RunAt: &runAt}
	lenient := service.NewTasks(f.pool, service.TasksConfig{OnceLateMax: time.Hour}) // a run_at a minute ago is allowed
	ot, err := lenient.Create(ctx, f.tenant, service.TaskInput{Name: "once", EndpointID: f.endpoint, Schedule: once})
	require.NoError(t, err)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, ot.ID))
	finishAll()
	sweep()
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, ot.ID), "kept: the task's latest slot")
	for _, spec := range []schedule.Spec{{Type: schedule.Cron, Cron: "0 3 * * *"}, once} {
		_, err = lenient.Update(ctx, f.tenant, ot.ID, func(in *service.TaskInput) error {
			in.Schedule = spec
			return nil
		})
		require.NoError(t, err)
	}
	for range 2 {
		_, err = s.Tick(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, ot.ID), "the slot fired once")
}
