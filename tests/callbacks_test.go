package tests

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// callbackReceiver accepts every webhook with a 202 and keeps each
// attempt's X-Ax-Callback-Token.
type callbackReceiver struct {
	mu     sync.Mutex
	tokens map[string][]string // execution id → token per attempt
	srv    *httptest.Server
}

func newCallbackReceiver(t *testing.T) *callbackReceiver {
	t.Helper()
	r := &callbackReceiver{tokens: map[string][]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		id := req.Header.Get("X-Ax-Execution-Id")
		r.tokens[id] = append(r.tokens[id], req.Header.Get("X-Ax-Callback-Token"))
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// tokensOf waits until execution id was sent n times and returns its tokens.
func (r *callbackReceiver) tokensOf(t *testing.T, id string, n int) []string {
	t.Helper()
	var out []string
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		out = append([]string(nil), r.tokens[id]...)
		return len(out) >= n
	}, 60*time.Second, 20*time.Millisecond, "execution %s was not sent %d times", id, n)
	return out
}

func waitEventType(t *testing.T, base, tok, id, typ string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		x, err := getJSON(t.Context(), base, tok, "/v1/executions/"+id)
		if !assert.NoError(c, err) {
			return
		}
		var types []any
		for _, ev := range x["events"].([]any) {
			types = append(types, ev.(map[string]any)["type"])
		}
		assert.Contains(c, types, typ, "the timeline")
	}, 60*time.Second, 50*time.Millisecond, "execution %s never got %s", id, typ)
}

// TestCallbacksSurviveRestart: executions wait for their callbacks while
// the ax binary is killed (SIGKILL) and started again on the same
// database: a completion still lands with its token, and a heartbeat
// timeout is still enforced by the database's clock, retried with the
// same idempotency key and a new token; the old token is refused.
func TestCallbacksSurviveRestart(t *testing.T) {
	t.Parallel()
	rcv := newCallbackReceiver(t)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "rcv", "url": rcv.srv.URL + "/hook"})
	far := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	task := func(name string, heartbeatMS int) string {
		return apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
			"name": name, "endpoint_id": ep["id"], "schedule": map[string]any{"type": "once", "run_at": far},
			"completion": map[string]any{"mode": "callback", "timeout_ms": 600000, "heartbeat_timeout_ms": heartbeatMS},
			"retry":      map[string]any{"max_attempts": 2, "initial_backoff_ms": 100, "max_backoff_ms": 100},
		})["id"].(string)
	}
	completed, late := task("completed", 300000), task("late", 5000)
	trigger := func(taskID string) string {
		return apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+taskID+"/trigger", tok, nil, http.StatusAccepted)["id"].(string)
	}
	a, b := trigger(completed), trigger(late)
	tokA := rcv.tokensOf(t, a, 1)[0]
	tokB := rcv.tokensOf(t, b, 1)[0]
	waitEventType(t, p.base, tok, a, "accepted")
	waitEventType(t, p.base, tok, b, "accepted")

	p.stop(t, syscall.SIGKILL)
	p = startAx(t, env)

	x := apiDo(t, http.MethodPost, p.base+"/v1/executions/"+a+"/complete", tokA,
		map[string]any{"status": "succeeded", "output": map[string]any{"rows": 7}}, http.StatusOK)
	require.Equal(t, "succeeded", x["state"])
	require.Equal(t, map[string]any{"rows": float64(7)}, x["output"])

	// b's heartbeat timeout passes while nothing heartbeats: attempt 2.
	tokens := rcv.tokensOf(t, b, 2)
	require.NotEqual(t, tokB, tokens[1])
	apiDo(t, http.MethodPost, p.base+"/v1/executions/"+b+"/complete", tokB, map[string]any{"status": "succeeded"}, http.StatusConflict)
	apiDo(t, http.MethodPost, p.base+"/v1/executions/"+b+"/complete", tokA, map[string]any{"status": "succeeded"}, http.StatusForbidden)
	waitEventType(t, p.base, tok, b, "accepted")
	x = apiDo(t, http.MethodPost, p.base+"/v1/executions/"+b+"/complete", tokens[1], map[string]any{"status": "succeeded"}, http.StatusOK)
	require.Equal(t, "succeeded", x["state"])
	require.EqualValues(t, 2, x["attempts"])
	var classes []any
	for _, ev := range x["events"].([]any) {
		if ev.(map[string]any)["type"] == "attempt_failed" {
			classes = append(classes, ev.(map[string]any)["error_class"])
		}
	}
	require.Equal(t, []any{"heartbeat_timeout"}, classes)
}
