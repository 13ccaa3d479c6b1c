package service_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
)

// firedExec is an execution the fixture fired, with its task.
type firedExec struct{ id, task string }

// fire creates n interval tasks on the fixture's endpoint (enabled), fires
// their first slot with one scheduler pass and returns the executions in
// id order.
func (f *fixture) fire(t *testing.T, n int) []firedExec {
	t.Helper()
	ctx := context.Background()
	f.insertTasks(t, n, 60, time.Now().UTC().Add(time.Second), "fire_once")
	_, err := f.pool.Exec(ctx, `UPDATE endpoints SET enabled = true`)
	require.NoError(t, err)
	res, err := f.scheduler(service.SchedulerConfig{}).Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, n, res.Fired)
	rows, err := f.pool.Query(ctx, `SELECT id::text, task_id::text FROM executions ORDER BY id`)
	require.NoError(t, err)
	var execs []firedExec
	for rows.Next() {
		var e firedExec
		require.NoError(t, rows.Scan(&e.id, &e.task))
		execs = append(execs, e)
	}
	require.NoError(t, rows.Err())
	require.Len(t, execs, n)
	return execs
}

// eventTypes lists the types of an execution's timeline.
func eventTypes(d service.ExecutionDetail) []string {
	types := make([]string, 0, len(d.Events))
	for _, e := range d.Events {
		types = append(types, e.Type)
	}
	return types
}

// TestBatchedBeginAndFinish drives many concurrent deliveries through
// Begin and Finish: the common case is batched, the cases that need a
// decision take the row-by-row path, and both leave the same rows and
// timelines.
func TestBatchedBeginAndFinish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const n = 300
	execs := f.fire(t, n)

	// Three that need a decision: a requested cancel, a paused task, and
	// a task whose overlap policy must be checked (nothing overlaps it,
	// so it is sent).
	cancelled, paused, overlap := execs[0], execs[1], execs[2]
	exec1 := func(sql string, args ...any) {
		_, err := f.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec1(`UPDATE executions SET cancel_requested = true WHERE id = $1`, cancelled.id)
	exec1(`UPDATE tasks SET state = 'paused' WHERE id = $1`, paused.task)
	exec1(`UPDATE tasks SET overlap_policy = 'skip' WHERE id = $1`, overlap.task)
	// A failure streak the success must reset.
	exec1(`UPDATE tasks SET consecutive_failures = 3 WHERE id = $1`, execs[3].task)

	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	begun := make([]service.Delivery, n)
	beginErrs := make([]error, n)
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Go(func() { begun[i], beginErrs[i] = d.Begin(ctx, f.tenant, e.id, 1) })
	}
	wg.Wait()
	for i, err := range beginErrs {
		require.NoError(t, err, "execution %d", i)
	}
	require.Equal(t, service.BatchStats{Batched: n - 3}, d.BatchStats(), "all but the three took the batched path")
	for i, b := range begun {
		switch execs[i] {
		case cancelled, paused:
			require.Equal(t, service.ActionDone, b.Action, "execution %d", i)
			require.Equal(t, service.ExecCancelled, b.State)
			continue
		}
		require.Equal(t, service.ActionSend, b.Action, "execution %d", i)
		require.Equal(t, service.ExecRunning, b.State)
		require.Equal(t, 1, b.Attempt)
		require.Equal(t, 1, b.Lease)
		require.False(t, b.Resumed)
		require.Equal(t, execs[i].task, b.TaskID)
		require.Equal(t, f.endpoint, b.EndpointID)
		require.Equal(t, "https://example.com/hook", b.URL)
		require.Equal(t, "POST", b.Method)
		require.JSONEq(t, `{}`, string(b.Payload))
		require.Len(t, b.Keys, 1)
		require.NotEmpty(t, b.Keys[0])
		require.Equal(t, 5, b.Retry.MaxAttempts)
		require.Equal(t, 10*time.Second, b.Timeout)
	}
	require.Equal(t, n-2, f.count(t, `SELECT count(*) FROM executions WHERE state = 'running' AND attempts = 1 AND lease_attempt = 1
		AND started_at IS NOT NULL`))

	// Finish: every sent one succeeded; one more outcome arrives from a
	// stale attempt and is refused.
	var conflicts sync.Map
	finished := make([]service.Finished, n)
	finishErrs := make([]error, n)
	for i, e := range execs {
		if e == cancelled || e == paused {
			continue
		}
		wg.Go(func() {
			finished[i], finishErrs[i] = d.Finish(ctx, f.tenant, e.id, begun[i].Lease, service.Outcome{
				Kind: service.OutcomeSucceeded, StatusCode: 200 + i%7, Latency: time.Duration(i) * time.Millisecond,
			})
		})
		if i == 10 {
			wg.Go(func() {
				_, err := d.Finish(ctx, f.tenant, e.id, 7, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
				conflicts.Store(e.id, err)
			})
		}
	}
	wg.Wait()
	for i, e := range execs {
		if e == cancelled || e == paused {
			continue
		}
		require.NoError(t, finishErrs[i], "execution %d", i)
		require.Equal(t, service.Finished{State: service.ExecSucceeded, Attempt: 1}, finished[i], "execution %d", i)
	}
	err10, _ := conflicts.Load(execs[10].id)
	require.ErrorIs(t, err10.(error), service.ErrConflict)
	require.Equal(t, int64(2*(n-3)+1), d.BatchStats().Batched, "every Begin and success but the three decisions, plus the stale outcome's first try")
	require.Zero(t, d.BatchStats().Failed)

	require.Equal(t, n-2, f.count(t, `SELECT count(*) FROM executions WHERE state = 'succeeded' AND attempts = 1
		AND finished_at >= started_at AND last_status_code BETWEEN 200 AND 206 AND last_error IS NULL`))
	require.Zero(t, f.count(t, `SELECT count(*) FROM tasks WHERE consecutive_failures <> 0`))
	for i, e := range execs {
		if e == cancelled || e == paused {
			continue
		}
		row, err := db.GetExecution(ctx, f.pool, f.tenant, e.id, false)
		require.NoError(t, err)
		timeline, err := db.ListExecutionEvents(ctx, f.pool, row)
		require.NoError(t, err)
		type ev struct {
			typ                  string
			attempt, code, latMS *int32
		}
		var got []ev
		for _, v := range timeline {
			got = append(got, ev{v.Type, v.Attempt, v.StatusCode, v.LatencyMS})
		}
		if e == overlap { // started row by row: its start is stored
			require.Equal(t, db.ImplicitFired|db.ImplicitSucceeded, int(row.ImplicitEvents))
		} else {
			require.Equal(t, db.ImplicitFired|db.ImplicitStarted|db.ImplicitSucceeded, int(row.ImplicitEvents))
		}
		require.Len(t, got, 4, "execution %d", i)
		require.Equal(t, []string{service.EventFired, service.EventAttemptStarted, service.EventAttemptSucceeded, service.EventSucceeded},
			[]string{got[0].typ, got[1].typ, got[2].typ, got[3].typ})
		for _, v := range got[1:] {
			require.EqualValues(t, 1, *v.attempt)
		}
		require.EqualValues(t, 200+i%7, *got[2].code)
		require.EqualValues(t, i, *got[2].latMS)
		require.EqualValues(t, 200+i%7, *got[3].code)
		require.Nil(t, got[3].latMS)
	}
}

// TestImpliedEventsSurviveARetry: an execution whose first start and
// fired event are implied by its row fails, is retried through the API and
// then succeeds; the API's timeline keeps every step in order.
func TestImpliedEventsSurviveARetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.fire(t, 1)[0].id
	// The scheduler's River job would race this test's calls: drop it.
	_, err := f.pool.Exec(ctx, `DELETE FROM river_job`)
	require.NoError(t, err)

	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	b, err := d.Begin(ctx, f.tenant, id, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, b.Action)
	fin, err := d.Finish(ctx, f.tenant, id, 1, service.Outcome{
		Kind: service.OutcomePermanent, StatusCode: 400,
		ErrorClass: "http_4xx", Error: "HTTP 400 Bad Request",
	})
	require.NoError(t, err)
	require.Equal(t, service.ExecFailed, fin.State)

	ex := service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{})
	r, err := ex.Retry(ctx, f.tenant, id)
	require.NoError(t, err)
	require.Nil(t, r.StartedAt, "a retried execution shows no start until it runs again")
	b, err = d.Begin(ctx, f.tenant, id, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, b.Action)
	require.Equal(t, 2, b.Attempt, "attempt numbers keep counting across an API retry")
	_, err = d.Finish(ctx, f.tenant, id, 1, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 204, Latency: 7 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, int64(3), d.BatchStats().Batched, "both starts and the success were batched")

	got, err := ex.Get(ctx, f.tenant, id)
	require.NoError(t, err)
	types := eventTypes(got)
	require.Equal(t, []string{
		service.EventFired, service.EventAttemptStarted, service.EventAttemptFailed, service.EventFailed,
		service.EventRetried, service.EventAttemptStarted, service.EventAttemptSucceeded, service.EventSucceeded,
	}, types)
	for i := 1; i < len(got.Events); i++ {
		require.False(t, got.Events[i].At.Before(got.Events[i-1].At), "event %d (%s) is before its predecessor", i, types[i])
	}
	require.Equal(t, 1, *got.Events[1].Attempt)
	require.Equal(t, 2, *got.Events[5].Attempt)
	require.Equal(t, 2, *got.Events[6].Attempt)
	require.Equal(t, 2, got.Attempts)
	require.Equal(t, 204, *got.Events[6].StatusCode)
	require.Equal(t, 7, *got.Events[6].LatencyMS)
	require.Equal(t, service.ExecSucceeded, got.State)
	require.NotNil(t, got.StartedAt)
	require.Equal(t, got.Events[5].At, *got.StartedAt, "started_at is the start of the latest run")
}

// TestRetryOfAnUnstartedExecution: cancelled before it ever started, then
// retried (with the id in upper case), then started and succeeded in
// batches addressed in upper case too: the start is stored after the
// retry, not implied before the cancel, and nothing is taken for an
// interrupted run.
func TestRetryOfAnUnstartedExecution(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.fire(t, 1)[0].id
	upper := strings.ToUpper(id)

	ex := service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{})
	c, err := ex.Cancel(ctx, f.tenant, id)
	require.NoError(t, err)
	require.Equal(t, service.ExecCancelled, c.State)
	_, err = ex.Retry(ctx, f.tenant, upper)
	require.NoError(t, err)
	var argsID string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT args->>'execution_id' FROM river_job WHERE state = 'available'`).Scan(&argsID))
	require.Equal(t, id, argsID, "the new job carries the canonical id")
	_, err = f.pool.Exec(ctx, `DELETE FROM river_job`) // this test plays the worker
	require.NoError(t, err)

	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	b, err := d.Begin(ctx, f.tenant, upper, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, b.Action)
	require.Equal(t, 1, b.Attempt)
	require.False(t, b.Resumed)
	fin, err := d.Finish(ctx, f.tenant, upper, 1, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
	require.NoError(t, err)
	require.Equal(t, service.ExecSucceeded, fin.State)
	require.Equal(t, service.BatchStats{Batched: 2}, d.BatchStats())

	got, err := ex.Get(ctx, f.tenant, id)
	require.NoError(t, err)
	types := eventTypes(got)
	require.Equal(t, []string{
		service.EventFired, service.EventCancelled, service.EventRetried, service.EventAttemptStarted,
		service.EventAttemptSucceeded, service.EventSucceeded,
	}, types)
}

// A row another transaction holds (a pause, a cancel in progress) is
// skipped by the batch and waits on the row-by-row path, which then sees
// the outcome of that transaction.
func TestBatchSkipsLockedExecutions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	execs := f.fire(t, 2)
	locked, free := execs[0].id, execs[1].id

	tx, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `UPDATE executions SET cancel_requested = true WHERE id = $1`, locked)
	require.NoError(t, err)

	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	type result struct {
		d   service.Delivery
		err error
	}
	got := make(chan result, 1)
	go func() {
		b, err := d.Begin(ctx, f.tenant, locked, 1)
		got <- result{b, err}
	}()
	b, err := d.Begin(ctx, f.tenant, free, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, b.Action, "the other execution is not held up")
	select {
	case r := <-got:
		t.Fatalf("Begin of a locked execution returned before the lock was released: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	require.NoError(t, tx.Commit(ctx))
	r := <-got
	require.NoError(t, r.err)
	require.Equal(t, service.ActionDone, r.d.Action)
	require.Equal(t, service.ExecCancelled, r.d.State, "the row-by-row path saw the committed cancel request")
	require.Equal(t, service.BatchStats{Batched: 1}, d.BatchStats())
}
