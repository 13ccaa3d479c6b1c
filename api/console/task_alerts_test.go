package console_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleTaskAlerts: a task's page says where its alerts go and from
// which failure in a row, and that a task without an alert endpoint has
// none.
func TestConsoleTaskAlerts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	pager := e.createEndpoint(tok, "pager")

	quiet := e.createTask(tok, "quiet", ep, "*/5 * * * *", "UTC")
	p := e.get("/console/tasks/"+quiet, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `<dd id="alerts">none`)

	id := e.createTask(tok, "watched", ep, "*/5 * * * *", "UTC")
	e.rest(http.MethodPatch, "/v1/tasks/"+id, tok, `{"alert_endpoint_id":"`+pager+`","alert_after_failures":3}`)
	p = e.get("/console/tasks/"+id, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `>pager</a> at each failed execution from 3 in a row on; <code>execution.recovered</code>`)

	e.rest(http.MethodPatch, "/v1/tasks/"+id, tok, `{"alert_after_failures":null}`)
	p = e.get("/console/tasks/"+id, tok)
	assert.Contains(t, p.Body, `>pager</a> at every failed execution;`)
}
