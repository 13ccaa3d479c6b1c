package jobs

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
)

// fireMany materialises n executions of task due now (their slots a
// millisecond apart, in the past), with their deliver
// jobs in queue, in one transaction (as h.fire does one by one).
func (h *harness) fireMany(task service.Task, n int, queue string) []string {
	h.t.Helper()
	ctx := h.t.Context()
	ids := make([]string, n)
	params := make([]river.InsertManyParams, n)
	for i := range ids {
		ids[i] = service.NewID()
		params[i] = river.InsertManyParams{
			Args: service.DeliverArgs{TenantID: h.tenant, ExecutionID: ids[i]},
			InsertOpts: &river.InsertOpts{
				Queue: queue, Priority: task.Priority, MaxAttempts: task.Retry.MaxAttempts + 3,
				UniqueOpts: river.UniqueOpts{ByArgs: true},
			},
		}
	}
	err := pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `WITH x AS (
				INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger)
				SELECT $1, id, $3, now() - n * interval '1 millisecond', 'schedule' FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, n)
				RETURNING tenant_id, task_id, scheduled_for, id)
			INSERT INTO unfinished_executions SELECT * FROM x`, h.tenant, ids, task.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO execution_events (tenant_id, execution_id, type)
			SELECT $1, id, 'fired' FROM unnest($2::uuid[]) id`, h.tenant, ids); err != nil {
			return err
		}
		res, err := h.client.InsertManyTx(ctx, tx, params)
		if err != nil {
			return err
		}
		jobIDs := make([]int64, n)
		for i, r := range res {
			jobIDs[i] = r.Job.ID
		}
		_, err = tx.Exec(ctx, `UPDATE executions e SET river_job_id = j.job FROM unnest($2::uuid[], $3::bigint[]) j(id, job)
			WHERE e.tenant_id = $1 AND e.id = j.id`, h.tenant, ids, jobIDs)
		return err
	})
	require.NoError(h.t, err)
	return ids
}

// TestTenantFairnessWithinLane: tenant A has a backlog of 1,000 due
// deliveries in the main lane to a receiver that takes 200 ms, four at a
// time (its 4 workers): 50 s of work. Tenant B's five fires, due while
// that backlog waits in the same River queue, each start within a few
// hundred milliseconds of their slot (asserted from the executions'
// started_at with a generous bound: far less than the backlog would take),
// while most of A's backlog has not started yet: River takes the
// reordered queue's jobs round-robin across tenants (service.Limits.Share).
func TestTenantFairnessWithinLane(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{River: RiverConfig{DeliverWorkers: 4, BulkWorkers: 2}, NoStart: true})
	limits := service.NewLimits(h.pool, service.LimitsConfig{})
	startLoops(t, LimitsLoops(limits)...)
	h.start(h.client)

	slow, slowURL := newGauge(t, 200*time.Millisecond)
	fast, fastURL := newGauge(t, 0)
	backlog := h.fireMany(h.task(h.endpoint(slowURL, nil).ID, nil), 1000, service.QueueDeliver)
	require.Eventually(t, func() bool { m, _, _ := slow.snapshot(); return m == 4 }, 30*time.Second, 5*time.Millisecond,
		"A's backlog takes every worker of the lane")

	h.tenant = "beta"
	require.NoError(t, db.EnsureTenant(t.Context(), h.pool, h.tenant))
	task := h.task(h.endpoint(fastURL, nil).ID, nil)
	first := time.Now().Add(time.Second)
	var mine []string
	for i := range 5 {
		mine = append(mine, h.fire(task, fireOpts{ScheduledFor: first.Add(time.Duration(i) * 300 * time.Millisecond)}))
	}
	var lastStart time.Time
	for _, id := range mine {
		e := h.waitState(id, service.ExecSucceeded)
		var slot time.Time
		require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT scheduled_for FROM executions WHERE tenant_id = $1 AND id = $2`,
			h.tenant, id).Scan(&slot))
		require.NotNil(t, e.StartedAt)
		late := e.StartedAt.Sub(slot)
		t.Logf("B's fire started %s after its slot", late)
		// The bound: the share pass's backlog age and period, one of A's
		// sends to free a worker, River's poll, and a loaded machine.
		require.Less(t, late, 3*time.Second, "B waited for A's backlog")
		if e.StartedAt.After(lastStart) {
			lastStart = *e.StartedAt
		}
	}
	_, arrivals, _ := fast.snapshot()
	require.Len(t, arrivals, len(mine))

	var startedA int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM executions
		WHERE tenant_id = 'acme' AND id = ANY($1) AND started_at <= $2`, backlog, lastStart).Scan(&startedA))
	t.Logf("A's deliveries started before B's last: %d of %d", startedA, len(backlog))
	require.Less(t, startedA, len(backlog)/2, "B's fires did not wait behind A's backlog")
}

// TestShareQueuesOrder: db.ShareQueues leaves a queue alone while one
// tenant has due jobs, or while nothing has waited FairAfter; once two
// tenants have a backlog there, River's fetch order takes them in turns
// within each priority, each tenant's own jobs in their order, priority
// still first; jobs not yet due are not touched; and a second pass
// changes nothing.
func TestShareQueuesOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{NoStart: true})
	ctx := t.Context()
	now := time.Now()
	type job struct {
		tenant   string
		priority int
		at       time.Time
	}
	insert := func(queue string, jobs ...job) []string {
		var ids []string
		params := make([]river.InsertManyParams, len(jobs))
		for i, j := range jobs {
			ids = append(ids, service.NewID())
			params[i] = river.InsertManyParams{
				Args:       service.DeliverArgs{TenantID: j.tenant, ExecutionID: ids[i]},
				InsertOpts: &river.InsertOpts{Queue: queue, Priority: j.priority, ScheduledAt: j.at},
			}
		}
		_, err := h.client.InsertMany(ctx, params)
		require.NoError(t, err)
		return ids
	}
	shareAfter := func(queue string, after time.Duration) int64 {
		n, err := db.ShareQueues(ctx, h.pool, []string{queue}, after)
		require.NoError(t, err)
		return n
	}
	share := func(queue string) int64 { return shareAfter(queue, 200*time.Millisecond) }
	// Two tenants, nothing waited longer than after (an hour, so that a
	// slow machine cannot make it so): River takes them in order.
	insert(service.QueueDeliverBulk, job{"x", 2, now.Add(-20 * time.Millisecond)}, job{"y", 2, now.Add(-10 * time.Millisecond)},
		job{"x", 2, now.Add(-5 * time.Millisecond)})
	require.Zero(t, shareAfter(service.QueueDeliverBulk, time.Hour), "no backlog: nothing to share")
	require.Positive(t, shareAfter(service.QueueDeliverBulk, time.Nanosecond), "the same jobs, late: shared")

	var a []job
	for i := range 8 {
		a = append(a, job{"a", 2, now.Add(-5*time.Second + time.Duration(i)*time.Millisecond)})
	}
	aIDs := insert(service.QueueDeliver, a...)
	require.Zero(t, share(service.QueueDeliver), "one tenant: nothing to share")

	bIDs := insert(service.QueueDeliver, job{"b", 2, now.Add(-50 * time.Millisecond)}, job{"b", 2, now.Add(-time.Second)},
		job{"b", 2, now.Add(-time.Second + time.Millisecond)})
	urgent := insert(service.QueueDeliver, job{"a", 1, now.Add(-time.Second)})
	var later time.Time
	future := insert(service.QueueDeliver, job{"c", 2, now.Add(10 * time.Second)})
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT scheduled_at FROM river_job WHERE args->>'execution_id' = $1`, future[0]).Scan(&later))

	require.Positive(t, share(service.QueueDeliver))
	rows, err := h.pool.Query(ctx, `SELECT args->>'tenant_id', args->>'execution_id', priority FROM river_job
		WHERE state = 'available' AND queue = 'deliver' AND scheduled_at <= now() ORDER BY priority, scheduled_at, id`)
	require.NoError(t, err)
	var order, tenants []string
	for rows.Next() {
		var tenant, id string
		var priority int
		require.NoError(t, rows.Scan(&tenant, &id, &priority))
		order = append(order, id)
		tenants = append(tenants, fmt.Sprintf("%s%d", tenant, priority))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"a1", "a2", "b2", "a2", "b2", "a2", "b2", "a2", "a2", "a2", "a2", "a2"}, tenants,
		"priority first, then a and b in turns")
	require.Equal(t, urgent[0], order[0])
	var gotA, gotB []string
	for i, id := range order[1:] {
		if tenants[i+1] == "a2" {
			gotA = append(gotA, id)
		} else {
			gotB = append(gotB, id)
		}
	}
	require.Equal(t, aIDs, gotA, "a's own order")
	// b's jobs in slot order: the two a second old, then the fresh one.
	require.Equal(t, []string{bIDs[1], bIDs[2], bIDs[0]}, gotB, "b's own order")

	var still time.Time
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT scheduled_at FROM river_job WHERE args->>'execution_id' = $1`, future[0]).Scan(&still))
	require.True(t, still.Equal(later), "a job not yet due keeps its time")
	require.Zero(t, share(service.QueueDeliver), "stable: a second pass changes nothing")

	// Batches are told apart by their (one) tenant.
	batch := func(tenant string, at time.Time) int64 {
		args := service.DeliverBatchArgs{}
		for range 2 {
			args.Executions = append(args.Executions, service.ExecutionRef{TenantID: tenant, ExecutionID: service.NewID()})
		}
		res, err := h.client.Insert(ctx, args, &river.InsertOpts{Queue: service.QueueDeliverBulkBatch, ScheduledAt: at})
		require.NoError(t, err)
		return res.Job.ID
	}
	p1, p2, p3 := batch("p", now.Add(-3*time.Second)), batch("p", now.Add(-3*time.Second+time.Millisecond)),
		batch("p", now.Add(-3*time.Second+2*time.Millisecond))
	q1 := batch("q", now.Add(-time.Second))
	require.Positive(t, share(service.QueueDeliverBulkBatch))
	var batches []int64
	rows, err = h.pool.Query(ctx, `SELECT id FROM river_job WHERE state = 'available' AND queue = $1 AND scheduled_at <= now()
		ORDER BY priority, scheduled_at, id`, service.QueueDeliverBulkBatch)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		batches = append(batches, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{p1, q1, p2, p3}, batches)
}

// TestDeliverSlowEndpointSingleJob: a main-lane deliver job whose endpoint
// turned slow since it was queued cannot change lanes, so it does not
// wait for a slot there either (which would hold a worker of the lane's
// other tenants): it sends within its endpoint's share of the slots (one
// of a lane of 4) and otherwise snoozes, without using an attempt, until
// the endpoint's send in flight is over.
func TestDeliverSlowEndpointSingleJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{River: RiverConfig{DeliverWorkers: 4, JobTimeout: 4 * time.Second}, NoStart: true})
	lanes := &service.Lanes{}
	h.deps.Lanes = lanes
	h.start(h.newClient())
	hang := newScript(t).holdRequests()
	ep := h.endpoint(hang.srv.URL, nil)
	lanes.Observe(ep.ID, 2*time.Second)
	task := h.task(ep.ID, nil)

	first := h.fire(task, fireOpts{})
	require.Equal(t, first, hang.next(t).Header.Get("Idempotency-Key"))
	second := h.fire(task, fireOpts{})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var snoozes int
		assert.NoError(c, h.pool.QueryRow(t.Context(), `SELECT coalesce((metadata->>'snoozes')::int, 0) FROM river_job
			WHERE args->>'execution_id' = $1`, second).Scan(&snoozes))
		assert.GreaterOrEqual(c, snoozes, 2)
	}, 20*time.Second, 10*time.Millisecond, "the second snoozes while the first holds the endpoint's share")
	require.Len(t, hang.hitsSoFar(), 1, "the second was not sent meanwhile")
	require.Zero(t, h.execution(second).Attempts)

	hang.releaseAll()
	h.waitState(first, service.ExecSucceeded)
	require.Equal(t, 1, h.waitState(second, service.ExecSucceeded).Attempts)
}
