package tests

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/tests/axproc"
)

// startRunner starts `ax runner` with args on listen (host:port; port 0:
// any) and returns it once it listens; the test fails if the race
// detector reports a data race in it.
func startRunner(t *testing.T, listen string, args ...string) *proc {
	t.Helper()
	all := append([]string{"runner", "--listen", listen}, args...)
	p, err := axproc.Start(t.Context(), axproc.Config{
		Binary: axBinary, Args: all, Env: []string{"PATH=/usr/bin:/bin"},
		Log: &testLogWriter{t: t},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Kill()
		if race := p.Race(); race != "" {
			t.Errorf("ax runner (pid %d): the race detector found a data race:\n%s", p.Pid(), race)
		}
	})
	return &proc{Proc: p, base: p.Base(), done: p.Done()}
}

func newWebhookSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// executionWhen polls an execution until done says so (or a minute and a
// half passes) and returns it; it fails no test off the test goroutine.
func executionWhen(t *testing.T, base, tok, id string, done func(map[string]any) bool) map[string]any {
	t.Helper()
	var last map[string]any
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, err := tryDo(context.Background(), http.MethodGet, base+"/v1/executions/"+id, tok, nil)
		if !assert.NoError(c, err) || !assert.Equal(c, http.StatusOK, code) {
			return
		}
		last = nil
		assert.NoError(c, json.Unmarshal(body, &last))
		assert.True(c, done(last), "execution %s: state %v, attempts %v", id, last["state"], last["attempts"])
	}, 90*time.Second, 100*time.Millisecond)
	return last
}

func finished(x map[string]any) bool {
	return x["state"] == "succeeded" || x["state"] == "failed" || x["state"] == "cancelled"
}

// TestRunnerRunsCommands: ax and `ax runner` (both the real binary) on a
// real database: a 30 s command in callback mode outlives its 5 s
// heartbeat timeout on the runner's heartbeats and completes with its
// output; a failing exit status ends the execution failed at once, its
// stderr kept; a program the runner does not allow is refused and nothing
// runs.
func TestRunnerRunsCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	ax := startAx(t, env)
	tok := crashToken(t, env)
	secret := newWebhookSecret(t)
	rn := startRunner(t, "127.0.0.1:0", "--secret", secret, "--allow", "/bin/sh", "--ax-url", ax.base)
	ep := apiPost(t, ax.base, tok, "/v1/endpoints", map[string]any{"name": "runner", "url": rn.base + "/run", "secret": secret})
	far := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	task := func(name string, payload any, retries int) string {
		return apiPost(t, ax.base, tok, "/v1/tasks", map[string]any{
			"name": name, "endpoint_id": ep["id"], "schedule": map[string]any{"type": "once", "run_at": far},
			"payload":    payload,
			"completion": map[string]any{"mode": "callback", "timeout_ms": 120000, "heartbeat_timeout_ms": 5000},
			"retry":      map[string]any{"max_attempts": retries, "initial_backoff_ms": 100, "max_backoff_ms": 100},
		})["id"].(string)
	}
	trigger := func(taskID string) string {
		return apiDo(t, http.MethodPost, ax.base+"/v1/tasks/"+taskID+"/trigger", tok, nil, http.StatusAccepted)["id"].(string)
	}
	long := trigger(task("long", map[string]any{"shell": "sleep 30; echo finished"}, 3))
	failing := trigger(task("failing", map[string]any{"shell": "echo broken >&2; exit 4"}, 3))
	refused := trigger(task("refused", map[string]any{"command": []string{"/usr/bin/touch", "/tmp/ax-runner-refused"}}, 3))

	x := executionWhen(t, ax.base, tok, failing, finished)
	require.Equal(t, "failed", x["state"], "a non-zero exit is not retried")
	assert.EqualValues(t, 1, x["attempts"])
	assert.Contains(t, x["last_error"], "exit status 4")
	assert.Equal(t, map[string]any{
		"exit_code": float64(4), "duration_ms": x["output"].(map[string]any)["duration_ms"],
		"stdout_tail": "", "stderr_tail": "broken\n",
	}, x["output"])

	x = executionWhen(t, ax.base, tok, refused, finished)
	require.Equal(t, "failed", x["state"])
	assert.Contains(t, x["last_error"], "400")
	assert.NoFileExists(t, "/tmp/ax-runner-refused")

	x = executionWhen(t, ax.base, tok, long, finished)
	require.Equal(t, "succeeded", x["state"], "%v", x["last_error"])
	assert.EqualValues(t, 1, x["attempts"], "the heartbeats kept the one attempt alive")
	out := x["output"].(map[string]any)
	assert.Equal(t, "finished\n", out["stdout_tail"])
	assert.EqualValues(t, 0, out["exit_code"])
	assert.GreaterOrEqual(t, out["duration_ms"], float64(30000))
	rn.stop(t, syscall.SIGTERM)
}

// TestRunnerShutdownIsRetried: SIGTERM ends a runner's running command
// after the grace and reports it failed and retryable; ax retries it, and
// a runner restarted on the same address runs it to success.
func TestRunnerShutdownIsRetried(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	ax := startAx(t, env)
	tok := crashToken(t, env)
	secret := newWebhookSecret(t)
	args := []string{"--secret", secret, "--allow", "/bin/sh", "--ax-url", ax.base, "--grace", "500ms", "--kill-after", "200ms"}
	rn := startRunner(t, "127.0.0.1:0", args...)
	u, err := url.Parse(rn.base)
	require.NoError(t, err)
	ep := apiPost(t, ax.base, tok, "/v1/endpoints", map[string]any{"name": "runner", "url": rn.base + "/run", "secret": secret})
	taskID := apiPost(t, ax.base, tok, "/v1/tasks", map[string]any{
		"name": "nightly", "endpoint_id": ep["id"],
		"schedule":   map[string]any{"type": "once", "run_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)},
		"payload":    map[string]any{"shell": "sleep 3; echo done"},
		"completion": map[string]any{"mode": "callback", "timeout_ms": 120000},
		"retry":      map[string]any{"max_attempts": 10, "initial_backoff_ms": 1000, "max_backoff_ms": 2000},
	})["id"].(string)
	id := apiDo(t, http.MethodPost, ax.base+"/v1/tasks/"+taskID+"/trigger", tok, nil, http.StatusAccepted)["id"].(string)
	waitEventType(t, ax.base, tok, id, "accepted")

	rn.stop(t, syscall.SIGTERM)
	startRunner(t, u.Host, args...)

	x := executionWhen(t, ax.base, tok, id, finished)
	require.Equal(t, "succeeded", x["state"], "%v", x["last_error"])
	assert.Equal(t, "done\n", x["output"].(map[string]any)["stdout_tail"])
	var errs []string
	for _, ev := range x["events"].([]any) {
		if e := ev.(map[string]any); e["type"] == "attempt_failed" {
			msg, _ := e["message"].(string)
			errs = append(errs, msg)
		}
	}
	require.NotEmpty(t, errs)
	assert.Contains(t, errs[0], "the runner shut down", "the first attempt was ended by the shutdown: %q", strings.Join(errs, " | "))
}
