package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/retention"
)

// An old version's hidden tasks keep its endpoints in use while a run of
// it is unfinished, and no longer once its last run has ended.
func TestWorkflowOldVersionsRetired(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	eps := service.NewEndpoints(f.pool)
	ep2, err := eps.Create(ctx, f.tenant, service.EndpointInput{Name: "e2", URL: "https://example.com/other"})
	require.NoError(t, err)
	f.exec(t, `UPDATE endpoints SET enabled = true`)
	b := f.node("b", "a")
	b.EndpointID = ep2.ID
	w := f.create(t, "versions", f.node("a"), b)
	r1 := f.trigger(t, w)

	// v2 no longer uses e2, but r1 (v1) runs: e2 stays in use.
	nodesV2 := []service.WorkflowNodeInput{f.node("a"), f.node("b", "a")}
	w, err = f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error { in.Nodes = nodesV2; return nil })
	require.NoError(t, err)
	require.Equal(t, 2, w.Version)
	require.ErrorIs(t, eps.Delete(ctx, f.tenant, ep2.ID), service.ErrConflict)

	// r1 ends: v1 is retired in that transaction, e2 is free.
	f.deliver(t, r1.ID, "a", true)
	f.deliver(t, r1.ID, "b", true)
	_, state := f.nodes(t, r1.ID)
	require.Equal(t, service.RunSucceeded, state)
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM tasks WHERE workflow_id = $1 AND name LIKE '%/v1/%'`, w.ID))
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM tasks WHERE workflow_id = $1 AND name LIKE '%/v2/%'`, w.ID))
	require.NoError(t, eps.Delete(ctx, f.tenant, ep2.ID))
	nodes, state := f.nodes(t, r1.ID) // the timeline of a run of a retired version
	require.Equal(t, service.RunSucceeded, state)
	require.Equal(t, map[string]string{"a": service.ExecSucceeded, "b": service.ExecSucceeded}, nodes)

	// A version without runs is retired by the PATCH that replaces it.
	nodesV3 := []service.WorkflowNodeInput{f.node("a"), f.node("c", "a")}
	_, err = f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error { in.Nodes = nodesV3; return nil })
	require.NoError(t, err)
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM tasks WHERE workflow_id = $1 AND name LIKE '%/v2/%'`, w.ID))

	// The backstop: a run of v3 cancelled while its root is being
	// delivered ends with that execution still running; the sweep retires
	// v3 once it has finished.
	r3 := f.trigger(t, w)
	id := f.execsOf(t, r3.ID, "a")[0]
	d, err := f.del.Begin(ctx, f.tenant, id, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action)
	_, err = f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error { in.Nodes = nodesV2; return nil })
	require.NoError(t, err)
	_, err = f.wf.CancelRun(ctx, f.tenant, r3.ID)
	require.NoError(t, err)
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM tasks WHERE workflow_id = $1 AND name LIKE '%/v3/%'`, w.ID),
		"its execution still runs")
	_, err = f.del.Finish(ctx, f.tenant, id, d.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: true})
	require.NoError(t, err)
	_, err = f.wf.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM tasks WHERE workflow_id = $1 AND name LIKE '%/v3/%'`, w.ID))
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM tasks WHERE workflow_id = $1 AND name LIKE '%/v4/%'`, w.ID))
}

// Finished runs older than the retention go with their node executions
// and events; unfinished ones, and the latest scheduled run of a
// workflow (its slot stays taken), stay.
func TestRetentionRemovesWorkflowRuns(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	b := f.node("b", "a")
	w := f.create(t, "expiring", f.node("a"), b)

	done := f.trigger(t, w)
	f.deliver(t, done.ID, "a", true)
	f.deliver(t, done.ID, "b", true)
	blocked := f.trigger(t, w)
	f.deliver(t, blocked.ID, "a", false)
	_, state := f.nodes(t, blocked.ID)
	require.Equal(t, service.RunBlocked, state)

	slot1 := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	slot2 := slot1.Add(time.Hour)
	var sched []string
	for _, at := range []time.Time{slot1, slot2} {
		id := service.NewID()
		ok, err := db.InsertWorkflowRun(ctx, f.pool, db.WorkflowRun{
			TenantID: f.tenant, ID: id, WorkflowID: w.ID, Version: 1,
			ScheduledFor: at, Trigger: service.TriggerSchedule,
		})
		require.NoError(t, err)
		require.True(t, ok)
		sched = append(sched, id)
	}
	_, err := f.wf.Sweep(ctx) // starts them
	require.NoError(t, err)
	for _, id := range sched {
		f.deliver(t, id, "a", true)
		f.deliver(t, id, "b", true)
	}
	doneExecs := append(f.execsOf(t, done.ID, "a"), f.execsOf(t, done.ID, "b")...)
	f.exec(t, `INSERT INTO execution_events (tenant_id, execution_id, type) VALUES ($1, $2, 'attempt_failed')`, f.tenant, doneExecs[0])

	time.Sleep(20 * time.Millisecond)
	r := retention.New(f.pool, retention.Config{Executions: 10 * time.Millisecond, Batch: 2})
	var total retention.Result
	for range 100 {
		res, err := r.Sweep(ctx)
		require.NoError(t, err)
		total.Runs += res.Runs
		if !res.More && res.Runs == 0 && total.Runs > 0 {
			break
		}
	}
	require.EqualValues(t, 2, total.Runs, "the finished manual run and the older scheduled run")
	runs := func(id string) int { return f.count(t, `SELECT count(*) FROM workflow_runs WHERE id = $1`, id) }
	require.Zero(t, runs(done.ID))
	require.Zero(t, runs(sched[0]))
	require.Equal(t, 1, runs(sched[1]), "the latest scheduled run keeps its slot")
	require.Equal(t, 1, runs(blocked.ID), "a blocked run waits for a person")
	for _, id := range doneExecs {
		require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE id = $1`, id))
		require.Zero(t, f.count(t, `SELECT count(*) FROM execution_events WHERE execution_id = $1`, id))
	}
	require.Len(t, f.execsOf(t, blocked.ID, "a"), 1, "the blocked run's failed execution stays")
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_run_nodes WHERE run_id = $1`, done.ID))
	n, s := f.nodes(t, blocked.ID)
	require.Equal(t, service.RunBlocked, s)
	require.Equal(t, service.ExecFailed, n["a"])

	// The kept slot cannot start again.
	ok, err := db.InsertWorkflowRun(ctx, f.pool, db.WorkflowRun{
		TenantID: f.tenant, ID: service.NewID(), WorkflowID: w.ID,
		Version: 1, ScheduledFor: slot2, Trigger: service.TriggerSchedule,
	})
	require.NoError(t, err)
	require.False(t, ok)
}
