package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// TestEventsPage: the events page lists the tenant's events with what
// each fired; its form posts a test event that fires the tenant's event
// task (events:write), shows a refused field again with the reason, and
// is absent for a token that may only read events.
func TestEventsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "e")
	task := e.rest(http.MethodPost, "/v1/tasks", tok, `{"name": "on-files", "endpoint_id": "`+ep+`",
		"schedule": {"type": "event", "event": "files.ready"}}`)["id"].(string)

	p := e.get("/console/events", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.Contains(t, p.Body, "No event yet")
	require.Contains(t, p.Body, `id="post-event"`)

	p = e.post("/console/events", tok, url.Values{"name": {"files.ready"}, "key": {"2026-12-03"}, "payload": {`{"path": "a.csv"}`}})
	require.Equal(t, http.StatusCreated, p.Status, p.Body)
	require.Contains(t, p.Body, `id="posted"`)
	require.Contains(t, p.Body, "it fired 1 task(s)")
	require.Contains(t, p.Body, "<code>2026-12-03</code>")
	var execs int
	require.NoError(t, e.pool.QueryRow(t.Context(), `SELECT count(*) FROM executions WHERE task_id = $1 AND trigger = 'event'`,
		task).Scan(&execs))
	require.Equal(t, 1, execs)
	require.Contains(t, p.Body, "/console/executions/", "the list links the execution it fired")

	p = e.post("/console/events", tok, url.Values{"name": {"files ready"}, "payload": {`{`}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	require.Contains(t, p.Body, "The event was not posted")
	require.Contains(t, p.Body, `value="files ready"`, "the typed values are kept")

	reader := token(t, "acme", api.ScopeEventsRead)
	p = e.get("/console/events", reader)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	require.NotContains(t, p.Body, `id="post-event"`)
	require.Equal(t, 1, strings.Count(p.Body, `<tr id="ev-`))
	require.Equal(t, http.StatusForbidden, e.post("/console/events", reader, url.Values{"name": {"x"}}).Status)
	require.Equal(t, 1, strings.Count(e.get("/console/events", token(t, "other")).Body, "No event yet"), "another tenant's events are not shown")
}
