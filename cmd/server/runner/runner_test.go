package runner_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/cmd/server/runner"
	"github.com/axhq/ax/openapi/receiver"
)

func newSecret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// fixture is a runner behind a real HTTP server.
type fixture struct {
	secret string
	r      *runner.Runner
	srv    *httptest.Server
}

func newFixture(t testing.TB, change func(*runner.Config)) *fixture {
	t.Helper()
	secret := newSecret(t)
	allow, err := runner.ParseAllowlist([]string{`/bin/(sh|true|false|echo|sleep)`})
	require.NoError(t, err)
	cfg := runner.Config{
		Secrets: []string{secret}, Allow: allow, KillAfter: 300 * time.Millisecond,
		Grace: 200 * time.Millisecond, Env: runner.BaseEnv(os.Environ()),
	}
	if change != nil {
		change(&cfg)
	}
	r, err := runner.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
		_ = r.Close()
	})
	return &fixture{secret: secret, r: r, srv: srv}
}

// answer is one HTTP answer of the runner.
type answer struct {
	status     int
	retryAfter string
	body       []byte
	out        runner.Output
}

// send posts payload signed with the fixture's secret as webhook id (at
// now, unless at is given). It fails no test, so goroutines may call it.
func (f *fixture) send(ctx context.Context, id string, payload any, at ...time.Time) (answer, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return answer{}, err
	}
	ts := time.Now()
	if len(at) > 0 {
		ts = at[0]
	}
	sig, err := receiver.Sign(f.secret, id, ts, body)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/run", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set(receiver.HeaderID, id)
	req.Header.Set(receiver.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(receiver.HeaderSignature, sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: b}
	if resp.Header.Get("Content-Type") == "application/json" {
		err = json.Unmarshal(b, &a.out)
	}
	return a, err
}

func (f *fixture) must(t *testing.T, id string, payload any) answer {
	t.Helper()
	a, err := f.send(t.Context(), id, payload)
	require.NoError(t, err)
	return a
}

// lines returns the lines of a file the commands append to ("" when absent).
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(string(b))
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body, err string
		program   string
	}{
		{body: `{"command": ["/bin/echo", "hi"]}`, program: "/bin/echo"},
		{body: `{"shell": "echo hi | wc -c", "env": {"A": "1"}, "dir": "/tmp", "timeout_s": 1.5}`, program: runner.Shell},
		{body: `{"command": ["/bin/echo"], "shell": "echo"}`, err: "either command or shell"},
		{body: `{}`, err: "command"},
		{body: `{"command": []}`, err: "command"},
		{body: `{"command": [""]}`, err: "the program, is empty"},
		{body: `{"shell": "  "}`, err: "shell is empty"},
		{body: `{"command": ["/bin/echo"], "timeout": 5}`, err: `unknown field "timeout"`},
		{body: `{"command": ["/bin/echo"], "timeout_s": 0}`, err: "timeout_s must be above 0"},
		{body: `{"command": ["/bin/echo"], "timeout_s": 86401}`, err: "at most 86400"},
		{body: `{"command": ["/bin/echo", "a\u0000b"]}`, err: "NUL"},
		{body: `{"command": ["/bin/echo"], "env": {"A=B": "1"}}`, err: "not a valid variable name"},
		{body: `{"command": ["/bin/echo"]} {}`, err: "more than one JSON value"},
		{body: `[1]`, err: "not a runner command"},
	} {
		c, err := runner.ParseCommand([]byte(tc.body))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.body)
			continue
		}
		if assert.NoError(t, err, tc.body) {
			assert.Equal(t, tc.program, c.Program(), tc.body)
		}
	}
}

func TestAllowlistMatchesInFull(t *testing.T) {
	t.Parallel()
	_, err := runner.ParseAllowlist(nil)
	require.ErrorContains(t, err, "at least one --allow")
	_, err = runner.ParseAllowlist([]string{"("})
	require.ErrorContains(t, err, `--allow "("`)
	a, err := runner.ParseAllowlist([]string{`/usr/local/bin/[a-z-]+`, `/bin/true`})
	require.NoError(t, err)
	for program, want := range map[string]bool{
		"/usr/local/bin/backup": true, "/bin/true": true,
		"/bin/truex": false, "x/bin/true": false, "/usr/local/bin/../../../bin/rm": false, "/usr/local/bin/a b": false,
	} {
		assert.Equal(t, want, a.Allows(program), program)
	}
}

// TestResponseMode: without a callback token the command runs within the
// request; 200 with its output on exit 0, 500 otherwise, both tails kept
// and ax's facts in the environment.
func TestResponseMode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	resp, err := http.Get(f.srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	ok := f.must(t, "msg_ok", map[string]any{"shell": `printf '%s' "$AX_WEBHOOK_ID $GREETING"`, "env": map[string]string{"GREETING": "hi"}})
	require.Equal(t, http.StatusOK, ok.status, "%s", ok.body)
	assert.Equal(t, 0, ok.out.ExitCode)
	assert.Equal(t, "msg_ok hi", ok.out.StdoutTail)

	bad := f.must(t, "msg_bad", map[string]any{"command": []string{"/bin/sh", "-c", "echo to-out; echo to-err >&2; exit 3"}})
	require.Equal(t, http.StatusInternalServerError, bad.status, "%s", bad.body)
	assert.Equal(t, 3, bad.out.ExitCode)
	assert.Equal(t, "to-out\n", bad.out.StdoutTail)
	assert.Equal(t, "to-err\n", bad.out.StderrTail)

	// The runner's own AX_* variables are not passed on.
	assert.Equal(t, []string{"PATH=/bin", "AXE=1"}, runner.BaseEnv([]string{"PATH=/bin", "AX_RUNNER_SECRETS=whsec_x", "AXE=1", "AX_URL=http://ax"}))
}

// TestTailKeepsTheLastFourKiB: a long output keeps its last 4 KiB, cut
// on a character boundary.
func TestTailKeepsTheLastFourKiB(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	// 3000 two-byte characters (6000 bytes), then a marker.
	a := f.must(t, "msg_tail", map[string]any{"shell": `i=0; while [ $i -lt 3000 ]; do printf 'é'; i=$((i+1)); done; printf END`})
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.True(t, strings.HasSuffix(a.out.StdoutTail, "éEND"))
	assert.LessOrEqual(t, len(a.out.StdoutTail), runner.TailMax)
	assert.GreaterOrEqual(t, len(a.out.StdoutTail), runner.TailMax-1)
	assert.NotContains(t, a.out.StdoutTail, "\uFFFD", "the cut character is dropped, not mangled")
}

// TestRefusesWithoutRunning: a program no pattern admits, a forged
// signature and a stale timestamp start no process.
func TestRefusesWithoutRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	mark := filepath.Join(t.TempDir(), "ran")
	touch := map[string]any{"shell": "echo x >> " + mark}

	a := f.must(t, "msg_1", map[string]any{"command": []string{"/usr/bin/touch", mark}})
	assert.Equal(t, http.StatusBadRequest, a.status)
	assert.Contains(t, string(a.body), `program "/usr/bin/touch" matches no --allow pattern`)

	forged := &fixture{secret: newSecret(t), srv: f.srv}
	a, err := forged.send(t.Context(), "msg_2", touch)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, a.status)

	a, err = f.send(t.Context(), "msg_3", touch, time.Now().Add(-10*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, a.status)
	assert.Contains(t, string(a.body), "too old")

	a = f.must(t, "msg_4", map[string]any{"command": []string{"/bin/echo"}, "timeout": 3})
	assert.Equal(t, http.StatusBadRequest, a.status)
	assert.Empty(t, lines(t, mark), "no process ran")
}

// processGone reports whether pid no longer runs (gone, or a zombie left
// for its new parent to reap).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

// TestTimeoutKillsTheProcessGroup: at its timeout the whole group goes,
// a child that ignores SIGTERM included, and the failure is retryable.
func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	pidFile := filepath.Join(t.TempDir(), "child")
	a := f.must(t, "msg_timeout", map[string]any{
		"shell":     `/bin/sh -c 'trap "" TERM; while :; do sleep 1; done' & echo $! > ` + pidFile + `; wait`,
		"timeout_s": 1,
	})
	require.Equal(t, http.StatusInternalServerError, a.status, "%s", a.body)
	assert.Equal(t, -1, a.out.ExitCode)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.Eventually(t, func() bool { return processGone(pid) }, 10*time.Second, 20*time.Millisecond,
		"the child that ignores SIGTERM (pid %d) was killed too", pid)
}

// TestOneProcessPerWebhookID: the same delivery twice at once runs once
// (the second is told to come back); once it succeeded a redelivery is
// answered from the record; a failed id runs again.
func TestOneProcessPerWebhookID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	log := filepath.Join(t.TempDir(), "runs")
	slow := map[string]any{"shell": "echo run >> " + log + "; sleep 1; echo done"}

	var (
		wg      sync.WaitGroup
		answers [2]answer
		errs    [2]error
	)
	for i := range answers {
		wg.Go(func() {
			if i == 1 {
				time.Sleep(200 * time.Millisecond) // the first is running by now
			}
			answers[i], errs[i] = f.send(t.Context(), "msg_same", slow)
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	assert.Equal(t, http.StatusOK, answers[0].status)
	assert.Equal(t, http.StatusServiceUnavailable, answers[1].status, "a redelivery while it runs: come back later")
	assert.Equal(t, "10", answers[1].retryAfter)
	again := f.must(t, "msg_same", slow)
	assert.Equal(t, http.StatusOK, again.status)
	assert.Equal(t, "done\n", again.out.StdoutTail, "answered from the record")
	assert.Len(t, lines(t, log), 1, "one process")

	flaky := filepath.Join(t.TempDir(), "flaky")
	failFirst := map[string]any{"shell": "echo run >> " + flaky + "; [ $(wc -l < " + flaky + ") -ge 2 ]"}
	assert.Equal(t, http.StatusInternalServerError, f.must(t, "msg_flaky", failFirst).status)
	assert.Equal(t, http.StatusOK, f.must(t, "msg_flaky", failFirst).status, "a retry after a failure runs again")
	assert.Len(t, lines(t, flaky), 2)
}

// TestWorkersBound: beyond --workers a delivery is told to come back.
func TestWorkersBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *runner.Config) { c.Workers = 1 })
	started := make(chan error, 1)
	go func() {
		_, err := f.send(context.Background(), "msg_long", map[string]any{"command": []string{"/bin/sleep", "2"}})
		started <- err
	}()
	require.Eventually(t, func() bool { return f.r.Running() == 1 }, 5*time.Second, 10*time.Millisecond)
	a := f.must(t, "msg_other", map[string]any{"command": []string{"/bin/true"}})
	assert.Equal(t, http.StatusTooManyRequests, a.status)
	assert.Equal(t, "5", a.retryAfter)
	require.NoError(t, <-started)
}

// TestStateDirKeepsSuccesses: a runner restarted on the same state
// directory answers a success from its record without running it again.
func TestStateDirKeepsSuccesses(t *testing.T) {
	t.Parallel()
	dir, log := t.TempDir(), filepath.Join(t.TempDir(), "runs")
	cmd := map[string]any{"shell": "echo run >> " + log + "; echo out"}
	f := newFixture(t, func(c *runner.Config) { c.StateDir = dir })
	require.Equal(t, http.StatusOK, f.must(t, "msg_kept", cmd).status)

	g2, err := runner.New(runner.Config{Secrets: []string{f.secret}, Allow: mustAllow(t, `/bin/sh`), StateDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = g2.Close() })
	srv := httptest.NewServer(g2.Handler())
	t.Cleanup(srv.Close)
	again, err := (&fixture{secret: f.secret, srv: srv}).send(t.Context(), "msg_kept", cmd)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, again.status)
	assert.Equal(t, "out\n", again.out.StdoutTail)
	assert.Len(t, lines(t, log), 1, "not run again after the restart")
}

func mustAllow(t *testing.T, patterns ...string) runner.Allowlist {
	t.Helper()
	a, err := runner.ParseAllowlist(patterns)
	require.NoError(t, err)
	return a
}

// TestShutdownEndsWhatOutlivesTheGrace: on shutdown new deliveries are
// refused, a command running past the grace is ended and answered as a
// retryable failure.
func TestShutdownEndsWhatOutlivesTheGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	res := make(chan answer, 1)
	go func() {
		a, _ := f.send(context.Background(), "msg_running", map[string]any{"command": []string{"/bin/sleep", "30"}})
		res <- a
	}()
	require.Eventually(t, func() bool { return f.r.Running() == 1 }, 5*time.Second, 10*time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- f.r.Shutdown(context.Background()) }()
	assert.Eventually(t, func() bool {
		a, err := f.send(context.Background(), "msg_new", map[string]any{"command": []string{"/bin/true"}})
		return err == nil && a.status == http.StatusServiceUnavailable
	}, 5*time.Second, 10*time.Millisecond, "a draining runner refuses new work")
	require.NoError(t, <-stopped)
	resp, err := http.Get(f.srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "not ready while it drains")
	a := <-res
	assert.Equal(t, http.StatusInternalServerError, a.status)
	assert.Equal(t, -1, a.out.ExitCode)
}
