package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// chainDoc is a four-node workflow document: extract, then a, b, c, where
// a depends on extract and on back (making a cycle a → c → b → a when
// back is "b").
func chainDoc(ep, back string) string {
	aDeps := `"extract"`
	if back != "" {
		aDeps += `,"` + back + `"`
	}
	return `{"name":"etl","inputs":{"day":"today"},"nodes":[` +
		`{"key":"extract","endpoint_id":"` + ep + `"},` +
		`{"key":"a","endpoint_id":"` + ep + `","depends_on":[` + aDeps + `]},` +
		`{"key":"b","endpoint_id":"` + ep + `","depends_on":["c"]},` +
		`{"key":"c","endpoint_id":"` + ep + `","depends_on":["a"]}]}`
}

// draftKeys are the keys of the nodes a page's graph draws, and those
// marked invalid.
func draftKeys(body string) (all, invalid []string) {
	for _, m := range regexp.MustCompile(`<g class="dag-node( dag-invalid)?" data-key="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		all = append(all, m[2])
		if m[1] != "" {
			invalid = append(invalid, m[2])
		}
	}
	return all, invalid
}

// TestConsoleWorkflowAuthoring: a new workflow's document is previewed
// (as a page and as the script's fragment) and saved through the REST
// route's decoding and service call; a cycle is refused naming it, with
// its nodes marked; a field error links to its node; YAML is read as
// JSON; nothing is stored before the save.
func TestConsoleWorkflowAuthoring(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")

	p := e.get("/console/workflows", tok)
	assert.Contains(t, p.Body, `href="/console/workflows/new"`)
	p = e.get("/console/workflows/new", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<textarea id="wf-document" name="document"`)
	assert.Contains(t, p.Body, `&#34;endpoint_id&#34;: &#34;`+ep+`&#34;`, "the example uses the tenant's endpoint")
	assert.Contains(t, p.Body, "/static/workflowedit.js")
	assertSecurityHeaders(t, p)

	// A cycle: previewed, then saved; refused both times, named, its
	// nodes marked in the graph, the first linked.
	cyclic := chainDoc(ep, "b")
	for _, action := range []url.Values{{"preview": {"1"}}, {}} {
		action.Set("document", cyclic)
		p = e.post("/console/workflows", tok, action)
		if action.Get("preview") != "" {
			require.Equal(t, http.StatusOK, p.Status, p.Body)
			assert.Contains(t, p.Body, "The draft would be refused")
		} else {
			require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
			assert.Contains(t, p.Body, "The workflow was not saved")
		}
		assert.Contains(t, p.Body, `<a href="#draft-node-1" class="draft-error-link"><code>nodes</code></a>`)
		assert.Contains(t, p.Body, "cycle: a → c → b → a")
		all, invalid := draftKeys(p.Body)
		assert.Equal(t, []string{"extract", "a", "b", "c"}, all)
		assert.Equal(t, []string{"a", "b", "c"}, invalid)
		assert.Contains(t, p.Body, `<li id="draft-node-2" tabindex="-1" class="draft-invalid">`)
		assert.Contains(t, p.Body, `&#34;depends_on&#34;`, "the document is shown as typed")
	}

	// The script's preview: the same fragment, 422 for a refused draft.
	p = e.post("/console/workflows/preview", tok, url.Values{"document": {cyclic}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.NotContains(t, p.Body, "<html")
	assert.Contains(t, p.Body, "cycle: a → c → b → a")

	// A field error links to its node.
	unknown := strings.Replace(chainDoc(ep, ""), `"depends_on":["c"]`, `"depends_on":["nope"]`, 1)
	p = e.post("/console/workflows/preview", tok, url.Values{"document": {unknown}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, `<a href="#draft-node-2" class="draft-error-link"><code>nodes[2].depends_on</code></a>`)
	assert.Contains(t, p.Body, `unknown node &#34;nope&#34;`)
	_, invalid := draftKeys(p.Body)
	assert.Equal(t, []string{"b"}, invalid)

	// Not JSON, a read-only field: refused on the document.
	p = e.post("/console/workflows/preview", tok, url.Values{"document": {`{"name":`}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, "<code>document</code>: the JSON body ends too early")
	p = e.post("/console/workflows/preview", tok, url.Values{"document": {`{"id":"x","name":"etl","nodes":[]}`}})
	assert.Contains(t, p.Body, "<code>id</code>: is read-only")

	assert.Empty(t, e.rest(http.MethodGet, "/v1/workflows", tok, "")["items"], "nothing was saved")

	// Fixed: a valid draft of four nodes, then saved.
	fixed := chainDoc(ep, "")
	p = e.post("/console/workflows/preview", tok, url.Values{"document": {fixed}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, "The draft is valid: 4 node(s)")
	all, invalid := draftKeys(p.Body)
	assert.Len(t, all, 4)
	assert.Empty(t, invalid)

	// YAML is the same document.
	yamlDoc := "name: etl\nnodes:\n  - key: extract\n    endpoint_id: " + ep + "\n  - key: load\n    endpoint_id: " + ep +
		"\n    depends_on: [extract]\n    trigger_rule: all_done\n"
	p = e.post("/console/workflows", tok, url.Values{"document": {yamlDoc}, "preview": {"1"}})
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, "The draft is valid: 2 node(s)")
	assert.Contains(t, p.Body, `<span class="label">all_done</span>`)

	p = e.post("/console/workflows", tok, url.Values{"document": {fixed}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	id := strings.TrimSuffix(strings.TrimPrefix(p.Location, "/console/workflows/"), "?done=workflow-created")
	require.Regexp(t, `^`+idRE.String()+`$`, id)
	w := e.rest(http.MethodGet, "/v1/workflows/"+id, tok, "")
	assert.Equal(t, "etl", w["name"])
	assert.Len(t, w["nodes"], 4)
	assert.Equal(t, map[string]any{"day": "today"}, w["inputs"])
	assert.Contains(t, e.get(p.Location, tok).Body, "The workflow is created")

	// The same name again: a conflict shown on the editor, the text kept.
	p = e.post("/console/workflows", tok, url.Values{"document": {fixed}})
	require.Equal(t, http.StatusConflict, p.Status, p.Body)
	assert.Contains(t, p.Body, `already exists`)
	assert.Contains(t, p.Body, `<textarea id="wf-document"`)
}

// TestConsoleWorkflowEdit: the editor holds the workflow's document; a
// change of the nodes saves a new version while a run in flight keeps
// its own; a refusal changes nothing; the update is audited.
func TestConsoleWorkflowEdit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, workflowDoc(ep))["id"].(string)
	run := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)["id"].(string)

	assert.Contains(t, e.get("/console/workflows/"+wf, tok).Body, `href="/console/workflows/`+wf+`/edit"`)
	p := e.get("/console/workflows/"+wf+"/edit", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, "version 1</strong>")
	assert.Contains(t, p.Body, "version 2</strong>")
	assert.Contains(t, p.Body, "runs in flight keep the version they started with")
	doc := htmlUnescape(regexp.MustCompile(`(?s)<textarea id="wf-document"[^>]*>(.*?)</textarea>`).FindStringSubmatch(p.Body)[1])
	assert.Contains(t, doc, `"trigger_rule": "one_success"`)

	// A refusal: the workflow is unchanged.
	bad := strings.Replace(doc, `"key": "clean"`, `"key": "Clean!"`, 1)
	p = e.post("/console/workflows/"+wf+"/edit", tok, url.Values{"document": {bad}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, `href="#draft-node-1"`)
	assert.EqualValues(t, 1, e.rest(http.MethodGet, "/v1/workflows/"+wf, tok, "")["version"])

	// A node added: version 2; the run keeps version 1.
	more := strings.Replace(doc, `"nodes": [`, `"nodes": [{"key": "notify", "endpoint_id": "`+ep+`", "depends_on": ["load"]}, `, 1)
	p = e.post("/console/workflows/"+wf+"/edit", tok, url.Values{"document": {more}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	assert.Equal(t, "/console/workflows/"+wf+"?done=workflow-saved", p.Location)
	w := e.rest(http.MethodGet, "/v1/workflows/"+wf, tok, "")
	assert.EqualValues(t, 2, w["version"])
	assert.Len(t, w["nodes"], 5)
	assert.EqualValues(t, 1, e.rest(http.MethodGet, "/v1/workflow-runs/"+run, tok, "")["version"])
	assert.Contains(t, e.get(p.Location, tok).Body, "runs already started keep the version they started with")

	audit := e.rest(http.MethodGet, "/v1/audit?resource_id="+wf, tok, "")["items"].([]any)
	require.NotEmpty(t, audit)
	last := audit[0].(map[string]any)
	assert.Equal(t, "update", last["action"])
	assert.Equal(t, "alice", last["subject"])
}

// TestConsoleWorkflowEditorReadOnly: a token without workflows:write sees
// no editor, and its forged posts are refused.
func TestConsoleWorkflowEditorReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rw := token(t, "acme")
	ep := e.createEndpoint(rw, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", rw, workflowDoc(ep))["id"].(string)

	ro := token(t, "acme", api.ScopeWorkflowsRead, api.ScopeEndpointsRead)
	assert.NotContains(t, e.get("/console/workflows", ro).Body, "New workflow")
	assert.NotContains(t, e.get("/console/workflows/"+wf, ro).Body, "/edit")
	for _, path := range []string{"/console/workflows/new", "/console/workflows/" + wf + "/edit"} {
		assert.Equal(t, http.StatusForbidden, e.get(path, ro).Status, path)
	}
	doc := chainDoc(ep, "")
	for _, path := range []string{"/console/workflows", "/console/workflows/preview", "/console/workflows/" + wf + "/edit"} {
		p := e.post(path, ro, url.Values{"document": {doc}})
		assert.Equal(t, http.StatusForbidden, p.Status, path)
		assert.Contains(t, p.Body, "workflows:write", path)
	}
	w := e.rest(http.MethodGet, "/v1/workflows/"+wf, rw, "")
	assert.Len(t, w["nodes"], 4, "unchanged")
	assert.Len(t, e.rest(http.MethodGet, "/v1/workflows", rw, "")["items"], 1)
}
