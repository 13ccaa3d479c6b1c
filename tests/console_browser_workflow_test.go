package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestConsoleInBrowserWorkflow drives a workflow through the console in
// a real Chromium: its page draws the graph; a triggered run whose first
// node fails (one attempt) is blocked; the console skips one blocked node,
// retries the failed node's execution (linked from the graph) once the
// receiver is fixed, and the run succeeds. The graph is readable in dark
// mode; a read-only token sees the graphs without a button.
func TestConsoleInBrowserWorkflow(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	shots := screenshotDir(t)
	var failing atomic.Bool
	failing.Store(true)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flaky" && failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "console-browser-secret-0123456789abcdef0123",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", "endpoints:read endpoints:write executions:read executions:write workflows:read workflows:write")
	ro := cliToken(t, env, "acme", "workflows:read executions:read")
	console := p.base + "/console/"

	ok := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "ok", "url": rcv.URL + "/hook"})
	flaky := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "flaky", "url": rcv.URL + "/flaky"})
	wf := apiPost(t, p.base, rw, "/v1/workflows", map[string]any{
		"name": "nightly-etl",
		"nodes": []any{
			map[string]any{"key": "extract", "endpoint_id": flaky["id"], "retry": map[string]any{"max_attempts": 1}},
			map[string]any{"key": "load", "endpoint_id": ok["id"], "depends_on": []string{"extract"}},
			map[string]any{"key": "notify", "endpoint_id": ok["id"], "depends_on": []string{"extract"}},
		},
	})
	wfURL := console + "workflows/" + wf["id"].(string)

	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := chromedp.Do(sctx, steps...); err != nil {
			u, _ := chromedp.Run(ctx, chromedp.Location())
			body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			t.Fatalf("browser step failed at %s: %v\npage:\n%s", u, err, body)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return s
	}
	evalS := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return s
	}
	shot := func(name string) {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), b, 0o600))
	}
	location := func() string {
		t.Helper()
		u, err := chromedp.Run(ctx, chromedp.Location())
		require.NoError(t, err)
		return u
	}
	nodeState := func(key string) string {
		t.Helper()
		return evalS(`(document.querySelector('#dag g[data-key="` + key + `"]') || {dataset: {}}).dataset.state || ""`)
	}
	// waitFor reloads url until the text of sel contains want.
	waitFor := func(url, sel, want string) {
		t.Helper()
		require.Eventually(t, func() bool {
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if chromedp.Do(sctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel))) != nil {
				return false
			}
			s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
			return err == nil && strings.Contains(s, want)
		}, 90*time.Second, 500*time.Millisecond, "%s: %s shows %q", url, sel, want)
	}

	// The workflow's page: its graph, its nodes, its buttons.
	do(chromedp.Navigate(console+"?token="+rw), chromedp.WaitVisible(chromedp.CSS("main h1")))
	do(chromedp.Navigate(wfURL), chromedp.WaitVisible(chromedp.CSS("#dag svg")))
	require.Equal(t, "3", evalS(`String(document.querySelectorAll("#dag g.dag-node").length)`))
	require.Equal(t, "2", evalS(`String(document.querySelectorAll("#dag path.dag-edge").length)`))
	require.Contains(t, evalS(`document.querySelector("#dag svg title").textContent`), "nightly-etl")
	require.Contains(t, text("#node-list"), "load after extract")
	// Boxes do not overlap, and the graph is as wide as its two layers.
	require.Equal(t, "ok", evalS(`(() => { const r = [...document.querySelectorAll("#dag rect")].map(e => e.getBoundingClientRect());
		for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++) {
			const a = r[i], b = r[j];
			if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) return "overlap " + i + " " + j; }
		return r.length === 3 && r[1].left > r[0].right ? "ok" : "layers"; })()`))
	shot("workflow.png")

	// Trigger a run: its first node fails, the others are blocked.
	do(chromedp.Click(chromedp.CSS("#trigger")), chromedp.WaitVisible(chromedp.CSS("#run-state")))
	runURL := location()
	require.Contains(t, runURL, "/console/workflow-runs/")
	require.Contains(t, text("#flash"), "A run was triggered")
	runURL, _, _ = strings.Cut(runURL, "?")
	waitFor(runURL, "#run-state", "blocked")
	require.Equal(t, "failed", nodeState("extract"))
	require.Equal(t, "blocked", nodeState("load"))
	require.Equal(t, "blocked", nodeState("notify"))
	require.Contains(t, evalS(`document.querySelector('#dag g[data-key="load"] title').textContent`), "load: blocked")
	require.Contains(t, text(".dag-legend"), "failed")
	require.Contains(t, text(".dag-legend"), "blocked")
	shot("workflow-run-blocked.png")

	// Skip one blocked node from the console.
	do(chromedp.Click(chromedp.CSS(`button.skip-node[data-node="notify"]`)), chromedp.WaitVisible(chromedp.CSS("#flash")))
	require.Contains(t, text("#flash"), `Node "notify" is skipped`)
	require.Equal(t, "skipped", nodeState("notify"))
	require.Equal(t, "blocked", nodeState("load"))

	// Fix the receiver, open the failed node's execution from the graph and
	// retry it: the run goes on and succeeds.
	failing.Store(false)
	href := evalS(`new URL(document.querySelector('#dag g[data-key="extract"] a').getAttribute("href"), location.href).href`)
	require.Contains(t, href, "/console/executions/")
	// The retry's answer is the execution's page without the Retry button
	// (pending, running or succeeded): waiting for it keeps the next
	// navigation from cutting the form's POST short.
	do(chromedp.Navigate(href), chromedp.WaitVisible(chromedp.CSS("#retry")), chromedp.Click(chromedp.CSS("#retry")),
		chromedp.WaitNotPresent(chromedp.CSS("#retry")))
	waitFor(runURL, "#run-state", "succeeded")
	require.Equal(t, "succeeded", nodeState("extract"))
	require.Equal(t, "succeeded", nodeState("load"))
	require.Equal(t, "skipped", nodeState("notify"))
	require.Equal(t, "0", evalS(`String(document.querySelectorAll("main form[method=post]").length)`), "a finished run has no actions")
	shot("workflow-run-succeeded.png")

	// Dark mode: the page and the graph's boxes follow the colour scheme.
	fill := func() string {
		return evalS(`getComputedStyle(document.querySelector('#dag g[data-key="load"] rect')).fill`)
	}
	light := fill()
	do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	}), chromedp.Navigate(runURL), chromedp.WaitVisible(chromedp.CSS("#dag svg")))
	require.NotEqual(t, light, fill(), "the node's tint follows dark mode")
	require.Equal(t, "rgb(15, 18, 22)", evalS(`getComputedStyle(document.body).backgroundColor`))
	shot("workflow-run-dark.png")

	// A read-only token sees the graphs and no button; a change without the
	// CSRF token is refused.
	do(chromedp.Navigate(console+"?token="+ro), chromedp.WaitVisible(chromedp.CSS("main h1")))
	for _, u := range []string{wfURL, runURL} {
		do(chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("#dag svg")))
		require.Equal(t, "0", evalS(`String(document.querySelectorAll("main form[method=post]").length)`), u)
	}
	require.Equal(t, "403", evalS(`fetch("/console/workflows/`+wf["id"].(string)+`/pause", {method: "POST", credentials: "same-origin",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: ""}).then(r => String(r.status))`))
}
