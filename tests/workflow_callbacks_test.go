package tests

import (
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestWorkflowCallbackNodeAndSLAEndToEnd drives, through the real binary,
// a 3-node workflow whose middle node is in callback mode and whose SLA
// passes while that node waits: the run waits for the node's completion
// (made over HTTP with the request's X-Ax-Callback-Token), the SLA miss is
// on the run (sla_missed_at, its sla_missed event), in /metrics, and
// alerted once; then the completion moves the run on to success.
func TestWorkflowCallbackNodeAndSLAEndToEnd(t *testing.T) {
	t.Parallel()
	rcv := newCallbackReceiver(t)
	alerts := newReceiver(t)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	cmd := exec.Command(axBinary, "token", "--tenant", "wfcb", "--scope",
		"endpoints:write workflows:read workflows:write executions:read")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	tok := strings.TrimSpace(string(out))

	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "rcv", "url": rcv.srv.URL + "/hook"})
	alertEP := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "pager", "url": alerts.srv.URL + "/alerts"})
	wf := apiPost(t, p.base, tok, "/v1/workflows", map[string]any{
		"name": "export.nightly", "alert_endpoint_id": alertEP["id"], "sla": map[string]any{"finish_within_ms": 2000},
		"nodes": []any{
			map[string]any{"key": "extract", "endpoint_id": ep["id"]},
			map[string]any{
				"key": "export", "endpoint_id": ep["id"], "depends_on": []string{"extract"},
				"completion": map[string]any{"mode": "callback", "timeout_ms": 600000},
			},
			map[string]any{"key": "report", "endpoint_id": ep["id"], "depends_on": []string{"export"}},
		},
	})
	run := apiDo(t, http.MethodPost, p.base+"/v1/workflows/"+wf["id"].(string)+"/trigger", tok, map[string]any{}, http.StatusAccepted)
	runID := run["id"].(string)

	// nodeOf returns a run's node, nil when it has none of that key.
	nodeOf := func(r map[string]any, key string) map[string]any {
		nodes, _ := r["nodes"].([]any)
		for _, n := range nodes {
			if n.(map[string]any)["key"] == key {
				return n.(map[string]any)
			}
		}
		return nil
	}
	var export string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := getJSON(t.Context(), p.base, tok, "/v1/workflow-runs/"+runID)
		assert.NoError(c, err)
		export, _ = nodeOf(r, "export")["execution_id"].(string)
		assert.NotEmpty(c, export, "export's execution")
	}, 60*time.Second, 50*time.Millisecond)
	token := rcv.tokensOf(t, export, 1)[0]
	require.NotEmpty(t, token)

	// The SLA passes while export waits: recorded on the run, alerted once.
	var r map[string]any
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		r, err = getJSON(t.Context(), p.base, tok, "/v1/workflow-runs/"+runID)
		assert.NoError(c, err)
		assert.NotNil(c, r["sla_missed_at"])
	}, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, "running", r["state"])
	require.Equal(t, "running", nodeOf(r, "export")["state"])
	require.Equal(t, "waiting", nodeOf(r, "report")["state"], "accepted is not done")
	events := r["events"].([]any)
	require.Len(t, events, 1)
	require.Equal(t, "sla_missed", events[0].(map[string]any)["type"])
	require.Eventually(t, func() bool { return len(alerts.all()) == 1 }, 60*time.Second, 50*time.Millisecond)
	alert := alerts.all()[0]
	require.Equal(t, "workflow_run.sla_missed", alert.header.Get("X-Ax-Alert-Type"))
	require.Contains(t, string(alert.body), runID)
	require.Contains(t, string(rawGet(t, p.base+"/metrics")), `ax_sla_missed_total{kind="workflow_run"} 1`)

	x := apiDo(t, http.MethodPost, p.base+"/v1/executions/"+export+"/complete", token,
		map[string]any{"status": "succeeded", "output": map[string]any{"files": 3}}, http.StatusOK)
	require.Equal(t, "succeeded", x["state"])
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := getJSON(t.Context(), p.base, tok, "/v1/workflow-runs/"+runID)
		assert.NoError(c, err)
		assert.Equal(c, "succeeded", r["state"])
	}, 60*time.Second, 50*time.Millisecond)
	time.Sleep(time.Second)
	require.Len(t, alerts.all(), 1, "one SLA alert, however long the run went on")
}
