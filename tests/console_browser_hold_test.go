package tests

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestConsoleBrowserHoldAndTest holds a once task's pending execution from
// the task page in a real Chromium, before its slot: past the slot the
// receiver has nothing and the execution page says held; Release on the
// task page sends it once, with its own id. The endpoints page's Test
// button sends one test request (X-Ax-Test) and shows its status.
func TestConsoleBrowserHoldAndTest(t *testing.T) {
	t.Parallel()
	b := newConsoleTab(t)
	rcv := newReceiver(t)
	env := consoleEnv(t)
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", consoleScopes)
	console := p.base + "/console/"

	ep := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "receiver", "url": rcv.srv.URL + "/hook"})
	runAt := time.Now().UTC().Add(20 * time.Second).Truncate(time.Second)
	task := apiPost(t, p.base, rw, "/v1/tasks", map[string]any{
		"name": "once", "endpoint_id": ep["id"], "payload": map[string]any{"n": 1},
		"schedule": map[string]any{"type": "once", "run_at": runAt.Format(time.RFC3339)},
	})
	taskID := task["id"].(string)
	taskURL := console + "tasks/" + taskID

	// The scheduler materialises the slot some seconds ahead of it.
	var x string
	for deadline := time.Now().Add(30 * time.Second); x == ""; time.Sleep(200 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the slot was never materialised")
		if items := apiItems(t, p.base, rw, "/v1/executions?state=pending&task_id="+taskID); len(items) == 1 {
			x = items[0]["id"].(string)
		}
	}
	require.True(t, time.Now().Before(runAt), "materialised before its slot")
	row := `#executions tr[data-id="` + x + `"]`
	b.signIn(console, rw)
	b.do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS(row+" button.hold")))
	b.do(chromedp.Click(chromedp.CSS(row+" button.hold")), chromedp.WaitVisible(chromedp.CSS(row+" button.release")))
	require.Contains(t, b.location(), "/console/tasks/"+taskID)
	require.Contains(t, b.text(row), "held")
	b.shot("task-held.png")
	require.Equal(t, true, apiGet(t, p.base, rw, "/v1/executions/"+x)["held"])

	// Past its slot: nothing sent, still pending and held.
	for time.Now().Before(runAt.Add(3 * time.Second)) {
		time.Sleep(200 * time.Millisecond)
	}
	require.Empty(t, rcv.all(), "a held execution is not sent at its slot")
	b.waitFor(console+"executions/"+x, "#exec-state", "held", 10*time.Second)
	require.Contains(t, b.text("#exec-state"), "pending")

	b.do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS(row+" button.release")))
	// The page the release answers with has no Release button on the row: waiting for
	// "#executions" alone returned on the page clicked, and the next navigation
	// cancelled the release in flight.
	b.do(chromedp.Click(chromedp.CSS(row+" button.release")), chromedp.WaitNotPresent(chromedp.CSS(row+" button.release")))
	b.waitFor(console+"executions/"+x, "#exec-state", "succeeded", 30*time.Second)
	hits := rcv.all()
	require.Len(t, hits, 1, "sent once")
	require.Equal(t, x, hits[0].header.Get("Idempotency-Key"))
	require.Contains(t, b.text("#timeline"), "released")

	// The endpoints page's Test button.
	epRow := "#ep-" + ep["id"].(string)
	b.do(chromedp.Navigate(console+"endpoints"), chromedp.WaitVisible(chromedp.CSS(epRow+" button.test")))
	b.do(chromedp.Click(chromedp.CSS(epRow+" button.test")), chromedp.WaitVisible(chromedp.CSS("#endpoint-test")))
	require.Contains(t, b.text("#test-status"), "HTTP 204")
	require.Contains(t, b.text("#test-duration"), "ms")
	b.shot("endpoint-tested.png")
	hits = rcv.all()
	require.Len(t, hits, 2)
	require.Equal(t, "true", hits[1].header.Get("X-Ax-Test"))
}
