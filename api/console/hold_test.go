package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleHoldAndRelease: a pending execution's page has Hold; held,
// it says so and has Release (and still Cancel); the task page's
// executions list has the same buttons, which come back to the task page;
// both changes are audited; another tenant's execution is a 404, a
// read-only token gets no button and a 403.
func TestConsoleHoldAndRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	task := e.createTask(tok, "t", e.createEndpoint(tok, "ep"), "@daily", "UTC")
	x := strings.TrimPrefix(e.post("/console/tasks/"+task+"/trigger", tok, nil).Location, "/console/executions/")
	execPage := "/console/executions/" + x

	p := e.get(execPage, tok)
	assert.Contains(t, p.Body, `id="hold"`)
	assert.NotContains(t, p.Body, `id="release"`)
	assert.NotContains(t, p.Body, `id="exec-held"`)
	p = e.post(execPage+"/hold", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, execPage, p.Location)
	p = e.get(execPage, tok)
	assert.Contains(t, p.Body, `id="exec-held"`)
	assert.Contains(t, p.Body, `id="release"`)
	assert.Contains(t, p.Body, `id="cancel"`, "a held execution can be cancelled")
	assert.NotContains(t, p.Body, `id="hold"`)
	assert.Contains(t, p.Body, "<strong>held</strong>", "on the timeline")

	// The task page's list: Release on the held one, back to the task page.
	taskPage := "/console/tasks/" + task
	p = e.get(taskPage, tok)
	assert.Contains(t, p.Body, `action="/console/executions/`+x+`/release"`)
	assert.Contains(t, p.Body, `<span class="label warn">held</span>`)
	p = e.post(execPage+"/release", tok, url.Values{"back": {taskPage}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, taskPage, p.Location)
	p = e.get(taskPage, tok)
	assert.Contains(t, p.Body, `action="/console/executions/`+x+`/hold"`)
	assert.NotContains(t, p.Body, `<span class="label warn">held</span>`)

	// Releasing what is not held is a conflict page.
	p = e.post(execPage+"/release", tok, nil)
	assert.Equal(t, http.StatusConflict, p.Status)
	assert.Contains(t, p.Body, "not held")

	var actions []string
	for _, it := range e.rest(http.MethodGet, "/v1/audit?resource_type=execution&resource_id="+x, tok, "")["items"].([]any) {
		m := it.(map[string]any)
		actions = append(actions, m["action"].(string))
		assert.Equal(t, "alice", m["subject"])
	}
	assert.Equal(t, []string{"release", "hold"}, actions)

	for _, path := range []string{execPage + "/hold", execPage + "/release"} {
		assert.Equal(t, http.StatusNotFound, e.post(path, token(t, "globex"), nil).Status, path)
	}
	readOnly := token(t, "acme", "tasks:read", "executions:read")
	assert.NotContains(t, e.get(execPage, readOnly).Body, `id="hold"`)
	assert.NotContains(t, e.get(taskPage, readOnly).Body, `/hold"`)
	assert.Equal(t, http.StatusForbidden, e.post(execPage+"/hold", readOnly, nil).Status)
}

// TestConsoleEndpointTest: the endpoints page's Test button sends one
// signed test request to the endpoint and shows its status, duration and
// response excerpt.
func TestConsoleEndpointTest(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "pong from the receiver")
	}))
	t.Cleanup(rcv.Close)
	e := newEnv(t)
	tok := token(t, "acme")
	p := e.post("/console/endpoints", tok, url.Values{"name": {"probe"}, "url": {rcv.URL + "/hook"}})
	require.Equal(t, http.StatusCreated, p.Status, p.Body)
	ep := idRE.FindString(e.rest(http.MethodGet, "/v1/endpoints", tok, "")["items"].([]any)[0].(map[string]any)["id"].(string))
	require.NotEmpty(t, ep)

	p = e.get("/console/endpoints", tok)
	assert.Contains(t, p.Body, `action="/console/endpoints/`+ep+`/test"`)
	p = e.post("/console/endpoints/"+ep+"/test", tok, nil)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="test-status">HTTP 202<`)
	assert.Contains(t, p.Body, `id="test-duration">`)
	assert.Contains(t, p.Body, "pong from the receiver")
	h := <-got
	assert.Equal(t, "true", h.Get("X-Ax-Test"))
	assert.NotEmpty(t, h.Get("Webhook-Signature"))

	assert.Equal(t, http.StatusNotFound, e.post("/console/endpoints/"+ep+"/test", token(t, "globex"), nil).Status)
	assert.Equal(t, http.StatusForbidden, e.post("/console/endpoints/"+ep+"/test", token(t, "acme", "endpoints:read"), nil).Status)
}
