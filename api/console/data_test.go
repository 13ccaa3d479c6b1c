package console_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/service"
)

// TestConsoleTaskRenderedBody: a templated task's page shows what its next
// fire, or a slot typed in UTC, would send (the render call: nothing is
// sent), and a template that fails for that slot as the field and reason;
// an untemplated task has no preview.
func TestConsoleTaskRenderedBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.rest(http.MethodPost, "/v1/tasks", tok, `{"name":"report","endpoint_id":"`+ep+`","payload_template":true,`+
		`"schedule":{"type":"cron","cron":"0 9 * * *","timezone":"UTC"},`+
		`"payload":{"day":"{{ .business_date }}","next":"{{ date_add .business_date 1 }}","n":1}}`)["id"].(string)

	p := e.get("/console/tasks/"+id, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	body := html.UnescapeString(p.Body)
	assert.Contains(t, body, `<h2 id="rendered">Rendered body</h2>`)
	assert.Contains(t, body, `id="rendered-body"`)
	assert.Regexp(t, `"day": "\d{4}-\d\d-\d\d"`, body, "the next fire, indented")

	p = e.get("/console/tasks/"+id+"?render_at=2026-12-03T09:00", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	body = html.UnescapeString(p.Body)
	assert.Contains(t, body, "\"day\": \"2026-12-03\",\n  \"next\": \"2026-12-04\",\n  \"n\": 1")
	assert.Contains(t, body, `datetime="2026-12-03T09:00:00Z"`, "the slot it rendered")
	assert.Contains(t, body, `value="2026-12-03T09:00"`, "the slot as typed")
	assert.NotContains(t, body, `id="render-problem"`)

	p = e.get("/console/tasks/"+id+"?render_at=yesterday", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="render-problem"`)
	assert.Contains(t, p.Body, `<code>scheduled_for</code> must be a date and time`)

	broken := e.rest(http.MethodPost, "/v1/tasks", tok, `{"name":"broken","endpoint_id":"`+ep+`","payload_template":true,`+
		`"schedule":{"type":"cron","cron":"0 9 * * *","timezone":"UTC"},"payload":{"x":"{{ date_add .trigger 1 }}"}}`)["id"].(string)
	p = e.get("/console/tasks/"+broken, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="render-problem"`)
	assert.Contains(t, p.Body, "nothing would be sent")
	assert.Contains(t, p.Body, `<code>payload.x</code>`)
	assert.NotContains(t, p.Body, `id="rendered-body"`)

	plain := e.createTask(tok, "plain", ep, "0 9 * * *", "UTC")
	assert.NotContains(t, e.get("/console/tasks/"+plain, tok).Body, "Rendered body")
	assert.Equal(t, http.StatusNotFound, e.get("/console/tasks/"+id+"?render_at=2026-12-03T09:00", token(t, "globex")).Status)
}

// dataWorkflowDoc: extract (plain) → transform, whose payload reads the
// date input and extract's rows.
func dataWorkflowDoc(ep string) string {
	return `{"name":"etl","inputs":{"date":"2026-12-01","mode":"full"},"nodes":[` +
		`{"key":"extract","endpoint_id":"` + ep + `"},` +
		`{"key":"transform","endpoint_id":"` + ep + `","depends_on":["extract"],"payload_template":true,` +
		`"payload":{"day":"{{ .inputs.date }}","rows":"{{ .nodes.extract.output.rows }}"}}]}`
}

// succeed delivers a run's node's execution with a 2xx whose body is
// output, as the deliver worker would.
func (e *env) succeed(tok, runID, key, output string) {
	e.t.Helper()
	run := e.rest(http.MethodGet, "/v1/workflow-runs/"+runID, tok, "")
	var id string
	for _, n := range run["nodes"].([]any) {
		if n := n.(map[string]any); n["key"] == key {
			id, _ = n["execution_id"].(string)
		}
	}
	require.NotEmpty(e.t, id, "node %s fired", key)
	enq, err := service.NewEnqueuer(e.pool, nil)
	require.NoError(e.t, err)
	del := service.NewDeliveries(e.pool, enq, service.DeliveriesConfig{})
	ctx := context.Background()
	d, err := del.Begin(ctx, "acme", id, 1)
	require.NoError(e.t, err)
	require.Equal(e.t, service.ActionSend, d.Action, d.Reason)
	_, err = del.Finish(ctx, "acme", id, d.Lease, service.Outcome{
		Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: true, Output: json.RawMessage(output),
	})
	require.NoError(e.t, err)
}

// TestConsoleWorkflowTriggerWithInputs: the workflow page's form starts a
// run with inputs (pre-filled with the defaults); an undeclared name or
// JSON that is not an object is a 422 shown next to the field with the
// inputs as typed. A token that may not trigger sees no form.
func TestConsoleWorkflowTriggerWithInputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, dataWorkflowDoc(ep))["id"].(string)

	p := e.get("/console/workflows/"+wf, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="trigger-inputs-form"`)
	assert.Contains(t, html.UnescapeString(p.Body), "{\n  \"date\": \"2026-12-01\",\n  \"mode\": \"full\"\n}</textarea>", "the defaults")
	assert.NotContains(t, e.get("/console/workflows/"+wf, token(t, "acme", api.ScopeWorkflowsRead)).Body, `id="trigger-inputs-form"`)

	p = e.post("/console/workflows/"+wf+"/trigger", tok, url.Values{"inputs": {`{"date": "2026-12-03", "foo": 1}`}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="trigger-problem"`)
	assert.Contains(t, p.Body, `<code>inputs.foo</code> the workflow declares no input`)
	assert.Contains(t, p.Body, `aria-invalid="true"`)
	assert.Contains(t, html.UnescapeString(p.Body), `{"date": "2026-12-03", "foo": 1}</textarea>`, "as typed")

	p = e.post("/console/workflows/"+wf+"/trigger", tok, url.Values{"inputs": {`{"date": `}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, `<code>inputs</code> must be a JSON object`)
	p = e.post("/console/workflows/"+wf+"/trigger", tok, url.Values{"inputs": {`[1]`}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)

	p = e.post("/console/workflows/"+wf+"/trigger", tok, url.Values{"inputs": {`{"date": "2026-12-03"}`}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	runID := strings.TrimSuffix(strings.TrimPrefix(p.Location, "/console/workflow-runs/"), "?done=triggered")
	run := e.rest(http.MethodGet, "/v1/workflow-runs/"+runID, tok, "")
	assert.Equal(t, map[string]any{"date": "2026-12-03", "mode": "full"}, run["inputs"])

	// Another tenant's workflow: 404, nothing started.
	p = e.post("/console/workflows/"+wf+"/trigger", token(t, "globex"), url.Values{"inputs": {`{}`}})
	assert.Equal(t, http.StatusNotFound, p.Status)
}

// TestConsoleWorkflowRunData: a run's page shows its inputs, each node's
// output (indented) and, for a templated node, what it was rendered from:
// the inputs it read with their values and the upstream outputs it read.
func TestConsoleWorkflowRunData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, dataWorkflowDoc(ep))["id"].(string)
	runID := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{"inputs":{"date":"2026-12-03"}}`)["id"].(string)
	runPath := "/console/workflow-runs/" + runID

	p := e.get(runPath, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	body := html.UnescapeString(p.Body)
	assert.Contains(t, body, `<dl class="facts" id="run-inputs"><dt><code>date</code></dt><dd><pre class="json"><code>"2026-12-03"</code></pre></dd>`)
	assert.Contains(t, body, `id="data-transform"`)
	assert.Contains(t, body, "Not rendered yet")
	assert.Contains(t, body, "No output yet.")

	e.succeed(tok, runID, "extract", `{"rows": [1, 2, 3], "file": "x.csv"}`)
	p = e.get(runPath, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	body = html.UnescapeString(p.Body)
	extract := sectionOf(t, body, "data-extract")
	assert.Contains(t, extract, "\"rows\": [\n    1,\n    2,\n    3\n  ]", "the output, indented")
	assert.NotContains(t, extract, "Rendered from", "an untemplated node has no lineage")
	transform := sectionOf(t, body, "data-transform")
	assert.Contains(t, transform, "Rendered from")
	assert.Contains(t, transform, `<h5>Inputs used</h5><dl class="facts lineage-inputs"><dt><code>date</code></dt><dd><pre class="json"><code>"2026-12-03"</code>`)
	assert.Contains(t, transform, `<dl class="facts lineage-nodes"><dt><code>extract</code> <span class="state state-succeeded">succeeded</span></dt>`)
	assert.Contains(t, transform, "\"file\": \"x.csv\"")
	assert.NotContains(t, transform, "mode", "only what its templates read")

	assert.Equal(t, http.StatusNotFound, e.get(runPath, token(t, "globex")).Status)
}

// sectionOf returns the run page's <section id="id"> … </section>.
func sectionOf(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	require.Positive(t, i, "section %s", id)
	j := strings.Index(body[i:], "</section>")
	require.Positive(t, j)
	return body[i : i+j]
}
