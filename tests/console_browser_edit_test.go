package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleBrowserEdit edits a task in a real Chromium against the real
// binary: the preview of the next fires follows the cron expression as it
// is typed, before anything is saved (the API still has the old one);
// invalid JSON in the payload is flagged while typing; a value the server
// refuses (422) is shown next to its own field; saving changes the task.
// The audit log page then lists the change and filters by resource type.
// A read-only token sees no edit link or form, and its forged POST (the
// page's own CSRF token, same origin) is refused with a 403. Last, the
// task is switched to an event schedule, whose preview names the event.
func TestConsoleBrowserEdit(t *testing.T) {
	t.Parallel()
	b := newConsoleTab(t)
	rcv := newReceiver(t)
	env := consoleEnv(t)
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", consoleScopes+" audit:read")
	ro := cliToken(t, env, "acme", "tasks:read endpoints:read executions:read audit:read")
	console := p.base + "/console/"

	ep := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "receiver", "url": rcv.srv.URL + "/hook"})
	task := apiPost(t, p.base, rw, "/v1/tasks", map[string]any{
		"name": "nightly", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "0 9 * * *", "timezone": "UTC"},
	})
	id := task["id"].(string)
	storedCron := func() string {
		return apiGet(t, p.base, rw, "/v1/tasks/"+id)["schedule"].(map[string]any)["cron"].(string)
	}
	// evalNow evaluates js; "" on an error (it runs in require.Eventually's
	// conditions, off the test's goroutine, so it must not fail the test).
	evalNow := func(js string) string {
		s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
		if err != nil {
			return ""
		}
		return s
	}
	firstFire := func() string {
		return evalNow(`(document.querySelector("#preview-list li") || {getAttribute: () => ""}).getAttribute("data-at")`)
	}

	b.signIn(console, rw)
	b.do(chromedp.Navigate(console+"tasks/"+id), chromedp.WaitVisible(chromedp.CSS("#edit-task")))
	b.do(b.follow("#edit-task"), chromedp.WaitVisible(chromedp.CSS("#preview-list li")))
	require.Contains(t, firstFire(), "T09:00:00Z")
	require.Equal(t, 5, b.count("#preview-list li"))

	// Type a new cron expression: the preview changes before saving.
	b.do(chromedp.Clear(chromedp.CSS("#f-cron")), chromedp.SendKeys(chromedp.CSS("#f-cron"), "30 18 * * *"))
	require.Eventually(t, func() bool { return strings.Contains(firstFire(), "T18:30:00Z") }, 30*time.Second, 100*time.Millisecond,
		"the preview follows the typed cron")
	assert.Equal(t, 5, b.count("#preview-list li"))
	assert.Equal(t, 5, b.count("#preview-list time"), "times in the viewer's zone, UTC in the title")
	assert.Equal(t, "0 9 * * *", storedCron(), "nothing is saved yet")
	b.shot("task-edit-preview.png")

	// A cron expression the service refuses: the preview says why.
	b.do(chromedp.SendKeys(chromedp.CSS("#f-cron"), "x"))
	require.Eventually(t, func() bool {
		return strings.Contains(evalNow(`document.querySelector("#preview-note").textContent`), "schedule.cron")
	}, 30*time.Second, 100*time.Millisecond,
		"the preview names the refused field")
	assert.Equal(t, 0, b.count("#preview-list li"))
	b.do(chromedp.SendKeys(chromedp.CSS("#f-cron"), "\b"))
	require.Eventually(t, func() bool { return strings.Contains(firstFire(), "T18:30:00Z") }, 30*time.Second, 100*time.Millisecond,
		"the preview is back")

	// Invalid JSON is flagged while typing.
	b.do(chromedp.Clear(chromedp.CSS("#f-payload")), chromedp.SendKeys(chromedp.CSS("#f-payload"), `{"report": `))
	assert.Contains(t, b.text("#payload-check"), "Not valid JSON")
	assert.Equal(t, "true", b.evalS(`document.querySelector("#f-payload").getAttribute("aria-invalid")`))
	b.do(chromedp.SendKeys(chromedp.CSS("#f-payload"), `"daily"}`))
	assert.Equal(t, "Valid JSON.", b.text("#payload-check"))

	// A value the server refuses: shown at its field, the form as typed.
	b.do(chromedp.SetValue(chromedp.CSS("#f-max_backoff_ms"), "50"), chromedp.Click(chromedp.CSS("#save-task")),
		chromedp.WaitVisible(chromedp.CSS("#err-retry-max_backoff_ms")))
	assert.Contains(t, b.text("#err-retry-max_backoff_ms"), "Error:")
	assert.Equal(t, "err-retry-max_backoff_ms", b.evalS(`document.querySelector("#f-max_backoff_ms").getAttribute("aria-describedby")`))
	assert.Equal(t, "30 18 * * *", b.evalS(`document.querySelector("#f-cron").value`))
	assert.Equal(t, "0 9 * * *", storedCron())
	b.shot("task-edit-422.png")

	b.do(chromedp.SetValue(chromedp.CSS("#f-max_backoff_ms"), "60000"), chromedp.Click(chromedp.CSS("#save-task")),
		chromedp.WaitVisible(chromedp.CSS("#flash")))
	assert.Contains(t, b.text("#flash"), "The task is saved.")
	assert.Equal(t, "30 18 * * *", storedCron())
	assert.Equal(t, map[string]any{"report": "daily"}, apiGet(t, p.base, rw, "/v1/tasks/"+id)["payload"])

	// The audit log: the update is listed; the type filter narrows it.
	b.do(chromedp.Navigate(console+"audit"), chromedp.WaitVisible(chromedp.CSS("#audit")))
	assert.Equal(t, 3, b.count("#audit tbody tr"), "the endpoint's and the task's creates, the update")
	assert.Equal(t, "update", b.evalS(`document.querySelector("#audit tbody tr").getAttribute("data-action")`))
	b.do(chromedp.SendKeys(chromedp.CSS("#a-type"), "endpoint"), chromedp.Click(chromedp.CSS("#audit-filter")))
	// The old page's #audit is visible until the filtered one replaces
	// it: wait for the navigation first.
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(b.location(), "resource_type=endpoint") &&
		time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	b.do(chromedp.WaitVisible(chromedp.CSS("#audit")))
	require.Contains(t, b.location(), "resource_type=endpoint")
	assert.Equal(t, 1, b.count("#audit tbody tr"))
	assert.Equal(t, "endpoint", b.evalS(`document.querySelector("#audit tbody tr").getAttribute("data-resource-type")`))
	b.shot("audit.png")

	// A read-only token: no edit link, no forms but sign-out; a forged
	// POST of the edit form, with the page's CSRF token, is a 403.
	b.signIn(console, ro)
	for _, u := range []string{console + "tasks/" + id, console + "endpoints", console + "calendars", console + "audit", console + "limits"} {
		b.do(chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("main h1")))
		assert.Equal(t, 0, b.count("main form[method=post]"), u)
		assert.Equal(t, 0, b.count(`a[href$="/edit"]`), u)
	}
	status := b.evalS(`(() => { const csrf = document.querySelector("form[action$='/sign-out'] input[name=csrf]").value;
		return fetch("/console/tasks/` + id + `/edit", {method: "POST", credentials: "same-origin",
			body: new URLSearchParams({csrf: csrf, name: "nightly", type: "cron", cron: "* * * * *"})}).then(r => String(r.status)); })()`)
	assert.Equal(t, "403", status)
	assert.Equal(t, "30 18 * * *", storedCron(), "the forged POST changed nothing")

	// The task made an event task: the preview says what it fires on
	// instead of listing slots, as the name is typed; saving stores it.
	b.signIn(console, rw)
	b.do(chromedp.Navigate(console+"tasks/"+id+"/edit"), chromedp.WaitVisible(chromedp.CSS("#preview-list li")))
	b.do(chromedp.Click(chromedp.CSS(`input[name=type][value=event]`)), chromedp.SendKeys(chromedp.CSS("#f-event"), "files.ready"))
	require.Eventually(t, func() bool {
		return strings.Contains(evalNow(`document.querySelector("#preview-note").textContent`), "Fires on each matching event \u201cfiles.ready\u201d")
	}, 30*time.Second, 100*time.Millisecond, "the preview follows the typed event name")
	assert.Equal(t, 0, b.count("#preview-list li"))
	b.shot("task-edit-event.png")
	b.do(chromedp.Click(chromedp.CSS("#save-task")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	assert.Contains(t, b.text("#no-fires"), "Fires on each matching event")
	schedule := apiGet(t, p.base, rw, "/v1/tasks/"+id)["schedule"].(map[string]any)
	assert.Equal(t, "event", schedule["type"])
	assert.Equal(t, "files.ready", schedule["event"])
}
