package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/event"
)

// A wait and an event it may match whose transactions overlap: under
// READ COMMITTED neither sees the other's uncommitted rows, so without
// the locks of events and waits (db.LockEvent) and the wait's own lookup
// the event would miss the node however late it arrived. These tests hold one side's transaction
// open at the point the race is lost and let the other side run.

// blockedOrDone returns once a backend waits for an advisory lock or
// done is closed (the other side did not block: the test then shows what
// it missed). It polls the lock table; it asserts nothing about time.
func blockedOrDone(t *testing.T, f *wfFixture, done <-chan struct{}) {
	t.Helper()
	for {
		select {
		case <-done:
			return
		default:
		}
		if f.count(t, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`) > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// queuedLookups returns the deferred lookups queued (service.WaitLookupArgs)
// and deletes them, as River's worker would once it ran them.
func queuedLookups(t *testing.T, f *wfFixture) []service.WaitLookupArgs {
	t.Helper()
	ctx := context.Background()
	rows, err := f.pool.Query(ctx, `DELETE FROM river_job WHERE kind = 'wait_lookup' RETURNING args`)
	require.NoError(t, err)
	var out []service.WaitLookupArgs
	for rows.Next() {
		var b []byte
		require.NoError(t, rows.Scan(&b))
		var a service.WaitLookupArgs
		require.NoError(t, json.Unmarshal(b, &a))
		out = append(out, a)
	}
	require.NoError(t, rows.Err())
	return out
}

// gatedWorkflow is a workflow whose root waits for event go with the key
// input k.
func gatedWorkflow(t *testing.T, f *wfFixture, maxActive int) service.Workflow {
	t.Helper()
	w, err := f.wf.Create(context.Background(), f.tenant, service.WorkflowInput{
		Name: "gated", MaxActiveRuns: maxActive, Inputs: inputsOf("k", `"a"`),
		Nodes: []service.WorkflowNodeInput{waitNode("gate", "go", "{{ .inputs.k }}")},
	})
	require.NoError(t, err)
	return w
}

// TestWaitForEventCommittedBeforeLock: a run's advance begins (the
// node's ready-since is its clock); an event of the node's name and key
// is posted and committed; then the advance records the wait: its lookup
// finds the event and ends the node with it at once, and the event's
// detail lists the node.
func TestWaitForEventCommittedBeforeLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	w := gatedWorkflow(t, f, 10)

	txW, err := f.pool.Begin(ctx) // the advance: its clock is the node's ready-since
	require.NoError(t, err)
	defer func() { _ = txW.Rollback(ctx) }()
	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "go", Key: "a", Payload: []byte(`{"n": 1}`)})
	require.NoError(t, err)
	require.Zero(t, ev.Matched.Waits, "no node awaits it yet")
	run, err := f.wf.TriggerWith(db.WithTx(ctx, f.pool, txW), f.tenant, w.ID, service.WorkflowTrigger{})
	require.NoError(t, err)
	require.NoError(t, txW.Commit(ctx))
	require.Empty(t, queuedLookups(t, f), "no event was in flight: nothing to look at again")

	n := f.runNode(t, run.ID, "gate")
	require.Equal(t, "succeeded", n.State, "the event arrived after the node became ready")
	require.Equal(t, ev.ID, n.EventID)
	require.JSONEq(t, `{"n": 1}`, string(n.Output))
	stored, err := events.Get(ctx, f.tenant, ev.ID)
	require.NoError(t, err)
	require.Equal(t, event.Matched{Waits: 1}, stored.Matched)
	require.Equal(t, []event.Match{{Type: event.MatchWait, WorkflowID: w.ID, RunID: run.ID, Node: "gate"}}, stored.Matches)
	_, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunSucceeded, state, "the run advanced past the node")
}

// TestWaitForEventCommittedWhileReadying: as above, but the event's
// transaction is still open (stored, its own lookup found no waiting
// node) when the advance records the wait and commits. The advance does
// not wait for it (it holds its run); it queues a lookup, which waits
// for the event's transaction and then ends the node with the event.
func TestWaitForEventCommittedWhileReadying(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	w := gatedWorkflow(t, f, 10)

	txW, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txW.Rollback(ctx) }()
	txE, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txE.Rollback(ctx) }()
	ev, err := events.Post(db.WithTx(ctx, f.pool, txE), f.tenant, event.Input{Name: "go", Key: "a", Payload: []byte(`{"n": 1}`)})
	require.NoError(t, err)
	require.Zero(t, ev.Matched.Waits, "no node awaits it yet")
	run, err := f.wf.TriggerWith(db.WithTx(ctx, f.pool, txW), f.tenant, w.ID, service.WorkflowTrigger{})
	require.NoError(t, err)
	require.NoError(t, txW.Commit(ctx))
	require.Equal(t, "running", f.runNode(t, run.ID, "gate").State, "the event is not committed yet")
	lookups, key := queuedLookups(t, f), "a"
	want := service.WaitLookupArgs{
		TenantID: f.tenant, RunID: run.ID, Keys: []string{"gate"}, Locks: []db.WaitLock{{Event: "go", Key: &key}},
	}
	require.Equal(t, []service.WaitLookupArgs{want}, lookups, "the advance queued a lookup")

	var (
		lookErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		lookErr = f.wf.LookUpArrived(ctx, lookups[0])
	}()
	blockedOrDone(t, f, done)
	require.NoError(t, txE.Commit(ctx))
	<-done
	require.NoError(t, lookErr)

	n := f.runNode(t, run.ID, "gate")
	require.Equal(t, "succeeded", n.State, "the event arrived after the node became ready")
	require.Equal(t, ev.ID, n.EventID)
	require.JSONEq(t, `{"n": 1}`, string(n.Output))
	stored, err := events.Get(ctx, f.tenant, ev.ID)
	require.NoError(t, err)
	require.Equal(t, event.Matched{Waits: 1}, stored.Matched)
	require.Equal(t, []event.Match{{Type: event.MatchWait, WorkflowID: w.ID, RunID: run.ID, Node: "gate"}}, stored.Matches)
	_, state := f.nodes(t, run.ID)
	require.Equal(t, service.RunSucceeded, state, "the run advanced past the node")
	require.NoError(t, f.wf.LookUpArrived(ctx, lookups[0]), "a lookup run again (a retried job) changes nothing")
	require.Equal(t, ev.ID, f.runNode(t, run.ID, "gate").EventID)
}

// TestWaitForWaitCommittedWhileEventPosted: the reverse order. A run's
// node awaits its event in a transaction not yet committed; an event of
// its name and key is posted meanwhile: its lookup runs once the wait
// committed, finds the node and ends it.
func TestWaitForWaitCommittedWhileEventPosted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	w := gatedWorkflow(t, f, 10)

	txW, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txW.Rollback(ctx) }()
	run, err := f.wf.TriggerWith(db.WithTx(ctx, f.pool, txW), f.tenant, w.ID, service.WorkflowTrigger{})
	require.NoError(t, err)

	var (
		ev      event.Event
		postErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		ev, postErr = events.Post(ctx, f.tenant, event.Input{Name: "go", Key: "a"})
	}()
	blockedOrDone(t, f, done)
	require.NoError(t, txW.Commit(ctx))
	<-done
	require.NoError(t, postErr)
	require.Equal(t, event.Matched{Waits: 1}, ev.Matched, "the event found the node")
	n := f.runNode(t, run.ID, "gate")
	require.Equal(t, "succeeded", n.State)
	require.Equal(t, ev.ID, n.EventID)
}

// TestWaitForNoLostMatch: runs whose wait_for nodes wait on distinct keys
// are started (their nodes readied) while events for those keys are
// posted on two service instances, each key twice: once racing its run's
// start, once after it. Every node whose matching event arrived after its
// ready-since (by the stored times) ends, with such an event, exactly
// once: no lost and no double resolution.
func TestWaitForNoLostMatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	second := service.NewWorkflows(f.delivery, f.enq, service.WorkflowsConfig{})
	workflows := []*service.Workflows{f.wf, second}
	instances := []*event.Events{
		service.NewEvents(f.pool, f.enq, f.wf, nil),
		service.NewEvents(f.delivery, f.enq, second, nil),
	}
	w := gatedWorkflow(t, f, 1000)
	const keys = 520 // 1,040 events

	// Each key's two posts race its run's start (on the other instance
	// than the start's, one after the other): either may arrive before
	// the node is ready, after, or while its wait is being recorded.
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		work = make(chan int)
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	post := func(on, i int) {
		if _, err := instances[on].Post(ctx, f.tenant, event.Input{Name: "go", Key: strconv.Itoa(i)}); err != nil {
			fail(err)
		}
	}
	for range 6 {
		wg.Go(func() {
			for i := range work {
				var race sync.WaitGroup
				race.Go(func() {
					in := service.WorkflowTrigger{Inputs: inputsOf("k", fmt.Sprintf(`"%d"`, i))}
					if _, err := workflows[i%2].TriggerWith(ctx, f.tenant, w.ID, in); err != nil {
						fail(err)
					}
				})
				post((i+1)%2, i)
				post(i%2, i)
				race.Wait()
			}
		})
	}
	for i := range keys {
		work <- i
	}
	close(work)
	wg.Wait()
	require.Empty(t, errs)
	// The lookups the starts queued (an event of the name was in flight),
	// as River's worker runs them.
	lookups := queuedLookups(t, f)
	for _, a := range lookups {
		require.NoError(t, f.wf.LookUpArrived(ctx, a))
	}
	resolved := f.count(t, `SELECT count(*) FROM workflow_run_nodes WHERE key = 'gate' AND state = 'succeeded'`)
	t.Logf("%d of %d starts queued a lookup; %d nodes ended (the others' events both arrived before they were ready)",
		len(lookups), keys, resolved)

	require.Equal(t, 2*keys, f.count(t, `SELECT count(*) FROM posted_events WHERE name = 'go'`))
	require.Equal(t, keys, f.count(t, `SELECT count(*) FROM workflow_run_nodes WHERE key = 'gate'`))
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_run_nodes n WHERE n.key = 'gate' AND n.state <> 'succeeded'
		AND EXISTS (SELECT 1 FROM posted_events p WHERE p.tenant_id = n.tenant_id AND p.name = 'go' AND p.key = n.wait_key
			AND p.received_at > n.wait_since)`), "lost matches: a node not ended although its event arrived after it was ready")
	require.Equal(t, resolved, f.count(t, `SELECT count(*) FROM workflow_run_nodes n JOIN posted_events p
		ON p.tenant_id = n.tenant_id AND p.id = n.event_id
		WHERE n.key = 'gate' AND n.state = 'succeeded' AND p.key = n.wait_key AND p.received_at > n.wait_since`),
		"every node ended with an event of its key that arrived after it was ready")
	require.Equal(t, resolved, f.count(t, `SELECT coalesce(sum(matched_waits), 0) FROM posted_events WHERE name = 'go'`),
		"the events' matched.waits sum to the nodes")
	require.Zero(t, f.count(t, `SELECT count(*) FROM (SELECT m->>'run_id' FROM posted_events, jsonb_array_elements(matched) m
		WHERE name = 'go' GROUP BY 1 HAVING count(*) <> 1) d`), "double resolutions: a node listed by two events")
	require.Equal(t, resolved, f.count(t, `SELECT count(*) FROM workflow_run_nodes n JOIN posted_events p
		ON p.tenant_id = n.tenant_id AND p.id = n.event_id
		WHERE n.key = 'gate' AND p.matched @> jsonb_build_array(jsonb_build_object('run_id', n.run_id::text, 'node', n.key))`),
		"the event that ended a node lists it")
	f.requireWaitsCounted(t)
}
