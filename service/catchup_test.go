package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
)

// fireOnceTask inserts an active fire_once task firing every second (no
// scheduler runs: its executions are the test's), to the fixture's
// endpoint enabled, and returns its id.
func (f *fixture) fireOnceTask(t *testing.T) string {
	t.Helper()
	id := uuid.NewString()
	_, err := f.pool.Exec(context.Background(), `UPDATE endpoints SET enabled = true WHERE tenant_id = $1 AND id = $2`, f.tenant, f.endpoint)
	require.NoError(t, err)
	_, err = f.pool.Exec(context.Background(), `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type,
			interval_seconds, misfire_policy)
		VALUES ($1, $2, $3, $4, 'interval', 1, 'fire_once')`, f.tenant, id, "fire-once-"+id, f.endpoint)
	require.NoError(t, err)
	return id
}

// pendingSlot inserts a pending first fire of task's slot ago before the
// database's now and returns its id.
func (f *fixture) pendingSlot(t *testing.T, task string, ago time.Duration) string {
	t.Helper()
	return f.pendingAt(t, task, `date_trunc('milliseconds', now()) - make_interval(secs => $4)`, ago.Seconds())
}

// pendingAt inserts a pending first fire of task's slot at the SQL
// expression slot (of $4, arg; $3 is the task) and returns its id.
func (f *fixture) pendingAt(t *testing.T, task, slot string, arg any) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	_, err := f.pool.Exec(context.Background(), `WITH x AS (
			INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger)
			VALUES ($1, $2, $3, `+slot+`, 'schedule')
			RETURNING tenant_id, task_id, scheduled_for, id)
		INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id) SELECT tenant_id, task_id, scheduled_for, id FROM x`,
		f.tenant, id, task, arg)
	require.NoError(t, err)
	return id
}

// TestFireOnceCatchUpStandsForTheDueSlots: fire_once tasks' queued fires
// are picked up past the misfire threshold (5 s) all at once, as after an
// outage, in any order: each task's latest is sent late — its catch-up —
// and the others are missed. A fire of the task due when the catch-up
// started, picked up past the threshold after it (a fire that crossed the
// threshold while the backlog drained), is missed too, not sent as a
// second late fire.
func TestFireOnceCatchUpStandsForTheDueSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	const tasks, queued = 5, 10
	type backlog struct {
		task   string
		queued []string // oldest first
	}
	backlogs := make([]backlog, tasks)
	for i := range backlogs {
		backlogs[i].task = f.fireOnceTask(t)
		for k := queued; k > 0; k-- {
			backlogs[i].queued = append(backlogs[i].queued, f.pendingSlot(t, backlogs[i].task, time.Duration(20+k)*time.Second))
		}
	}
	got := make([][]service.Delivery, tasks)
	errs := make([][]error, tasks)
	var wg sync.WaitGroup
	for i, b := range backlogs {
		got[i], errs[i] = make([]service.Delivery, queued), make([]error, queued)
		for k, id := range b.queued {
			wg.Go(func() { got[i][k], errs[i][k] = d.Begin(ctx, f.tenant, id, 1) })
		}
	}
	wg.Wait()
	crossing := make([]string, tasks)
	for i, b := range backlogs {
		for k := range b.queued {
			require.NoError(t, errs[i][k])
			if k == queued-1 {
				require.Equal(t, service.ActionSend, got[i][k].Action, "task %d: the latest queued fire is the catch-up", i)
				require.True(t, got[i][k].Late)
				continue
			}
			require.Equal(t, service.ActionDone, got[i][k].Action, "task %d: %s", i, got[i][k].Reason)
			require.True(t, got[i][k].Missed, "task %d: %s", i, got[i][k].Reason)
		}
		// Due half a second before the catch-up started.
		crossing[i] = f.pendingAt(t, b.task, `(SELECT first_started_at FROM executions WHERE task_id = $3 AND late)
			- make_interval(secs => $4)`, 0.5)
	}
	for { // until those are past the threshold
		var left bool
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM executions
			WHERE id = ANY ($1::uuid[]) AND scheduled_for >= now() - interval '5.1 seconds')`, crossing).Scan(&left))
		if !left {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, b := range backlogs {
		c, err := d.Begin(ctx, f.tenant, crossing[i], 1)
		require.NoError(t, err)
		require.True(t, c.Missed, "task %d: a fire due when the catch-up started is missed, not a second late fire: %+v", i, c)
		require.Contains(t, c.Reason, "a late fire that started after its slot stands for it (misfire_policy fire_once)")

		var late, missed int
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM executions WHERE task_id = $1 AND late AND first_started_at IS NOT NULL),
				(SELECT missed_count FROM tasks WHERE id = $1)`, b.task).Scan(&late, &missed))
		require.Equal(t, 1, late, "task %d: one late fire", i)
		require.Equal(t, queued, missed, "task %d: the others are counted missed", i)
	}
}

// TestFireOnceMisfiresDecideOneAtATime: a misfire of a fire_once task is
// decided under its task's row lock, after the catch-up that holds it
// commits, so it sees that catch-up. Here a catch-up of the task is being
// recorded, uncommitted, when a fire due before it is picked up past the
// threshold: that fire waits, then is missed. Deciding without the lock,
// it would see no catch-up and be sent as a second late fire.
func TestFireOnceMisfiresDecideOneAtATime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	for round := range 20 {
		task := f.fireOnceTask(t)
		id := f.pendingSlot(t, task, 10*time.Second)

		tx, err := f.pool.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, db.LockTask(ctx, tx, f.tenant, task))
		require.NoError(t, db.RecordCatchUp(ctx, tx, f.tenant, task))
		var (
			got  service.Delivery
			bErr error
			done = make(chan struct{})
		)
		go func() {
			defer close(done)
			got, bErr = d.Begin(ctx, f.tenant, id, 1)
		}()
		waited := false
		for !waited {
			select {
			case <-done:
				waited = true // decided without waiting: the check below fails
				continue
			default:
			}
			var n int
			require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
			waited = n > 0
		}
		require.NoError(t, tx.Commit(ctx))
		<-done
		require.NoError(t, bErr)
		require.True(t, got.Missed, "round %d: %s", round, fmt.Sprintf("%+v", got))
	}
}

// TestFireOnceOneShotMisfireIsSentAlone: a one-shot (once) fire_once
// task has no other slot its misfire could stand for, so the misfire is
// sent late without the catch-up's bookkeeping: Begin neither waits for
// the task's row lock (held here by another transaction throughout) nor
// records a catch-up on the task.
func TestFireOnceOneShotMisfireIsSentAlone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := newFixture(t)
	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	task := uuid.NewString()
	_, err := f.pool.Exec(ctx, `UPDATE endpoints SET enabled = true WHERE tenant_id = $1 AND id = $2`, f.tenant, f.endpoint)
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, run_at, misfire_policy)
		VALUES ($1, $2, $3, $4, 'once', now() - interval '10 seconds', 'fire_once')`, f.tenant, task, "one-shot-"+task, f.endpoint)
	require.NoError(t, err)
	id := f.pendingSlot(t, task, 10*time.Second)

	tx, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	require.NoError(t, db.LockTask(ctx, tx, f.tenant, task))

	got, err := d.Begin(ctx, f.tenant, id, 1)
	require.NoError(t, err, "decided without the task's row lock")
	require.Equal(t, service.ActionSend, got.Action)
	require.True(t, got.Late)
	var caughtUp *time.Time
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT caught_up_at FROM tasks WHERE tenant_id = $1 AND id = $2`, f.tenant, task).Scan(&caughtUp))
	require.Nil(t, caughtUp, "no catch-up recorded")
}
