package tests

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestFinishedCounterMatchesStats: through the real binary, the executions
// ax_executions_finished_total counts by state are those GET /v1/stats
// counts by state, whatever ended them — deliveries, a pause cancelling
// the fires queued, a slot skipped on request.
func TestFinishedCounterMatchesStats(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	tok := crashToken(t, env)

	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "rcv", "url": rcv.srv.URL + "/hook"})
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "every-second", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "cron", "cron": "* * * * * *"},
	})
	require.Eventually(t, func() bool { return len(rcv.all()) >= 2 }, 15*time.Second, 20*time.Millisecond)
	apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+task["id"].(string)+"/pause", tok, nil, http.StatusOK)

	daily := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "daily", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "cron", "cron": "0 3 * * *"},
	})
	next := apiGet(t, p.base, tok, "/v1/tasks/"+daily["id"].(string)+"/preview?count=1")["items"].([]any)[0].(map[string]any)["at"]
	apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+daily["id"].(string)+"/skip", tok, map[string]any{"scheduled_for": next}, http.StatusOK)

	counter := func(c *assert.CollectT, m []byte, state string) int {
		got := regexp.MustCompile(`ax_executions_finished_total\{state="` + state + `"\} (\d+)`).FindSubmatch(m)
		if got == nil {
			return 0
		}
		n, err := strconv.Atoi(string(got[1]))
		assert.NoError(c, err)
		return n
	}
	var stats map[string]int
	require.EventuallyWithT(t, func(c *assert.CollectT) { // deliveries under way at the pause finish
		code, _, metrics, err := send(t.Context(), http.MethodGet, p.base+"/metrics", "", nil)
		if !assert.NoError(c, err) || !assert.Equal(c, http.StatusOK, code) {
			return
		}
		code, _, b, err := send(t.Context(), http.MethodGet, p.base+"/v1/stats", tok, nil)
		if !assert.NoError(c, err) || !assert.Equal(c, http.StatusOK, code, "%s", b) {
			return
		}
		var got struct {
			Executions struct {
				ByState map[string]int `json:"by_state"`
			} `json:"executions"`
		}
		if !assert.NoError(c, json.Unmarshal(b, &got), "%s", b) {
			return
		}
		stats = got.Executions.ByState
		for _, s := range []string{"succeeded", "failed", "cancelled", "skipped"} {
			assert.Equal(c, stats[s], counter(c, metrics, s), "%s: the counter and the stats", s)
		}
		assert.Zero(c, stats["pending"], "pending")
		assert.Zero(c, stats["running"], "running")
	}, 15*time.Second, 100*time.Millisecond, "the counter by state is the stats' by state")
	require.Positive(t, stats["succeeded"])
	require.Positive(t, stats["cancelled"], "the pause cancelled the fires queued")
	require.Equal(t, 1, stats["skipped"])
}
