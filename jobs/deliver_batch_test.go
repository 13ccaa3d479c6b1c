package jobs

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
)

// TestDeliverBatch: one batch job makes the first attempt of each of its
// executions with fewer send slots than executions; what needs more — a
// retry, an overlap "queue" wait — continues in a deliver job of its own
// with leases above the batch's, and the decisions of a single delivery
// (a paused task) hold in a batch too.
func TestDeliverBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{River: RiverConfig{DeliverWorkers: 2}})
	ok := newScript(t, response{Status: http.StatusOK})
	flaky := newScript(t, response{Status: http.StatusServiceUnavailable}, response{Status: http.StatusOK})
	epOK, epFlaky := h.endpoint(ok.srv.URL, nil), h.endpoint(flaky.srv.URL, nil)

	plain := []service.Task{h.task(epOK.ID, nil), h.task(epOK.ID, nil), h.task(epOK.ID, nil), h.task(epOK.ID, nil)}
	retried := h.task(epFlaky.ID, nil)
	paused := h.task(epOK.ID, nil)
	_, err := h.tasks.Pause(t.Context(), h.tenant, paused.ID)
	require.NoError(t, err)
	queued := h.task(epOK.ID, func(in *service.TaskInput) { in.OverlapPolicy = service.OverlapQueue })
	// The queued task's previous execution is still running (no job).
	earlier := service.NewID()
	_, err = h.pool.Exec(t.Context(), `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, attempts, lease_attempt)
		VALUES ($1, $2, $3, now() - interval '1 minute', 'schedule', 'running', 1, 1)`, h.tenant, earlier, queued.ID)
	require.NoError(t, err)
	dbtest.SyncUnfinished(t, h.pool)

	slot := time.Now().Add(-100 * time.Millisecond).UTC().Truncate(time.Millisecond)
	ids, batchJob := h.fireBatch(append(plain, retried, paused, queued), slot)

	for _, id := range ids[:4] {
		e := h.waitState(id, service.ExecSucceeded)
		require.Equal(t, 1, e.Attempts)
		require.Equal(t, []string{"fired", "attempt_started", "attempt_succeeded", "succeeded"}, eventTypes(h.events(id)))
		states, _ := h.deliverJobs(id)
		require.Empty(t, states, "a first attempt that succeeds needs no job of its own")
	}
	got := map[string]bool{}
	for range 4 {
		hit := ok.next(t)
		require.Equal(t, "1", hit.Header.Get("X-Ax-Attempt"))
		got[hit.Header.Get("Idempotency-Key")] = true
	}
	require.Len(t, got, 4, "each execution of the batch was sent once")

	// The retry: attempt 2 in a deliver job whose leases start above the
	// batch's, with the same idempotency key.
	e := h.waitState(ids[4], service.ExecSucceeded)
	require.Equal(t, 2, e.Attempts)
	require.Equal(t, 2, e.LeaseAttempt)
	first, second := flaky.next(t), flaky.next(t)
	require.Equal(t, ids[4], first.Header.Get("Idempotency-Key"))
	require.Equal(t, ids[4], second.Header.Get("Idempotency-Key"))
	require.Equal(t, []string{"1", "2"}, []string{first.Header.Get("X-Ax-Attempt"), second.Header.Get("X-Ax-Attempt")})
	require.Equal(t, []string{
		"fired", "attempt_started", "attempt_failed", "retry_scheduled", "attempt_started",
		"attempt_succeeded", "succeeded",
	}, eventTypes(h.events(ids[4])))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		states, bases, err := h.loadDeliverJobs(ids[4])
		assert.NoError(c, err)
		assert.Equal(c, []string{"completed"}, states)
		assert.Equal(c, []int{1}, bases)
	}, 10*time.Second, 10*time.Millisecond, "one job of its own, leases above the batch's 1")

	// The paused task's execution is cancelled without a send.
	e = h.waitState(ids[5], service.ExecCancelled)
	require.Equal(t, 0, e.Attempts)

	// The queued execution waits in a job of its own, and is sent once
	// the previous execution has finished.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		states, _, err := h.loadDeliverJobs(ids[6])
		assert.NoError(c, err)
		assert.Len(c, states, 1)
	}, 10*time.Second, 10*time.Millisecond)
	h.waitJobState(batchJob, "completed")
	require.Equal(t, service.ExecPending, h.execution(ids[6]).State)
	_, err = h.pool.Exec(t.Context(), `UPDATE executions SET state = 'succeeded', finished_at = now()
		WHERE tenant_id = $1 AND id = $2`, h.tenant, earlier)
	require.NoError(t, err)
	dbtest.SyncUnfinished(t, h.pool)
	h.waitState(ids[6], service.ExecSucceeded)
	require.Equal(t, ids[6], ok.next(t).Header.Get("Idempotency-Key"))
	ok.quiet(t, 200*time.Millisecond)
}

// TestDeliverBatchRerun: a batch job that runs again (River rescued it
// after a crash) sends nothing itself; every execution continues in a
// deliver job of its own above the batch's leases: the one the crash cut
// mid-send is resumed with the same idempotency key as attempt 2, the one
// never begun is sent as attempt 1, the finished one is left alone, and
// one whose task allows a single attempt is failed without a second send.
func TestDeliverBatchRerun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{NoStart: true})
	recv := newScript(t)
	ep := h.endpoint(recv.srv.URL, nil)
	tasks := []service.Task{
		h.task(ep.ID, nil), h.task(ep.ID, nil), h.task(ep.ID, nil),
		h.task(ep.ID, func(in *service.TaskInput) { in.Retry.MaxAttempts = 1 }),
	}
	slot := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	ids, batchJob := h.fireBatch(tasks, slot)
	ctx := context.Background()
	// The first run: sent ids[0] and ids[3] and crashed; finished ids[2].
	_, err := h.pool.Exec(ctx, `UPDATE executions SET state = 'running', attempts = 1, lease_attempt = 1,
			started_at = now(), first_started_at = now(), implicit_events = implicit_events | 2
		WHERE tenant_id = $1 AND id = ANY($2::uuid[])`, h.tenant, []string{ids[0], ids[3]})
	require.NoError(t, err)
	_, err = h.pool.Exec(ctx, `UPDATE executions SET state = 'succeeded', attempts = 1, lease_attempt = 1,
			started_at = now(), first_started_at = now(), finished_at = now(), last_status_code = 200,
			implicit_events = implicit_events | 6
		WHERE tenant_id = $1 AND id = $2`, h.tenant, ids[2])
	require.NoError(t, err)
	dbtest.SyncUnfinished(t, h.pool)
	_, err = h.pool.Exec(ctx, `UPDATE river_job SET attempt = 1, attempted_at = now() WHERE id = $1`, batchJob)
	require.NoError(t, err)
	h.start(h.client)

	e := h.waitState(ids[0], service.ExecSucceeded)
	require.Equal(t, 2, e.Attempts)
	e = h.waitState(ids[1], service.ExecSucceeded)
	require.Equal(t, 1, e.Attempts)
	e = h.waitState(ids[3], service.ExecFailed)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, service.ErrorClassInterrupted, *e.LastErrorClass)
	h.waitJobState(batchJob, "completed")

	sent := map[string]string{}
	for range 2 {
		hit := recv.next(t)
		sent[hit.Header.Get("Idempotency-Key")] = hit.Header.Get("X-Ax-Attempt")
	}
	require.Equal(t, map[string]string{ids[0]: "2", ids[1]: "1"}, sent)
	recv.quiet(t, 300*time.Millisecond)
	for _, id := range []string{ids[0], ids[1], ids[3]} {
		states, bases := h.deliverJobs(id)
		require.Len(t, states, 1, "execution %s", id)
		require.Equal(t, 2, bases[0], "leases above the batch's second run")
	}
	require.Equal(t, "succeeded", h.execution(ids[2]).State)
	require.Contains(t, eventTypes(h.events(ids[0])), "rescued")
}

// TestDeliverBatchCancelWhileRunning: a cancel requested while a batched
// execution is in flight cuts its attempt short (the batch job carries
// others, so River's job cancel cannot be used); the other execution of
// the batch is untouched.
func TestDeliverBatchCancelWhileRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	hang := newScript(t, response{Status: -1})
	ok := newScript(t)
	tasks := []service.Task{
		h.task(h.endpoint(hang.srv.URL, func(in *service.EndpointInput) { in.Timeout = 30 * time.Second }).ID, nil),
		h.task(h.endpoint(ok.srv.URL, nil).ID, nil),
	}
	ids, batchJob := h.fireBatch(tasks, time.Now().UTC())
	hang.next(t)
	h.waitState(ids[1], service.ExecSucceeded)
	_, err := h.pool.Exec(t.Context(), `UPDATE executions SET cancel_requested = true WHERE tenant_id = $1 AND id = $2`,
		h.tenant, ids[0])
	require.NoError(t, err)
	e := h.waitState(ids[0], service.ExecCancelled)
	require.Equal(t, ErrorClassCanceled, *e.LastErrorClass)
	require.Equal(t, []string{"fired", "attempt_started", "attempt_failed", "cancelled"}, eventTypes(h.events(ids[0])))
	h.waitJobState(batchJob, "completed")
	states, _ := h.deliverJobs(ids[0])
	require.Empty(t, states)
}

// TestDeliverBatchLeavesOwnedExecutions: an execution of a batch that
// another job owns (an API retry after a cancel while it waited in the
// batch) is that job's alone: the batch does not start it, so it is sent
// once.
func TestDeliverBatchLeavesOwnedExecutions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{NoStart: true})
	recv := newScript(t)
	ep := h.endpoint(recv.srv.URL, nil)
	ids, batchJob := h.fireBatch([]service.Task{h.task(ep.ID, nil), h.task(ep.ID, nil)}, time.Now().UTC())
	res, err := h.client.Insert(t.Context(), service.DeliverArgs{TenantID: h.tenant, ExecutionID: ids[0]},
		&river.InsertOpts{Queue: service.QueueDeliver, UniqueOpts: river.UniqueOpts{ByArgs: true}})
	require.NoError(t, err)
	_, err = h.pool.Exec(t.Context(), `UPDATE executions SET river_job_id = $3 WHERE tenant_id = $1 AND id = $2`,
		h.tenant, ids[0], res.Job.ID)
	require.NoError(t, err)
	h.start(h.client)

	h.waitState(ids[0], service.ExecSucceeded)
	h.waitState(ids[1], service.ExecSucceeded)
	h.waitJobState(batchJob, "completed")
	h.waitJobState(res.Job.ID, "completed")
	got := map[string]int{}
	for range 2 {
		got[recv.next(t).Header.Get("Idempotency-Key")]++
	}
	recv.quiet(t, 300*time.Millisecond)
	require.Equal(t, map[string]int{ids[0]: 1, ids[1]: 1}, got)
}

// TestDeliverBatchSlotWait: with every send slot busy past the slot wait,
// a batch's member continues in a deliver job of its own (and that job
// snoozes, using no attempt, while the slot stays busy); both are sent
// once, as attempt 1.
func TestDeliverBatchSlotWait(t *testing.T) {
	t.Parallel()
	// JobTimeout 2 s: a slot wait of 500 ms.
	// Two send slots and two River workers: the batch holds both slots
	// through one worker, and the handed-off job runs on the other.
	h := newHarness(t, harnessOpts{River: RiverConfig{DeliverWorkers: 2, JobTimeout: 2 * time.Second}})
	recv := newScript(t).holdRequests()
	ep := h.endpoint(recv.srv.URL, nil)
	ids, batchJob := h.fireBatch([]service.Task{h.task(ep.ID, nil), h.task(ep.ID, nil), h.task(ep.ID, nil)}, time.Now().UTC())
	sent := map[string]bool{recv.next(t).Header.Get("Idempotency-Key"): true, recv.next(t).Header.Get("Idempotency-Key"): true}
	var waiting string
	for _, id := range ids {
		if !sent[id] {
			waiting = id
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		states, _, err := h.loadDeliverJobs(waiting)
		assert.NoError(c, err)
		assert.Len(c, states, 1)
	}, 5*time.Second, 10*time.Millisecond, "the member without a slot is handed off")
	_, bases := h.deliverJobs(waiting)
	require.Equal(t, []int{1}, bases)
	time.Sleep(700 * time.Millisecond) // the handed-off job finds the slot busy and snoozes
	recv.releaseAll()
	for _, id := range ids {
		e := h.waitState(id, service.ExecSucceeded)
		require.Equal(t, 1, e.Attempts)
	}
	second := recv.next(t)
	require.Equal(t, waiting, second.Header.Get("Idempotency-Key"))
	require.Equal(t, "1", second.Header.Get("X-Ax-Attempt"))
	h.waitJobState(batchJob, "completed")
	recv.quiet(t, 300*time.Millisecond)
	var snoozes int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT coalesce((metadata->>'snoozes')::int, 0) FROM river_job
		WHERE kind = 'deliver' AND args->>'execution_id' = $1`, waiting).Scan(&snoozes))
	require.Positive(t, snoozes, "the handed-off job snoozed while the only slot was busy")
}

// TestDeliverBatchSlotWaitHandsOffTogether: the members of a batch that
// find no send slot within the slot wait are handed off in a few
// transactions, not in one each (a backlog must not make catching up
// dearer), and each is still sent once, as attempt 1.
func TestDeliverBatchSlotWaitHandsOffTogether(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{River: RiverConfig{DeliverWorkers: 2, JobTimeout: 2 * time.Second}})
	recv := newScript(t).holdRequests()
	ep := h.endpoint(recv.srv.URL, nil)
	tasks := make([]service.Task, 12)
	for i := range tasks {
		tasks[i] = h.task(ep.ID, nil)
	}
	ids, batchJob := h.fireBatch(tasks, time.Now().UTC())
	sent := map[string]bool{recv.next(t).Header.Get("Idempotency-Key"): true, recv.next(t).Header.Get("Idempotency-Key"): true}
	var waiting []string
	for _, id := range ids {
		if !sent[id] {
			waiting = append(waiting, id)
		}
	}
	require.Len(t, waiting, 10)
	require.Eventually(t, func() bool {
		var n int
		err := h.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job
			WHERE kind = 'deliver' AND args->>'execution_id' = ANY($1)`, waiting).Scan(&n)
		return err == nil && n == len(waiting)
	}, 10*time.Second, 10*time.Millisecond, "every member without a slot is handed off")
	var txs int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(DISTINCT xmin::text) FROM river_job
		WHERE kind = 'deliver' AND args->>'execution_id' = ANY($1)`, waiting).Scan(&txs))
	t.Logf("10 members handed off in %d transaction(s)", txs)
	require.LessOrEqual(t, txs, len(waiting)/2, "members that time out together are handed off together")
	recv.releaseAll()
	for _, id := range ids {
		e := h.waitState(id, service.ExecSucceeded)
		require.Equal(t, 1, e.Attempts)
	}
	h.waitJobState(batchJob, "completed")
}

// TestDeliverBatchSlowEndpointToBulkLane: a main-lane batch's member to
// an endpoint that is slow when it comes due is not sent by the batch: it
// continues in the bulk lane's queue, where it is delivered; a member to
// an endpoint that turns slow during its attempt is retried in the bulk
// lane; a member to a fast endpoint is sent by the batch.
func TestDeliverBatchSlowEndpointToBulkLane(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{NoStart: true})
	lanes := &service.Lanes{}
	h.deps.Lanes = lanes
	h.start(h.newClient())

	slow, fast := newScript(t), newScript(t)
	turning := newScript(t, response{Status: http.StatusServiceUnavailable}, response{Status: http.StatusOK}).holdRequests()
	epSlow, epFast, epTurning := h.endpoint(slow.srv.URL, nil), h.endpoint(fast.srv.URL, nil), h.endpoint(turning.srv.URL, nil)
	lanes.Observe(epSlow.ID, 2*time.Second)
	retry := func(in *service.TaskInput) {
		in.Retry.InitialBackoff, in.Retry.MaxBackoff = 100*time.Millisecond, 100*time.Millisecond
	}
	tasks := []service.Task{h.task(epSlow.ID, nil), h.task(epFast.ID, nil), h.task(epTurning.ID, retry)}
	ids, _ := h.fireBatch(tasks, time.Now().Add(-50*time.Millisecond))

	// While the turning endpoint holds its first attempt, it turns slow
	// (as when its attempts in flight pass the threshold).
	first := turning.next(t)
	require.Equal(t, "1", first.Header.Get("X-Ax-Attempt"))
	for range 3 {
		lanes.Observe(epTurning.ID, 2*time.Second)
	}
	turning.releaseAll()

	for _, id := range ids {
		h.waitState(id, service.ExecSucceeded)
	}
	queues := func(id string) []string {
		rows, err := h.pool.Query(t.Context(), `SELECT queue FROM river_job WHERE kind = 'deliver' AND args->>'execution_id' = $1
			ORDER BY id`, id)
		require.NoError(t, err)
		q, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return q
	}
	require.Equal(t, []string{service.QueueDeliverBulk}, queues(ids[0]), "slow: sent by a bulk-lane job")
	require.Equal(t, "1", slow.next(t).Header.Get("X-Ax-Attempt"))
	require.Empty(t, queues(ids[1]), "fast: sent by the batch")
	require.Equal(t, []string{service.QueueDeliverBulk}, queues(ids[2]), "turned slow: retried in the bulk lane")
	require.Equal(t, "2", turning.next(t).Header.Get("X-Ax-Attempt"))
}
