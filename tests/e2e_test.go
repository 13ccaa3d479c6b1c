package tests

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
)

// hit is one webhook the receiver got.
type hit struct {
	header http.Header
	body   []byte
	at     time.Time
}

type receiver struct {
	mu   sync.Mutex
	hits []hit
	srv  *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.hits = append(r.hits, hit{header: req.Header.Clone(), body: b, at: time.Now()})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) all() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// TestScheduledWebhookEndToEnd: a task created through the API of the real
// binary fires on schedule; the receiver gets signed webhooks with the
// payload byte for byte; the execution history and /metrics tell the story.
func TestScheduledWebhookEndToEnd(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	tok := crashToken(t, env)

	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "rcv", "url": rcv.srv.URL + "/hook"})
	secret := ep["secret"].(string)
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "every-second", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "cron", "cron": "* * * * * *"},
		"payload":  map[string]any{"order": 42},
	})
	// The raw payload bytes as sent in the create request are what webhooks carry.
	require.Eventually(t, func() bool { return len(rcv.all()) >= 3 }, 15*time.Second, 20*time.Millisecond)

	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, h := range rcv.all() {
		id := h.header.Get("webhook-id")
		require.Equal(t, id, h.header.Get("Idempotency-Key"))
		require.Equal(t, id, h.header.Get("X-Ax-Execution-Id"))
		require.False(t, seen[id], "each execution delivered once")
		seen[id] = true
		require.Equal(t, task["id"], h.header.Get("X-Ax-Task-Id"))
		require.Equal(t, "1", h.header.Get("X-Ax-Attempt"))
		require.Equal(t, `{"order":42}`, string(h.body))
		ts, err := strconv.ParseInt(h.header.Get("webhook-timestamp"), 10, 64)
		require.NoError(t, err)
		require.Equal(t, jobs.Sign(key, id, time.Unix(ts, 0), h.body), h.header.Get("webhook-signature"))
		slot, err := time.Parse(time.RFC3339Nano, h.header.Get("X-Ax-Scheduled-For"))
		require.NoError(t, err)
		require.Zero(t, slot.Nanosecond(), "a per-second cron fires on whole seconds")
		require.False(t, h.at.Before(slot), "never early")
		require.Less(t, h.at.Sub(slot), 2*time.Second, "on time")
		require.True(t, strings.HasPrefix(h.header.Get("User-Agent"), "ax/"))
	}

	// The execution history records each fire with its timeline.
	list := apiGet(t, p.base, tok, "/v1/executions?state=succeeded&task_id="+task["id"].(string))
	items := list["items"].([]any)
	require.NotEmpty(t, items)
	exec := apiGet(t, p.base, tok, "/v1/executions/"+items[0].(map[string]any)["id"].(string))
	var types []string
	for _, ev := range exec["events"].([]any) {
		types = append(types, ev.(map[string]any)["type"].(string))
	}
	require.Equal(t, []string{service.EventFired, service.EventAttemptStarted, service.EventAttemptSucceeded, service.EventSucceeded}, types)

	// Metrics exist and moved.
	resp, err := http.Get(p.base + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	m := string(body)
	for _, want := range []string{
		`ax_fires_total{trigger="schedule"}`,
		`ax_delivery_attempts_total{error_class="",outcome="success"}`,
		`ax_executions_finished_total{state="succeeded"}`,
		`ax_firing_lateness_seconds_count`,
		`ax_delivery_attempt_duration_seconds_count`,
		`ax_scheduler_pass_duration_seconds_count`,
		`ax_scheduler_claimed_tasks_count`,
		`ax_delivery_transitions_batched_total`,
		`ax_http_requests_total{method="POST",route="/v1/tasks",status="201"}`,
		`ax_http_request_duration_seconds_count{method="POST",route="/v1/tasks"}`,
	} {
		require.Regexp(t, regexp.QuoteMeta(want)+` [1-9]`, m, "metric %s is present and positive", want)
	}
	require.Contains(t, m, "ax_river_jobs_scrape_ok 1")
	require.Contains(t, m, "ax_delivery_batch_failures_total 0")
	require.Contains(t, m, "go_goroutines")
	require.Contains(t, m, "process_resident_memory_bytes")
}
