package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNULInJSONDocuments: Postgres cannot hold U+0000 in a jsonb value. A
// request whose JSON goes to a jsonb column (a workflow node's payload, a
// heartbeat's progress, a completion's output) with \u0000 in a value or
// a key is a 422 naming the field, never a 500; a completion refused so
// leaves the attempt open, and the same completion without it succeeds.
// A task's payload is stored as bytes and keeps the character.
func TestNULInJSONDocuments(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")

	for _, payload := range []string{`{"s":"a\u0000b"}`, `{"a\u0000":1}`, `["x",{"deep":["\u0000"]}]`, `"\u0000"`} {
		body := `{"name":"wf","nodes":[{"key":"a","endpoint_id":"` + ep + `","payload":` + payload + `}]}`
		r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: body})
		require.Equal(t, []string{"nodes[0].payload"}, fieldErrors(r), payload)
	}
	// An escaped backslash before u0000 is the text \u0000, not the character.
	wf := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: `{"name":"wf","nodes":[{"key":"a","endpoint_id":"` + ep + `","payload":{"s":"a\\u0000b"}}]}`,
	}).JSON["id"].(string)
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + wf, Token: tok,
		Body: `{"nodes":[{"key":"a","endpoint_id":"` + ep + `"},{"key":"b","endpoint_id":"` + ep + `","payload":{"\u0000":0}}]}`,
	})
	require.Equal(t, []string{"nodes[1].payload"}, fieldErrors(r))

	x, cb := a.waitingExecution(tok)
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: cb,
		Body: `{"progress":{"line":"\u0000"}}`,
	})
	require.Equal(t, []string{"progress"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: `{"status":"succeeded","output":{"stdout_tail":"ok\u0000"}}`,
	})
	require.Equal(t, []string{"output"}, fieldErrors(r))
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + x, Token: tok})
	require.Equal(t, "running", got.JSON["state"], "a refused completion changes nothing")
	done := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: `{"status":"succeeded","output":{"stdout_tail":"ok"}}`,
	})
	require.Equal(t, "succeeded", done.JSON["state"])

	// A task's payload is bytes: the character is kept, byte for byte.
	task := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: `{"name":"t","endpoint_id":"` + ep + `","schedule":{"type":"interval","interval_seconds":60},"payload":{"s":"a\u0000b"}}`,
	})
	require.Equal(t, map[string]any{"s": "a\x00b"}, task.JSON["payload"])
}
