package tests

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkflowBackfillDelivers drives a workflow backfill through the real
// binary: each of five daily slots starts one run whose two steps reach
// the receiver once with the slot and round 1; a re-run of all is round 2.
func TestWorkflowBackfillDelivers(t *testing.T) {
	t.Parallel()
	env := backfillEnv(t)
	recv := newRoundReceiver(t, 0)
	p := startAx(t, env)
	cmd := exec.Command(axBinary, "token", "--tenant", "wfbf", "--scope", "admin")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	tok := strings.TrimSpace(string(out))
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "wf", "url": recv.srv.URL + "/hook"})
	wf := apiPost(t, p.base, tok, "/v1/workflows", map[string]any{
		"name": "nightly", "schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"}, "max_active_runs": 5,
		"nodes": []any{
			map[string]any{"key": "extract", "endpoint_id": ep["id"]},
			map[string]any{"key": "report", "endpoint_id": ep["id"], "depends_on": []string{"extract"}},
		},
	})
	id := wf["id"].(string)
	span := map[string]any{"from": "2026-03-01T00:00:00Z", "to": "2026-03-06T00:00:00Z", "max_concurrency": 2}
	b := apiDo(t, http.MethodPost, p.base+"/v1/workflows/"+id+"/backfill", tok, span, http.StatusAccepted)
	require.Equal(t, id, b["workflow_id"])
	require.EqualValues(t, 5, b["total"])
	b = waitBackfill(t, p.base, tok, b["id"].(string), 2*time.Minute)
	require.Equal(t, "succeeded", b["state"], "%v", b)
	require.EqualValues(t, 5, b["created"])
	require.EqualValues(t, 5, b["succeeded"])
	day := func(d int) string { return time.Date(2026, 3, d, 2, 0, 0, 0, time.UTC).Format(time.RFC3339) }
	recv.mu.Lock()
	for d := 1; d <= 5; d++ {
		require.Len(t, recv.got[day(d)+"#1"], 2, "both steps of the slot %s, once each", day(d))
	}
	recv.mu.Unlock()

	span["rerun"] = "all"
	b = apiDo(t, http.MethodPost, p.base+"/v1/workflows/"+id+"/backfill", tok, span, http.StatusAccepted)
	b = waitBackfill(t, p.base, tok, b["id"].(string), 2*time.Minute)
	require.Equal(t, "succeeded", b["state"], "%v", b)
	recv.mu.Lock()
	for d := 1; d <= 5; d++ {
		require.Len(t, recv.got[day(d)+"#2"], 2, "round 2 of the slot %s", day(d))
		require.Len(t, recv.got[day(d)+"#1"], 2)
	}
	recv.mu.Unlock()
	// The backfilled span's runs, all backfills (the live schedule may add
	// tonight's run when the test crosses 02:00 UTC).
	var backfilled int
	for _, r := range apiGet(t, p.base, tok, "/v1/workflows/"+id+"/runs?limit=100")["items"].([]any) {
		r := r.(map[string]any)
		if r["scheduled_for"].(string) < "2026-03-06" {
			require.Equal(t, "backfill", r["trigger"])
			backfilled++
		}
	}
	require.Equal(t, 10, backfilled)
}
