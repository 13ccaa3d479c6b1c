package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/dag"
	"github.com/axhq/ax/service/schedule"
)

// wfFixture drives workflows through the real delivery path (Begin and
// Finish as the deliver worker calls them), without River's workers.
type wfFixture struct {
	*fixture
	wf  *service.Workflows
	del *service.Deliveries
	ex  *service.Executions
}

func newWFFixture(t *testing.T) *wfFixture {
	t.Helper()
	f := newFixture(t)
	f.exec(t, `UPDATE endpoints SET enabled = true`)
	return &wfFixture{
		fixture: f, wf: service.NewWorkflows(f.pool, f.enq, service.WorkflowsConfig{}),
		del: service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{}),
		ex:  service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{}),
	}
}

func (f *wfFixture) node(key string, deps ...string) service.WorkflowNodeInput {
	return service.WorkflowNodeInput{Key: key, EndpointID: f.endpoint, DependsOn: deps}
}

func (f *wfFixture) create(t *testing.T, name string, nodes ...service.WorkflowNodeInput) service.Workflow {
	t.Helper()
	w, err := f.wf.Create(context.Background(), f.tenant, service.WorkflowInput{Name: name, Nodes: nodes, MaxActiveRuns: 10})
	require.NoError(t, err)
	return w
}

func (f *wfFixture) trigger(t *testing.T, w service.Workflow) service.WorkflowRun {
	t.Helper()
	r, err := f.wf.Trigger(context.Background(), f.tenant, w.ID, "")
	require.NoError(t, err)
	return r
}

// nodes returns the run's node states by key.
func (f *wfFixture) nodes(t *testing.T, runID string) (map[string]string, string) {
	t.Helper()
	r, err := f.wf.GetRun(context.Background(), f.tenant, runID)
	require.NoError(t, err)
	out := map[string]string{}
	for _, n := range r.Nodes {
		out[n.Key] = n.State
	}
	return out, r.State
}

// execsOf returns the executions of a run's node, by shard.
func (f *wfFixture) execsOf(t *testing.T, runID, key string) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT id::text FROM executions WHERE workflow_run_id = $1 AND node = $2
		ORDER BY shard`, runID, key)
	require.NoError(t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

// deliver makes one attempt of each execution of a node, as the worker
// does, with a 2xx (ok) or a permanent failure.
func (f *wfFixture) deliver(t *testing.T, runID, key string, ok bool) []service.Delivery {
	t.Helper()
	ctx := context.Background()
	var out []service.Delivery
	ids := f.execsOf(t, runID, key)
	require.NotEmpty(t, ids, "node %s has fired", key)
	for _, id := range ids {
		lease := f.count(t, `SELECT lease_attempt + 1 FROM executions WHERE id = $1`, id)
		d, err := f.del.Begin(ctx, f.tenant, id, lease)
		require.NoError(t, err)
		require.Equal(t, service.ActionSend, d.Action, "node %s: %s", key, d.Reason)
		out = append(out, d)
		o := service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: d.WorkflowRunID != ""}
		if !ok {
			o = service.Outcome{
				Kind: service.OutcomePermanent, StatusCode: 400, ErrorClass: "http_4xx", Error: "400",
				WorkflowRun: d.WorkflowRunID != "",
			}
		}
		_, err = f.del.Finish(ctx, f.tenant, id, d.Lease, o)
		require.NoError(t, err)
	}
	return out
}

// The run engine's states are package dag's words: a node's state is its
// executions' (or a run's) under the same name.
func TestWorkflowStatesAreDagStates(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{service.ExecPending, dag.Pending},
		{service.ExecRunning, dag.Running},
		{service.ExecRetrying, dag.Retrying},
		{service.ExecSucceeded, dag.Succeeded},
		{service.ExecFailed, dag.Failed},
		{service.ExecCancelled, dag.Cancelled},
		{service.RunRunning, dag.Running},
		{service.RunBlocked, dag.Blocked},
		{service.RunSucceeded, dag.Succeeded},
		{service.RunFailed, dag.Failed},
		{service.NodeWaiting, dag.Waiting},
		{service.NodeBlocked, dag.Blocked},
		{service.NodeSkipped, dag.Skipped},
		{service.NodeCancelled, dag.Cancelled},
	} {
		require.Equal(t, pair[0], pair[1])
	}
}

func TestWorkflowValidation(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	refuse := func(want string, nodes ...service.WorkflowNodeInput) {
		t.Helper()
		_, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{Name: "w", Nodes: nodes})
		var ve *service.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Contains(t, ve.Error(), want)
	}
	refuse("cycle: transform → report → transform",
		f.node("extract"), f.node("transform", "extract", "report"), f.node("report", "transform"))
	refuse(`unknown node "nope"`, f.node("a", "nope"))
	refuse(`node "a" depends on itself`, f.node("a", "a"))
	refuse("a workflow has at least one node")
	refuse(`key "a" is used by another node`, f.node("a"), f.node("a"))
	bad := f.node("a")
	bad.TriggerRule, bad.Shards = "sometimes", 1001
	refuse("must be all_success, all_done or one_success", bad)
	refuse("shards: must be 1 to 1000", bad)
	ghost := f.node("a")
	ghost.EndpointID = "0190a5a0-0000-7000-8000-000000000000"
	refuse("nodes[0].endpoint_id: no such endpoint", ghost)
	many := make([]service.WorkflowNodeInput, 201)
	for i := range many {
		many[i] = f.node(fmt.Sprintf("n%d", i))
	}
	refuse("at most 200 nodes", many...)

	// Every problem at once, in the document's order: each node's key,
	// delivery fields and rule, then each node's dependencies.
	odd := f.node("Bad", "x")
	odd.TriggerRule, odd.Shards = "sometimes", 2000
	_, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{Name: "w", Nodes: []service.WorkflowNodeInput{odd, f.node("b", "b", "Bad", "Bad")}})
	var ve *service.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []service.FieldError{
		{Field: "nodes[0].key", Message: "must match ^[a-z0-9][a-z0-9._-]{0,63}$"},
		{Field: "nodes[0].shards", Message: "must be 1 to 1000"},
		{Field: "nodes[0].trigger_rule", Message: "must be all_success, all_done or one_success"},
		{Field: "nodes[0].depends_on", Message: `unknown node "x"`},
		{Field: "nodes[1].depends_on", Message: `node "b" depends on itself`},
		{Field: "nodes[1].depends_on", Message: `"Bad" is listed twice`},
	}, ve.Fields)

	w := f.create(t, "ok", f.node("a"))
	_, err = f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error {
		in.Nodes = append(in.Nodes, f.node("b", "c"), f.node("c", "b"))
		return nil
	})
	require.ErrorContains(t, err, "cycle: ")
	got, err := f.wf.Get(ctx, f.tenant, w.ID)
	require.NoError(t, err)
	require.Equal(t, 1, got.Version, "a refused patch changes nothing")

	// The node tasks stay out of the task API.
	tasks, _, err := f.tasks.List(ctx, f.tenant, service.TaskFilter{}, service.Page{Limit: 50})
	require.NoError(t, err)
	require.Empty(t, tasks)
}

// TestWorkflowDiamond: extract → transform + audit → report, each node
// only after its upstreams succeeded, with the workflow's headers.
func TestWorkflowDiamond(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	w := f.create(t, "billing.daily", f.node("extract"), f.node("transform", "extract"), f.node("audit", "extract"),
		f.node("report", "transform", "audit"))
	run := f.trigger(t, w)
	require.Equal(t, service.RunRunning, run.State)
	nodes, _ := f.nodes(t, run.ID)
	require.Equal(t, map[string]string{"extract": "pending", "transform": "waiting", "audit": "waiting", "report": "waiting"}, nodes)

	d := f.deliver(t, run.ID, "extract", true)[0]
	require.Equal(t, w.ID, d.WorkflowID)
	require.Equal(t, run.ID, d.WorkflowRunID)
	require.Equal(t, "extract", d.Node)
	require.Equal(t, service.TriggerManual, d.Trigger)
	nodes, _ = f.nodes(t, run.ID)
	require.Equal(t, "succeeded", nodes["extract"])
	require.Equal(t, "pending", nodes["transform"])
	require.Equal(t, "pending", nodes["audit"])
	require.Equal(t, "waiting", nodes["report"])

	require.Equal(t, service.TriggerDependency, f.deliver(t, run.ID, "transform", true)[0].Trigger)
	nodes, _ = f.nodes(t, run.ID)
	require.Equal(t, "waiting", nodes["report"], "report waits for audit too")
	f.deliver(t, run.ID, "audit", true)
	f.deliver(t, run.ID, "report", true)
	nodes, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunSucceeded, state)
	for k, s := range nodes {
		require.Equal(t, "succeeded", s, k)
	}
	require.Equal(t, 4, f.count(t, `SELECT count(*) FROM executions WHERE workflow_run_id = $1`, run.ID), "each node fired once")
}

// TestWorkflowTriggerRules: a fails and b succeeds; all_done and
// one_success downstream run, all_success is blocked until it is skipped.
func TestWorkflowTriggerRules(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	done, one, all := f.node("done", "a", "b"), f.node("one", "a", "b"), f.node("all", "a", "b")
	done.TriggerRule, one.TriggerRule = service.RuleAllDone, service.RuleOneSuccess
	a := f.node("a")
	a.Retry.MaxAttempts = 1
	w := f.create(t, "rules", a, f.node("b"), done, one, all)
	run := f.trigger(t, w)

	f.deliver(t, run.ID, "b", true)
	nodes, _ := f.nodes(t, run.ID)
	require.Equal(t, "pending", nodes["one"], "one_success fires on the first success")
	require.Equal(t, "waiting", nodes["done"])
	require.Equal(t, "waiting", nodes["all"])

	f.deliver(t, run.ID, "a", false)
	nodes, state := f.nodes(t, run.ID)
	require.Equal(t, "failed", nodes["a"])
	require.Equal(t, "pending", nodes["done"], "all_done fires whatever the outcome")
	require.Equal(t, "blocked", nodes["all"])
	require.Equal(t, service.RunBlocked, state)

	f.deliver(t, run.ID, "done", true)
	f.deliver(t, run.ID, "one", true)
	_, state = f.nodes(t, run.ID)
	require.Equal(t, service.RunBlocked, state, "blocked waits for a person")

	_, err := f.wf.SkipNode(ctx, f.tenant, run.ID, "all")
	require.NoError(t, err)
	nodes, state = f.nodes(t, run.ID)
	require.Equal(t, "skipped", nodes["all"])
	require.Equal(t, service.RunFailed, state, "ended with a failed node and none blocked")
	_, err = f.wf.SkipNode(ctx, f.tenant, run.ID, "all")
	require.ErrorIs(t, err, service.ErrConflict)
}

// TestWorkflowBlockedRetryUnblocks: a failed upstream blocks its
// downstream; retrying the upstream's execution unblocks it, and its
// success fires the downstream by itself.
func TestWorkflowBlockedRetryUnblocks(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	alert, err := service.NewEndpoints(f.pool).Create(ctx, f.tenant, service.EndpointInput{
		Name: "pager", URL: "https://example.com/pager",
		Enabled: true,
	})
	require.NoError(t, err)
	a := f.node("a")
	a.Retry.MaxAttempts = 1
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "blocky", AlertEndpointID: alert.ID,
		Nodes: []service.WorkflowNodeInput{a, f.node("b", "a"), f.node("c", "b")},
	})
	require.NoError(t, err)
	run := f.trigger(t, w)
	f.deliver(t, run.ID, "a", false)
	nodes, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunBlocked, state)
	require.Equal(t, "blocked", nodes["b"])
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'workflow_alert'
		AND args->>'run_id' = $1 AND args->>'type' = 'workflow_run.blocked'`, run.ID))

	_, err = f.ex.Retry(ctx, f.tenant, f.execsOf(t, run.ID, "a")[0])
	require.NoError(t, err)
	nodes, state = f.nodes(t, run.ID)
	require.Equal(t, service.RunRunning, state)
	require.Equal(t, "waiting", nodes["b"])
	require.Equal(t, "pending", nodes["a"])

	f.deliver(t, run.ID, "a", true)
	f.deliver(t, run.ID, "b", true)
	f.deliver(t, run.ID, "c", true)
	_, state = f.nodes(t, run.ID)
	require.Equal(t, service.RunSucceeded, state)
}

// TestWorkflowForceRunAndCancel: a blocked node forced to run; a run
// cancelled with a node in flight.
func TestWorkflowForceRunAndCancel(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	a := f.node("a")
	a.Retry.MaxAttempts = 1
	w := f.create(t, "force", a, f.node("b", "a"))
	run := f.trigger(t, w)
	f.deliver(t, run.ID, "a", false)
	_, err := f.wf.RunNode(ctx, f.tenant, run.ID, "b")
	require.NoError(t, err)
	nodes, state := f.nodes(t, run.ID)
	require.Equal(t, "pending", nodes["b"])
	require.Equal(t, service.RunRunning, state)
	_, err = f.wf.RunNode(ctx, f.tenant, run.ID, "b")
	require.ErrorIs(t, err, service.ErrConflict, "a fired node is retried through its execution")
	_, err = f.wf.RunNode(ctx, f.tenant, run.ID, "nope")
	require.ErrorIs(t, err, service.ErrNotFound)
	f.deliver(t, run.ID, "b", true)
	_, state = f.nodes(t, run.ID)
	require.Equal(t, service.RunFailed, state)

	run2 := f.trigger(t, w)
	got, err := f.wf.CancelRun(ctx, f.tenant, run2.ID)
	require.NoError(t, err)
	require.Equal(t, service.RunCancelled, got.State)
	nodes, _ = f.nodes(t, run2.ID)
	require.Equal(t, map[string]string{"a": "cancelled", "b": "cancelled"}, nodes)
	_, err = f.wf.CancelRun(ctx, f.tenant, run2.ID)
	require.ErrorIs(t, err, service.ErrConflict)
	_, err = f.wf.RunNode(ctx, f.tenant, run2.ID, "b")
	require.ErrorIs(t, err, service.ErrConflict)
}

// TestWorkflowMaxActiveRuns: runs beyond max_active_runs wait, in order,
// and start when a run ends.
func TestWorkflowMaxActiveRuns(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "one-at-a-time", MaxActiveRuns: 1,
		Nodes: []service.WorkflowNodeInput{f.node("a")},
	})
	require.NoError(t, err)
	r1, r2, r3 := f.trigger(t, w), f.trigger(t, w), f.trigger(t, w)
	require.Equal(t, service.RunRunning, r1.State)
	require.Equal(t, service.RunPending, r2.State)
	require.Equal(t, service.RunPending, r3.State)
	require.Empty(t, f.execsOf(t, r2.ID, "a"))

	f.deliver(t, r1.ID, "a", true)
	_, s2 := f.nodes(t, r2.ID)
	_, s3 := f.nodes(t, r3.ID)
	require.Equal(t, service.RunRunning, s2, "the oldest pending run starts when the active one ends")
	require.Equal(t, service.RunPending, s3)

	_, err = f.wf.CancelRun(ctx, f.tenant, r2.ID)
	require.NoError(t, err)
	_, s3 = f.nodes(t, r3.ID)
	require.Equal(t, service.RunRunning, s3)

	// Dedup: the same key returns the same run.
	d1, err := f.wf.Trigger(ctx, f.tenant, w.ID, "k")
	require.NoError(t, err)
	d2, err := f.wf.Trigger(ctx, f.tenant, w.ID, "k")
	require.NoError(t, err)
	require.Equal(t, d1.ID, d2.ID)
}

// TestWorkflowScheduleAndPause: the scheduler starts a run per slot, once
// however many passes; a paused workflow starts none; PATCH versions.
func TestWorkflowScheduleAndPause(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "every-second", MaxActiveRuns: 1000,
		Schedule: &schedule.Spec{Type: schedule.Interval, IntervalSeconds: 1},
		Nodes:    []service.WorkflowNodeInput{f.node("a"), f.node("b", "a")},
	})
	require.NoError(t, err)
	require.NotNil(t, w.NextRunAt)
	sched := f.scheduler(service.SchedulerConfig{})
	tick := func() {
		t.Helper()
		_, err := sched.Tick(ctx)
		require.NoError(t, err)
	}
	tick()
	tick()
	runs := f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID)
	require.Positive(t, runs, "the look-ahead covers the next slots")
	require.Zero(t, f.count(t, `SELECT count(*) FROM (SELECT scheduled_for FROM workflow_runs GROUP BY scheduled_for
		HAVING count(*) > 1) d`), "a slot starts one run")
	require.Equal(t, runs, f.count(t, `SELECT count(*) FROM executions WHERE workflow_id = $1 AND node = 'a'
		AND trigger = 'schedule'`, w.ID), "each run's root fired for its slot")
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions e JOIN workflow_runs r ON r.id = e.workflow_run_id
		WHERE e.scheduled_for <> r.scheduled_for`), "a node's execution carries its run's slot")

	// PATCH during a run: the runs in flight keep version 1.
	var inflight string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT id::text FROM workflow_runs WHERE workflow_id = $1 ORDER BY scheduled_for LIMIT 1`,
		w.ID).Scan(&inflight))
	w2, err := f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error {
		in.Nodes = append(in.Nodes, f.node("c", "b"))
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, w2.Version)
	f.deliver(t, inflight, "a", true)
	f.deliver(t, inflight, "b", true)
	nodes, state := f.nodes(t, inflight)
	require.Len(t, nodes, 2)
	require.Equal(t, service.RunSucceeded, state)

	_, err = f.wf.Pause(ctx, f.tenant, w.ID)
	require.NoError(t, err)
	before := f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID)
	time.Sleep(1500 * time.Millisecond)
	tick()
	require.Equal(t, before, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID), "paused: no run")
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1 AND scheduled_for > now()`, w.ID),
		"the runs made ahead of their slot were dropped at the pause")
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions e WHERE workflow_id = $1 AND NOT EXISTS
		(SELECT 1 FROM workflow_runs r WHERE r.id = e.workflow_run_id)`, w.ID), "with their executions")
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM workflow_runs WHERE id = $1`, inflight), "a run in flight stays")
	_, err = f.wf.Resume(ctx, f.tenant, w.ID)
	require.NoError(t, err)
	// The slots just after the resume may already have their runs (the
	// look-ahead made them before the pause), so pass until a new one
	// starts rather than expecting it from the first pass.
	require.Eventually(t, func() bool {
		n := 0
		if _, err = sched.Tick(ctx); err == nil {
			n, err = f.loadCount(`SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID)
		}
		return err != nil || n > before // an error ends the wait, for the check below
	}, 10*time.Second, 200*time.Millisecond, "resumed: runs start again")
	require.NoError(t, err)
	var version int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT version FROM workflow_runs WHERE workflow_id = $1
		ORDER BY scheduled_for DESC LIMIT 1`, w.ID).Scan(&version))
	require.Equal(t, 2, version, "runs started after the patch use the new version")
}

// TestWorkflowBackstopFiresOnce: an upstream's success recorded without
// its run's advance (written by hand: every path of ax advances the run in
// the transaction that records it) is found by the sweep, and the downstream fires exactly once
// however many sweeps and advances race (four replicas' worth).
func TestWorkflowBackstopFiresOnce(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	b := f.node("b", "a")
	b.Shards = 3
	w := f.create(t, "backstop", f.node("a"), b, f.node("c", "b"))
	var runs []string
	for range 8 {
		runs = append(runs, f.trigger(t, w).ID)
	}
	for _, r := range runs {
		id := f.execsOf(t, r, "a")[0]
		d, err := f.del.Begin(ctx, f.tenant, id, 1)
		require.NoError(t, err)
		ok, err := db.EndDelivery(ctx, f.delivery, db.DeliveryEnd{
			TenantID: f.tenant, ID: id,
			From: []string{service.ExecRunning}, Lease: &d.Lease, To: service.ExecSucceeded,
		})
		require.NoError(t, err)
		require.True(t, ok)
		nodes, _ := f.nodes(t, r)
		require.Equal(t, "succeeded", nodes["a"])
		require.Equal(t, "waiting", nodes["b"], "not advanced yet")
	}
	f.exec(t, `UPDATE workflow_runs SET advanced_at = now() - interval '1 minute'`)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				if _, err := f.wf.Sweep(ctx); err != nil {
					errs <- err
				}
				for _, r := range runs {
					if err := f.wf.AdvanceRun(ctx, f.tenant, r); err != nil && !errors.Is(err, service.ErrConflict) {
						errs <- err
					}
				}
				_ = i + j
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, r := range runs {
		require.Len(t, f.execsOf(t, r, "b"), 3, "each shard of b fired once")
		require.Empty(t, f.execsOf(t, r, "c"))
	}
	require.Zero(t, f.count(t, `SELECT count(*) FROM (SELECT workflow_run_id, node, shard FROM executions
		WHERE workflow_run_id IS NOT NULL GROUP BY 1, 2, 3 HAVING count(*) > 1) d`))
	require.Equal(t, 8*3, f.count(t, `SELECT count(*) FROM river_job j JOIN executions e
		ON e.id = (j.args->>'execution_id')::uuid WHERE e.node = 'b'`)+
		f.count(t, `SELECT count(*) FROM river_job j, regexp_split_to_table(j.args->>'executions', ' ') m
			JOIN executions e ON e.id = split_part(m, '.', 2)::uuid WHERE j.kind = 'deliver_batch' AND e.node = 'b'`),
		"one deliver job per shard")

	// A sharded node succeeds when every shard did.
	r := runs[0]
	ds := f.deliver(t, r, "b", true)
	require.Len(t, ds, 3)
	for i, d := range ds {
		require.Equal(t, i, d.Shard)
		require.Equal(t, 3, d.ShardCount)
	}
	nodes, _ := f.nodes(t, r)
	require.Equal(t, "pending", nodes["c"])
}

// TestTaskShards: a task with shards fires each slot as that many
// executions, one per shard, sharing the slot; four schedulers racing
// over it never fire a shard of a slot twice.
func TestTaskShards(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	_, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "bad", EndpointID: f.endpoint, Shards: 2,
		OverlapPolicy: service.OverlapSkip, Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 1},
	})
	require.ErrorContains(t, err, "overlap_policy allow")
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "fan-out", EndpointID: f.endpoint, Shards: 5,
		Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 1},
	})
	require.NoError(t, err)
	require.Equal(t, 5, task.Shards)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := f.scheduler(service.SchedulerConfig{})
			for range 5 {
				if _, err := s.Tick(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	slots := f.count(t, `SELECT count(DISTINCT scheduled_for) FROM executions WHERE task_id = $1`, task.ID)
	require.Positive(t, slots)
	require.Equal(t, slots*5, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task.ID))
	require.Zero(t, f.count(t, `SELECT count(*) FROM (SELECT scheduled_for FROM executions WHERE task_id = $1
		GROUP BY scheduled_for HAVING count(DISTINCT shard) <> 5 OR min(shard) <> 0 OR max(shard) <> 4
		OR min(shard_count) <> 5) b`, task.ID), "each slot has shards 0..4 of 5")
	var id string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT id::text FROM executions WHERE task_id = $1 AND shard = 3 LIMIT 1`,
		task.ID).Scan(&id))
	d, err := f.del.Begin(ctx, f.tenant, id, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action, d.Reason)
	require.Equal(t, 3, d.Shard)
	require.Equal(t, 5, d.ShardCount)

	// A manual trigger fires every shard too, once per dedup key.
	x1, err := f.ex.Trigger(ctx, f.tenant, task.ID, service.TriggerInput{DedupKey: "k"})
	require.NoError(t, err)
	x2, err := f.ex.Trigger(ctx, f.tenant, task.ID, service.TriggerInput{DedupKey: "k"})
	require.NoError(t, err)
	require.Equal(t, x1.ID, x2.ID)
	require.Equal(t, 0, x1.Shard)
	require.Equal(t, 5, f.count(t, `SELECT count(DISTINCT shard) FROM executions WHERE task_id = $1 AND trigger = 'manual'
		AND dedup_key = 'k' AND shard_count = 5`, task.ID))
	require.Equal(t, 5, f.count(t, `SELECT count(*) FROM river_job j JOIN executions e ON e.id = (j.args->>'execution_id')::uuid
		WHERE e.trigger = 'manual'`), "one deliver job per shard")
}

// BenchmarkWorkflowAdvance advances a running run whose nodes all wait on
// an upstream still in flight: the work of the advance that follows each
// node execution's end (its run's graph, nodes and executions read, the
// rules evaluated), without a write. The graph comes from the Workflows'
// cache of parsed versions; without it each advance would read and parse
// the version's document, every node's payload included (measured on a
// 2-core machine: 0.46 → 0.76 ms for 3 small nodes, 0.50 → 2.4 ms for 50
// nodes of 1 KiB, 0.69 → 78 ms for 200 nodes of 16 KiB).
func BenchmarkWorkflowAdvance(b *testing.B) {
	ctx := context.Background()
	pools := dbtest.Pools(b)
	enq, err := service.NewEnqueuer(pools.Main, nil)
	require.NoError(b, err)
	require.NoError(b, service.NewTenants(pools.Main).Ensure(ctx, "acme"))
	ep, err := service.NewEndpoints(pools.Main).Create(ctx, "acme", service.EndpointInput{Name: "e", URL: "https://example.com/hook"})
	require.NoError(b, err)
	wf := service.NewWorkflows(pools.Main, enq, service.WorkflowsConfig{})
	for _, bc := range []struct{ nodes, payload int }{{3, 2}, {50, 1 << 10}, {200, 16 << 10}} {
		b.Run(fmt.Sprintf("nodes=%d/payload=%d", bc.nodes, bc.payload), func(b *testing.B) {
			payload := []byte(`{"p":"` + strings.Repeat("x", max(bc.payload-8, 0)) + `"}`)
			nodes := []service.WorkflowNodeInput{{Key: "root", EndpointID: ep.ID, Payload: payload}}
			for i := 1; i < bc.nodes; i++ {
				nodes = append(nodes, service.WorkflowNodeInput{
					Key: fmt.Sprintf("n%d", i), EndpointID: ep.ID, Payload: payload,
					DependsOn: []string{"root"},
				})
			}
			w, err := wf.Create(ctx, "acme", service.WorkflowInput{Name: "w-" + strings.ToLower(service.NewID()), Nodes: nodes})
			require.NoError(b, err)
			run, err := wf.Trigger(ctx, "acme", w.ID, "")
			require.NoError(b, err)
			for b.Loop() {
				if err := wf.AdvanceRun(ctx, "acme", run.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
