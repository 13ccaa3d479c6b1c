package console_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleWaitForNode: a run's page shows what an awaiting wait_for
// node waits for, with the Run now and Skip buttons, which resolve it;
// Run now's flash says the node was marked succeeded, not started.
func TestConsoleWaitForNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	doc := `{"name":"gated","max_active_runs":5,"nodes":[
		{"key":"files","wait_for":{"event":"files.ready","key":"k1","timeout_ms":3600000}},
		{"key":"process","endpoint_id":"` + ep + `","depends_on":["files"]}]}`
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, doc)["id"].(string)
	runID := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)["id"].(string)
	runPath := "/console/workflow-runs/" + runID

	p := e.get(runPath, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<span class="node-wait">waits for <code>files.ready</code> key <code>k1</code> until `)
	assert.Contains(t, p.Body, `action="/console/workflow-runs/`+runID+`/nodes/files/run"`, "an awaiting node can be run")
	assert.Contains(t, p.Body, `action="/console/workflow-runs/`+runID+`/nodes/files/skip"`, "and skipped")

	p = e.post(runPath+"/nodes/files/run", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, `id="flash">Node &#34;files&#34; is marked succeeded without its event`, "a wait is not started: it sends nothing")
	assert.NotContains(t, p.Body, "was started now")
	st := dagStatesOf(p.Body)
	assert.Equal(t, "succeeded", st["files"])
	assert.Equal(t, "pending", st["process"])
	assert.NotContains(t, p.Body, `/nodes/files/run"`, "a resolved wait has no buttons")

	p = e.post(runPath+"/nodes/files/skip", tok, nil)
	assert.Equal(t, http.StatusConflict, p.Status, "a wait that ended is not skipped")
	assert.Contains(t, p.Body, `id="problem"`)
}
