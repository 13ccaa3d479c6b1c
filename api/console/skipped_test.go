package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleSkippedExecutionHasNoRetry: a skipped slot's execution page
// offers no Retry (the service refuses to retry a slot deliberately not
// fired, 409) and no Cancel; a cancelled execution's page still has Retry.
func TestConsoleSkippedExecutionHasNoRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "t", ep, "*/5 * * * *", "UTC")

	slots := skipSlotRE.FindAllStringSubmatch(e.get("/console/tasks/"+id, tok).Body, -1)
	require.NotEmpty(t, slots)
	p := e.post("/console/tasks/"+id+"/skip", tok, url.Values{"scheduled_for": {slots[0][1]}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	xs := e.rest(http.MethodGet, "/v1/executions?task_id="+id+"&state=skipped", tok, "")["items"].([]any)
	require.Len(t, xs, 1)
	x := xs[0].(map[string]any)["id"].(string)

	p = e.get("/console/executions/"+x, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<span class="state state-skipped">skipped</span>`)
	assert.Contains(t, p.Body, "skipped by request")
	assert.NotContains(t, p.Body, `id="retry"`, "a skipped slot cannot be retried")
	assert.NotContains(t, p.Body, `id="cancel"`)
	p = e.post("/console/executions/"+x+"/retry", tok, nil)
	assert.Equal(t, http.StatusConflict, p.Status, "what the button would have met")

	// A cancelled execution keeps its Retry.
	f := e.rest(http.MethodPost, "/v1/tasks/"+id+"/trigger", tok, `{}`)["id"].(string)
	require.Equal(t, "cancelled", e.rest(http.MethodPost, "/v1/executions/"+f+"/cancel", tok, "")["state"])
	p = e.get("/console/executions/"+f, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="retry"`)
}
