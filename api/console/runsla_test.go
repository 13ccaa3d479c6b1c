package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleRunSLA: a run's page shows its workflow's SLA: the deadline
// (slot + sla.finish_within_ms) while it is not due; once the sweep has
// recorded a miss, "missed" with when, the deadline the miss recorded and
// its sla_missed event; a workflow without an SLA says so.
func TestConsoleRunSLA(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	doc := strings.Replace(workflowDoc(ep), `{"name":"etl",`, `{"name":"etl","sla":{"finish_within_ms":3600000},`, 1)
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, doc)["id"].(string)
	run := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)
	runID := run["id"].(string)
	slot, err := time.Parse(time.RFC3339Nano, run["scheduled_for"].(string))
	require.NoError(t, err)
	due := slot.Add(time.Hour).UTC()

	p := e.get("/console/workflow-runs/"+runID, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="run-sla" data-sla="open"`)
	assert.Contains(t, p.Body, "succeed within 1h of the slot")
	assert.Contains(t, p.Body, `<span id="sla-due"><time datetime="`+due.Format(time.RFC3339)+`"`)
	assert.Contains(t, p.Body, "not due yet")
	assert.NotContains(t, p.Body, `id="sla-missed"`)
	assert.NotContains(t, p.Body, `id="run-events"`)

	// The sweep records the miss: sla_missed_at and an sla_missed event
	// with the deadline it applied.
	_, err = e.pool.Exec(ctx, `UPDATE workflow_runs SET sla_missed_at = '2026-01-02T04:00:00Z' WHERE tenant_id = 'acme' AND id = $1`, runID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO workflow_run_events (tenant_id, run_id, type, message, data)
		VALUES ('acme', $1, 'sla_missed', 'not succeeded within 1h0m0s of its slot (sla.finish_within_ms); it is running',
		'{"due_at":"2026-01-02T03:04:05Z","state":"running","finish_within_ms":3600000}')`, runID)
	require.NoError(t, err)

	p = e.get("/console/workflow-runs/"+runID, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="run-sla" data-sla="missed"`)
	assert.Contains(t, p.Body, `<span class="label warn" id="sla-missed">missed</span>, recorded <time datetime="2026-01-02T04:00:00Z"`)
	assert.Contains(t, p.Body, `<span id="sla-due"><time datetime="2026-01-02T03:04:05Z"`, "the deadline the miss recorded")
	assert.Contains(t, p.Body, `<table id="run-events">`)
	assert.Contains(t, p.Body, `<code>sla_missed</code></td><td>not succeeded within 1h0m0s of its slot`)

	// A run cancelled before its deadline did not miss it.
	cancelled := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)["id"].(string)
	e.rest(http.MethodPost, "/v1/workflow-runs/"+cancelled+"/cancel", tok, ``)
	p = e.get("/console/workflow-runs/"+cancelled, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="run-sla" data-sla="ended"`)
	assert.Contains(t, p.Body, "ended cancelled before its deadline")

	// Another tenant sees nothing of it.
	assert.Equal(t, http.StatusNotFound, e.get("/console/workflow-runs/"+runID, token(t, "globex")).Status)

	// A workflow without an SLA.
	plain := e.rest(http.MethodPost, "/v1/workflows", tok, strings.Replace(workflowDoc(ep), `"etl"`, `"plain"`, 1))["id"].(string)
	other := e.rest(http.MethodPost, "/v1/workflows/"+plain+"/trigger", tok, `{}`)["id"].(string)
	p = e.get("/console/workflow-runs/"+other, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `id="run-sla" data-sla="none"`)
	assert.Contains(t, p.Body, "the workflow sets no <code>sla.finish_within_ms</code>")
}
