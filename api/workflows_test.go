package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWorkflowAPI: the billing.daily document round-trips; a cycle is a
// 422 naming it; another tenant's workflow and run are 404; a PATCH of the
// nodes moves the version; the run shows its nodes; scopes are checked.
func TestWorkflowAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	body := `{"name":"billing.daily",
		"schedule":{"type":"cron","cron":"10 2 * * *","timezone":"Asia/Shanghai"},
		"max_active_runs":1,"misfire_policy":"fire_once","alert_endpoint_id":"` + ep + `","sla":{"finish_within_ms":7200000},
		"nodes":[
			{"key":"extract","endpoint_id":"` + ep + `","payload":{"step":1}},
			{"key":"transform","endpoint_id":"` + ep + `","depends_on":["extract"]},
			{"key":"audit","endpoint_id":"` + ep + `","depends_on":["extract"],"retry":{"max_attempts":1}},
			{"key":"report","endpoint_id":"` + ep + `","depends_on":["transform","audit"],"trigger_rule":"all_done"}]}`
	created := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: body})
	id := created.JSON["id"].(string)
	require.Equal(t, "active", created.JSON["state"])
	require.EqualValues(t, 1, created.JSON["version"])
	require.NotNil(t, created.JSON["next_run_at"])
	require.Equal(t, map[string]any{"finish_within_ms": 7200000.0}, created.JSON["sla"])
	nodes := created.JSON["nodes"].([]any)
	require.Len(t, nodes, 4)
	require.Equal(t, "extract", nodes[0].(map[string]any)["key"], "upstream first")
	require.Equal(t, "all_done", nodes[3].(map[string]any)["trigger_rule"])

	cycle := `{"name":"loop","nodes":[
		{"key":"extract","endpoint_id":"` + ep + `"},
		{"key":"transform","endpoint_id":"` + ep + `","depends_on":["extract","report"]},
		{"key":"report","endpoint_id":"` + ep + `","depends_on":["transform"]}]}`
	r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: cycle})
	require.Contains(t, string(r.Raw), "cycle: transform → report → transform")
	a.must(http.StatusBadRequest, req{Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: `{"name":`})
	a.must(http.StatusConflict, req{Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: body})

	other := token(t, "globex")
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/workflows/" + id, Token: other})
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: other})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/workflows/nope", Token: tok})

	run := a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok,
		Body: map[string]any{"dedup_key": "2027-01-01"},
	})
	runID := run.JSON["id"].(string)
	require.Equal(t, "running", run.JSON["state"])
	require.Equal(t, "manual", run.JSON["trigger"])
	again := a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok,
		Body: map[string]any{"dedup_key": "2027-01-01"},
	})
	require.Equal(t, runID, again.JSON["id"])
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: other})
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok})
	states := map[string]string{}
	for _, n := range got.JSON["nodes"].([]any) {
		m := n.(map[string]any)
		states[m["key"].(string)] = m["state"].(string)
	}
	require.Equal(t, map[string]string{"extract": "pending", "transform": "waiting", "audit": "waiting", "report": "waiting"}, states)
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/workflow-runs/" + runID + "/nodes/nope/run", Token: tok})

	patched := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
		Body: `{"nodes":[{"key":"only","endpoint_id":"` + ep + `"}]}`,
	})
	require.EqualValues(t, 2, patched.JSON["version"])
	got = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok})
	require.Len(t, got.JSON["nodes"], 4, "the run keeps its version")
	require.EqualValues(t, 1, got.JSON["version"])
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflows/" + id + "/runs", Token: tok})
	require.Len(t, list.JSON["items"], 1)

	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/workflow-runs/" + runID + "/cancel", Token: tok})
	a.must(http.StatusConflict, req{Method: http.MethodPost, Path: "/v1/workflow-runs/" + runID + "/cancel", Token: tok})

	readOnly := token(t, "acme", "workflows:read")
	a.must(http.StatusForbidden, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/pause", Token: readOnly})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflows", Token: readOnly})
	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/workflows/" + id, Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok})
	tasks := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks", Token: tok})
	require.Empty(t, tasks.JSON["items"], "node tasks are not tasks of the API")
}

// TestWorkflowNodeCompletionAndSLAFields: a node takes a task's completion
// object (validated as a task's, the error naming the node), returns it,
// and a PATCH that repeats it makes no new version; a workflow's SLA is
// validated as a task's; a run without a miss shows neither
// sla_missed_at nor events.
func TestWorkflowNodeCompletionAndSLAFields(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "long")
	node := func(completion string) string {
		return `{"name":"long.running","nodes":[{"key":"a","endpoint_id":"` + ep + `"},
			{"key":"b","endpoint_id":"` + ep + `","depends_on":["a"],"completion":` + completion + `}]}`
	}
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: node(`{"mode":"callback"}`),
	})
	require.Contains(t, string(r.Raw), "nodes[1].completion.timeout_ms")
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: node(`{"mode":"eventually","timeout_ms":1000}`),
	})
	require.Contains(t, string(r.Raw), "nodes[1].completion.mode")
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: node(`{"mode":"callback","timeout_ms":60000,"deadline":1}`),
	})
	require.Contains(t, string(r.Raw), "nodes[1].completion.deadline")
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: `{"name":"slow","sla":{"finish_within_ms":10},"nodes":[{"key":"a","endpoint_id":"` + ep + `"}]}`,
	})
	require.Contains(t, string(r.Raw), "sla.finish_within_ms")

	completion := map[string]any{"mode": "callback", "timeout_ms": 3600000.0, "heartbeat_timeout_ms": 120000.0}
	created := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: node(`{"mode":"callback","timeout_ms":3600000,"heartbeat_timeout_ms":120000}`),
	})
	id := created.JSON["id"].(string)
	nodes := created.JSON["nodes"].([]any)
	require.Nil(t, nodes[0].(map[string]any)["completion"], "response mode is the default")
	require.Equal(t, completion, nodes[1].(map[string]any)["completion"])
	patched := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
		Body: map[string]any{"nodes": nodes},
	})
	require.EqualValues(t, 1, patched.JSON["version"], "the same nodes make no new version")
	nodes[1].(map[string]any)["completion"] = map[string]any{"mode": "response"}
	patched = a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
		Body: map[string]any{"nodes": nodes},
	})
	require.EqualValues(t, 2, patched.JSON["version"])
	require.Nil(t, patched.JSON["nodes"].([]any)[1].(map[string]any)["completion"])

	run := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok})
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + run.JSON["id"].(string), Token: tok})
	require.NotContains(t, got.JSON, "sla_missed_at")
	require.NotContains(t, got.JSON, "events")
}

// TestWorkflowRunSLA: a run carries where it stands with its workflow's
// SLA, in GET /v1/workflow-runs/{id} and in lists, worked out by service
// (the console shows the same): not due yet with its deadline; missed,
// with when and the deadline the miss recorded; none without an SLA.
func TestWorkflowRunSLA(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "ep")
	id := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: `{"name":"etl","sla":{"finish_within_ms":3600000},"nodes":[{"key":"a","endpoint_id":"` + ep + `"}]}`,
	}).JSON["id"].(string)
	run := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok}).JSON
	runID := run["id"].(string)
	slot, err := time.Parse(time.RFC3339Nano, run["scheduled_for"].(string))
	require.NoError(t, err)
	due := slot.Add(time.Hour).UTC().Format(time.RFC3339Nano)
	open := map[string]any{"status": "open", "finish_within_ms": 3600000.0, "due_at": due}
	require.Equal(t, open, run["sla"])
	require.Equal(t, open, a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok}).JSON["sla"])
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflows/" + id + "/runs", Token: tok}).JSON["items"].([]any)
	require.Equal(t, open, list[0].(map[string]any)["sla"])

	a.exec(`UPDATE workflow_runs SET sla_missed_at = '2026-01-02T04:00:00Z' WHERE id = $1`, runID)
	a.exec(`INSERT INTO workflow_run_events (tenant_id, run_id, type, message, data)
		VALUES ('acme', $1, 'sla_missed', 'not succeeded within 1h0m0s of its slot', '{"due_at":"2026-01-02T03:04:05Z"}')`, runID)
	require.Equal(t, map[string]any{
		"status": "missed", "finish_within_ms": 3600000.0, "due_at": "2026-01-02T03:04:05Z",
		"missed_at": "2026-01-02T04:00:00Z",
	},
		a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runID, Token: tok}).JSON["sla"])
	list = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflows/" + id + "/runs", Token: tok}).JSON["items"].([]any)
	require.Equal(t, "missed", list[0].(map[string]any)["sla"].(map[string]any)["status"])

	plain := a.createWorkflow(tok, "plain")
	r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + a.triggerWorkflow(tok, plain), Token: tok})
	require.Equal(t, map[string]any{"status": "none"}, r.JSON["sla"])
}

// TestWorkflowBackfillAPI: a workflow's backfill has the task backfill's
// body and answers; the resource names the workflow; calendars work on
// workflow schedules and a calendar in use by one cannot be deleted.
func TestWorkflowBackfillAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	id := a.createWorkflow(tok, "wf-bf-api")
	path := "/v1/workflows/" + id + "/backfill"
	rng := map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z"}
	r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: path, Token: tok, Body: rng})
	require.Contains(t, string(r.Raw), "no schedule")

	cal := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/calendars", Token: tok,
		Body: map[string]any{"name": "new-year", "dates": []string{"2026-01-01"}},
	}).JSON["id"].(string)
	a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 2 * * *", "exclude_calendars": []string{cal}}},
	})
	a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/calendars/" + cal, Token: tok})

	plan := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: path, Token: tok,
		Body: map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z", "dry_run": true},
	})
	require.Equal(t, []any{map[string]any{"scheduled_for": "2026-01-02T02:00:00Z", "round": 1.0, "action": "create"}},
		plan.JSON["slots"], "the excluded date has no slot")

	b := a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: path, Token: tok,
		Body: map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-05T00:00:00Z", "rerun": "all", "max_concurrency": 2},
	})
	bid := b.JSON["id"].(string)
	require.Equal(t, id, b.JSON["workflow_id"])
	require.NotContains(t, b.JSON, "task_id")
	require.EqualValues(t, 3, b.JSON["total"])
	require.Equal(t, "running", b.JSON["state"])
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/backfills?workflow_id=" + id, Token: tok})
	require.Len(t, list.JSON["items"], 1)
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/backfills?workflow_id=nope", Token: tok})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/backfills/" + bid, Token: tok})
	c := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/backfills/" + bid + "/cancel", Token: tok})
	require.Equal(t, "cancelled", c.JSON["state"])

	other := token(t, "globex")
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: path, Token: other, Body: rng})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/backfills/" + bid, Token: other})
	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: path, Token: tok,
		Body: map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-05T00:00:00Z", "rerun": "sometimes"},
	})
	a.must(http.StatusBadRequest, req{Method: http.MethodPost, Path: path, Token: tok, Body: `{"from":`})
}
