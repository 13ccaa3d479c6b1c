package jobs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
)

// TestBulkReplayDoesNotStarveOthers: tenant A replays 1,000 failed
// executions at once (POST /v1/executions/retry's service call) to a
// receiver that takes 200 ms, four at a time (the lane's 4 workers): 50 s
// of work queued in one go. Tenant B's five fires, due while that replay
// waits in the same River queue, start long before most of the replay has
// (the replay's deliveries are ordinary deliveries: the lane's fair shares
// take them round-robin with B's), which is what "a replay of 10,000 does
// not starve other tenants" asks at a size this machine runs in a test.
func TestBulkReplayDoesNotStarveOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{River: RiverConfig{DeliverWorkers: 4, BulkWorkers: 2}, NoStart: true})
	limits := service.NewLimits(h.pool, service.LimitsConfig{})
	startLoops(t, LimitsLoops(limits)...)
	h.start(h.client)

	slow, slowURL := newGauge(t, 200*time.Millisecond)
	fast, fastURL := newGauge(t, 0)
	taskA := h.task(h.endpoint(slowURL, nil).ID, nil)
	night := time.Now().Add(-6 * time.Hour).UTC().Truncate(time.Second)
	_, err := h.pool.Exec(t.Context(), `WITH x AS (
			INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, attempts, last_error, finished_at)
			SELECT $1, gen_random_uuid(), $2, $3::timestamptz + make_interval(secs => g), 'schedule', 'failed', 1, 'the night', now()
			FROM generate_series(1, 1000) g
			RETURNING id)
		SELECT count(*) FROM x`, h.tenant, taskA.ID, night)
	require.NoError(t, err)
	x := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{})
	res, err := x.RetryBulk(t.Context(), h.tenant, service.RetryBulkInput{
		TaskID: taskA.ID, State: service.ExecFailed, From: night, To: night.Add(time.Hour),
	})
	require.NoError(t, err)
	require.Equal(t, 1000, res.Retried)
	require.Eventually(t, func() bool { m, _, _ := slow.snapshot(); return m == 4 }, 30*time.Second, 5*time.Millisecond,
		"A's replay takes every worker of the lane")

	h.tenant = "beta"
	require.NoError(t, db.EnsureTenant(t.Context(), h.pool, h.tenant))
	taskB := h.task(h.endpoint(fastURL, nil).ID, nil)
	first := time.Now().Add(time.Second)
	var mine []string
	for i := range 5 {
		mine = append(mine, h.fire(taskB, fireOpts{ScheduledFor: first.Add(time.Duration(i) * 300 * time.Millisecond)}))
	}
	var lastStart time.Time
	for _, id := range mine {
		e := h.waitState(id, service.ExecSucceeded)
		require.NotNil(t, e.StartedAt)
		if e.StartedAt.After(lastStart) {
			lastStart = *e.StartedAt
		}
	}
	_, arrivals, _ := fast.snapshot()
	require.Len(t, arrivals, len(mine))

	var startedA int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM executions
		WHERE tenant_id = 'acme' AND task_id = $1 AND started_at <= $2`, taskA.ID, lastStart).Scan(&startedA))
	t.Logf("A's replayed deliveries started before B's last: %d of 1000", startedA)
	require.Less(t, startedA, 500, "B's fires did not wait behind A's replay")
}
