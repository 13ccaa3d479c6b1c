package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestConsoleInBrowserWorkflowData triggers a workflow with inputs from
// its console page in a real Chromium — first with an input it does not
// declare (refused next to the field, the inputs kept as typed), then
// with a date — and opens the run: it shows the run's inputs, the first
// node's output, and what the templated node was rendered from (the date
// input and that output), which is what its receiver got.
func TestConsoleInBrowserWorkflowData(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	shots := screenshotDir(t)
	var (
		mu  sync.Mutex
		got []byte // the transform node's body
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/extract":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"rows": [1, 2, 3], "file": "sales-2026-12-03.csv"}`))
		case "/transform":
			mu.Lock()
			got = b
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(rcv.Close)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "console-browser-secret-0123456789abcdef0123",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", "endpoints:read endpoints:write executions:read executions:write workflows:read workflows:write")
	console := p.base + "/console/"
	extract := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "extract", "url": rcv.URL + "/extract"})
	transform := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "transform", "url": rcv.URL + "/transform"})
	wf := apiPost(t, p.base, rw, "/v1/workflows", map[string]any{
		"name":   "daily-sales",
		"inputs": map[string]any{"date": "2026-12-01", "mode": "full"},
		"nodes": []any{
			map[string]any{"key": "extract", "endpoint_id": extract["id"]},
			map[string]any{
				"key": "transform", "endpoint_id": transform["id"], "depends_on": []string{"extract"}, "payload_template": true,
				"payload": map[string]any{"day": "{{ .inputs.date }}", "rows": "{{ .nodes.extract.output.rows }}"},
			},
		},
	})

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
	shot := func(name string) {
		t.Helper()
		b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), b, 0o600))
	}

	do(chromedp.Navigate(console+"?token="+rw), chromedp.WaitVisible(chromedp.CSS("main h1")))
	do(chromedp.Navigate(console+"workflows/"+wf["id"].(string)), chromedp.WaitVisible(chromedp.CSS("#trigger-inputs-json")))
	defaults, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#trigger-inputs-json")))
	require.NoError(t, err)
	require.JSONEq(t, `{"date": "2026-12-01", "mode": "full"}`, defaults, "pre-filled with the defaults")

	// An input the workflow does not declare: refused next to the field.
	do(chromedp.SetValue(chromedp.CSS("#trigger-inputs-json"), `{"date": "2026-12-03", "dte": "x"}`),
		chromedp.Click(chromedp.CSS("#trigger-with-inputs")), chromedp.WaitVisible(chromedp.CSS("#trigger-problem")))
	require.Contains(t, text("#trigger-problem"), "inputs.dte")
	kept, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#trigger-inputs-json")))
	require.NoError(t, err)
	require.JSONEq(t, `{"date": "2026-12-03", "dte": "x"}`, kept, "the inputs as typed")
	shot("workflow-trigger-refused.png")

	do(chromedp.SetValue(chromedp.CSS("#trigger-inputs-json"), `{"date": "2026-12-03"}`),
		chromedp.Click(chromedp.CSS("#trigger-with-inputs")), chromedp.WaitVisible(chromedp.CSS("#run-state")))
	runURL, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, runURL, "/console/workflow-runs/")
	runURL, _, _ = strings.Cut(runURL, "?")
	require.Eventually(t, func() bool {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if chromedp.Do(sctx, chromedp.Navigate(runURL), chromedp.WaitVisible(chromedp.CSS("#run-state"))) != nil {
			return false
		}
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS("#run-state")))
		return err == nil && strings.Contains(s, "succeeded")
	}, 90*time.Second, 500*time.Millisecond, "the run succeeds")

	inputs := text("#run-inputs")
	require.Contains(t, inputs, `"2026-12-03"`)
	require.Contains(t, inputs, `"full"`, "the defaults it kept")
	require.Contains(t, text("#data-extract"), "sales-2026-12-03.csv", "extract's output")
	require.NotContains(t, text("#data-extract"), "Rendered from")
	lineage := text("#data-transform .lineage")
	require.Contains(t, lineage, "Inputs used")
	require.Contains(t, lineage, `"2026-12-03"`)
	require.Contains(t, lineage, "Upstream outputs used")
	require.Contains(t, lineage, "sales-2026-12-03.csv")
	require.NotContains(t, lineage, "full", "only what its templates read")
	shot("workflow-run-data.png")

	mu.Lock()
	body := got
	mu.Unlock()
	var sent map[string]any
	require.NoError(t, json.Unmarshal(body, &sent), "%s", body)
	require.Equal(t, map[string]any{"day": "2026-12-03", "rows": []any{1.0, 2.0, 3.0}}, sent, "what the lineage says it read")
}
