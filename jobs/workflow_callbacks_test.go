package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// The workflow tests of long-running work: a node in callback mode and a
// workflow SLA, through the real River workers, real receivers (httptest)
// and the callback sweeper loop as cmd/server runs it.

// newWorkflowHarness is a harness whose River client also runs the
// workflow alert worker.
func newWorkflowHarness(t *testing.T) (*harness, *service.Workflows) {
	t.Helper()
	h := newHarness(t, harnessOpts{NoStart: true})
	wf := service.NewWorkflows(h.pool, h.enq, service.WorkflowsConfig{})
	h.deps.Workflows = wf
	h.deps.PublicURL = "https://ax.example.com"
	h.client = h.newClient()
	h.start(h.client)
	return h, wf
}

// runOf returns a run and its node states by key.
func runOf(t *testing.T, h *harness, wf *service.Workflows, id string) (service.WorkflowRun, map[string]string) {
	t.Helper()
	r, err := wf.GetRun(t.Context(), h.tenant, id)
	require.NoError(t, err)
	return r, nodeStates(r)
}

// nodeStates returns a run's node states by key.
func nodeStates(r service.WorkflowRun) map[string]string {
	nodes := map[string]string{}
	for _, n := range r.Nodes {
		nodes[n.Key] = n.State
	}
	return nodes
}

// waitRun waits until the run is in state.
func waitRun(t *testing.T, h *harness, wf *service.Workflows, id, state string) (service.WorkflowRun, map[string]string) {
	t.Helper()
	var (
		r     service.WorkflowRun
		nodes map[string]string
	)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		r, err = wf.GetRun(t.Context(), h.tenant, id)
		assert.NoError(c, err)
		nodes = nodeStates(r)
		assert.Equal(c, state, r.State, "nodes %v", nodes)
	}, 20*time.Second, 10*time.Millisecond, "run %s never became %s", id, state)
	return r, nodes
}

// callbackChain creates extract → transform → report on three receivers,
// transform in callback mode with the given heartbeat timeout and retry
// policy, and triggers a run.
func callbackChain(t *testing.T, h *harness, wf *service.Workflows, heartbeat time.Duration, retry service.RetryPolicy,
	change func(*service.WorkflowInput),
) (run string, extract, transform, report *script) {
	t.Helper()
	extract, transform, report = newScript(t), newScript(t, response{Status: http.StatusAccepted}), newScript(t)
	in := service.WorkflowInput{Name: h.name("wf"), MaxActiveRuns: 1, Nodes: []service.WorkflowNodeInput{
		{Key: "extract", EndpointID: h.endpoint(extract.srv.URL, nil).ID},
		{
			Key: "transform", EndpointID: h.endpoint(transform.srv.URL, nil).ID, DependsOn: []string{"extract"}, Retry: retry,
			Completion: service.Completion{Mode: service.CompletionCallback, Timeout: time.Minute, HeartbeatTimeout: heartbeat},
		},
		{Key: "report", EndpointID: h.endpoint(report.srv.URL, nil).ID, DependsOn: []string{"transform"}},
	}}
	if change != nil {
		change(&in)
	}
	w, err := wf.Create(t.Context(), h.tenant, in)
	require.NoError(t, err)
	require.Equal(t, service.CompletionCallback, w.Nodes[1].Completion.Mode, "the node keeps its completion mode")
	require.Empty(t, w.Nodes[0].Completion.Mode)
	r, err := wf.Trigger(t.Context(), h.tenant, w.ID, "")
	require.NoError(t, err)
	return r.ID, extract, transform, report
}

// TestWorkflowCallbackNodeCompletionAdvances: the callback node's 2xx only
// accepts it; the downstream node waits until the node's execution is
// completed, then fires, and the run succeeds.
func TestWorkflowCallbackNodeCompletionAdvances(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	h.sweeper(h.deliveries, metrics.New(nil))
	run, extract, transform, report := callbackChain(t, h, wf, 0, service.RetryPolicy{}, nil)

	require.Empty(t, extract.next(t).Header.Get("X-Ax-Callback-Token"), "a response-mode node carries no token")
	hit := transform.next(t)
	require.Equal(t, "transform", hit.Header.Get("X-Ax-Node"))
	require.Equal(t, run, hit.Header.Get("X-Ax-Workflow-Run-Id"))
	id := hit.Header.Get("Idempotency-Key")
	_, grant := h.grantOf(hit)
	h.waitEvent(id, service.EventAccepted)

	// Accepted, not done: the run waits, and so does report.
	report.quiet(t, 500*time.Millisecond)
	r, nodes := runOf(t, h, wf, run)
	require.Equal(t, service.RunRunning, r.State)
	require.Equal(t, map[string]string{
		"extract": service.ExecSucceeded, "transform": service.ExecRunning,
		"report": service.NodeWaiting,
	}, nodes)

	_, err := h.deliveries.Complete(t.Context(), h.tenant, id, grant, service.CompletionInput{
		Status: service.ExecSucceeded, Output: json.RawMessage(`{"rows":7}`),
	})
	require.NoError(t, err)
	require.Equal(t, "report", report.next(t).Header.Get("X-Ax-Node"), "the completion fires the downstream node")
	_, nodes = waitRun(t, h, wf, run, service.RunSucceeded)
	require.Equal(t, service.ExecSucceeded, nodes["transform"])
	require.Len(t, transform.hitsSoFar(), 1, "one attempt")
}

// TestWorkflowCallbackNodeFailedCompletionBlocks: a failed completion that
// is not retryable fails the node; its all_success downstream is blocked
// and so is the run (with its workflow_run.blocked alert).
func TestWorkflowCallbackNodeFailedCompletionBlocks(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	h.sweeper(h.deliveries, metrics.New(nil))
	alerts := newScript(t)
	alertEP := h.endpoint(alerts.srv.URL, nil)
	run, extract, transform, report := callbackChain(t, h, wf, 0, service.RetryPolicy{MaxAttempts: 3},
		func(in *service.WorkflowInput) { in.AlertEndpointID = alertEP.ID })
	extract.next(t)
	hit := transform.next(t)
	id := hit.Header.Get("Idempotency-Key")
	_, grant := h.grantOf(hit)
	h.waitEvent(id, service.EventAccepted)

	final := false
	_, err := h.deliveries.Complete(t.Context(), h.tenant, id, grant, service.CompletionInput{
		Status: service.ExecFailed, Error: "the export was rejected", Retryable: &final,
	})
	require.NoError(t, err)
	_, nodes := waitRun(t, h, wf, run, service.RunBlocked)
	require.Equal(t, map[string]string{
		"extract": service.ExecSucceeded, "transform": service.ExecFailed,
		"report": service.NodeBlocked,
	}, nodes)
	var body WorkflowAlertBody
	require.NoError(t, json.Unmarshal(alerts.next(t).Body, &body))
	require.Equal(t, service.AlertWorkflowRunBlocked, body.Type)
	require.Equal(t, []string{"report"}, body.Nodes)
	report.quiet(t, 300*time.Millisecond)
	transform.quiet(t, 300*time.Millisecond) // not retried: retryable false
}

// TestWorkflowCallbackNodeHeartbeatTimeoutRetries: a callback node that
// stops heartbeating is failed by the sweeper (heartbeat_timeout) and
// retried under the node's retry policy, with the same idempotency key and
// a new token; the run waits for the retry's completion, then advances.
func TestWorkflowCallbackNodeHeartbeatTimeoutRetries(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	h.sweeper(h.deliveries, metrics.New(nil))
	run, extract, transform, report := callbackChain(t, h, wf, time.Second,
		service.RetryPolicy{MaxAttempts: 2, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, nil)
	extract.next(t)
	first := transform.next(t)
	id := first.Header.Get("Idempotency-Key")
	oldToken, oldGrant := h.grantOf(first)

	second := transform.next(t) // no heartbeat: timed out and retried
	require.Equal(t, id, second.Header.Get("Idempotency-Key"))
	require.Equal(t, "2", second.Header.Get("X-Ax-Attempt"))
	newToken, newGrant := h.grantOf(second)
	require.NotEqual(t, oldToken, newToken)
	evs := h.events(id)
	i := slices.IndexFunc(evs, func(ev event) bool { return ev.Type == service.EventAttemptFailed })
	require.GreaterOrEqual(t, i, 0, "timeline %v", eventTypes(evs))
	require.Equal(t, service.ErrorClassHeartbeatTimeout, *evs[i].ErrorClass)
	_, nodes := runOf(t, h, wf, run)
	require.Equal(t, service.NodeWaiting, nodes["report"], "the timeout is no outcome for the downstream node")

	ctx := t.Context()
	_, err := h.deliveries.Complete(ctx, h.tenant, id, oldGrant, service.CompletionInput{Status: service.ExecSucceeded})
	require.ErrorIs(t, err, service.ErrConflict, "the first attempt's token is refused")
	require.NoError(t, h.deliveries.Heartbeat(ctx, h.tenant, id, newGrant, json.RawMessage(`{"pct":50}`)))
	_, err = h.deliveries.Complete(ctx, h.tenant, id, newGrant, service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
	report.next(t)
	waitRun(t, h, wf, run, service.RunSucceeded)
}

// TestWorkflowCallbackNodeExhaustedTimeoutsFailTheRun: when the node's
// retries run out on timeouts, the node fails and the usual rules apply:
// an all_done downstream still runs and the run ends failed.
func TestWorkflowCallbackNodeExhaustedTimeoutsFailTheRun(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	h.sweeper(h.deliveries, metrics.New(nil))
	run, extract, transform, report := callbackChain(t, h, wf, time.Second, service.RetryPolicy{MaxAttempts: 1},
		func(in *service.WorkflowInput) { in.Nodes[2].TriggerRule = service.RuleAllDone })
	extract.next(t)
	transform.next(t)
	report.next(t) // after transform's heartbeat timeout, with no attempt left
	_, nodes := waitRun(t, h, wf, run, service.RunFailed)
	require.Equal(t, map[string]string{
		"extract": service.ExecSucceeded, "transform": service.ExecFailed,
		"report": service.ExecSucceeded,
	}, nodes)
	transform.quiet(t, 300*time.Millisecond)
}

// TestWorkflowRunSLAMissedOnce: a run still running at its workflow's SLA
// deadline gets one sla_missed event on its own timeline, sla_missed_at,
// one count in ax_sla_missed_total{kind="workflow_run"} and exactly one
// workflow_run.sla_missed alert, with two replicas' sweepers and alert
// workers racing, and a restarted sweeper adds nothing; the run goes on.
func TestWorkflowRunSLAMissedOnce(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	// A second replica: its own Deliveries, sweeper and River client.
	other := service.NewDeliveries(h.pool, h.enq, service.DeliveriesConfig{})
	h.start(h.newClient())
	m1, m2 := metrics.New(nil), metrics.New(nil)
	stop1, stop2 := h.sweeper(h.deliveries, m1), h.sweeper(other, m2)

	alerts := newScript(t)
	alertEP := h.endpoint(alerts.srv.URL, nil)
	run, extract, transform, report := callbackChain(t, h, wf, 0, service.RetryPolicy{}, func(in *service.WorkflowInput) {
		in.AlertEndpointID = alertEP.ID
		in.SLAFinishWithin = 1500 * time.Millisecond
	})
	extract.next(t)
	hit := transform.next(t)
	_, grant := h.grantOf(hit)

	alert := alerts.next(t)
	require.Equal(t, service.AlertWorkflowRunSLAMissed, alert.Header.Get("X-Ax-Alert-Type"))
	var body WorkflowAlertBody
	require.NoError(t, json.Unmarshal(alert.Body, &body))
	require.Equal(t, service.AlertWorkflowRunSLAMissed, body.Type)
	require.Equal(t, run, body.RunID)
	require.NotNil(t, body.State)
	require.Equal(t, service.RunRunning, *body.State)
	require.NotNil(t, body.SLA)
	require.EqualValues(t, 1500, body.SLA.FinishWithinMS)
	require.NotNil(t, body.ScheduledFor)
	require.WithinDuration(t, body.ScheduledFor.Add(1500*time.Millisecond), *body.SLA.DueAt, time.Millisecond)

	r, _ := runOf(t, h, wf, run)
	require.NotNil(t, r.SLAMissedAt)
	require.Len(t, r.Events, 1)
	ev := r.Events[0]
	require.Equal(t, service.EventSLAMissed, ev.Type)
	require.Equal(t, service.RunRunning, ev.Data["state"])
	require.EqualValues(t, 1500, ev.Data["finish_within_ms"])
	require.Equal(t, alertEP.ID, ev.Data["alert_endpoint_id"])
	due := r.ScheduledFor.Add(1500 * time.Millisecond)
	require.False(t, ev.At.Before(due), "never before the deadline")
	t.Logf("sla_missed recorded %s after the deadline", ev.At.Sub(due))
	require.Less(t, ev.At.Sub(due), 5*time.Second, "about a sweep after the deadline")

	// Once, whatever the replicas and restarts.
	alerts.quiet(t, 700*time.Millisecond)
	stop1()
	stop2()
	h.sweeper(other, m2)
	alerts.quiet(t, 700*time.Millisecond)
	total := testutil.ToFloat64(m1.SLAMissed.WithLabelValues(metrics.SLAKindWorkflowRun)) +
		testutil.ToFloat64(m2.SLAMissed.WithLabelValues(metrics.SLAKindWorkflowRun))
	require.InDelta(t, 1, total, 0)
	require.Zero(t, testutil.ToFloat64(m1.SLAMissed.WithLabelValues(metrics.SLAKindExecution))+
		testutil.ToFloat64(m2.SLAMissed.WithLabelValues(metrics.SLAKindExecution)), "the node tasks have no SLA of their own")

	// The run goes on, and keeps the record.
	_, err := h.deliveries.Complete(context.Background(), h.tenant, hit.Header.Get("Idempotency-Key"), grant,
		service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
	report.next(t)
	r, _ = waitRun(t, h, wf, run, service.RunSucceeded)
	require.NotNil(t, r.SLAMissedAt)
	require.Len(t, r.Events, 1)
	alerts.quiet(t, 300*time.Millisecond)
}

// TestWorkflowRunSLAMetInTime: a run that succeeds before its deadline is
// never recorded as missed, and neither is a run of a workflow without an
// SLA; the slack format gives one readable line with the run's link.
func TestWorkflowRunSLAMetInTime(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	m := metrics.New(nil)
	h.sweeper(h.deliveries, m)
	alerts := newScript(t)
	alertEP := h.endpoint(alerts.srv.URL, func(in *service.EndpointInput) { in.Format = service.AlertFormatSlack })
	recv := newScript(t)
	w, err := wf.Create(t.Context(), h.tenant, service.WorkflowInput{
		Name: h.name("wf"), AlertEndpointID: alertEP.ID,
		SLAFinishWithin: 1200 * time.Millisecond, Nodes: []service.WorkflowNodeInput{{Key: "only", EndpointID: h.endpoint(recv.srv.URL, nil).ID}},
	})
	require.NoError(t, err)
	r, err := wf.Trigger(t.Context(), h.tenant, w.ID, "")
	require.NoError(t, err)
	recv.next(t)
	waitRun(t, h, wf, r.ID, service.RunSucceeded)
	alerts.quiet(t, 2*time.Second)
	r, _ = runOf(t, h, wf, r.ID)
	require.Nil(t, r.SLAMissedAt)
	require.Empty(t, r.Events)
	require.Zero(t, testutil.ToFloat64(m.SLAMissed.WithLabelValues(metrics.SLAKindWorkflowRun)))

	slot := time.Date(2026, 3, 1, 18, 0, 0, 0, time.UTC)
	text := WorkflowSlackText(service.WorkflowAlertArgs{
		RunID: "r1", WorkflowID: "w1", Type: service.AlertWorkflowRunSLAMissed,
		State: service.RunBlocked, ScheduledFor: &slot, SLAFinishWithinMS: 7_200_000,
	}, "billing<daily>", "https://ax.example.com/")
	require.Equal(t, ":hourglass: workflow *billing&lt;daily&gt;* missed its SLA: a run not succeeded within 2h0m0s of its slot "+
		"2026-03-01T18:00:00Z (it is blocked) <https://ax.example.com/v1/workflow-runs/r1|run r1>", text)
}

// TestWorkflowRunCancelEndsCallbackWait: cancelling a run whose callback
// node waits cancels the node's execution at once (no job carries it) and
// its token can no longer act.
func TestWorkflowRunCancelEndsCallbackWait(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	run, extract, transform, report := callbackChain(t, h, wf, 0, service.RetryPolicy{}, nil)
	extract.next(t)
	hit := transform.next(t)
	id := hit.Header.Get("Idempotency-Key")
	_, grant := h.grantOf(hit)
	h.waitEvent(id, service.EventAccepted)

	_, err := wf.CancelRun(t.Context(), h.tenant, run)
	require.NoError(t, err)
	require.Equal(t, service.ExecCancelled, h.execution(id).State, "cancelled at once, not at its deadline")
	_, nodes := runOf(t, h, wf, run)
	require.Equal(t, service.ExecCancelled, nodes["transform"])
	_, err = h.deliveries.Complete(t.Context(), h.tenant, id, grant, service.CompletionInput{Status: service.ExecSucceeded})
	require.ErrorIs(t, err, service.ErrConflict)
	require.ErrorIs(t, h.deliveries.Heartbeat(t.Context(), h.tenant, id, grant, nil), service.ErrConflict)
	report.quiet(t, 300*time.Millisecond)
}
