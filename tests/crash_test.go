package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// crashReceiver records every webhook; while holding it answers nothing,
// so deliveries stay in flight until the connection dies.
type crashReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	holding bool
	hits    []crashHit
	arrived chan struct{}
}

type crashHit struct {
	key, webhookID, executionID, attempt string
}

func newCrashReceiver(t *testing.T) *crashReceiver {
	t.Helper()
	r := &crashReceiver{holding: true, arrived: make(chan struct{}, 256)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.hits = append(r.hits, crashHit{
			key: req.Header.Get("Idempotency-Key"), webhookID: req.Header.Get("Webhook-Id"),
			executionID: req.Header.Get("X-Ax-Execution-Id"), attempt: req.Header.Get("X-Ax-Attempt"),
		})
		holding := r.holding
		r.mu.Unlock()
		r.arrived <- struct{}{}
		if holding {
			<-req.Context().Done() // until ax dies
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *crashReceiver) stopHolding() {
	r.mu.Lock()
	r.holding = false
	r.mu.Unlock()
}

func (r *crashReceiver) byKey() map[string][]crashHit {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]crashHit{}
	for _, h := range r.hits {
		out[h.key] = append(out[h.key], h)
	}
	return out
}

// TestCrashMidDelivery kills ax with SIGKILL while deliveries are in
// flight and starts it again on the same database: every execution ends
// final, the interrupted ones are re-sent with the same idempotency key,
// none is lost, and a max_attempts 1 task is never sent twice.
func TestCrashMidDelivery(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"AX_DATABASE_URL":          dbtest.URL(t),
		"AX_JWT_SECRET":            "crash-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
		// A crashed delivery is retried once River's rescuer finds it
		// stuck: make that seconds, not minutes.
		"AX_JOB_TIMEOUT":             "5s",
		"AX_RESCUE_STUCK_JOBS_AFTER": "6s",
	}
	recv := newCrashReceiver(t)
	p := startAx(t, env)
	tok := crashToken(t, env)

	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{
		"name": "crash", "url": recv.srv.URL + "/hook", "timeout_ms": 4000,
	})
	runAt := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	task := func(name string, maxAttempts int) string {
		return apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
			"name": name, "endpoint_id": ep["id"], "payload": map[string]any{"task": name},
			"schedule": map[string]any{"type": "once", "run_at": runAt},
			"retry":    map[string]any{"max_attempts": maxAttempts, "initial_backoff_ms": 200, "max_backoff_ms": 1000},
		})["id"].(string)
	}
	atLeastOnce := []string{task("crash.a", 5), task("crash.b", 5), task("crash.c", 5)}
	atMostOnce := task("crash.once", 1)
	all := append([]string{atMostOnce}, atLeastOnce...)

	// Every delivery reaches the receiver and hangs there; then ax dies.
	for range all {
		select {
		case <-recv.arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d deliveries arrived", len(recv.byKey()), len(all))
		}
	}
	p.stop(t, syscall.SIGKILL)
	recv.stopHolding()

	p2 := startAx(t, env)
	// Rescue waits for River's leader lease of the dead process to expire
	// (≤ 15 s), AX_RESCUE_STUCK_JOBS_AFTER, and the rescuer's pass.
	final := map[string]map[string]any{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, id := range all {
			page, err := getJSON(t.Context(), p2.base, tok, "/v1/executions?task_id="+id)
			if !assert.NoError(c, err) {
				return
			}
			items := page["items"].([]any)
			if !assert.Len(c, items, 1, "task %s's executions", id) {
				return
			}
			ex := items[0].(map[string]any)
			if !assert.Contains(c, []any{"succeeded", "failed", "cancelled", "skipped"}, ex["state"], "task %s's execution", id) {
				return
			}
			final[id] = ex
		}
	}, 90*time.Second, 250*time.Millisecond, "every execution ends final after the restart")

	hits := recv.byKey()
	for _, id := range atLeastOnce {
		ex := final[id]
		require.Equal(t, "succeeded", ex["state"], "task %s", id)
		execID := ex["id"].(string)
		sent := hits[execID]
		require.GreaterOrEqual(t, len(sent), 2, "the interrupted delivery was sent again")
		for i, h := range sent {
			require.Equal(t, execID, h.key, "same idempotency key on every attempt")
			require.Equal(t, execID, h.webhookID)
			require.Equal(t, execID, h.executionID)
			require.Equal(t, strconv.Itoa(i+1), h.attempt)
		}
		detail := apiGet(t, p2.base, tok, "/v1/executions/"+execID)
		var types []string
		for _, e := range detail["events"].([]any) {
			types = append(types, e.(map[string]any)["type"].(string))
		}
		require.Contains(t, types, "rescued", "%v", types)
		require.Equal(t, "succeeded", types[len(types)-1])
	}
	once := final[atMostOnce]
	require.Equal(t, "failed", once["state"], "max_attempts 1 is never re-sent")
	require.Len(t, hits[once["id"].(string)], 1)
	require.Equal(t, "interrupted", once["error_class"])

	// Nothing was sent that is not one of these executions.
	known := map[string]bool{}
	for _, ex := range final {
		known[ex["id"].(string)] = true
	}
	for key := range hits {
		require.True(t, known[key], "unexpected delivery %s", key)
	}
	p2.stop(t, syscall.SIGTERM)
}

func crashToken(t *testing.T, env map[string]string) string {
	t.Helper()
	cmd := exec.Command(axBinary, "token", "--tenant", "crash", "--scope", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

func apiPost(t *testing.T, base, token, path string, body any) map[string]any {
	t.Helper()
	return apiDo(t, http.MethodPost, base+path, token, body, http.StatusCreated)
}

func apiGet(t *testing.T, base, token, path string) map[string]any {
	t.Helper()
	return apiDo(t, http.MethodGet, base+path, token, nil, http.StatusOK)
}

func apiDo(t *testing.T, method, url, token string, body any, want int) map[string]any {
	t.Helper()
	m, err := doJSON(ctxT(t), method, url, token, body, want)
	require.NoError(t, err)
	return m
}

// getJSON is apiGet returning its error, for a condition of Eventually
// (which runs off the test's goroutine).
func getJSON(ctx context.Context, base, token, path string) (map[string]any, error) {
	return doJSON(ctx, http.MethodGet, base+path, token, nil, http.StatusOK)
}

// doJSON is apiDo returning its error.
func doJSON(ctx context.Context, method, url, token string, body any, want int) (map[string]any, error) {
	code, _, b, err := send(ctx, method, url, token, body)
	if err != nil {
		return nil, err
	}
	if code != want {
		return nil, fmt.Errorf("%s %s: status %d, want %d: %s", method, url, code, want, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", method, url, err, b)
	}
	return m, nil
}

// send sends one request (with the token, when there is one) and returns
// the status, headers and body. It does not fail the test: the condition
// of Eventually may call it.
func send(ctx context.Context, method, url, token string, body any) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}
