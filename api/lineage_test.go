package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestWorkflowRunLineageAPI: GET of a run returns rendered_from on a
// templated node once it rendered — the inputs it named and the upstream
// output it read, a null for an upstream without output — and none on an
// untemplated node; the exchanges are checked against the document. Another
// tenant gets a 404.
func TestWorkflowRunLineageAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "lineage")
	w := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: map[string]any{
			"name": "lineage", "inputs": map[string]any{"date": "2026-12-01"},
			"nodes": []any{
				map[string]any{"key": "extract", "endpoint_id": ep},
				map[string]any{"key": "quiet", "endpoint_id": ep},
				map[string]any{
					"key": "load", "endpoint_id": ep, "depends_on": []string{"extract", "quiet"}, "payload_template": true,
					"payload": map[string]any{"d": "{{ .inputs.date }}", "rows": "{{ .nodes.extract.output.rows }}", "q": "{{ .nodes.quiet.status }}"},
				},
			},
		},
	})
	runID := a.triggerWorkflow(tok, w.JSON["id"].(string))
	ctx := t.Context()
	enq, err := service.NewEnqueuer(a.pool, nil)
	require.NoError(t, err)
	d := service.NewDeliveries(a.pool, enq, service.DeliveriesConfig{})
	nodes := func() map[string]map[string]any {
		run := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok})
		out := map[string]map[string]any{}
		for _, n := range run.JSON["nodes"].([]any) {
			out[n.(map[string]any)["key"].(string)] = n.(map[string]any)
		}
		return out
	}
	succeed := func(x, output string) {
		var out json.RawMessage // none for ""
		if output != "" {
			out = json.RawMessage(output)
		}
		del, err := d.Begin(ctx, "acme", x, 1)
		require.NoError(t, err)
		require.Equal(t, service.ActionSend, del.Action, del.Reason)
		_, err = d.Finish(ctx, "acme", x, del.Lease, service.Outcome{
			Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: true, Output: out,
		})
		require.NoError(t, err)
	}
	before := nodes()
	require.NotContains(t, before["load"], "rendered_from")
	succeed(before["extract"]["execution_id"].(string), `{"rows": [1, 2]}`)
	succeed(before["quiet"]["execution_id"].(string), ``)

	after := nodes()
	require.NotContains(t, after["extract"], "rendered_from")
	require.NotContains(t, after["quiet"], "rendered_from")
	require.Equal(t, map[string]any{
		"inputs": []any{"date"},
		"nodes": map[string]any{
			"extract": map[string]any{"status": "succeeded", "output": map[string]any{"rows": []any{1.0, 2.0}}},
			"quiet":   map[string]any{"status": "succeeded"},
		},
	}, after["load"]["rendered_from"])
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: token(t, "globex")})
}
