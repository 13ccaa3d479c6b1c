package tests

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleBrowserAuthoring authors a workflow in a real Chromium
// against the real binary. A four-node draft with a cycle is previewed
// without a script's help ("Preview without saving" posts the form) and
// refused with the cycle named, its nodes marked and the error linking
// to its node; the draft fixed as typed is previewed by the page's script
// (four nodes drawn, nothing saved yet); saving creates it. It is then
// triggered with inputs from its page; the run's page shows each node's
// output (the receiver answers each node with a JSON body). Editing saves
// version 2 and says the run keeps version 1. A read-only token sees no
// editor and its forged POST is refused. The pages are photographed
// (1200 px wide) for docs/console.md: AX_SCREENSHOTS=../docs/screenshots
// writes them there.
func TestConsoleBrowserAuthoring(t *testing.T) {
	t.Parallel()
	b := newConsoleTab(t)
	var (
		mu   sync.Mutex
		sent []string // the bodies the nodes sent
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = append(sent, string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"step": "` + strings.TrimPrefix(r.URL.Path, "/") + `", "rows": 3}`))
	}))
	t.Cleanup(rcv.Close)
	env := consoleEnv(t)
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", consoleScopes+" workflows:read workflows:write audit:read events:read events:write")
	ro := cliToken(t, env, "acme", "workflows:read endpoints:read executions:read")
	console := p.base + "/console/"
	// One endpoint per node: each answers with its own output.
	eps := map[string]string{}
	for _, k := range []string{"extract", "transform", "load", "report"} {
		eps[k] = apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": k, "url": rcv.URL + "/" + k})["id"].(string)
	}
	ep := eps["extract"]
	b.do(chromedp.EmulateViewport(1200, 900))

	// The draft: extract → transform → load → report, and transform
	// after report too: a cycle.
	doc := func(cycle bool) string {
		deps := `["extract"]`
		if cycle {
			deps = `["extract", "report"]`
		}
		return `{
  "name": "daily-sales",
  "inputs": {"day": "2026-12-01"},
  "nodes": [
    {"key": "extract", "endpoint_id": "` + ep + `", "payload": {"day": "{{ .inputs.day }}"}, "payload_template": true},
    {"key": "transform", "endpoint_id": "` + eps["transform"] + `", "depends_on": ` + deps + `,
     "payload": {"rows": "{{ .nodes.extract.output.rows }}"}, "payload_template": true},
    {"key": "load", "endpoint_id": "` + eps["load"] + `", "depends_on": ["transform"]},
    {"key": "report", "endpoint_id": "` + eps["report"] + `", "depends_on": ["load"], "trigger_rule": "all_done"}
  ]
}`
	}
	setDoc := func(text string) chromedp.Action[chromedp.Void] {
		return chromedp.SetValue(chromedp.CSS("#wf-document"), text)
	}

	b.signIn(console, rw)
	b.do(chromedp.Navigate(console+"workflows"), chromedp.WaitVisible(chromedp.CSS("#new-workflow")))
	b.do(b.follow("#new-workflow"), chromedp.WaitVisible(chromedp.CSS("#wf-document")))
	example := b.evalS(`document.querySelector("#wf-document").value`)
	assert.Contains(t, example, `"endpoint_id": "`, "a starting example")
	assert.Regexp(t, eps["extract"]+"|"+eps["transform"]+"|"+eps["load"]+"|"+eps["report"], example, "on one of the tenant's endpoints")

	// The cycle, previewed by the form (no script involved): refused,
	// named, its nodes marked; the error links to its first node.
	b.do(setDoc(doc(true)))
	submitAndWait(b, "#wf-preview", "#draft-errors")
	errs := b.text("#draft-errors")
	assert.Contains(t, errs, "The draft would be refused")
	assert.Contains(t, errs, "cycle: transform → load → report → transform")
	assert.Equal(t, 4, b.count("#draft g.dag-node"))
	assert.Equal(t, 3, b.count("#draft g.dag-node.dag-invalid"))
	assert.Contains(t, b.evalS(`document.querySelector('#draft g.dag-node[data-key="load"] .dag-sub').textContent`), "in the cycle", "said in words, not only by colour")
	assert.Equal(t, "true", b.evalS(`document.querySelector("#wf-document").getAttribute("aria-invalid")`))
	b.do(chromedp.Click(chromedp.CSS(".draft-error-link")))
	assert.Equal(t, "draft-node-1", b.evalS(`(document.querySelector("#draft-nodes li:target") || {id: ""}).id`))
	assert.Contains(t, b.text("#draft-node-1"), "on the cycle")
	b.shot("workflow-editor-cycle.png")

	// Saving it is refused the same way; nothing is stored.
	submitAndWait(b, "#wf-save", "#draft-errors")
	assert.Contains(t, b.text("#draft-errors"), "The workflow was not saved")
	assert.Contains(t, b.text("#draft-errors"), "cycle: transform → load → report → transform")
	assert.Empty(t, apiGet(t, p.base, rw, "/v1/workflows")["items"])

	// Fixed as typed: the script previews it — four nodes, no error.
	b.do(setDoc(doc(false)))
	b.evalS(`String(document.querySelector("#wf-document").dispatchEvent(new Event("input")))`)
	require.Eventually(t, func() bool {
		s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector("#draft-status") || {textContent: ""}).textContent`))
		return err == nil && strings.Contains(s, "The draft is valid: 4 node(s)")
	}, 30*time.Second, 100*time.Millisecond, "the script's preview follows the typing")
	assert.Equal(t, 4, b.count("#draft g.dag-node"))
	assert.Equal(t, 0, b.count("#draft g.dag-node.dag-invalid"))
	assert.Equal(t, 3, b.count("#draft path.dag-edge"))
	assert.Equal(t, "false", b.evalS(`document.querySelector("#wf-document").getAttribute("aria-invalid")`))
	assert.Empty(t, apiGet(t, p.base, rw, "/v1/workflows")["items"], "a preview saves nothing")
	b.shot("workflow-draft-preview.png")

	submitAndWait(b, "#wf-save", "#flash")
	assert.Contains(t, b.text("#flash"), "The workflow is created")
	items := apiGet(t, p.base, rw, "/v1/workflows")["items"].([]any)
	require.Len(t, items, 1)
	wf := items[0].(map[string]any)
	assert.Equal(t, "daily-sales", wf["name"])
	assert.Len(t, wf["nodes"], 4)

	// Trigger it with inputs from its page; the run shows the outputs.
	b.do(chromedp.SetValue(chromedp.CSS("#trigger-inputs-json"), `{"day": "2026-12-03"}`),
		chromedp.Click(chromedp.CSS("#trigger-with-inputs")), chromedp.WaitVisible(chromedp.CSS("#run-state")))
	runURL, _, _ := strings.Cut(b.location(), "?")
	require.Contains(t, runURL, "/console/workflow-runs/")
	b.waitFor(runURL, "#run-state", "succeeded", 90*time.Second)
	assert.Contains(t, b.text("#run-inputs"), `"2026-12-03"`)
	for _, k := range []string{"extract", "transform", "load", "report"} {
		assert.Contains(t, b.text("#data-"+k), `"step": "`+k+`"`, k+"'s output: its own receiver's answer")
	}
	b.shot("workflow-run-outputs.png")
	mu.Lock()
	bodies := append([]string(nil), sent...)
	mu.Unlock()
	var payloads []map[string]any
	for _, s := range bodies {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) == nil {
			payloads = append(payloads, m)
		}
	}
	assert.Contains(t, payloads, map[string]any{"day": "2026-12-03"}, "extract's payload, rendered from the run's input")
	assert.Contains(t, payloads, map[string]any{"rows": 3.0}, "transform's payload, rendered from extract's output")

	// Edit: a node added makes version 2; the run keeps version 1.
	b.do(chromedp.Navigate(console+"workflows/"+wf["id"].(string)), chromedp.WaitVisible(chromedp.CSS("#edit-workflow")))
	b.do(b.follow("#edit-workflow"), chromedp.WaitVisible(chromedp.CSS("#wf-document")))
	assert.Contains(t, b.text("#wf-version"), "version 1")
	assert.Contains(t, b.text("#wf-version"), "runs in flight keep the version they started with")
	current := b.evalS(`document.querySelector("#wf-document").value`)
	var edited map[string]any
	require.NoError(t, json.Unmarshal([]byte(current), &edited), current)
	edited["nodes"] = append(edited["nodes"].([]any), map[string]any{"key": "notify", "endpoint_id": ep, "depends_on": []string{"report"}})
	next, err := json.MarshalIndent(edited, "", "  ")
	require.NoError(t, err)
	b.do(setDoc(string(next)))
	submitAndWait(b, "#wf-save", "#flash")
	assert.Contains(t, b.text("#flash"), "runs already started keep the version they started with")
	assert.EqualValues(t, 2, apiGet(t, p.base, rw, "/v1/workflows/"+wf["id"].(string))["version"])
	runID := runURL[strings.LastIndex(runURL, "/")+1:]
	assert.EqualValues(t, 1, apiGet(t, p.base, rw, "/v1/workflow-runs/"+runID)["version"])

	// The other pages docs/console.md shows: a task's edit form with its
	// preview, the audit log, the events page, the limits page.
	task := apiPost(t, p.base, rw, "/v1/tasks", map[string]any{
		"name": "nightly-report", "endpoint_id": ep,
		"schedule": map[string]any{"type": "cron", "cron": "30 6 * * 1-5", "timezone": "Europe/Paris"},
	})
	b.do(chromedp.Navigate(console+"tasks/"+task["id"].(string)+"/edit"), chromedp.WaitVisible(chromedp.CSS("#preview-list li")))
	b.shot("task-edit-preview.png")
	apiDo(t, http.MethodPost, p.base+"/v1/events", rw, map[string]any{"name": "files.ready", "key": "2026-12-03", "payload": map[string]any{"rows": 3}}, http.StatusAccepted)
	b.do(chromedp.Navigate(console+"events"), chromedp.WaitVisible(chromedp.CSS("#events")))
	b.shot("events.png")
	b.do(chromedp.Navigate(console+"audit"), chromedp.WaitVisible(chromedp.CSS("#audit")))
	b.shot("audit.png")
	b.do(chromedp.Navigate(console+"limits"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	b.shot("limits.png")

	// A read-only token: no editor, and a forged POST is a 403.
	b.signIn(console, ro)
	b.do(chromedp.Navigate(console+"workflows/"+wf["id"].(string)), chromedp.WaitVisible(chromedp.CSS("main h1")))
	assert.Equal(t, 0, b.count(`a[href$="/edit"]`))
	assert.Equal(t, 0, b.count("main form[method=post]"))
	b.do(chromedp.Navigate(console+"workflows"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	assert.Equal(t, 0, b.count("#new-workflow"))
	status := b.evalS(`(() => { const csrf = document.querySelector("form[action$='/sign-out'] input[name=csrf]").value;
		return fetch("/console/workflows", {method: "POST", credentials: "same-origin",
			body: new URLSearchParams({csrf: csrf, document: ` + jsString(doc(false)) + `})}).then(r => String(r.status)); })()`)
	assert.Equal(t, "403", status)
	assert.Len(t, apiGet(t, p.base, rw, "/v1/workflows")["items"], 1, "the forged POST created nothing")
}

// submitAndWait clicks sel, a submit button, and waits for the page the
// form's answer loads to show want (the page it leaves may show want
// too: the wait starts once it is gone).
func submitAndWait(b *consoleTab, sel, want string) {
	b.t.Helper()
	b.evalS(`String(window.axPageLeft = true)`)
	b.do(chromedp.Click(chromedp.CSS(sel)))
	require.Eventually(b.t, func() bool {
		s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`String(window.axPageLeft === undefined && document.readyState === "complete")`))
		return err == nil && s == "true"
	}, time.Minute, 50*time.Millisecond, "the page %s submits to loads", sel)
	b.do(chromedp.WaitVisible(chromedp.CSS(want)))
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
