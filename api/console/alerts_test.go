package console_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// TestConsoleAlerts: the alerts page teaches the next step in each empty
// section, then lists an execution's SLA miss, an execution failed for
// good, a workflow run's SLA miss and a blocked run (linked to its page,
// where it is resolved); another tenant sees none of them, and a session
// without workflows:read sees the execution sections only.
func TestConsoleAlerts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	tok := token(t, "acme")

	p := e.get("/console/alerts", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assertSecurityHeaders(t, p)
	assert.Contains(t, p.Body, `href="/console/alerts" aria-current="page">Alerts</a>`, "the nav link")
	assert.Contains(t, p.Body, "No execution has missed its SLA")
	assert.Contains(t, p.Body, `-d '{"sla":{"finish_within_ms":3600000}`, "how to set an SLA on a task")
	assert.Contains(t, p.Body, "No workflow run has missed its SLA")
	assert.Contains(t, p.Body, "No execution failed for good in the last 24h")
	assert.Contains(t, p.Body, "No workflow run is blocked")

	ep := e.createEndpoint(tok, "ep")
	task := e.createTask(tok, "nightly", ep, "30 2 * * *", "UTC")
	// Executions that failed for good and missed an SLA: states only
	// retries spent over minutes reach, written as a delivery would.
	failed, late, stale := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	_, err := e.pool.Exec(ctx, `
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, attempts, last_error, last_error_class, finished_at)
		VALUES ('acme', $1, $4, now() - interval '2 hours', 'manual', 'failed', 3, 'HTTP 503 Service Unavailable', 'http_5xx', now() - interval '1 hour'),
		       ('acme', $2, $4, now() - interval '3 hours', 'manual', 'retrying', 2, 'HTTP 500', 'http_5xx', NULL),
		       ('acme', $3, $4, now() - interval '3 days', 'manual', 'failed', 3, 'HTTP 404', 'http_4xx', now() - interval '2 days')`,
		failed, late, stale, task)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO unfinished_executions SELECT tenant_id, task_id, scheduled_for, id
		FROM executions WHERE tenant_id = 'acme' AND id = $1`, late)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO sla_misses (tenant_id, execution_id, due_at) VALUES ('acme', $1, now() - interval '2 hours')`, late)
	require.NoError(t, err)

	// A blocked run, for real: its first node's execution is cancelled.
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, `{"name":"etl","nodes":[{"key":"extract","endpoint_id":"`+ep+`"},`+
		`{"key":"load","endpoint_id":"`+ep+`","depends_on":["extract"]}]}`)["id"].(string)
	run := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)
	runID := run["id"].(string)
	x := run["nodes"].([]any)[0].(map[string]any)["execution_id"].(string)
	e.rest(http.MethodPost, "/v1/executions/"+x+"/cancel", tok, ``)
	require.Equal(t, "blocked", e.rest(http.MethodGet, "/v1/workflow-runs/"+runID, tok, "")["state"])
	// And it missed its workflow's SLA, as the sweep records it.
	_, err = e.pool.Exec(ctx, `UPDATE workflow_runs SET sla_missed_at = now() WHERE tenant_id = 'acme' AND id = $1`, runID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO workflow_run_events (tenant_id, run_id, type, data)
		VALUES ('acme', $1, 'sla_missed', '{"due_at":"2026-01-02T03:04:05Z","state":"blocked"}')`, runID)
	require.NoError(t, err)

	p = e.get("/console/alerts", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	body := p.Body
	assert.NotContains(t, body, "No execution has missed its SLA")
	assert.NotContains(t, body, "No workflow run has missed its SLA")
	assert.NotContains(t, body, "No execution failed for good")
	assert.NotContains(t, body, "No workflow run is blocked")
	// The execution's SLA miss: the execution, its task by name, its state now.
	assert.Contains(t, body, `<a href="/console/executions/`+late+`">`+shownID(late)+`</a>`)
	assert.Contains(t, body, `<a href="/console/tasks/`+task+`">`+shownName(task, "nightly")+`</a>`)
	assert.Contains(t, body, `<span class="state state-retrying">retrying</span>`)
	// Failed for good within a day, with its error; not the one of two days ago.
	assert.Contains(t, body, `/console/executions/`+failed+`"`)
	assert.Contains(t, body, `<code>http_5xx</code> HTTP 503 Service Unavailable`)
	assert.NotContains(t, body, stale)
	// The run's SLA miss, with the recorded deadline in UTC on hover.
	assert.Contains(t, body, `<a href="/console/workflows/`+wf+`">`+shownName(wf, "etl")+`</a>`)
	assert.Contains(t, body, `<time datetime="2026-01-02T03:04:05Z" title="2026-01-02 03:04:05 UTC">`)
	// The blocked run links to its page, where it is resolved.
	assert.Contains(t, body, `<a href="/console/workflow-runs/`+runID+`">Resolve `+shownID(runID)+`</a>`)
	assert.Contains(t, body, `<span class="state state-blocked">blocked</span>`)

	// Another tenant sees none of it.
	p = e.get("/console/alerts", token(t, "globex"))
	require.Equal(t, http.StatusOK, p.Status)
	for _, id := range []string{late, failed, runID, wf, task} {
		assert.NotContains(t, p.Body, id)
	}
	assert.Contains(t, p.Body, "No execution has missed its SLA")
	assert.Contains(t, p.Body, "No workflow run is blocked")

	// Scopes: executions:read is the page's; without workflows:read the
	// workflow sections are not there.
	p = e.get("/console/alerts", token(t, "acme", api.ScopeExecutionsRead))
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, late)
	assert.NotContains(t, p.Body, runID)
	assert.NotContains(t, p.Body, "Blocked workflow runs")
	assert.Equal(t, http.StatusForbidden, e.get("/console/alerts", token(t, "acme", api.ScopeTasksRead)).Status)
}

// TestConsoleWorkflowStepLinks: a workflow step's execution names its
// workflow, run and node, never the workflow's own task behind it (whose
// page does not exist): its page links to its run and node, the alerts
// list it failed for good under its workflow's name linked to its run, and
// the API shows it without a task_id.
func TestConsoleWorkflowStepLinks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, `{"name":"etl","nodes":[{"key":"extract","endpoint_id":"`+ep+`"}]}`)["id"].(string)
	run := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)
	runID := run["id"].(string)
	x := run["nodes"].([]any)[0].(map[string]any)["execution_id"].(string)
	var hidden string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT task_id::text FROM executions WHERE id = $1`, x).Scan(&hidden))
	// It fails for good, as a delivery would record it.
	_, err := e.pool.Exec(ctx, `WITH f AS (UPDATE executions SET state = 'failed', attempts = 1, last_error = 'HTTP 400',
			last_error_class = 'http_4xx', finished_at = now() WHERE id = $1 RETURNING tenant_id, id)
		DELETE FROM unfinished_executions u USING f WHERE u.tenant_id = f.tenant_id AND u.id = f.id`, x)
	require.NoError(t, err)

	got := e.rest(http.MethodGet, "/v1/executions/"+x, tok, "")
	assert.NotContains(t, got, "task_id", "the step's task is not one the API shows")
	assert.Equal(t, wf, got["workflow_id"])
	assert.Equal(t, runID, got["workflow_run_id"])
	assert.Equal(t, "extract", got["node"])

	p := e.get("/console/executions/"+x, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<dt>Workflow step</dt><dd id="exec-step"><a href="/console/workflows/`+wf+`">`+shownName(wf, "etl")+`</a>`)
	assert.Contains(t, p.Body, `run <a href="/console/workflow-runs/`+runID+`">`+shownID(runID)+`</a>`)
	assert.Contains(t, p.Body, `node <a href="/console/workflow-runs/`+runID+`#node-extract"><code>extract</code></a>`)
	assert.NotContains(t, p.Body, hidden)
	assert.NotContains(t, p.Body, "X-Ax-Task-Id")
	assert.Contains(t, p.Body, "X-Ax-Workflow-Run-Id")

	p = e.get("/console/alerts", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<a href="/console/executions/`+x+`">`)
	assert.Contains(t, p.Body, `<a href="/console/workflow-runs/`+runID+`">`+shownName(wf, "etl")+`</a><br><small>node <code>extract</code></small>`)
	assert.NotContains(t, p.Body, hidden)
}
