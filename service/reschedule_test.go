package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// everySecond is an interval of 1 s anchored on a whole second, and
// everySecondCron the cron schedule with the same instants.
func everySecond(anchor time.Time) schedule.Spec {
	return schedule.Spec{Type: schedule.Interval, IntervalSeconds: 1, StartAt: &anchor}
}

var everySecondCron = schedule.Spec{Type: schedule.Cron, Cron: "* * * * * *"}

// requireOneLiveExecutionPerSlot checks the task's scheduled executions
// after since: every whole second s up to the latest materialised slot
// that the schedule fires (fires(s)) has exactly one execution that is not
// cancelled, with exactly one deliver job; no other second has one.
func (f *fixture) requireOneLiveExecutionPerSlot(t *testing.T, taskID string, since time.Time, fires func(time.Time) bool) {
	t.Helper()
	ctx := context.Background()
	rows, err := f.pool.Query(ctx, `SELECT scheduled_for, count(*) FROM executions
		WHERE task_id = $1 AND trigger = 'schedule' AND state <> 'cancelled' AND scheduled_for > $2
		GROUP BY scheduled_for ORDER BY scheduled_for`, taskID, since)
	require.NoError(t, err)
	live := map[time.Time]int{}
	var last time.Time
	for rows.Next() {
		var slot time.Time
		var n int
		require.NoError(t, rows.Scan(&slot, &n))
		live[slot.UTC()] = n
		last = slot.UTC()
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, live, "the scheduler materialised slots after %s", since)
	for s := since.Truncate(time.Second).Add(time.Second); !s.After(last); s = s.Add(time.Second) {
		if fires(s) {
			require.Equal(t, 1, live[s], "slot %s has one live execution", s.Format(time.RFC3339))
		} else {
			require.Zero(t, live[s], "slot %s is not a slot of the schedule", s.Format(time.RFC3339))
		}
	}
	const jobs = `SELECT count(*) FROM executions e WHERE e.task_id = $1 AND e.state <> 'cancelled' AND NOT EXISTS (
			SELECT 1 FROM river_job j WHERE (j.kind = 'deliver' AND j.args->>'execution_id' = e.id::text)
				OR (j.kind = 'deliver_batch' AND j.args->>'executions' LIKE '%' || e.id::text || '%'))`
	require.Zero(t, f.count(t, jobs, taskID), "every live execution has a deliver job")
}

// TestRescheduleToTheSameInstants: an interval-1s task anchored on a whole
// second changed to the cron schedule of every second. The executions the
// scheduler had materialised are slots of the new schedule too: they stay
// pending (and are the scheduler's duplicates: live executions), and every
// slot after the change has one live execution.
func TestRescheduleToTheSameInstants(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.scheduler(service.SchedulerConfig{})
	anchor := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "every-second", EndpointID: f.endpoint,
		Schedule: everySecond(anchor),
	})
	require.NoError(t, err)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	materialised := f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'`, task.ID)
	require.GreaterOrEqual(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'
		AND scheduled_for > now() + interval '2 s'`, task.ID), 2, "slots ahead are materialised")

	changed := time.Now().UTC()
	_, err = f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
		in.Schedule = everySecondCron
		return nil
	})
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'cancelled'`, task.ID),
		"the slots the new schedule shares keep their executions")
	require.Equal(t, materialised, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'`, task.ID))
	res, err := s.Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, res.Duplicate, "the kept executions hold their slots")
	require.Zero(t, res.Missed)
	f.requireOneLiveExecutionPerSlot(t, task.ID, changed.Add(time.Second), func(time.Time) bool { return true })
}

// TestAlternatingReschedules switches a task 24 times between two
// schedules that share instants (every second; every even second), with a
// scheduler pass after each change: after each one every slot of the
// schedule in force has exactly one live execution and no other second
// has one, even where an earlier change had cancelled an execution of the
// same instant.
func TestAlternatingReschedules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.scheduler(service.SchedulerConfig{})
	anchor := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	schedules := []schedule.Spec{everySecond(anchor), {Type: schedule.Cron, Cron: "*/2 * * * * *"}}
	fires := []func(time.Time) bool{
		func(time.Time) bool { return true },
		func(s time.Time) bool { return s.Second()%2 == 0 },
	}
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "alternating", EndpointID: f.endpoint,
		Schedule: schedules[0],
	})
	require.NoError(t, err)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	for i := 1; i <= 24; i++ {
		changed := time.Now().UTC()
		_, err = f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
			in.Schedule = schedules[i%2]
			return nil
		})
		require.NoError(t, err)
		res, err := s.Tick(ctx)
		require.NoError(t, err)
		require.Zero(t, res.Missed)
		f.requireOneLiveExecutionPerSlot(t, task.ID, changed.Add(time.Second), fires[i%2])
	}
	var missed int64
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT missed_count FROM tasks WHERE id = $1`, task.ID).Scan(&missed))
	require.Zero(t, missed)
}

// TestRetryOfARescheduledExecution: an execution a schedule change
// cancelled can be retried while no other execution holds its slot (it
// takes the slot back); once the new schedule fires the same instant, a
// retry is a conflict rather than a second delivery of the slot.
func TestRetryOfARescheduledExecution(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.scheduler(service.SchedulerConfig{})
	ex := service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{})
	anchor := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "retried", EndpointID: f.endpoint,
		Schedule: everySecond(anchor),
	})
	require.NoError(t, err)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	change := func(spec schedule.Spec) {
		t.Helper()
		_, err := f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
			in.Schedule = spec
			return nil
		})
		require.NoError(t, err)
	}
	// Every even second: the odd ones are cancelled.
	change(schedule.Spec{Type: schedule.Cron, Cron: "*/2 * * * * *"})
	var odd []string
	rows, err := f.pool.Query(ctx, `SELECT id::text FROM executions WHERE task_id = $1 AND state = 'cancelled'
		AND scheduled_for > now() + interval '2 s' ORDER BY scheduled_for`, task.ID)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		odd = append(odd, id)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(odd), 2)

	// No execution holds the first one's slot: the retry takes it back.
	got, err := ex.Retry(ctx, f.tenant, odd[0])
	require.NoError(t, err)
	require.Equal(t, service.ExecPending, got.State)

	// Every second again: the scheduler fires the other odd slots anew,
	// and the retried one holds its own.
	change(everySecond(anchor))
	res, err := s.Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, res.Fired)
	_, err = ex.Retry(ctx, f.tenant, odd[1])
	require.ErrorIs(t, err, service.ErrConflict)
	require.Contains(t, err.Error(), "another execution fires this slot")
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions e JOIN executions o ON o.task_id = e.task_id
		AND o.scheduled_for = e.scheduled_for WHERE e.id = $1 AND o.state = 'pending'`, odd[0]),
		"the retried execution is its slot's only live one")
}
