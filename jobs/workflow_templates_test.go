package jobs

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// TestWorkflowNodeTemplates: through the real workers and receivers, a
// templated node's body is rendered from the run's inputs, its slot's
// business date and its upstream node's output; run_if fires a node on
// "true", skips it on "false" (its downstream still runs) and fails it,
// unsent, on anything else.
func TestWorkflowNodeTemplates(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	h.sweeper(h.deliveries, metrics.New(nil))
	extract := newScript(t, response{
		Status: http.StatusOK, Header: map[string]string{"Content-Type": "application/json"},
		Body: `{"rows": 42, "file": "export-20261201.csv"}`,
	})
	load, full, after := newScript(t, response{Status: http.StatusOK}), newScript(t, response{Status: http.StatusOK}),
		newScript(t, response{Status: http.StatusOK})
	nodes := []service.WorkflowNodeInput{
		{Key: "extract", EndpointID: h.endpoint(extract.srv.URL, nil).ID},
		{
			Key: "load", EndpointID: h.endpoint(load.srv.URL, nil).ID, DependsOn: []string{"extract"}, PayloadTemplate: true,
			Payload: []byte(`{"file": "{{ .nodes.extract.output.file }}", "rows": "{{ .nodes.extract.output.rows }}",` +
				` "region": "{{ .inputs.region }}", "status": "{{ .nodes.extract.status }}", "run": "{{ .workflow_run_id }}"}`),
		},
		{
			Key: "full", EndpointID: h.endpoint(full.srv.URL, nil).ID, DependsOn: []string{"extract"},
			RunIf: `{{ eq .inputs.mode "full" }}`,
		},
		{Key: "after", EndpointID: h.endpoint(after.srv.URL, nil).ID, DependsOn: []string{"load", "full"}},
	}
	w, err := wf.Create(t.Context(), h.tenant, service.WorkflowInput{
		Name: h.name("wf"), MaxActiveRuns: 3, Nodes: nodes,
		Inputs: service.Inputs{"region": json.RawMessage(`"cn"`), "mode": json.RawMessage(`"full"`)},
	})
	require.NoError(t, err)

	// mode full: every node runs; load's body is rendered, its types kept.
	r, err := wf.TriggerWith(t.Context(), h.tenant, w.ID, service.WorkflowTrigger{})
	require.NoError(t, err)
	extract.next(t)
	body := load.next(t).Body
	require.JSONEq(t, `{"file": "export-20261201.csv", "rows": 42, "region": "cn", "status": "succeeded", "run": "`+r.ID+`"}`, string(body))
	full.next(t)
	after.next(t)
	waitRun(t, h, wf, r.ID, service.RunSucceeded)

	// mode delta: full is skipped, and after (all_success) still runs.
	sent := len(full.hitsSoFar())
	r, err = wf.TriggerWith(t.Context(), h.tenant, w.ID, service.WorkflowTrigger{Inputs: service.Inputs{"mode": json.RawMessage(`"delta"`)}})
	require.NoError(t, err)
	extract.next(t)
	load.next(t)
	after.next(t)
	_, states := waitRun(t, h, wf, r.ID, service.RunSucceeded)
	require.Equal(t, service.NodeSkipped, states["full"], "run_if false skips the node")
	require.Len(t, full.hitsSoFar(), sent, "nothing was sent to the skipped node")

	// A condition that renders neither true nor false fails its node
	// unsent: the run fails, and what depends on it does not run.
	w2, err := wf.Create(t.Context(), h.tenant, service.WorkflowInput{
		Name: h.name("wf2"), MaxActiveRuns: 1,
		Nodes: []service.WorkflowNodeInput{
			{Key: "extract", EndpointID: h.endpoint(extract.srv.URL, nil).ID},
			{Key: "full", EndpointID: h.endpoint(full.srv.URL, nil).ID, DependsOn: []string{"extract"}, RunIf: `{{ .inputs.mode }}`},
		},
		Inputs: service.Inputs{"mode": json.RawMessage(`"maybe"`)},
	})
	require.NoError(t, err)
	r, err = wf.TriggerWith(t.Context(), h.tenant, w2.ID, service.WorkflowTrigger{})
	require.NoError(t, err)
	extract.next(t)
	run, _ := waitRun(t, h, wf, r.ID, service.RunFailed)
	var failedID string
	for _, n := range run.Nodes {
		if n.Key == "full" {
			failedID = n.ExecutionID
		}
	}
	require.NotEmpty(t, failedID)
	x, err := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{}).Get(t.Context(), h.tenant, failedID)
	require.NoError(t, err)
	require.Equal(t, service.ExecFailed, x.State)
	require.Equal(t, service.ErrorClassTemplate, x.LastErrorClass)
	require.Contains(t, x.LastError, `run_if rendered "maybe": want true or false`)
	require.Len(t, full.hitsSoFar(), sent, "a failed condition sends nothing")
}
