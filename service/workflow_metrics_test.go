package service_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// TestWorkflowRunsAreCounted: the runs that end are counted by state
// (ax_workflow_runs_total) through the metrics each service is handed in
// its Config, whichever path ends them: a delivery's outcome (Deliveries),
// a cancel (Workflows), a change of a node's execution (Executions).
func TestWorkflowRunsAreCounted(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	m := metrics.New(nil)
	f.wf = service.NewWorkflows(f.pool, f.enq, service.WorkflowsConfig{Metrics: m})
	f.del = service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{Metrics: m})
	f.ex = service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{Metrics: m})
	counted := map[string]float64{}
	ended := func(runID string) {
		t.Helper()
		_, state := f.nodes(t, runID)
		require.Contains(t, []string{service.RunSucceeded, service.RunFailed, service.RunCancelled}, state)
		counted[state]++
		for _, s := range []string{service.RunSucceeded, service.RunFailed, service.RunCancelled} {
			require.InDelta(t, counted[s], testutil.ToFloat64(m.WorkflowRuns.WithLabelValues(s)), 0, "runs %s", s)
		}
	}
	a := f.node("a")
	a.Retry.MaxAttempts = 1
	w := f.create(t, "counted", a)

	run := f.trigger(t, w)
	f.deliver(t, run.ID, "a", true)
	ended(run.ID)

	run = f.trigger(t, w)
	_, err := f.wf.CancelRun(ctx, f.tenant, run.ID)
	require.NoError(t, err)
	ended(run.ID)

	run = f.trigger(t, w)
	_, err = f.ex.Cancel(ctx, f.tenant, f.execsOf(t, run.ID, "a")[0])
	require.NoError(t, err)
	ended(run.ID)
}
