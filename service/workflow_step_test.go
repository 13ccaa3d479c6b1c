package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestWorkflowStepsBatchAcrossRuns: node successes of several runs
// recorded in one step batch each advance their own run once, after all
// of them: a join whose two upstreams succeed in the batch fires once
// with one deliver job, the successor of another run fires, a run
// cancelled meanwhile fires nothing (its success is recorded, its run
// stays cancelled), and a stale attempt or an execution that does not
// exist in the batch is left to the row-by-row path, which reports the
// conflict.
func TestWorkflowStepsBatchAcrossRuns(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	join := f.create(t, "steps-join", f.node("a"), f.node("b", "a"), f.node("c", "a"), f.node("d", "b", "c"))
	chain := f.create(t, "steps-chain", f.node("a"), f.node("b", "a"))

	begin := func(runID, key string) service.StepRequest {
		t.Helper()
		x := f.execsOf(t, runID, key)
		require.Len(t, x, 1, "node %s has fired", key)
		d, err := f.del.Begin(ctx, f.tenant, x[0], 1)
		require.NoError(t, err)
		require.Equal(t, service.ActionSend, d.Action)
		return service.StepRequest{ExecutionID: x[0], Lease: d.Lease}
	}
	j := f.trigger(t, join)
	f.deliver(t, j.ID, "a", true)
	jb, jc := begin(j.ID, "b"), begin(j.ID, "c")
	c1, c2 := f.trigger(t, chain), f.trigger(t, chain)
	a1, a2 := begin(c1.ID, "a"), begin(c2.ID, "a")
	_, err := f.wf.CancelRun(ctx, f.tenant, c2.ID) // a2 is running: asked to stop
	require.NoError(t, err)
	stale := a1
	stale.Lease++ // an attempt that does not own the execution
	gone := service.StepRequest{ExecutionID: service.NewID(), Lease: 1}

	ok, err := f.del.FinishStepsTogether(ctx, f.tenant, []service.StepRequest{jb, a2, stale, gone, jc, a1})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, false, false, true, true}, ok)

	d := f.execsOf(t, j.ID, "d")
	require.Len(t, d, 1, "the join fired once")
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE args->>'execution_id' = $1`, d[0]),
		"one deliver job for the join")
	nodes, state := f.nodes(t, j.ID)
	require.Equal(t, "running", state)
	require.Equal(t, map[string]string{"a": "succeeded", "b": "succeeded", "c": "succeeded", "d": "pending"}, nodes)

	b := f.execsOf(t, c1.ID, "b")
	require.Len(t, b, 1, "the other run's successor fired")
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE args->>'execution_id' = $1`, b[0]),
		"with its deliver job, inserted with the join's")
	nodes, _ = f.nodes(t, c1.ID)
	require.Equal(t, "succeeded", nodes["a"])

	require.Empty(t, f.execsOf(t, c2.ID, "b"), "the cancelled run fires nothing")
	nodes, state = f.nodes(t, c2.ID)
	require.Equal(t, "cancelled", state)
	require.Equal(t, "succeeded", nodes["a"], "its attempt was sent: its success is recorded")
	require.Equal(t, "cancelled", nodes["b"])

	// The stale attempt, left by the batch, is refused by the row-by-row
	// path.
	_, err = f.del.Finish(ctx, f.tenant, stale.ExecutionID, stale.Lease,
		service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: true})
	require.ErrorIs(t, err, service.ErrConflict)
	_, err = f.del.Finish(ctx, f.tenant, gone.ExecutionID, gone.Lease,
		service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: true})
	require.ErrorIs(t, err, service.ErrConflict)
}

// TestWorkflowAdvanceMarksItsRun: the advance of a run that stays running
// marks it advanced (advanced_at), in the step batch and row by row, so
// that the backstop (db.StalledRuns), which reads only the runs not
// advanced for its age, leaves a run that advances alone.
func TestWorkflowAdvanceMarksItsRun(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	chain := f.create(t, "marks-chain", f.node("a"), f.node("b", "a"), f.node("c", "b"))
	r := f.trigger(t, chain)
	marked := func() bool {
		t.Helper()
		return f.count(t, `SELECT count(*) FROM workflow_runs WHERE id = $1 AND advanced_at > now() - interval '5 seconds'`,
			r.ID) == 1
	}
	require.True(t, marked(), "its admission marks it")

	f.exec(t, `UPDATE workflow_runs SET advanced_at = now() - interval '1 minute' WHERE id = $1`, r.ID)
	x := f.execsOf(t, r.ID, "a")
	require.Len(t, x, 1)
	d, err := f.del.Begin(ctx, f.tenant, x[0], 1)
	require.NoError(t, err)
	ok, err := f.del.FinishStepsTogether(ctx, f.tenant, []service.StepRequest{{ExecutionID: x[0], Lease: d.Lease}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, ok)
	require.Len(t, f.execsOf(t, r.ID, "b"), 1, "b fired")
	require.True(t, marked(), "the step batch's advance marks it")

	f.exec(t, `UPDATE workflow_runs SET advanced_at = now() - interval '1 minute' WHERE id = $1`, r.ID)
	x = f.execsOf(t, r.ID, "b")
	d, err = f.del.Begin(ctx, f.tenant, x[0], 1)
	require.NoError(t, err)
	_, err = f.del.Finish(ctx, f.tenant, x[0], d.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
	require.NoError(t, err)
	require.Len(t, f.execsOf(t, r.ID, "c"), 1, "c fired")
	require.True(t, marked(), "the row-by-row advance marks it")
}

// TestWorkflowStepsWriteOnceForAllRuns: the executions that a step
// batch's advances fire are inserted for all its runs together, one
// statement: the three runs' successors carry one command id (cmin), and
// each fired once with a deliver job of its own.
func TestWorkflowStepsWriteOnceForAllRuns(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	chain := f.create(t, "steps-once", f.node("a"), f.node("b", "a", "x"), f.node("x"))
	var reqs []service.StepRequest
	var runs []string
	for range 3 {
		r := f.trigger(t, chain)
		runs = append(runs, r.ID)
		for _, k := range []string{"a", "x"} {
			x := f.execsOf(t, r.ID, k)
			require.Len(t, x, 1)
			d, err := f.del.Begin(ctx, f.tenant, x[0], 1)
			require.NoError(t, err)
			reqs = append(reqs, service.StepRequest{ExecutionID: x[0], Lease: d.Lease})
		}
	}
	ok, err := f.del.FinishStepsTogether(ctx, f.tenant, reqs)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true, true, true}, ok)
	for _, r := range runs {
		b := f.execsOf(t, r, "b")
		require.Len(t, b, 1, "b fired once")
		require.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE args->>'execution_id' = $1`, b[0]),
			"with its own deliver job")
	}
	require.Equal(t, 1, f.count(t, `SELECT count(DISTINCT cmin::text) FROM executions
		WHERE workflow_run_id = ANY($1::uuid[]) AND node = 'b'`, runs), "one insert for the runs' successors")
}

// TestStepBatchWritesAsTheRow: a node success the step batch records in
// its one statement (db.EndNodeSuccesses) leaves exactly what the
// row-by-row path leaves — the execution's row, its timeline (the events
// in order, a no_output among them), its output, its place in
// unfinished_executions — and so does one it records one by one (a task
// whose failure streak it ends), for outcomes with and without a body, a
// status other than 200, and an accepted callback attempt that keeps the
// status its 2xx stored. Each pair is two runs of one workflow: one
// node's success row by row, the other's in a batch with the others.
func TestStepBatchWritesAsTheRow(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.create(t, "steps-as-row", f.node("a"), f.node("b", "a"))
	cases := []struct {
		name   string
		out    service.Outcome
		streak bool // the node's task has a failure streak to end
	}{
		{name: "output", out: service.Outcome{StatusCode: 200, Output: []byte(`{"rows": 3}`)}},
		{name: "no output", out: service.Outcome{StatusCode: 201, NoOutput: "the response is not JSON"}},
		{name: "plain", out: service.Outcome{StatusCode: 204, Latency: 17 * time.Millisecond}},
		{name: "callback", out: service.Outcome{Detached: true, Output: []byte(`"done"`)}},
		{name: "streak", out: service.Outcome{StatusCode: 200}, streak: true},
	}
	type side struct{ run, exec string }
	begin := func(c int) side {
		t.Helper()
		r := f.trigger(t, w)
		x := f.execsOf(t, r.ID, "a")
		require.Len(t, x, 1)
		d, err := f.del.Begin(ctx, f.tenant, x[0], 1)
		require.NoError(t, err)
		require.Equal(t, 1, d.Lease)
		f.exec(t, `UPDATE executions SET last_status_code = 202 WHERE id = $1`, x[0]) // what a callback's 2xx stores
		if cases[c].streak {
			f.exec(t, `UPDATE tasks SET consecutive_failures = 2 FROM executions e WHERE e.id = $1 AND tasks.id = e.task_id`, x[0])
		}
		return side{run: r.ID, exec: x[0]}
	}
	rows, batch := make([]side, len(cases)), make([]side, len(cases))
	var reqs []service.StepRequest
	for c := range cases {
		rows[c], batch[c] = begin(c), begin(c)
		out := cases[c].out
		out.Kind, out.WorkflowRun = service.OutcomeSucceeded, true
		_, err := f.del.FinishRow(ctx, f.tenant, rows[c].exec, 1, out)
		require.NoError(t, err, cases[c].name)
		reqs = append(reqs, service.StepRequest{ExecutionID: batch[c].exec, Lease: 1, Outcome: out})
	}
	ok, err := f.del.FinishStepsTogether(ctx, f.tenant, reqs)
	require.NoError(t, err)
	for c := range cases {
		require.True(t, ok[c], cases[c].name)
	}

	// what an execution's success left, without its ids and instants
	type event struct {
		Type                           string
		Attempt, StatusCode, LatencyMS *int
		ErrorClass, Message            string
		Data                           map[string]any
	}
	type left struct {
		State, LastError, LastErrorClass string
		Attempts                         int
		LastStatusCode                   *int
		Finished, Unfinished, NextFired  bool
		Output                           string
		Events                           []event
		TaskFailures                     int
	}
	leftBy := func(s side) left {
		t.Helper()
		d, err := f.ex.Get(ctx, f.tenant, s.exec)
		require.NoError(t, err)
		l := left{
			State: d.State, LastError: d.LastError, LastErrorClass: d.LastErrorClass, Attempts: d.Attempts,
			LastStatusCode: d.LastStatusCode, Finished: d.FinishedAt != nil, Output: string(d.Output),
			Unfinished: f.count(t, `SELECT count(*) FROM unfinished_executions WHERE id = $1`, s.exec) == 1,
			NextFired:  len(f.execsOf(t, s.run, "b")) == 1,
			TaskFailures: f.count(t, `SELECT t.consecutive_failures FROM tasks t JOIN executions e
				ON e.tenant_id = t.tenant_id AND e.task_id = t.id WHERE e.id = $1`, s.exec),
		}
		for _, ev := range d.Events {
			if ev.Type == "fired" {
				ev.Data = nil // the run's instant
			}
			l.Events = append(l.Events, event{ev.Type, ev.Attempt, ev.StatusCode, ev.LatencyMS, ev.ErrorClass, ev.Message, ev.Data})
		}
		return l
	}
	for c := range cases {
		want := leftBy(rows[c])
		require.Equal(t, "succeeded", want.State, cases[c].name)
		require.True(t, want.NextFired, cases[c].name)
		require.Equal(t, want, leftBy(batch[c]), cases[c].name)
	}
	require.Equal(t, 1, f.count(t, `SELECT count(DISTINCT cmin::text) FROM executions
		WHERE id = ANY($1::uuid[]) AND state = 'succeeded'`, []string{batch[0].exec, batch[1].exec, batch[2].exec}),
		"the plain successes in one statement")
}
