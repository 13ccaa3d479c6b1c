package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// screenshotDir is where the browser test writes its screenshots (not
// committed: .gitignore). AX_SCREENSHOTS overrides it.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AX_SCREENSHOTS")
	if dir == "" {
		dir = "screenshots"
	}
	require.NoError(t, os.MkdirAll(dir, 0o750))
	return dir
}

// chromiumPath finds Debian's chromium (installed by .ci/run). Without it
// the test is skipped, unless AX_REQUIRE_BROWSER is set (CI sets it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("AX_REQUIRE_BROWSER") != "" {
		t.Fatal("no chromium on PATH (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: the console's browser test needs Debian's chromium package")
	return ""
}

// browser starts a headless Chromium for the test, with a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctxT(t), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// Fail rather than hang when the machine is very slow.
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(cancelTimeout)
	// Start the browser now, on this context: a browser started by a
	// step's shorter-lived context would end with it.
	require.NoError(t, chromedp.Do(ctx))
	return ctx
}

// TestConsoleInBrowser drives the console in a real Chromium against the
// real binary and a real receiver: sign in, create an endpoint and a task,
// see its next fires, trigger it and watch the execution succeed, pause
// it, open the timeline, sign out; a read-only token sees no write
// actions; a change without the CSRF token is refused; another tenant's id
// is a 404 page. Screenshots go to screenshotDir.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	shots := screenshotDir(t)
	rcv := newReceiver(t)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "console-browser-secret-0123456789abcdef0123",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	all := "tasks:read tasks:write endpoints:read endpoints:write executions:read executions:write"
	rw := cliToken(t, env, "acme", all)
	ro := cliToken(t, env, "acme", "tasks:read endpoints:read executions:read")
	other := cliToken(t, env, "globex", all)
	console := p.base + "/console/"

	// Each step has a deadline of its own, so that a failure can still
	// report the page it stopped on.
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
	eval := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return n
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

	// follow opens a link's target (chromedp's queries can miss the page
	// a clicked link loads; Navigate waits for it).
	follow := func(sel string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			href, err := chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).href`)(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			return chromedp.Navigate(href)(ctx, tg)
		}
	}

	// Sign in by pasting the token.
	do(chromedp.Navigate(console), chromedp.WaitVisible(chromedp.CSS("textarea#token")))
	shot("signin.png")
	do(chromedp.SetValue(chromedp.CSS("textarea#token"), rw), chromedp.Click(chromedp.CSS("form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("h2")))
	require.Contains(t, text("main"), "No tasks yet")
	require.Equal(t, 0, eval(`document.cookie.length`), "the session cookie is HttpOnly")

	// Create an endpoint: its secret is shown once.
	do(follow("#first-endpoint"), chromedp.WaitVisible(chromedp.CSS("#ep-name")),
		chromedp.SetValue(chromedp.CSS("#ep-name"), "receiver"), chromedp.SetValue(chromedp.CSS("#ep-url"), rcv.srv.URL+"/hook"),
		chromedp.Click(chromedp.CSS("#create-endpoint")), chromedp.WaitVisible(chromedp.CSS("#secret")))
	require.Contains(t, text("#secret"), "whsec_")

	// Create a task from the secret page's next step.
	do(follow("#next-task"), chromedp.WaitVisible(chromedp.CSS("#name")),
		chromedp.SetValue(chromedp.CSS("#name"), "nightly-report"), chromedp.SetValue(chromedp.CSS("#cron"), "30 2 * * *"),
		chromedp.SetValue(chromedp.CSS("#timezone"), "Europe/Paris"), chromedp.SetValue(chromedp.CSS("#payload"), `{"report":"daily"}`),
		chromedp.Click(chromedp.CSS("#create-task")), chromedp.WaitVisible(chromedp.CSS("#fires")))
	taskURL := location()
	taskID := taskURL[strings.LastIndex(taskURL, "/")+1:]
	require.Equal(t, "every day at 02:30 (Europe/Paris)", text("#schedule-words"))
	require.Equal(t, "vixie", text("#dst-policy"))
	require.Equal(t, 10, eval(`document.querySelectorAll("#fires li").length`), "the next ten fires")
	require.Equal(t, 10, eval(`[...document.querySelectorAll("#fires time")].filter(e => e.textContent !== e.title).length`),
		"times are shown in the viewer's zone, UTC in the tooltip")
	shot("task.png")

	// Trigger: the execution page reloads itself until the receiver's 2xx.
	do(chromedp.Click(chromedp.CSS("#trigger")), chromedp.WaitVisible(chromedp.CSS("#exec-state")))
	execURL := location()
	require.Contains(t, execURL, "/console/executions/")
	require.Eventually(t, func() bool {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#exec-state")))
		return err == nil && strings.Contains(s, "succeeded")
	}, 90*time.Second, 300*time.Millisecond, "the execution succeeds at the receiver")
	require.NotEmpty(t, rcv.all(), "the receiver got the webhook")
	require.JSONEq(t, `{"report":"daily"}`, string(rcv.all()[0].body))

	// Pause from the task page.
	do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("#pause")), chromedp.Click(chromedp.CSS("#pause")),
		chromedp.WaitVisible(chromedp.CSS("#resume")))
	require.Contains(t, text("main"), "Paused: no fires")
	require.Contains(t, text("main"), "succeeded", "the recent executions list the run")

	// The timeline of the execution.
	do(chromedp.Navigate(execURL), chromedp.WaitVisible(chromedp.CSS("#timeline")))
	tl := text("#timeline")
	require.Contains(t, tl, "fired")
	require.Contains(t, tl, "succeeded")
	require.Contains(t, text("main"), "Webhook-Id")
	shot("execution.png")

	do(chromedp.Navigate(console+"tasks"), chromedp.WaitVisible(chromedp.CSS("#tasks")))
	require.Contains(t, text("#tasks"), "nightly-report")
	require.Contains(t, text("#tasks"), "succeeded", "the last outcome")
	shot("tasks.png")
	do(chromedp.EmulateViewport(390, 844), chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("#schedule-words")))
	require.Equal(t, 0, eval(`document.documentElement.scrollWidth > window.innerWidth + 1 ? 1 : 0`), "no sideways scrolling on a phone")
	shot("task-phone.png")
	do(chromedp.EmulateViewport(1280, 900))

	// A change without the CSRF token, from the console's own page, is refused.
	require.Equal(t, 403, eval(`fetch("/console/tasks/`+taskID+`/resume", {method: "POST", credentials: "same-origin",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: ""}).then(r => r.status)`))
	do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("#resume")))

	// Sign out: the next page asks for a token.
	// The page's own sign-out form is submitted with fetch (same origin,
	// its CSRF token): a click's navigation can escape chromedp's waits.
	require.Equal(t, 200, eval(`(() => { const f = document.querySelector("form[action$='/sign-out']");
		return fetch(f.action, {method: "POST", credentials: "same-origin", body: new URLSearchParams(new FormData(f))}).then(r => r.status); })()`))
	do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("textarea#token")))

	// A read-only token, signed in through ?token=, sees no write actions.
	do(chromedp.Navigate(console+"?token="+ro), chromedp.WaitVisible(chromedp.CSS("#tasks")))
	require.NotContains(t, location(), "token=", "the token leaves the address bar")
	for _, u := range []string{console + "tasks", taskURL, execURL, console + "endpoints"} {
		do(chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS("main h1")))
		require.Equal(t, 0, eval(`document.querySelectorAll("main form[method=post]").length`), u)
		require.NotContains(t, text("main"), "New task", u)
	}

	// Another tenant's task id is a 404 page.
	do(chromedp.Navigate(console+"?token="+other), chromedp.WaitVisible(chromedp.CSS("main h1")))
	do(chromedp.Navigate(taskURL), chromedp.WaitVisible(chromedp.CSS("main h1")))
	require.Equal(t, "Not found", text("main h1"))
	require.Equal(t, 404, eval(`fetch(location.href).then(r => r.status)`))
	shot("not-found.png")
}
