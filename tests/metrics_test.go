package tests

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

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
	env := map[string]string{"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true"}
	p := startAx(t, env)
	tok := crashToken(t, env)

	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "rcv", "url": rcv.srv.URL + "/hook"})
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{"name": "every-second", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "cron", "cron": "* * * * * *"}})
	require.Eventually(t, func() bool { return len(rcv.all()) >= 2 }, 15*time.Second, 20*time.Millisecond)
	apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+task["id"].(string)+"/pause", tok, nil, http.StatusOK)

	daily := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{"name": "daily", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "cron", "cron": "0 3 * * *"}})
	next := apiGet(t, p.base, tok, "/v1/tasks/"+daily["id"].(string)+"/preview?count=1")["items"].([]any)[0].(map[string]any)["at"]
	apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+daily["id"].(string)+"/skip", tok, map[string]any{"scheduled_for": next}, http.StatusOK)

	counter := func(m, state string) int {
		got := regexp.MustCompile(`ax_executions_finished_total\{state="` + state + `"\} (\d+)`).FindStringSubmatch(m)
		if got == nil {
			return 0
		}
		n, err := strconv.Atoi(got[1])
		require.NoError(t, err)
		return n
	}
	var stats map[string]any
	require.Eventually(t, func() bool { // deliveries under way at the pause finish
		resp, err := http.Get(p.base + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, resp.Body.Close())
		require.NoError(t, err)
		stats = apiGet(t, p.base, tok, "/v1/stats")["executions"].(map[string]any)["by_state"].(map[string]any)
		for _, s := range []string{"succeeded", "failed", "cancelled", "skipped"} {
			if counter(string(body), s) != int(stats[s].(float64)) {
				return false
			}
		}
		return stats["pending"].(float64) == 0 && stats["running"].(float64) == 0
	}, 15*time.Second, 100*time.Millisecond, "the counter by state is the stats' by state")
	require.Positive(t, stats["succeeded"])
	require.Positive(t, stats["cancelled"], "the pause cancelled the fires queued")
	require.EqualValues(t, 1, stats["skipped"])
}
