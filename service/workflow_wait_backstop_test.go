package service_test

import (
	"context"
	"errors"
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

// The stalled-run backstop reads no run counted waiting
// (workflow_runs.awaiting_nodes, which the sweep brings up to date after
// waits start and end: db.CountRunWaits). These tests show that a run
// whose wait ended, by whichever path, is counted out and found again
// when it stalls, and that the count is right after concurrent events.

// requireWaitsCounted sweeps once (which counts the waits started or
// ended since the last pass), then checks that every run's awaiting_nodes
// is the number of its nodes awaiting their event and that no node is
// left to count.
func (f *wfFixture) requireWaitsCounted(t *testing.T) {
	t.Helper()
	_, err := f.wf.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_runs r WHERE r.awaiting_nodes <> (SELECT count(*)
		FROM workflow_run_nodes n WHERE n.tenant_id = r.tenant_id AND n.run_id = r.id AND n.state = 'awaiting')`),
		"runs whose count of awaiting nodes is wrong")
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_run_nodes WHERE (state = 'awaiting') <> wait_counted`),
		"nodes left to count")
}

// awaitingOf is a run's awaiting_nodes.
func (f *wfFixture) awaitingOf(t *testing.T, runID string) int {
	t.Helper()
	return f.count(t, `SELECT awaiting_nodes FROM workflow_runs WHERE id = $1`, runID)
}

// TestWaitEndReachesTheBackstop: a run whose wait_for node awaits its
// event is counted waiting by the sweep; once the wait ends — by its
// event, its timeout, run or skipped by hand — its all_done downstream a
// fires, and when a's success is recorded without the run's advance
// (written by hand, as in TestWorkflowBackstopFiresOnce) the sweep finds
// the stalled run and fires b. A cancelled run's waits are counted out
// too.
func TestWaitEndReachesTheBackstop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	for _, path := range []string{"event", "timeout", "run", "skip"} {
		a := f.node("a", "gate")
		a.TriggerRule = service.RuleAllDone
		w := f.create(t, "backstop-"+path, waitNode("gate", "go."+path, ""), a, f.node("b", "a"))
		run := f.trigger(t, w)
		_, err := f.wf.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, f.awaitingOf(t, run.ID), "%s: the wait is counted", path)
		stalled, err := db.StalledRuns(ctx, f.pool, 0, 100)
		require.NoError(t, err)
		require.NotContains(t, stalled, db.RunRef{TenantID: f.tenant, ID: run.ID}, "%s: a waiting run is not the backstop's", path)

		switch path {
		case "event":
			ev, err := events.Post(ctx, f.tenant, event.Input{Name: "go.event"})
			require.NoError(t, err)
			require.Equal(t, 1, ev.Matched.Waits)
		case "timeout":
			f.exec(t, `UPDATE workflow_run_nodes SET wait_deadline = now() - interval '1 second' WHERE run_id = $1`, run.ID)
			_, err := f.wf.Sweep(ctx)
			require.NoError(t, err)
			require.Equal(t, "failed", f.runNode(t, run.ID, "gate").State)
		case "run":
			_, err := f.wf.RunNode(ctx, f.tenant, run.ID, "gate")
			require.NoError(t, err)
		case "skip":
			_, err := f.wf.SkipNode(ctx, f.tenant, run.ID, "gate")
			require.NoError(t, err)
		}
		ids := f.execsOf(t, run.ID, "a")
		require.Len(t, ids, 1, "%s: a fired when the wait ended", path)

		// a's success without the advance: only the backstop fires b.
		d, err := f.del.Begin(ctx, f.tenant, ids[0], 1)
		require.NoError(t, err)
		ok, err := db.EndDelivery(ctx, f.delivery, db.DeliveryEnd{
			TenantID: f.tenant, ID: ids[0], From: []string{service.ExecRunning}, Lease: &d.Lease, To: service.ExecSucceeded,
		})
		require.NoError(t, err)
		require.True(t, ok)
		require.Empty(t, f.execsOf(t, run.ID, "b"), "%s: not advanced yet", path)
		f.exec(t, `UPDATE workflow_runs SET advanced_at = now() - interval '1 minute' WHERE id = $1`, run.ID)
		_, err = f.wf.Sweep(ctx)
		require.NoError(t, err)
		require.Len(t, f.execsOf(t, run.ID, "b"), 1, "%s: the backstop found the stalled run", path)
		require.Zero(t, f.awaitingOf(t, run.ID), "%s: the ended wait is counted out", path)
	}

	w := f.create(t, "backstop-cancel", waitNode("gate", "go.cancel", ""), f.node("a", "gate"))
	run := f.trigger(t, w)
	_, err := f.wf.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, f.awaitingOf(t, run.ID))
	_, err = f.wf.CancelRun(ctx, f.tenant, run.ID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", f.runNode(t, run.ID, "gate").State)
	f.requireWaitsCounted(t)
	require.Zero(t, f.awaitingOf(t, run.ID), "the cancelled wait is counted out")
}

// TestWaitCountUnderRace: while events for their keys are posted on two
// service instances, nodes are run and skipped by hand, and both
// instances sweep without pause, 300 runs start waiting (a third of them
// with a second wait after the first): afterwards every run's count of
// awaiting nodes is right, and no sweep, post or trigger failed.
func TestWaitCountUnderRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	second := service.NewWorkflows(f.delivery, f.enq, service.WorkflowsConfig{})
	workflows := []*service.Workflows{f.wf, second}
	instances := []*event.Events{
		service.NewEvents(f.pool, f.enq, f.wf, nil),
		service.NewEvents(f.delivery, f.enq, second, nil),
	}
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "race", MaxActiveRuns: 1000, Inputs: inputsOf("k", `"a"`),
		Nodes: []service.WorkflowNodeInput{
			waitNode("gate", "go", "{{ .inputs.k }}"),
			waitNode("again", "again", "{{ .inputs.k }}", "gate"),
		},
	})
	require.NoError(t, err)
	const runs = 300

	var (
		mu    sync.Mutex
		errs  []error
		ids   = make([]string, runs)
		wg    sync.WaitGroup
		work  = make(chan int)
		stop  = make(chan struct{})
		sweep sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	for i := range workflows {
		sweep.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := workflows[i].Sweep(ctx); err != nil {
					fail(fmt.Errorf("sweep: %w", err))
				}
				time.Sleep(2 * time.Millisecond) // pacing only: the sweeps keep racing the rest
			}
		})
	}
	for range 6 {
		wg.Go(func() {
			for i := range work {
				key := strconv.Itoa(i)
				r, err := workflows[i%2].TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("k", `"`+key+`"`)})
				if err != nil {
					fail(fmt.Errorf("trigger: %w", err))
					continue
				}
				ids[i] = r.ID
				if _, err := instances[(i+1)%2].Post(ctx, f.tenant, event.Input{Name: "go", Key: key}); err != nil {
					fail(fmt.Errorf("post: %w", err))
				}
				switch i % 3 {
				case 0: // the second wait too, by its event, racing a skip
					var race sync.WaitGroup
					race.Go(func() {
						if _, err := instances[i%2].Post(ctx, f.tenant, event.Input{Name: "again", Key: key}); err != nil {
							fail(fmt.Errorf("post: %w", err))
						}
					})
					if _, err := workflows[(i+1)%2].SkipNode(ctx, f.tenant, r.ID, "again"); err != nil &&
						!errors.Is(err, service.ErrConflict) {
						fail(fmt.Errorf("skip: %w", err))
					}
					race.Wait()
				case 1: // the second wait run by hand
					if _, err := workflows[i%2].RunNode(ctx, f.tenant, r.ID, "again"); err != nil {
						fail(fmt.Errorf("run: %w", err))
					}
				}
			}
		})
	}
	for i := range runs {
		work <- i
	}
	close(work)
	wg.Wait()
	close(stop)
	sweep.Wait()
	require.Empty(t, errs)
	f.requireWaitsCounted(t)
	waiting := 0
	for _, id := range ids {
		waiting += f.awaitingOf(t, id)
	}
	require.Equal(t, runs/3, waiting, "the runs left waiting: one in three, on its second wait")
	require.Equal(t, 2*runs/3, f.count(t, `SELECT count(*) FROM workflow_runs WHERE state = 'succeeded'`))
}
