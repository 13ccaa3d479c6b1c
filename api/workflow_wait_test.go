package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// nodeOf returns node key of a run's JSON.
func nodeOf(t *testing.T, run map[string]any, key string) map[string]any {
	t.Helper()
	for _, n := range run["nodes"].([]any) {
		if m := n.(map[string]any); m["key"] == key {
			return m
		}
	}
	require.FailNow(t, "no node", key)
	return nil
}

// TestWaitForAPI: a wait_for node round-trips; its 422s name its fields;
// a waiting node shows running with its wait; an event resolves it (its
// output and event_id in the run, matched.waits and the node in the
// event); POST …/nodes/{key}/run takes an optional output (only for a
// wait_for node) and refuses a node that is not waiting (409), as skip
// does.
func TestWaitForAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "files")
	body := `{"name":"daily.import","max_active_runs":5,"nodes":[
		{"key":"files","wait_for":{"event":"files.ready","key":"{{ .business_date }}","timeout_ms":3600000}},
		{"key":"process","endpoint_id":"` + ep + `","depends_on":["files"],"payload_template":true,
		 "payload":{"file":"{{ .nodes.files.output.file }}"}}]}`
	created := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: body}).JSON
	id := created["id"].(string)
	files := created["nodes"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"event": "files.ready", "key": "{{ .business_date }}", "timeout_ms": 3600000.0}, files["wait_for"])
	require.NotContains(t, files, "endpoint_id")

	for _, c := range []struct{ node, field string }{
		{`{"key":"w","endpoint_id":"` + ep + `","wait_for":{"event":"x","timeout_ms":1000}}`, "nodes[0].endpoint_id"},
		{`{"key":"w","wait_for":{"event":"x","timeout_ms":500}}`, "nodes[0].wait_for.timeout_ms"},
		{`{"key":"w","wait_for":{"event":"a b","timeout_ms":1000}}`, "nodes[0].wait_for.event"},
		{`{"key":"w","wait_for":{"event":"x","key":"{{ .nodes.up.output }}","timeout_ms":1000}}`, "nodes[0].wait_for.key"},
		{`{"key":"w","wait_for":{"event":"x","timeout_ms":1000},"payload":{"a":1}}`, "nodes[0].payload"},
		{`{"key":"w","wait_for":{"event":"x","timeout_ms":1000},"shards":4}`, "nodes[0].shards"},
		{`{"key":"w","wait_for":{"event":"x","timeout_ms":1000},"completion":{"mode":"callback"}}`, "nodes[0].completion"},
	} {
		r := a.must(http.StatusUnprocessableEntity, req{
			Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: `{"name":"bad","nodes":[` + c.node + `]}`,
		})
		require.Contains(t, string(r.Raw), `"`+c.field+`"`, c.node)
	}
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: `{"name":"bad","nodes":[{"key":"w","wait_for":{"event":"x"}}]}`,
	})
	require.Contains(t, string(r.Raw), "1000 (1 s) to 2592000000 (30 days)", "the 422 says the range")

	trigger := func() (string, map[string]any) {
		run := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok, Body: `{}`})
		return run.JSON["id"].(string), run.JSON
	}
	runID, run := trigger()
	n := nodeOf(t, run, "files")
	require.Equal(t, "running", n["state"])
	wait := n["wait"].(map[string]any)
	require.Equal(t, "files.ready", wait["event"])
	date := run["scheduled_for"].(string)[:10]
	require.Equal(t, date, wait["key"])
	require.NotEmpty(t, wait["deadline"])
	require.NotContains(t, n, "execution_id")

	posted := a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/events", Token: tok,
		Body: map[string]any{"name": "files.ready", "key": date, "payload": map[string]any{"file": "a.csv"}},
	}).JSON
	require.Equal(t, map[string]any{"tasks": 0.0, "workflows": 0.0, "waits": 1.0}, posted["matched"])
	detail := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/events/" + posted["id"].(string), Token: tok}).JSON
	require.Equal(t, []any{map[string]any{"type": "wait", "workflow_id": id, "run_id": runID, "node": "files"}}, detail["matches"])
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok}).JSON
	n = nodeOf(t, got, "files")
	require.Equal(t, "succeeded", n["state"])
	require.Equal(t, posted["id"], n["event_id"])
	require.Equal(t, map[string]any{"file": "a.csv"}, n["output"])
	require.NotContains(t, n, "wait")
	require.Equal(t, "pending", nodeOf(t, got, "process")["state"])

	path := func(run, key, action string) string {
		return "/v1/workflow-runs/" + run + "/nodes/" + key + "/" + action
	}
	a.must(http.StatusConflict, req{Method: http.MethodPost, Path: path(runID, "files", "run"), Token: tok})
	a.must(http.StatusConflict, req{Method: http.MethodPost, Path: path(runID, "files", "skip"), Token: tok})
	a.must(http.StatusConflict, req{Method: http.MethodPost, Path: path(runID, "process", "run"), Token: tok})
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: path(runID, "process", "run"), Token: tok, Body: `{"output":{"a":1}}`,
	})
	require.Contains(t, string(r.Raw), `"output"`)

	second, _ := trigger()
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: path(second, "files", "run"), Token: tok, Body: `{"outptu":1}`})
	ran := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: path(second, "files", "run"), Token: tok, Body: `{"output":{"file":"by-hand.csv"}}`,
	}).JSON
	n = nodeOf(t, ran, "files")
	require.Equal(t, "succeeded", n["state"])
	require.Equal(t, map[string]any{"file": "by-hand.csv"}, n["output"])
	require.NotContains(t, n, "event_id")

	third, _ := trigger()
	skipped := a.must(http.StatusOK, req{Method: http.MethodPost, Path: path(third, "files", "skip"), Token: tok}).JSON
	require.Equal(t, "skipped", nodeOf(t, skipped, "files")["state"])
	fourth, _ := trigger()
	plain := a.must(http.StatusOK, req{Method: http.MethodPost, Path: path(fourth, "files", "run"), Token: tok}).JSON
	n = nodeOf(t, plain, "files")
	require.Equal(t, "succeeded", n["state"])
	require.NotContains(t, n, "output", "run without a body: no output")
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: path(fourth, "files", "run"), Token: token(t, "other")})
}
