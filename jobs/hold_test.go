package jobs

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
)

// executionsAPI is the API's Executions over h's database.
func (h *harness) executionsAPI() *service.Executions {
	return service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{})
}

// parked waits until the job that carried execution id when it was held
// has run and ended, leaving it pending and held.
func (h *harness) parked(id string, job int64) {
	h.t.Helper()
	h.waitJobState(job, "completed")
	x, err := h.executionsAPI().Get(h.t.Context(), h.tenant, id)
	require.NoError(h.t, err)
	require.Equal(h.t, service.ExecPending, x.State)
	require.True(h.t, x.Held)
}

// waitDBPast waits until the database's clock is past t.
func (h *harness) waitDBPast(t time.Time) {
	h.t.Helper()
	require.EventuallyWithT(h.t, func(c *assert.CollectT) {
		var past bool
		assert.NoError(c, h.pool.QueryRow(h.t.Context(), `SELECT now() > $1`, t).Scan(&past))
		assert.True(c, past)
	}, 20*time.Second, 20*time.Millisecond)
}

// TestHoldBeforeTheSlot: an execution held before its slot is not sent
// when its job comes at the slot (the job ends, the execution stays
// pending and held, and the reconciler does not count it an orphan);
// released after its slot but within the misfire threshold, it is sent at
// once, on time, as attempt 1 with its own id.
func TestHoldBeforeTheSlot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{Deliveries: service.DeliveriesConfig{MisfireThreshold: time.Hour}})
	rcv := newScript(t, response{Status: http.StatusOK})
	task := h.task(h.endpoint(rcv.srv.URL, nil).ID, nil)
	slot := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	id := h.fire(task, fireOpts{ScheduledFor: slot})
	job := *h.execution(id).RiverJobID
	x := h.executionsAPI()
	_, err := x.Hold(t.Context(), h.tenant, id)
	require.NoError(t, err)

	h.parked(id, job)
	require.Empty(t, rcv.hitsSoFar(), "nothing sent at the slot")
	orphans, err := db.FindOrphanedExecutions(t.Context(), h.pool, 0, 100, 100)
	require.NoError(t, err)
	for _, o := range orphans {
		require.NotEqual(t, id, o.ID, "a held execution is no orphan: the reconciler leaves it alone")
	}

	_, err = x.Release(t.Context(), h.tenant, id)
	require.NoError(t, err)
	h.waitState(id, service.ExecSucceeded)
	got := rcv.next(t)
	require.Equal(t, id, got.Header.Get("Idempotency-Key"))
	require.Equal(t, "1", got.Header.Get("X-Ax-Attempt"))
	require.Equal(t, []string{"fired", "held", "released", "attempt_started", "attempt_succeeded", "succeeded"},
		eventTypes(h.events(id)))
	d, err := x.Get(t.Context(), h.tenant, id)
	require.NoError(t, err)
	require.False(t, d.Late, "within the misfire threshold: on time")
	rcv.quiet(t, 200*time.Millisecond)
}

// TestReleaseBeforeTheSlot: held and released before its slot, an
// execution is sent once, at its slot (not before it, by the database's
// clock), by its new job; the job it had is cancelled.
func TestReleaseBeforeTheSlot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	rcv := newScript(t, response{Status: http.StatusOK})
	task := h.task(h.endpoint(rcv.srv.URL, nil).ID, nil)
	slot := time.Now().Add(3 * time.Second).UTC().Truncate(time.Millisecond)
	id := h.fire(task, fireOpts{ScheduledFor: slot})
	job := *h.execution(id).RiverJobID
	x := h.executionsAPI()
	_, err := x.Hold(t.Context(), h.tenant, id)
	require.NoError(t, err)
	_, err = x.Release(t.Context(), h.tenant, id)
	require.NoError(t, err)
	released := *h.execution(id).RiverJobID
	require.NotEqual(t, job, released, "a new job carries it")
	state, _ := h.jobState(job)
	require.Equal(t, "cancelled", state, "the job it had")

	h.waitState(id, service.ExecSucceeded)
	require.Equal(t, id, rcv.next(t).Header.Get("Idempotency-Key"))
	var onTime bool
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT first_started_at >= scheduled_for FROM executions
		WHERE tenant_id = $1 AND id = $2`, h.tenant, id).Scan(&onTime))
	require.True(t, onTime, "started at its slot, not before")
	rcv.quiet(t, 200*time.Millisecond)
	h.waitJobState(released, "completed")
}

// TestReleasePastTheMisfireThreshold: released more than the misfire
// threshold after its slot, a held first fire is a misfire that its
// task's misfire_policy decides, as for any late fire: skip misses it
// (counted, nothing sent); fire_all sends it, marked late.
func TestReleasePastTheMisfireThreshold(t *testing.T) {
	t.Parallel()
	const threshold = 100 * time.Millisecond
	h := newHarness(t, harnessOpts{Deliveries: service.DeliveriesConfig{MisfireThreshold: threshold}})
	rcv := newScript(t, response{Status: http.StatusOK})
	ep := h.endpoint(rcv.srv.URL, nil)
	skip := h.task(ep.ID, func(in *service.TaskInput) { in.MisfirePolicy = service.MisfireSkip })
	fireAll := h.task(ep.ID, func(in *service.TaskInput) { in.MisfirePolicy = service.MisfireFireAll })
	slot := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	x := h.executionsAPI()
	var ids []string
	for _, task := range []service.Task{skip, fireAll} {
		id := h.fire(task, fireOpts{ScheduledFor: slot})
		_, err := x.Hold(t.Context(), h.tenant, id)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		h.parked(id, *h.execution(id).RiverJobID)
	}
	h.waitDBPast(slot.Add(threshold))
	for _, id := range ids {
		_, err := x.Release(t.Context(), h.tenant, id)
		require.NoError(t, err)
	}

	missed := h.waitState(ids[0], service.ExecSkipped)
	require.Zero(t, missed.Attempts)
	require.Contains(t, *missed.LastError, "misfire_policy skip")
	task, err := h.tasks.Get(t.Context(), h.tenant, skip.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, task.MissedCount, "a missed slot")

	h.waitState(ids[1], service.ExecSucceeded)
	require.Equal(t, ids[1], rcv.next(t).Header.Get("Idempotency-Key"))
	d, err := x.Get(t.Context(), h.tenant, ids[1])
	require.NoError(t, err)
	require.True(t, d.Late, "sent late")
	rcv.quiet(t, 200*time.Millisecond)
}

// TestHoldInABatch: a held member of a deliver_batch job is not started
// by the batch (the batched start leaves it; the row-by-row decision
// parks it) while the others are sent; released, it is sent by a job of
// its own.
func TestHoldInABatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{Deliveries: service.DeliveriesConfig{MisfireThreshold: time.Hour}})
	rcv := newScript(t, response{Status: http.StatusOK})
	ep := h.endpoint(rcv.srv.URL, nil)
	tasks := []service.Task{h.task(ep.ID, nil), h.task(ep.ID, nil), h.task(ep.ID, nil)}
	slot := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	ids, batchJob := h.fireBatch(tasks, slot)
	x := h.executionsAPI()
	_, err := x.Hold(t.Context(), h.tenant, ids[1])
	require.NoError(t, err)

	h.parked(ids[1], batchJob)
	for _, i := range []int{0, 2} {
		h.waitState(ids[i], service.ExecSucceeded)
	}
	got := map[string]bool{rcv.next(t).Header.Get("Idempotency-Key"): true, rcv.next(t).Header.Get("Idempotency-Key"): true}
	require.Equal(t, map[string]bool{ids[0]: true, ids[2]: true}, got)
	require.Positive(t, h.deliveries.BatchStats().Batched, "the others took the batched start")
	rcv.quiet(t, 200*time.Millisecond)

	_, err = x.Release(t.Context(), h.tenant, ids[1])
	require.NoError(t, err)
	h.waitState(ids[1], service.ExecSucceeded)
	require.Equal(t, ids[1], rcv.next(t).Header.Get("Idempotency-Key"))
	rcv.quiet(t, 200*time.Millisecond)
}

// TestHeldHoldsNoLaterFireBack: an overlap_policy skip task's held
// pending execution does not make its later fires skip (it has not
// started, and may never); a pending one that is not held does.
func TestHeldHoldsNoLaterFireBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{Deliveries: service.DeliveriesConfig{MisfireThreshold: time.Hour}})
	rcv := newScript(t, response{Status: http.StatusOK})
	task := h.task(h.endpoint(rcv.srv.URL, nil).ID, func(in *service.TaskInput) { in.OverlapPolicy = service.OverlapSkip })
	earlier := service.NewID()
	_, err := h.pool.Exec(t.Context(), `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, held_at)
		VALUES ($1, $2, $3, now() - interval '1 minute', 'schedule', 'pending', now())`, h.tenant, earlier, task.ID)
	require.NoError(t, err)
	dbtest.SyncUnfinished(t, h.pool)

	later := h.fire(task, fireOpts{})
	h.waitState(later, service.ExecSucceeded)
	require.Equal(t, later, rcv.next(t).Header.Get("Idempotency-Key"))

	_, err = h.pool.Exec(t.Context(), `UPDATE executions SET held_at = NULL WHERE tenant_id = $1 AND id = $2`, h.tenant, earlier)
	require.NoError(t, err)
	skipped := h.fire(task, fireOpts{})
	e := h.waitState(skipped, service.ExecSkipped)
	require.Contains(t, *e.LastError, "overlap_policy skip")
	rcv.quiet(t, 200*time.Millisecond)
	// The earlier one, which no job carries here, ends.
	_, err = h.executionsAPI().Cancel(t.Context(), h.tenant, earlier)
	require.NoError(t, err)
}
