package service_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestBatchedBeginAndFinish drives many concurrent deliveries through
// Begin and Finish: the common case is batched, the cases that need a
// decision take the row-by-row path, and both leave the same rows and
// timelines.
func TestBatchedBeginAndFinish(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const n = 300
	f.insertTasks(t, n, 60, time.Now().UTC().Add(time.Second), "fire_once")
	res, err := f.scheduler(service.SchedulerConfig{}).Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, n, res.Fired)

	type exec struct{ id, task string }
	rows, err := f.pool.Query(ctx, `SELECT id::text, task_id::text FROM executions ORDER BY id`)
	require.NoError(t, err)
	var execs []exec
	for rows.Next() {
		var e exec
		require.NoError(t, rows.Scan(&e.id, &e.task))
		execs = append(execs, e)
	}
	require.NoError(t, rows.Err())
	require.Len(t, execs, n)

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
	exec1(`UPDATE endpoints SET enabled = true`)
	// A failure streak the success must reset.
	exec1(`UPDATE tasks SET consecutive_failures = 3 WHERE id = $1`, execs[3].task)

	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	begun := make([]service.Delivery, n)
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Go(func() {
			var err error
			begun[i], err = d.Begin(ctx, f.tenant, e.id, 1)
			require.NoError(t, err)
		})
	}
	wg.Wait()
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
	for i, e := range execs {
		if e == cancelled || e == paused {
			continue
		}
		wg.Go(func() {
			fin, err := d.Finish(ctx, f.tenant, e.id, begun[i].Lease, service.Outcome{
				Kind: service.OutcomeSucceeded, StatusCode: 200 + i%7, Latency: time.Duration(i) * time.Millisecond,
			})
			require.NoError(t, err)
			require.Equal(t, service.Finished{State: service.ExecSucceeded, Attempt: 1}, fin)
		})
		if i == 10 {
			wg.Go(func() {
				_, err := d.Finish(ctx, f.tenant, e.id, 7, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
				conflicts.Store(e.id, err)
			})
		}
	}
	wg.Wait()
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
		evs, err := f.pool.Query(ctx, `SELECT type, attempt, status_code, latency_ms FROM execution_events
			WHERE execution_id = $1 ORDER BY seq`, e.id)
		require.NoError(t, err)
		type ev struct {
			typ                  string
			attempt, code, latMS *int
		}
		var got []ev
		for evs.Next() {
			var v ev
			require.NoError(t, evs.Scan(&v.typ, &v.attempt, &v.code, &v.latMS))
			got = append(got, v)
		}
		require.NoError(t, evs.Err())
		require.Len(t, got, 4, "execution %d", i)
		require.Equal(t, []string{service.EventFired, service.EventAttemptStarted, service.EventAttemptSucceeded, service.EventSucceeded},
			[]string{got[0].typ, got[1].typ, got[2].typ, got[3].typ})
		for _, v := range got[1:] {
			require.Equal(t, 1, *v.attempt)
		}
		require.Equal(t, 200+i%7, *got[2].code)
		require.Equal(t, i, *got[2].latMS)
		require.Equal(t, 200+i%7, *got[3].code)
		require.Nil(t, got[3].latMS)
	}
}
