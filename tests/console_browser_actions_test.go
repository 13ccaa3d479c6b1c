package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// consoleScopes is every scope the console's task pages use.
const consoleScopes = "tasks:read tasks:write endpoints:read endpoints:write executions:read executions:write"

// consoleTab is a Chromium tab on the console for one test, with the
// steps the browser tests share. It accepts every JavaScript dialog (the
// console's data-confirm buttons ask first) and remembers their messages.
type consoleTab struct {
	t     *testing.T
	ctx   context.Context
	shots string

	mu      sync.Mutex
	dialogs []string
}

func newConsoleTab(t *testing.T) *consoleTab {
	t.Helper()
	b := &consoleTab{t: t, ctx: browser(t), shots: screenshotDir(t)}
	opening := chromedp.Events(b.ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range opening {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			// Answer from another goroutine than the one that receives
			// the events.
			go func() {
				_ = chromedp.Do(b.ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
					return err
				}))
			}()
		}
	}()
	return b
}

// do runs steps with a deadline of their own, so that a failure can still
// report the page it stopped on.
func (b *consoleTab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		u, _ := chromedp.Run(b.ctx, chromedp.Location())
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		b.t.Fatalf("browser step failed at %s: %v\npage:\n%s", u, err, body)
	}
}

func (b *consoleTab) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(b.t, err)
	return s
}

// evalS evaluates js (awaiting a promise) to a string.
func (b *consoleTab) evalS(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err)
	return s
}

// count is the number of elements sel matches on the page.
func (b *consoleTab) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
	require.NoError(b.t, err)
	return n
}

func (b *consoleTab) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	require.NoError(b.t, os.WriteFile(filepath.Join(b.shots, name), png, 0o600))
}

func (b *consoleTab) location() string {
	b.t.Helper()
	u, err := chromedp.Run(b.ctx, chromedp.Location())
	require.NoError(b.t, err)
	return u
}

func (b *consoleTab) dialogSeen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// signIn opens the console with token (the ?token= exchange).
func (b *consoleTab) signIn(console, token string) {
	b.t.Helper()
	b.do(chromedp.Navigate(console+"?token="+token), chromedp.WaitVisible(chromedp.CSS("main h1")))
}

// follow opens a link's target (chromedp's queries can miss the page a
// clicked link loads; Navigate waits for it).
func (b *consoleTab) follow(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		href, err := chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).href`)(ctx, tg)
		if err != nil {
			return chromedp.Void{}, err
		}
		return chromedp.Navigate(href)(ctx, tg)
	}
}

// waitFor reloads url until the text of sel contains want.
func (b *consoleTab) waitFor(url, sel, want string, within time.Duration) {
	b.t.Helper()
	require.Eventually(b.t, func() bool {
		sctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
		defer cancel()
		if chromedp.Do(sctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel))) != nil {
			return false
		}
		s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
		return err == nil && strings.Contains(s, want)
	}, within, 300*time.Millisecond, "%s: %s shows %q", url, sel, want)
}

func consoleEnv(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "console-browser-secret-0123456789abcdef0123",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
}

// apiItems is GET path's items.
func apiItems(t *testing.T, base, token, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, it := range apiGet(t, base, token, path)["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

// slotOf is the slot a delivery was for (X-Ax-Scheduled-For).
func slotOf(t *testing.T, h hit) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, h.header.Get("X-Ax-Scheduled-For"))
	require.NoError(t, err)
	return at.UTC()
}

// deliveredAt counts the receiver's deliveries of each slot.
func deliveredAt(t *testing.T, r *receiver) map[time.Time]int {
	t.Helper()
	n := map[time.Time]int{}
	for _, h := range r.all() {
		n[slotOf(t, h)]++
	}
	return n
}

// TestConsoleBrowserSkip skips one of the next fires of a task that fires
// every 2 s from its page in a real Chromium (the button asks first): the
// page marks the slot skipped, the API lists it as a skipped execution,
// and the receiver gets the slots either side of it and never that one.
// A read-only token sees the mark but no Skip button and no Backfill form,
// and its POST is refused.
func TestConsoleBrowserSkip(t *testing.T) {
	t.Parallel()
	b := newConsoleTab(t)
	rcv := newReceiver(t)
	env := consoleEnv(t)
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", consoleScopes)
	ro := cliToken(t, env, "acme", "tasks:read executions:read")
	console := p.base + "/console/"

	const every = 2 * time.Second
	ep := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "receiver", "url": rcv.srv.URL + "/hook"})
	task := apiPost(t, p.base, rw, "/v1/tasks", map[string]any{
		"name": "every-2s", "endpoint_id": ep["id"], "payload": map[string]any{"n": 1},
		"schedule": map[string]any{
			"type": "interval", "interval_seconds": int(every / time.Second),
			"start_at": time.Now().UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339),
		},
	})
	taskID := task["id"].(string)
	taskURL := console + "tasks/" + taskID

	b.signIn(console, rw)
	b.do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("#fires")))
	require.Equal(t, 10, b.count("#fires button.skip-slot"), "each of the next fires has a Skip button")

	// Skip the first slot at least 6 s away: time enough to press the
	// button before it is due on a slow machine. The scheduler may be
	// materialising that very slot as the skip arrives; the skip moves it.
	var slots []string
	require.NoError(t, json.Unmarshal([]byte(b.evalS(
		`JSON.stringify([...document.querySelectorAll("#fires button.skip-slot")].map(e => e.dataset.slot))`)), &slots))
	var skip time.Time
	for _, s := range slots {
		at, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		if at.After(time.Now().Add(6 * time.Second)) {
			skip = at.UTC()
			break
		}
	}
	require.False(t, skip.IsZero(), "a slot 6 s away among %v", slots)
	b.do(chromedp.Click(chromedp.CSS(`button.skip-slot[data-slot="`+skip.Format(time.RFC3339Nano)+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#flash, #problem")))
	slot := skip.Format(time.RFC3339Nano)
	if b.count("#problem") > 0 {
		require.Failf(t, "the skip is refused", "slot %s: %s", slot, b.text("#problem"))
	}
	require.Contains(t, b.dialogSeen(), "Skip this slot? It will not fire.", "the button asks first")
	require.Contains(t, b.location(), "/console/tasks/"+taskID+"?done=slot-skipped")
	require.Contains(t, b.text("#flash"), "The slot is skipped")
	marked := b.evalS(`JSON.stringify([...document.querySelectorAll("#fires li")]
		.filter(li => li.querySelector(".skipped-slot")).map(li => li.querySelector("time").getAttribute("datetime")))`)
	require.JSONEq(t, `["`+skip.Format(time.RFC3339)+`"]`, marked, "the skipped slot, and only it, is marked")
	require.Equal(t, 0, b.count(`button.skip-slot[data-slot="`+slot+`"]`), "a skipped slot has no Skip button")
	require.Equal(t, 10, b.count("#fires button.skip-slot"), "still the next 10 fires, the skipped slot marked among them")
	b.shot("task-skipped.png")

	// Over the API the slot is a skipped execution.
	skipped := apiItems(t, p.base, rw, "/v1/executions?state=skipped&task_id="+taskID)
	require.Len(t, skipped, 1)
	require.Equal(t, skip.Format(time.RFC3339Nano), skipped[0]["scheduled_for"])
	require.Equal(t, "skipped by request", skipped[0]["last_error"])

	// The receiver gets the slots before and after it, never the slot.
	before, after := skip.Add(-every), skip.Add(every)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := deliveredAt(t, rcv)
		if got[before] > 0 && got[after] > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the neighbours of %s delivered; got %v", slot, got)
		time.Sleep(100 * time.Millisecond)
	}
	got := deliveredAt(t, rcv)
	require.Zero(t, got[skip], "the skipped slot is never delivered")
	require.Equal(t, 1, got[before])
	at := apiItems(t, p.base, rw, "/v1/executions?task_id="+taskID+"&since="+slot+"&until="+skip.Add(time.Millisecond).Format(time.RFC3339Nano))
	require.Len(t, at, 1, "one execution at the slot")
	require.Equal(t, "skipped", at[0]["state"])
	require.EqualValues(t, 0, at[0]["attempts"])

	// The task page's executions list it skipped, and the others delivered.
	b.do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("#fires")))
	require.Equal(t, "skipped", b.evalS(`document.querySelector('main tr:has(a[href$="/executions/`+
		skipped[0]["id"].(string)+`"]) .state').textContent`))
	require.Positive(t, b.count("main tr .state-succeeded"))
	// Its page says why, and offers no Retry (a skipped slot cannot be).
	b.do(b.follow(`main a[href$="/executions/`+skipped[0]["id"].(string)+`"]`), chromedp.WaitVisible(chromedp.CSS("#exec-state")))
	require.Contains(t, b.text("#exec-state"), "skipped")
	require.Contains(t, b.text("#timeline"), "skipped by request")
	require.Equal(t, 0, b.count("#retry, #cancel"))

	// A read-only token sees no Skip button and no Backfill form (nor
	// the Tasks list's link to it); a POST of the skip form is refused.
	b.signIn(console, ro)
	b.do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("#fires")))
	require.Equal(t, 0, b.count("button.skip-slot"))
	require.Equal(t, 0, b.count("#backfill-form, #backfill"))
	require.Equal(t, 0, b.count("main form[method=post]"))
	b.do(chromedp.Navigate(console+"tasks"), chromedp.WaitVisible(chromedp.CSS("#tasks")))
	require.Contains(t, b.text("#tasks"), "every-2s")
	require.Equal(t, 0, b.count(".backfill-link"))
	// The page's CSRF token (from its sign-out form) does not make up for
	// the missing scope.
	next := time.Now().Add(time.Minute).UTC()
	require.Equal(t, "403", b.evalS(`(() => { const f = new FormData(document.querySelector("form[action$='/sign-out']"));
		f.set("scheduled_for", `+strconv.Quote(next.Format(time.RFC3339))+`);
		return fetch("/console/tasks/`+taskID+`/skip", {method: "POST", credentials: "same-origin", body: new URLSearchParams(f)})
			.then(r => String(r.status)); })()`))
	require.Len(t, apiItems(t, p.base, rw, "/v1/executions?state=skipped&task_id="+taskID), 1, "nothing more was skipped")
}

// TestConsoleBrowserBackfill backfills a daily task from the console in a
// real Chromium: the Tasks list links to the form; a dry run shows the
// counts and creates nothing; Start backfill opens the Backfills page,
// where the backfill runs to its end; the receiver gets each slot exactly
// once, by the executions the API lists. A reversed range is refused on
// the page.
func TestConsoleBrowserBackfill(t *testing.T) {
	t.Parallel()
	b := newConsoleTab(t)
	rcv := newReceiver(t)
	env := consoleEnv(t)
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", consoleScopes)
	console := p.base + "/console/"

	ep := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "receiver", "url": rcv.srv.URL + "/hook"})
	task := apiPost(t, p.base, rw, "/v1/tasks", map[string]any{
		"name": "daily-report", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
	})
	taskID := task["id"].(string)
	from, to := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC)
	var want []time.Time // 02:00 UTC on 1 to 5 March
	for d := 1; d <= 5; d++ {
		want = append(want, time.Date(2026, 3, d, 2, 0, 0, 0, time.UTC))
	}
	span := "/v1/executions?task_id=" + taskID + "&since=" + from.Format(time.RFC3339) + "&until=" + to.Format(time.RFC3339)

	// From the Tasks list to the task's form.
	b.signIn(console, rw)
	b.do(chromedp.Navigate(console+"tasks"), chromedp.WaitVisible(chromedp.CSS("#tasks")))
	require.Equal(t, 1, b.count(".backfill-link"))
	b.do(b.follow(".backfill-link"), chromedp.WaitVisible(chromedp.CSS("#backfill-form")))
	require.Contains(t, b.location(), "/console/tasks/"+taskID+"#backfill")
	taskURL := console + "tasks/" + taskID

	fill := func(from, to string) {
		b.do(chromedp.SetValue(chromedp.CSS("#bf-from"), from), chromedp.SetValue(chromedp.CSS("#bf-to"), to),
			chromedp.SetValue(chromedp.CSS("#bf-conc"), "2"))
	}

	// A dry run: the counts, and nothing created.
	fill("2026-03-01T00:00", "2026-03-06T00:00")
	b.do(chromedp.Click(chromedp.CSS("#backfill-dry-run")), chromedp.WaitVisible(chromedp.CSS("#backfill-plan")))
	require.Equal(t, "5", b.text("#plan-total"))
	require.Equal(t, "5", b.text("#plan-create"))
	require.Equal(t, "0", b.text("#plan-rerun"))
	require.Equal(t, "0", b.text("#plan-keep"))
	require.Contains(t, b.text("#backfill-plan"), "Nothing was created")
	require.Equal(t, "2026-03-01T00:00", b.evalS(`document.querySelector("#bf-from").value`), "the form keeps its values")
	require.Equal(t, "2026-03-06T00:00", b.evalS(`document.querySelector("#bf-to").value`))
	require.Equal(t, 0, b.count("#backfill-problem"))
	b.shot("backfill-dry-run.png")
	require.Empty(t, apiItems(t, p.base, rw, "/v1/backfills"), "a dry run creates no backfill")
	require.Empty(t, apiItems(t, p.base, rw, span), "nor an execution")

	// Start it: the Backfills page opens and the backfill runs to its end.
	b.do(chromedp.Click(chromedp.CSS("#backfill-start")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	require.Contains(t, b.location(), "/console/backfills?done=backfill-started")
	require.Contains(t, b.text("#flash"), "The backfill is started")
	bfs := apiItems(t, p.base, rw, "/v1/backfills")
	require.Len(t, bfs, 1)
	bf := bfs[0]
	require.Equal(t, taskID, bf["task_id"])
	require.EqualValues(t, 5, bf["total"])
	require.EqualValues(t, 2, bf["max_concurrency"])
	require.Equal(t, "missing", bf["rerun"])
	bf = waitBackfill(t, p.base, rw, bf["id"].(string), 45*time.Second)
	require.Equal(t, "succeeded", bf["state"], "%v", bf)
	require.EqualValues(t, 5, bf["succeeded"])
	require.EqualValues(t, 0, bf["failed"])
	b.waitFor(console+"backfills", "main table tbody", "succeeded", 30*time.Second)
	row := b.text("main table tbody")
	require.Contains(t, row, "5/5 created · 5 ok · 0 failed")
	require.Equal(t, 1, b.count(`main table tbody a[href$="/tasks/`+taskID+`"]`), "the row links to its task")
	require.Equal(t, "5", b.evalS(`String(document.querySelector("main table tbody progress").value)`))
	b.shot("backfills.png")

	// The receiver got each slot once, by the backfill's executions.
	xs := apiItems(t, p.base, rw, span)
	require.Len(t, xs, 5)
	ids := map[string]bool{}
	for _, x := range xs {
		require.Equal(t, "backfill", x["trigger"])
		require.Equal(t, bf["id"], x["backfill_id"])
		require.Equal(t, "succeeded", x["state"])
		ids[x["id"].(string)] = true
	}
	got := map[time.Time]int{}
	keys := map[string]bool{}
	for _, h := range rcv.all() {
		at := slotOf(t, h)
		if at.Before(from) || !at.Before(to) {
			continue // a fire of the schedule itself, should the test run at 02:00 UTC
		}
		got[at]++
		key := h.header.Get("Idempotency-Key")
		require.False(t, keys[key], "idempotency key %s delivered twice", key)
		keys[key] = true
	}
	require.Len(t, got, 5)
	for _, at := range want {
		require.Equal(t, 1, got[at], "slot %s delivered once", at)
	}
	require.Equal(t, ids, keys, "the deliveries are the listed executions")

	// A reversed range is refused on the task page, with the form as typed.
	b.do(chromedp.Navigate(taskURL+"#backfill"), chromedp.WaitVisible(chromedp.CSS("#backfill-form")))
	fill("2026-03-06T00:00", "2026-03-01T00:00")
	b.do(chromedp.Click(chromedp.CSS("#backfill-start")), chromedp.WaitVisible(chromedp.CSS("#backfill-problem")))
	require.Contains(t, b.text("#backfill-problem"), "The backfill was not started")
	require.Contains(t, b.text("#backfill-problem"), "must be after from")
	require.Equal(t, "2026-03-06T00:00", b.evalS(`document.querySelector("#bf-from").value`))
	require.Equal(t, 0, b.count("#backfill-plan"))
	b.shot("backfill-refused.png")
	require.Len(t, apiItems(t, p.base, rw, "/v1/backfills"), 1, "no backfill was created")
}

// TestConsoleBrowserAlerts opens the Alerts page in a real Chromium: an
// execution of a task with a 1 s SLA that its endpoint holds is listed as
// an SLA miss (running, then succeeded once let go), and an execution of a
// one-attempt task whose endpoint answers 500 as failed for good; each
// row links to its execution's page.
func TestConsoleBrowserAlerts(t *testing.T) {
	t.Parallel()
	b := newConsoleTab(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			case <-time.After(45 * time.Second):
			}
			w.WriteHeader(http.StatusNoContent)
		case "/fail":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(rcv.Close)
	t.Cleanup(let) // before rcv.Close (cleanups run last first)
	env := consoleEnv(t)
	p := startAx(t, env)
	rw := cliToken(t, env, "acme", consoleScopes)
	console := p.base + "/console/"

	slow := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "slow", "url": rcv.URL + "/slow"})
	failing := apiPost(t, p.base, rw, "/v1/endpoints", map[string]any{"name": "failing", "url": rcv.URL + "/fail"})
	late := apiPost(t, p.base, rw, "/v1/tasks", map[string]any{
		"name": "sla-late", "endpoint_id": slow["id"], "schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
		"timeout_ms": 60000, "sla": map[string]any{"finish_within_ms": 1000},
	})
	broken := apiPost(t, p.base, rw, "/v1/tasks", map[string]any{
		"name": "fails-for-good", "endpoint_id": failing["id"], "schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
		"retry": map[string]any{"max_attempts": 1},
	})
	lateX := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+late["id"].(string)+"/trigger", rw, nil, http.StatusAccepted)["id"].(string)
	brokenX := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+broken["id"].(string)+"/trigger", rw, nil, http.StatusAccepted)["id"].(string)

	// Over the API: the SLA miss is recorded while the endpoint holds the
	// request, and the other execution fails for good.
	events := func(x map[string]any) []string {
		var out []string
		for _, ev := range x["events"].([]any) {
			out = append(out, ev.(map[string]any)["type"].(string))
		}
		return out
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		x, err := getJSON(t.Context(), p.base, rw, "/v1/executions/"+lateX)
		if !assert.NoError(c, err) {
			return
		}
		assert.Equal(c, "running", x["state"])
		assert.Contains(c, strings.Join(events(x), " "), "sla_missed")
	}, 30*time.Second, 100*time.Millisecond, "the held execution misses its SLA")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		x, err := getJSON(t.Context(), p.base, rw, "/v1/executions/"+brokenX)
		assert.NoError(c, err)
		assert.Equal(c, "failed", x["state"])
	}, 30*time.Second, 100*time.Millisecond, "the one-attempt execution fails for good")

	// The Alerts page, from the navigation, lists both.
	b.signIn(console, rw)
	b.do(b.follow(`nav a[href$="/alerts"]`), chromedp.WaitVisible(chromedp.CSS("#alerts-failed")))
	require.Contains(t, b.location(), "/console/alerts")
	slaRow := `#alerts-sla a[href$="/executions/` + lateX + `"]`
	failRow := `#alerts-failed a[href$="/executions/` + brokenX + `"]`
	require.Equal(t, 1, b.count(slaRow), "the SLA miss links to its execution")
	require.Equal(t, 1, b.count("#alerts-sla tbody tr"))
	sla := b.text("#alerts-sla tbody")
	require.Contains(t, sla, "sla-late")
	require.Contains(t, sla, "running", "the state now")
	require.Equal(t, 1, b.count(failRow), "the failure links to its execution")
	require.Equal(t, 1, b.count("#alerts-failed tbody tr"))
	failed := b.text("#alerts-failed tbody")
	require.Contains(t, failed, "HTTP 500")
	require.Equal(t, 1, b.count(`#alerts-failed tbody a[href$="/tasks/`+broken["id"].(string)+`"]`), "the row links to its task")
	require.Equal(t, 0, b.count(`#alerts-sla a[href$="/executions/`+brokenX+`"]`), "the task without an SLA has no miss")
	b.shot("alerts.png")

	// Let the held request go: the miss stays listed, succeeded now.
	let()
	b.waitFor(console+"alerts", "#alerts-sla tbody", "succeeded", 30*time.Second)
	require.Equal(t, 1, b.count(slaRow))

	// Each link opens the right execution.
	b.do(b.follow(slaRow), chromedp.WaitVisible(chromedp.CSS("#exec-state")))
	require.Contains(t, b.location(), "/console/executions/"+lateX)
	require.Contains(t, b.text("#exec-state"), "succeeded")
	require.Equal(t, 1, b.count("#timeline li.ev-sla_missed"), "the timeline has the miss")
	b.do(chromedp.Navigate(console+"alerts"), chromedp.WaitVisible(chromedp.CSS("#alerts-failed")))
	b.do(b.follow(failRow), chromedp.WaitVisible(chromedp.CSS("#exec-state")))
	require.Contains(t, b.location(), "/console/executions/"+brokenX)
	require.Contains(t, b.text("#exec-state"), "failed")
	require.Contains(t, b.text("main"), "fails-for-good")
	require.Equal(t, 1, b.count("#retry"), "a failed execution can be retried from there")
}
