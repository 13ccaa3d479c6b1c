package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestWorkflowInputsAPI: a workflow declares inputs; a trigger overrides
// them (an undeclared name is a 422 naming inputs.<name>); the run and
// the run lists return the merged inputs; a PATCH of the inputs is a new
// version; a backfill's inputs are checked the same way, and a task's
// backfill takes none.
func TestWorkflowInputsAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "inputs")
	created := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: map[string]any{
			"name": "with-inputs", "max_active_runs": 5,
			"schedule": map[string]any{"type": "cron", "cron": "0 * * * *", "timezone": "UTC"},
			"inputs":   map[string]any{"business_date": "2026-12-01", "limit": 10, "opts": map[string]any{"dry": false}},
			"nodes":    []any{map[string]any{"key": "a", "endpoint_id": ep}},
		},
	})
	id := created.JSON["id"].(string)
	defaults := map[string]any{"business_date": "2026-12-01", "limit": 10.0, "opts": map[string]any{"dry": false}}
	require.Equal(t, defaults, created.JSON["inputs"])
	require.Equal(t, defaults, a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflows/" + id, Token: tok}).JSON["inputs"])

	plain := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok})
	require.Equal(t, defaults, plain.JSON["inputs"])
	run := a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok,
		Body: map[string]any{"inputs": map[string]any{"limit": 5}, "dedup_key": "d1"},
	})
	merged := map[string]any{"business_date": "2026-12-01", "limit": 5.0, "opts": map[string]any{"dry": false}}
	require.Equal(t, merged, run.JSON["inputs"])
	runID := run.JSON["id"].(string)
	require.Equal(t, merged, a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok}).JSON["inputs"])
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflows/" + id + "/runs", Token: tok})
	byID := map[string]any{}
	for _, it := range list.JSON["items"].([]any) {
		m := it.(map[string]any)
		byID[m["id"].(string)] = m["inputs"]
	}
	require.Equal(t, map[string]any{runID: merged, plain.JSON["id"].(string): defaults}, byID)

	bad := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok,
		Body: map[string]any{"inputs": map[string]any{"foo": 1, "limit": 2}},
	})
	require.Equal(t, []string{"inputs.foo"}, fieldErrors(bad))
	big := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok,
		Body: map[string]any{"inputs": map[string]any{"limit": strings.Repeat("x", service.InputsMax)}},
	})
	require.Equal(t, []string{"inputs"}, fieldErrors(big))
	badName := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: map[string]any{
			"name": "bad-inputs", "inputs": map[string]any{"has-dash": 1},
			"nodes": []any{map[string]any{"key": "a", "endpoint_id": ep}},
		},
	})
	require.Equal(t, []string{"inputs.has-dash"}, fieldErrors(badName))

	// A PATCH of the inputs replaces them and moves the version; the run
	// keeps its own.
	patched := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
		Body: map[string]any{"inputs": map[string]any{"limit": 1}},
	})
	require.EqualValues(t, 2, patched.JSON["version"])
	require.Equal(t, map[string]any{"limit": 1.0}, patched.JSON["inputs"])
	same := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
		Body: map[string]any{"max_active_runs": 3},
	})
	require.EqualValues(t, 2, same.JSON["version"], "the inputs did not change")
	require.Equal(t, merged, a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok}).JSON["inputs"])

	// Backfills.
	from := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour).Format(time.RFC3339)
	to := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour).Format(time.RFC3339)
	bf := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/backfill", Token: tok,
		Body: map[string]any{"from": from, "to": to, "inputs": map[string]any{"business_date": "x"}},
	})
	require.Equal(t, []string{"inputs.business_date"}, fieldErrors(bf), "no longer declared")
	ok := a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/backfill", Token: tok,
		Body: map[string]any{"from": from, "to": to, "inputs": map[string]any{"limit": 99}},
	})
	require.Equal(t, map[string]any{"limit": 99.0}, ok.JSON["inputs"])
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/backfills/" + ok.JSON["id"].(string), Token: tok})
	require.Equal(t, map[string]any{"limit": 99.0}, got.JSON["inputs"])
	task := a.createTask(tok, ep, "plain", nil).JSON["id"].(string)
	tb := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + task + "/backfill", Token: tok,
		Body: map[string]any{"from": from, "to": to, "inputs": map[string]any{"limit": 1}},
	})
	require.Equal(t, []string{"inputs"}, fieldErrors(tb))

	// Another tenant: 404, nothing of the run.
	a.must(http.StatusNotFound, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: token(t, "globex"),
		Body: map[string]any{"inputs": map[string]any{"limit": 1}},
	})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: token(t, "globex")})
}

// TestWorkflowNodeOutputAPI: a callback node's completion output is the
// node's output in the run and its execution's; an output over 64 KiB is
// a 422 naming output, and changes nothing.
func TestWorkflowNodeOutputAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "cb")
	w := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: map[string]any{"name": "cb-output", "nodes": []any{map[string]any{
			"key": "a", "endpoint_id": ep,
			"completion": map[string]any{"mode": "callback", "timeout_ms": 3600000},
		}}},
	})
	runID := a.triggerWorkflow(tok, w.JSON["id"].(string))
	node := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok}).JSON["nodes"].([]any)[0].(map[string]any)
	require.NotContains(t, node, "output", "no output before the node ends")
	x := node["execution_id"].(string)

	// Sent and accepted, as the deliver worker does.
	ctx := t.Context()
	enq, err := service.NewEnqueuer(a.pool, nil)
	require.NoError(t, err)
	d := service.NewDeliveries(a.pool, enq, service.DeliveriesConfig{})
	del, err := d.Begin(ctx, "acme", x, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, del.Action, del.Reason)
	cb, err := d.PrepareCallback(ctx, del)
	require.NoError(t, err)
	_, err = d.Accept(ctx, del, http.StatusAccepted, time.Millisecond)
	require.NoError(t, err)

	big := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: map[string]any{"status": "succeeded", "output": map[string]any{"blob": strings.Repeat("x", service.OutputMax)}},
	})
	require.Equal(t, []string{"output"}, fieldErrors(big))
	require.Contains(t, string(big.Raw), "at most 65536 bytes")
	a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: map[string]any{"status": "succeeded", "output": map[string]any{"rows": 7}},
	})
	run := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok})
	require.Equal(t, "succeeded", run.JSON["state"])
	require.Equal(t, map[string]any{"rows": 7.0}, run.JSON["nodes"].([]any)[0].(map[string]any)["output"])
	require.Equal(t, map[string]any{"rows": 7.0},
		a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + x, Token: tok}).JSON["output"])
}
