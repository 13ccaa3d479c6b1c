package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/schedule"
)

// waitNode is a wait_for node of event name (key: a template, "" for
// none), waiting an hour.
func waitNode(key, name, keyTpl string, deps ...string) service.WorkflowNodeInput {
	return service.WorkflowNodeInput{
		Key: key, DependsOn: deps, WaitFor: &service.WaitFor{Event: name, Key: keyTpl, Timeout: time.Hour},
	}
}

// runNode returns node key of a run.
func (f *wfFixture) runNode(t *testing.T, runID, key string) service.WorkflowRunNode {
	t.Helper()
	r, err := f.wf.GetRun(context.Background(), f.tenant, runID)
	require.NoError(t, err)
	for _, n := range r.Nodes {
		if n.Key == key {
			return n
		}
	}
	require.FailNow(t, "no such node", key)
	return service.WorkflowRunNode{}
}

// payloadOf returns the payload of a run's node's execution.
func (f *wfFixture) payloadOf(t *testing.T, runID, key string) string {
	t.Helper()
	ids := f.execsOf(t, runID, key)
	require.Len(t, ids, 1, "node %s fired", key)
	var p string
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT convert_from(payload, 'UTF8') FROM executions WHERE id = $1`,
		ids[0]).Scan(&p))
	return p
}

// TestWaitForEventAfterReady: a wait_for node whose rule is met awaits
// its event (shown running, with its event, rendered key and deadline);
// an event of another name or key leaves it waiting; the matching event
// ends it succeeded with the event's payload as its output and id, counts
// in matched.waits and lists it in the event, and the output reaches the
// next node's template, which fires.
func TestWaitForEventAfterReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	process := f.node("process", "files")
	process.Payload, process.PayloadTemplate = []byte(`{"file": "{{ .nodes.files.output.file }}", "date": "{{ .business_date }}"}`), true
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "daily", MaxActiveRuns: 10,
		Nodes: []service.WorkflowNodeInput{waitNode("files", "files.ready", "{{ .business_date }}"), process},
	})
	require.NoError(t, err)
	require.Equal(t, &service.WaitFor{Event: "files.ready", Key: "{{ .business_date }}", Timeout: time.Hour}, w.Nodes[0].WaitFor,
		"the workflow shows the node's wait")
	run := f.trigger(t, w)
	date := run.ScheduledFor.UTC().Format("2006-01-02")

	n := f.runNode(t, run.ID, "files")
	require.Equal(t, "running", n.State)
	require.NotNil(t, n.Wait)
	require.Equal(t, "files.ready", n.Wait.Event)
	require.Equal(t, date, n.Wait.Key, "the key rendered when the node became ready")
	require.WithinDuration(t, *n.StartedAt, n.Wait.Deadline.Add(-time.Hour), time.Millisecond)
	require.Empty(t, f.execsOf(t, run.ID, "files"), "a wait_for node sends nothing")

	for _, in := range []event.Input{
		{Name: "files.gone", Key: date},
		{Name: "files.ready", Key: "1999-01-01"},
	} {
		ev, err := events.Post(ctx, f.tenant, in)
		require.NoError(t, err)
		require.Zero(t, ev.Matched.Waits, "%+v", in)
	}
	require.Equal(t, "running", f.runNode(t, run.ID, "files").State)

	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "files.ready", Key: date, Payload: json.RawMessage(`{"file": "a.csv"}`)})
	require.NoError(t, err)
	require.Equal(t, event.Matched{Waits: 1}, ev.Matched)
	require.Equal(t, []event.Match{{Type: event.MatchWait, WorkflowID: w.ID, RunID: run.ID, Node: "files"}}, ev.Matches)
	stored, err := events.Get(ctx, f.tenant, ev.ID)
	require.NoError(t, err)
	require.Equal(t, ev.Matches, stored.Matches, "the event lists the nodes it resolved")

	n = f.runNode(t, run.ID, "files")
	require.Equal(t, "succeeded", n.State)
	require.Nil(t, n.Wait)
	require.Equal(t, ev.ID, n.EventID)
	require.JSONEq(t, `{"file": "a.csv"}`, string(n.Output))
	require.NotNil(t, n.FinishedAt)
	require.JSONEq(t, fmt.Sprintf(`{"file": "a.csv", "date": %q}`, date), f.payloadOf(t, run.ID, "process"))

	again, err := events.Post(ctx, f.tenant, event.Input{Name: "files.ready", Key: date})
	require.NoError(t, err)
	require.Zero(t, again.Matched.Waits, "a wait ends once")
	f.deliver(t, run.ID, "process", true)
	_, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunSucceeded, state)
}

// TestWaitForEventBeforeReady: an event that arrived before the node
// became ready does not satisfy it (nor does one before an upstream
// finished); one without a payload gives a null output; a node without a
// key takes any key.
func TestWaitForEventBeforeReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	w := f.create(t, "late", f.node("first"), waitNode("gate", "go", "", "first"))
	run := f.trigger(t, w)
	early, err := events.Post(ctx, f.tenant, event.Input{Name: "go"})
	require.NoError(t, err)
	require.Zero(t, early.Matched.Waits, "the node is not ready: its upstream runs")
	f.deliver(t, run.ID, "first", true)
	n := f.runNode(t, run.ID, "gate")
	require.Equal(t, "running", n.State, "the earlier event does not satisfy it")

	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "go", Key: "anything"})
	require.NoError(t, err)
	require.Equal(t, 1, ev.Matched.Waits)
	n = f.runNode(t, run.ID, "gate")
	require.Equal(t, "succeeded", n.State)
	require.Nil(t, n.Output, "an event without a payload: no output")
	_, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunSucceeded, state)
}

// TestWaitForTimeout: a node whose event does not arrive by its deadline
// fails (event_timeout) when the sweep passes; its all_success downstream
// is blocked (and the run), its all_done downstream fires; an event after
// that resolves nothing; skipping the blocked node ends the run.
func TestWaitForTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	cleanup := f.node("cleanup", "gate")
	cleanup.TriggerRule = service.RuleAllDone
	w := f.create(t, "timeout", waitNode("gate", "go", ""), f.node("next", "gate"), cleanup)
	run := f.trigger(t, w)
	other := f.trigger(t, w)
	_, err := f.wf.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, "running", f.runNode(t, run.ID, "gate").State, "not due yet")

	// Its deadline passes (moved, rather than waited for).
	f.exec(t, `UPDATE workflow_run_nodes SET wait_deadline = now() - interval '1 second' WHERE run_id = $1`, run.ID)
	_, err = f.wf.Sweep(ctx)
	require.NoError(t, err)
	n := f.runNode(t, run.ID, "gate")
	require.Equal(t, "failed", n.State)
	require.Equal(t, service.ErrorClassEventTimeout, n.ErrorClass)
	require.Contains(t, n.LastError, "no event go arrived by ")
	nodes, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunBlocked, state)
	require.Equal(t, "blocked", nodes["next"])
	require.Equal(t, "pending", nodes["cleanup"], "all_done downstream runs")
	require.Equal(t, "running", f.runNode(t, other.ID, "gate").State, "the other run's wait is not due")

	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "go"})
	require.NoError(t, err)
	require.Equal(t, event.Matched{Waits: 1}, ev.Matched, "only the other run's node still waits")
	require.Equal(t, other.ID, ev.Matches[0].RunID)
	require.Equal(t, "failed", f.runNode(t, run.ID, "gate").State)

	_, err = f.wf.RunNode(ctx, f.tenant, run.ID, "gate")
	require.ErrorIs(t, err, service.ErrConflict, "a failed wait is not run again")
	_, err = f.wf.SkipNode(ctx, f.tenant, run.ID, "next")
	require.NoError(t, err)
	f.deliver(t, run.ID, "cleanup", true)
	_, state = f.nodes(t, run.ID)
	require.Equal(t, service.RunFailed, state)
}

// TestWaitForKeyDoesNotRender: a key whose template fails when the node
// becomes ready fails the node (error_class template), which blocks its
// all_success downstream.
func TestWaitForKeyDoesNotRender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "badkey", MaxActiveRuns: 10,
		Nodes: []service.WorkflowNodeInput{f.node("up"), waitNode("gate", "go", "{{ .nodes.up.output.date }}", "up"), f.node("next", "gate")},
	})
	require.NoError(t, err)
	run := f.trigger(t, w)
	f.deliver(t, run.ID, "up", true) // its output is none: .date is missing
	n := f.runNode(t, run.ID, "gate")
	require.Equal(t, "failed", n.State)
	require.Equal(t, service.ErrorClassTemplate, n.ErrorClass)
	require.Contains(t, n.LastError, "wait_for.key")
	nodes, state := f.nodes(t, run.ID)
	require.Equal(t, "blocked", nodes["next"])
	require.Equal(t, service.RunBlocked, state)
}

// TestWaitForByHand: a person runs an awaiting node (with an output,
// which reaches its downstream) or skips one, or runs one whose rule is
// not met yet; a node not waiting (ended, or a plain node that fired) is
// a 409; an output on a plain node is a 422; a cancelled run's waits end.
func TestWaitForByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	next := f.node("next", "gate")
	next.Payload, next.PayloadTemplate = []byte(`{"rows": "{{ .nodes.gate.output.rows }}"}`), true
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "byhand", MaxActiveRuns: 10, Nodes: []service.WorkflowNodeInput{waitNode("gate", "go", ""), next},
	})
	require.NoError(t, err)

	run := f.trigger(t, w)
	got, err := f.wf.RunNodeWith(ctx, f.tenant, run.ID, "gate", json.RawMessage(`{"rows": 7}`))
	require.NoError(t, err)
	require.Equal(t, "succeeded", got.Nodes[0].State)
	require.JSONEq(t, `{"rows": 7}`, string(got.Nodes[0].Output))
	require.Empty(t, got.Nodes[0].EventID)
	require.JSONEq(t, `{"rows": 7}`, f.payloadOf(t, run.ID, "next"))
	_, err = f.wf.RunNode(ctx, f.tenant, run.ID, "gate")
	require.ErrorIs(t, err, service.ErrConflict, "an ended wait")
	_, err = f.wf.SkipNode(ctx, f.tenant, run.ID, "gate")
	require.ErrorIs(t, err, service.ErrConflict, "an ended wait")
	_, err = f.wf.RunNodeWith(ctx, f.tenant, run.ID, "next", json.RawMessage(`1`))
	requireFields(t, err, "output")
	_, err = f.wf.RunNodeWith(ctx, f.tenant, run.ID, "gate", json.RawMessage(`{`))
	requireFields(t, err, "output")

	plain := f.create(t, "plain", waitNode("gate", "go", ""), f.node("next", "gate"))
	skipped := f.trigger(t, plain)
	got, err = f.wf.SkipNode(ctx, f.tenant, skipped.ID, "gate")
	require.NoError(t, err)
	require.Equal(t, "skipped", got.Nodes[0].State)
	require.Equal(t, "pending", got.Nodes[1].State, "a skipped upstream satisfies all_success")
	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "go"})
	require.NoError(t, err)
	require.Zero(t, ev.Matched.Waits, "a skipped wait takes no event")

	// A wait_for node whose rule is not met yet can be run by hand too.
	w2 := f.create(t, "early", f.node("up"), waitNode("gate", "go", "", "up"))
	early := f.trigger(t, w2)
	got, err = f.wf.RunNode(ctx, f.tenant, early.ID, "gate")
	require.NoError(t, err)
	require.Equal(t, "succeeded", got.Nodes[1].State)
	require.Nil(t, got.Nodes[1].Output)

	cancelled := f.trigger(t, w)
	_, err = f.wf.CancelRun(ctx, f.tenant, cancelled.ID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", f.runNode(t, cancelled.ID, "gate").State)
	ev, err = events.Post(ctx, f.tenant, event.Input{Name: "go"})
	require.NoError(t, err)
	require.Zero(t, ev.Matched.Waits, "a cancelled run's wait takes no event")
	_, err = f.wf.RunNode(ctx, f.tenant, cancelled.ID, "gate")
	require.ErrorIs(t, err, service.ErrConflict)
}

// TestWaitForPausedWorkflow: pausing a workflow starts no new run, but its
// runs in flight go on: their waits still end with an event.
func TestWaitForPausedWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	w := f.create(t, "paused", waitNode("gate", "go", ""))
	run := f.trigger(t, w)
	_, err := f.wf.Pause(ctx, f.tenant, w.ID)
	require.NoError(t, err)
	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "go"})
	require.NoError(t, err)
	require.Equal(t, 1, ev.Matched.Waits)
	_, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunSucceeded, state)
}

// TestWaitForTenantIsolation: an event of one tenant never resolves
// another tenant's waits.
func TestWaitForTenantIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "other"))
	w := f.create(t, "iso", waitNode("gate", "go", ""))
	run := f.trigger(t, w)
	ev, err := events.Post(ctx, "other", event.Input{Name: "go"})
	require.NoError(t, err)
	require.Zero(t, ev.Matched.Waits)
	require.Equal(t, "running", f.runNode(t, run.ID, "gate").State)
	_, err = f.wf.RunNode(ctx, "other", run.ID, "gate")
	require.ErrorIs(t, err, service.ErrNotFound, "another tenant's run")
	ev, err = events.Post(ctx, f.tenant, event.Input{Name: "go"})
	require.NoError(t, err)
	require.Equal(t, 1, ev.Matched.Waits)
}

// TestWaitForValidation: a wait_for node's fields, each a 422 naming it.
func TestWaitForValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	create := func(nodes ...service.WorkflowNodeInput) error {
		_, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{Name: "v", Nodes: nodes})
		return err
	}
	with := func(change func(*service.WorkflowNodeInput)) service.WorkflowNodeInput {
		n := waitNode("gate", "go", "", "up")
		change(&n)
		return n
	}
	up := f.node("up")
	for _, c := range []struct {
		node  service.WorkflowNodeInput
		field string
	}{
		{with(func(n *service.WorkflowNodeInput) { n.EndpointID = f.endpoint }), "nodes[1].endpoint_id"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Event = "has space" }), "nodes[1].wait_for.event"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Event = "" }), "nodes[1].wait_for.event"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Timeout = 0 }), "nodes[1].wait_for.timeout_ms"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Timeout = 999 * time.Millisecond }), "nodes[1].wait_for.timeout_ms"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Timeout = 31 * 24 * time.Hour }), "nodes[1].wait_for.timeout_ms"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Key = "{{ .nodes.other.output }}" }), "nodes[1].wait_for.key"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Key = "{{ .nope }}" }), "nodes[1].wait_for.key"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Key = "{{ .event.key }}" }), "nodes[1].wait_for.key"},
		{with(func(n *service.WorkflowNodeInput) { n.WaitFor.Key = "{{ " }), "nodes[1].wait_for.key"},
		{with(func(n *service.WorkflowNodeInput) { n.Payload = []byte(`{}`) }), "nodes[1].payload"},
		{with(func(n *service.WorkflowNodeInput) { n.PayloadTemplate = true }), "nodes[1].payload_template"},
		{with(func(n *service.WorkflowNodeInput) { n.Shards = 3 }), "nodes[1].shards"},
		{with(func(n *service.WorkflowNodeInput) {
			n.Completion = service.Completion{Mode: service.CompletionCallback}
		}), "nodes[1].completion"},
		{with(func(n *service.WorkflowNodeInput) { n.Timeout = time.Second }), "nodes[1].timeout_ms"},
		{with(func(n *service.WorkflowNodeInput) { n.Retry.MaxAttempts = 3 }), "nodes[1].retry"},
	} {
		requireFields(t, create(up, c.node), c.field)
	}
	var ve *service.ValidationError
	require.ErrorAs(t, create(up, with(func(n *service.WorkflowNodeInput) { n.WaitFor.Timeout = 0 })), &ve)
	require.Equal(t, "is required: 1000 (1 s) to 2592000000 (30 days)", ve.Fields[0].Message, "the 422 says the range")

	// Upstream outputs, inputs and the slot's data are fine; so are a
	// shard count of 1 and the response mode (the defaults).
	ok := with(func(n *service.WorkflowNodeInput) {
		n.WaitFor.Key = "{{ .nodes.up.output.id }}-{{ .business_date }}-{{ .inputs.region }}"
		n.Shards, n.Completion.Mode = 1, service.CompletionResponse
	})
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "ok", Nodes: []service.WorkflowNodeInput{up, ok}, Inputs: inputsOf("region", `"eu"`),
	})
	require.NoError(t, err)
	require.Equal(t, 1, w.Version)
	// A PATCH that changes nothing keeps the version (the stored node reads back as given).
	w, err = f.wf.Update(ctx, f.tenant, w.ID, func(*service.WorkflowInput) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 1, w.Version)
	_, err = f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error {
		in.Nodes[1].WaitFor.Timeout = 0
		return nil
	})
	requireFields(t, err, "nodes[1].wait_for.timeout_ms")
	// An event-scheduled workflow's wait key may read .event.
	evKey := waitNode("gate", "done", "{{ .event.key }}")
	_, err = f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "chain", Schedule: &schedule.Spec{Type: schedule.Event, Event: "start"}, Nodes: []service.WorkflowNodeInput{evKey},
	})
	require.NoError(t, err)
}

// TestWaitForExactlyOnce: two service instances (each its own pool) post
// 200 events at once for 100 waiting nodes: each node is resolved exactly
// once, by one event, and the events' matched.waits sum to 100.
func TestWaitForExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	second := service.NewWorkflows(f.delivery, f.enq, service.WorkflowsConfig{})
	instances := []*event.Events{
		service.NewEvents(f.pool, f.enq, f.wf, nil),
		service.NewEvents(f.delivery, f.enq, second, nil),
	}
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "many", MaxActiveRuns: 100, Nodes: []service.WorkflowNodeInput{waitNode("gate", "go", ""), f.node("next", "gate")},
	})
	require.NoError(t, err)
	const nodes, posts = 100, 200
	for range nodes {
		f.trigger(t, w)
	}
	require.Equal(t, nodes, f.count(t, `SELECT count(*) FROM workflow_run_nodes WHERE state = 'awaiting'`))

	var (
		mu       sync.Mutex
		waits    int
		resolved = map[string]int{} // run id → times an event said it resolved its node
		errs     []error
		wg       sync.WaitGroup
		work     = make(chan int)
	)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				ev, err := instances[i%2].Post(ctx, f.tenant, event.Input{Name: "go"})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					waits += ev.Matched.Waits
					for _, m := range ev.Matches {
						resolved[m.RunID]++
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := range posts {
		work <- i
	}
	close(work)
	wg.Wait()
	require.Empty(t, errs)
	require.Equal(t, nodes, waits, "matched.waits sum to the nodes")
	distinct := len(resolved) // not require.Len: its message would print the whole map
	require.Equal(t, nodes, distinct, "runs whose node an event resolved")
	for run, n := range resolved {
		require.Equal(t, 1, n, "run %s's node resolved once", run)
	}
	require.Equal(t, nodes, f.count(t, `SELECT count(*) FROM workflow_run_nodes WHERE key = 'gate' AND state = 'succeeded'
		AND event_id IS NOT NULL`))
	require.Equal(t, nodes, f.count(t, `SELECT count(*) FROM executions WHERE node = 'next'`), "each next fired once")
	f.requireWaitsCounted(t)
}

// TestWaitingNodesGauge: the sweep counts the waiting nodes into
// ax_waiting_nodes; a run waiting for an event is no stalled run for the
// sweep.
func TestWaitingNodesGauge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	m := metrics.New(nil)
	wf := service.NewWorkflows(f.pool, f.enq, service.WorkflowsConfig{Metrics: m})
	w, err := wf.Create(ctx, f.tenant, service.WorkflowInput{Name: "g", MaxActiveRuns: 10, Nodes: []service.WorkflowNodeInput{waitNode("gate", "go", "")}})
	require.NoError(t, err)
	for range 3 {
		_, err := wf.Trigger(ctx, f.tenant, w.ID, "")
		require.NoError(t, err)
	}
	f.exec(t, `UPDATE workflow_runs SET advanced_at = now() - interval '1 hour'`)
	looked, err := wf.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, looked, "waiting runs are not stalled")
	n, err := wf.WaitingNodes(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.InDelta(t, 3, testutil.ToFloat64(m.WaitingNodes), 0)
}

// TestWaitForScheduledRunWaitsFromItsSlot: the scheduler starts a run a
// little ahead of its slot (its look-ahead); the run's root wait_for node
// waits from its slot, so an event posted before the slot does not
// satisfy it, and one posted after does (for each run, whichever it is
// when the event comes: the check holds however slow the machine).
func TestWaitForScheduledRunWaitsFromItsSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "every-second", MaxActiveRuns: 1000, Schedule: &schedule.Spec{Type: schedule.Interval, IntervalSeconds: 1},
		Nodes: []service.WorkflowNodeInput{waitNode("gate", "go", "")},
	})
	require.NoError(t, err)
	_, err = f.scheduler(service.SchedulerConfig{}).Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, f.count(t, `SELECT count(*) FROM workflow_run_nodes n JOIN workflow_runs r ON r.id = n.run_id
		WHERE r.workflow_id = $1 AND n.rule_met_at < r.scheduled_for`, w.ID), "a run started ahead of its slot")
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_run_nodes n JOIN workflow_runs r ON r.id = n.run_id
		WHERE r.workflow_id = $1 AND n.wait_since IS DISTINCT FROM greatest(n.rule_met_at, r.scheduled_for)`, w.ID),
		"its wait starts at its slot")

	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "go"})
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_run_nodes n, posted_events v
		WHERE v.id = $1 AND (n.state = 'succeeded') <> (n.wait_since < v.received_at)`, ev.ID),
		"the event satisfies exactly the waits that started before it")
	require.Equal(t, ev.Matched.Waits, f.count(t, `SELECT count(*) FROM workflow_run_nodes WHERE event_id = $1`, ev.ID))
}

// TestWaitForEventStartedRun: a run started by one event waits for
// another, keyed by the first event's key (.event.key); the event that
// started the run is not the one it waits for, even of the same name.
func TestWaitForEventStartedRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	_, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "chain", MaxActiveRuns: 10, Schedule: &schedule.Spec{Type: schedule.Event, Event: "batch"},
		Nodes: []service.WorkflowNodeInput{waitNode("next", "batch", "{{ .event.key }}")},
	})
	require.NoError(t, err)
	first, err := events.Post(ctx, f.tenant, event.Input{Name: "batch", Key: "a"})
	require.NoError(t, err)
	require.Equal(t, event.Matched{Workflows: 1}, first.Matched, "it starts a run, and does not satisfy that run's wait")
	runID := first.Matches[0].RunID
	require.Equal(t, "a", f.runNode(t, runID, "next").Wait.Key)

	other, err := events.Post(ctx, f.tenant, event.Input{Name: "batch", Key: "b"})
	require.NoError(t, err)
	require.Equal(t, event.Matched{Workflows: 1}, other.Matched, "another key: a run of its own, no wait ended")
	second, err := events.Post(ctx, f.tenant, event.Input{Name: "batch", Key: "a"})
	require.NoError(t, err)
	require.Equal(t, event.Matched{Workflows: 1, Waits: 1}, second.Matched)
	require.Equal(t, second.ID, f.runNode(t, runID, "next").EventID)
}
