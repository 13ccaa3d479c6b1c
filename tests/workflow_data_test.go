package tests

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestWorkflowDataEndToEnd: through the real binary, a run triggered with
// inputs keeps its merged inputs, and each node's output is its
// receiver's JSON answer; a node whose answer is not JSON has none, and
// its timeline says why.
func TestWorkflowDataEndToEnd(t *testing.T) {
	t.Parallel()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/json") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"rows": 1200, "file": "s3://bucket/2026-12-01.csv"}`)
			return
		}
		_, _ = io.WriteString(w, "thanks")
	}))
	t.Cleanup(rcv.Close)
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": "e2e-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	cmd := exec.Command(axBinary, "token", "--tenant", "wfdata", "--scope", "endpoints:write workflows:read workflows:write executions:read")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	tok := strings.TrimSpace(string(out))

	jsonEP := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "json", "url": rcv.URL + "/json"})
	textEP := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "text", "url": rcv.URL + "/text"})
	wf := apiPost(t, p.base, tok, "/v1/workflows", map[string]any{
		"name":   "export.daily",
		"inputs": map[string]any{"business_date": "2026-12-01", "limit": 100},
		"nodes": []any{
			map[string]any{"key": "extract", "endpoint_id": jsonEP["id"]},
			map[string]any{"key": "notify", "endpoint_id": textEP["id"], "depends_on": []string{"extract"}},
		},
	})
	run := apiDo(t, http.MethodPost, p.base+"/v1/workflows/"+wf["id"].(string)+"/trigger", tok,
		map[string]any{"inputs": map[string]any{"limit": 5}}, http.StatusAccepted)
	runID := run["id"].(string)
	want := map[string]any{"business_date": "2026-12-01", "limit": 5.0}
	require.Equal(t, want, run["inputs"])
	var got map[string]any
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		got, err = getJSON(context.Background(), p.base, tok, "/v1/workflow-runs/"+runID)
		assert.NoError(c, err)
		assert.Equal(c, "succeeded", got["state"])
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, want, got["inputs"])
	nodes := map[string]map[string]any{}
	for _, n := range got["nodes"].([]any) {
		m := n.(map[string]any)
		nodes[m["key"].(string)] = m
	}
	require.Equal(t, map[string]any{"rows": 1200.0, "file": "s3://bucket/2026-12-01.csv"}, nodes["extract"]["output"])
	require.NotContains(t, nodes["notify"], "output")

	x := apiGet(t, p.base, tok, "/v1/executions/"+nodes["extract"]["execution_id"].(string))
	require.Equal(t, nodes["extract"]["output"], x["output"])
	y := apiGet(t, p.base, tok, "/v1/executions/"+nodes["notify"]["execution_id"].(string))
	require.NotContains(t, y, "output")
	var why []string
	for _, ev := range y["events"].([]any) {
		if e := ev.(map[string]any); e["type"] == "no_output" {
			why = append(why, e["message"].(string))
		}
	}
	require.Equal(t, []string{"the response body is not JSON"}, why)
}
