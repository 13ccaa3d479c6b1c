package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tenantToken mints a token of the binary for tenant with every task,
// endpoint and execution scope.
func tenantToken(t *testing.T, env map[string]string, tenant string) string {
	t.Helper()
	cmd := exec.Command(axBinary, "token", "--tenant", tenant, "--scope",
		"tasks:read tasks:write endpoints:read endpoints:write executions:read executions:write")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestTemplatedPayloadsEndToEnd drives templated payloads through the
// real binary's API: a templated Asia/Shanghai daily task's backfill of
// November sends thirty bodies, each with its slot's local business date;
// a trigger sends its own rendering; the render endpoint says what a slot
// would send and is another tenant's 404; a template naming unknown data
// is a 422 naming the field.
func TestTemplatedPayloadsEndToEnd(t *testing.T) {
	t.Parallel()
	env := backfillEnv(t)
	recv := newReceiver(t)
	p := startAx(t, env)
	tok := tenantToken(t, env, "tmpl-a")
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "export", "url": recv.srv.URL + "/hook"})

	bad := apiDo(t, http.MethodPost, p.base+"/v1/tasks", tok, map[string]any{
		"name": "bad", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "30 2 * * *"},
		"payload_template": true, "payload": map[string]any{"rows": "{{ .nodes.extract.output.rows }}"},
	}, http.StatusUnprocessableEntity)
	require.Equal(t, "payload.rows", bad["errors"].([]any)[0].(map[string]any)["field"])

	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "export", "endpoint_id": ep["id"],
		"schedule":         map[string]any{"type": "cron", "cron": "30 2 * * *", "timezone": "Asia/Shanghai"},
		"payload_template": true,
		"payload": map[string]any{
			"date": "{{ .business_date }}", "file": `export-{{ date_format (date_add .business_date -1) "yyyyMMdd" }}.csv`,
			"trigger": "{{ .trigger }}", "round": "{{ .round }}",
		},
	})
	id := task["id"].(string)
	require.Equal(t, true, task["payload_template"])

	r := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/render", tok, map[string]any{"scheduled_for": "2026-11-01T18:30:00Z"}, http.StatusOK)
	require.Equal(t, map[string]any{"date": "2026-11-02", "file": "export-20261101.csv", "trigger": "schedule", "round": 1.0}, r["body"])
	apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/render", tenantToken(t, env, "tmpl-b"), map[string]any{}, http.StatusNotFound)

	b := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, map[string]any{
		"from": "2026-10-31T16:00:00Z", "to": "2026-11-30T16:00:00Z", "max_concurrency": 10,
	}, http.StatusAccepted)
	require.EqualValues(t, 30, b["total"])
	b = waitBackfill(t, p.base, tok, b["id"].(string), time.Minute)
	require.Equal(t, "succeeded", b["state"], "%v", b)

	var dates []string
	for _, h := range recv.all() {
		var body map[string]any
		require.NoError(t, json.Unmarshal(h.body, &body))
		require.Equal(t, "backfill", body["trigger"])
		slot, err := time.Parse(time.RFC3339Nano, h.header.Get("X-Ax-Scheduled-For"))
		require.NoError(t, err)
		require.Equal(t, slot.Add(8*time.Hour).Format(time.DateOnly), body["date"], "its own slot's Shanghai date")
		dates = append(dates, body["date"].(string))
	}
	slices.Sort(dates)
	require.Len(t, slices.Compact(dates), 30, "thirty bodies, thirty different local dates")
	require.Equal(t, "2026-11-01", dates[0])
	require.Equal(t, "2026-11-30", dates[len(dates)-1])

	x := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/trigger", tok, nil, http.StatusAccepted)
	require.Eventually(t, func() bool { return len(recv.all()) == 31 }, 30*time.Second, 20*time.Millisecond)
	last := recv.all()[30]
	require.Equal(t, x["id"], last.header.Get("Idempotency-Key"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(last.body, &body))
	require.Equal(t, "manual", body["trigger"])
	require.EqualValues(t, 1, body["round"])
}
