package tests

import (
	"io"
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

// TestWorkflowEndToEnd drives a 4-node workflow (extract → transform,
// audit → report; transform in two shards) through the real binary to a
// real receiver: each node arrives once, after its upstreams, with the
// workflow's headers, and the run ends succeeded.
func TestWorkflowEndToEnd(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	cmd := exec.Command(axBinary, "token", "--tenant", "wf", "--scope", "endpoints:write workflows:read workflows:write executions:read")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	tok := strings.TrimSpace(string(out))

	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "rcv", "url": rcv.srv.URL + "/hook"})
	wf := apiPost(t, p.base, tok, "/v1/workflows", map[string]any{
		"name": "billing.daily",
		"nodes": []any{
			map[string]any{"key": "extract", "endpoint_id": ep["id"], "payload": map[string]any{"step": 1}},
			map[string]any{"key": "transform", "endpoint_id": ep["id"], "depends_on": []string{"extract"}, "shards": 2},
			map[string]any{"key": "audit", "endpoint_id": ep["id"], "depends_on": []string{"extract"}},
			map[string]any{
				"key": "report", "endpoint_id": ep["id"], "depends_on": []string{"transform", "audit"},
				"trigger_rule": "all_done",
			},
		},
	})
	run := apiDo(t, http.MethodPost, p.base+"/v1/workflows/"+wf["id"].(string)+"/trigger", tok, map[string]any{}, http.StatusAccepted)
	runID := run["id"].(string)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := getJSON(t.Context(), p.base, tok, "/v1/workflow-runs/"+runID)
		assert.NoError(c, err)
		assert.Equal(c, "succeeded", r["state"])
	}, 30*time.Second, 50*time.Millisecond)

	hits := rcv.all()
	require.Len(t, hits, 5, "extract, two shards of transform, audit, report: each once")
	at := map[string][]time.Time{}
	for _, h := range hits {
		require.Equal(t, wf["id"], h.header.Get("X-Ax-Workflow-Id"))
		require.Equal(t, runID, h.header.Get("X-Ax-Workflow-Run-Id"))
		require.Empty(t, h.header.Values("X-Ax-Task-Id"), "a step names its workflow, run and node, not the workflow's own task")
		node := h.header.Get("X-Ax-Node")
		at[node] = append(at[node], h.at)
		if node == "transform" {
			require.Equal(t, "2", h.header.Get("X-Ax-Shard-Count"))
			require.Contains(t, []string{"0", "1"}, h.header.Get("X-Ax-Shard-Index"))
		} else {
			require.Empty(t, h.header.Get("X-Ax-Shard-Count"), "an unsharded node carries no shard headers")
		}
		if node == "extract" {
			require.Equal(t, `{"step":1}`, string(h.body))
		}
	}
	require.Len(t, at["extract"], 1)
	require.Len(t, at["transform"], 2)
	require.Len(t, at["audit"], 1)
	require.Len(t, at["report"], 1)
	for _, later := range []string{"transform", "audit"} {
		for _, ts := range at[later] {
			require.True(t, ts.After(at["extract"][0]), "%s after extract", later)
			require.True(t, at["report"][0].After(ts), "report after %s", later)
		}
	}
	resp, err := http.Get(p.base + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.NoError(t, err)
	require.Contains(t, string(metrics), `ax_workflow_runs_total{state="succeeded"} 1`)
	require.Regexp(t, `ax_workflow_node_wait_seconds_count [1-9]`, string(metrics))

	got := apiGet(t, p.base, tok, "/v1/workflow-runs/"+runID)
	for _, n := range got["nodes"].([]any) {
		m := n.(map[string]any)
		require.Equal(t, "succeeded", m["state"], m["key"])
		require.NotEmpty(t, m["execution_id"])
		// A step's execution points at what exists: its workflow, run
		// and node, and no task id that would be a 404.
		x := apiGet(t, p.base, tok, "/v1/executions/"+m["execution_id"].(string))
		require.NotContains(t, x, "task_id", m["key"])
		require.Equal(t, wf["id"], x["workflow_id"])
		require.Equal(t, runID, x["workflow_run_id"])
		require.Equal(t, m["key"], x["node"])
	}
}
