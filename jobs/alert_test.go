package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestAlert: a failed execution sends one signed alert to its task's alert
// endpoint, and the outcome lands on the execution's timeline.
func TestAlert(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusBadRequest, Body: "nope"})
	alerts := newScript(t, response{Status: http.StatusOK})
	alertEP := h.endpoint(alerts.srv.URL+"/alerts", nil)
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.AlertEndpointID = alertEP.ID })
	slot := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	id := h.fire(task, fireOpts{ScheduledFor: slot})

	got := alerts.next(t)
	h.waitState(id, service.ExecFailed)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		evs, err := h.loadEvents(id)
		assert.NoError(c, err)
		assert.Equal(c, service.EventAlertSent, lastType(evs), "timeline %v", eventTypes(evs))
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"fired", "attempt_started", "attempt_failed", "failed", "alert_queued", "alert_sent"},
		eventTypes(h.events(id)))

	var jobID int64
	require.NoError(t, h.pool.QueryRow(context.Background(),
		`SELECT id FROM river_job WHERE kind = 'alert' AND args->>'execution_id' = $1`, id).Scan(&jobID))
	alertID := AlertID(id, jobID)
	require.Equal(t, "alert-"+id+"-"+strconv.FormatInt(jobID, 10), alertID)
	require.NotContains(t, alertID, ".")
	require.Equal(t, alertID, got.Header.Get("Webhook-Id"))
	require.Equal(t, alertID, got.Header.Get("Idempotency-Key"))
	// Headers of its own: a receiver keyed on a task's slot never takes
	// the alert for a fire of it.
	require.Equal(t, AlertType, got.Header.Get("X-Ax-Alert-Type"))
	require.Equal(t, id, got.Header.Get("X-Ax-Alert-Execution-Id"))
	for _, h := range []string{"X-Ax-Task-Id", "X-Ax-Execution-Id", "X-Ax-Scheduled-For", "X-Ax-Round"} {
		require.Empty(t, got.Header.Values(h), h)
	}
	ts, err := strconv.ParseInt(got.Header.Get("Webhook-Timestamp"), 10, 64)
	require.NoError(t, err)
	key, err := service.ParseSecret(alertEP.Secret)
	require.NoError(t, err)
	require.Equal(t, Sign(key, alertID, time.Unix(ts, 0), got.Body), got.Header.Get("Webhook-Signature"))

	var body map[string]any
	require.NoError(t, json.Unmarshal(got.Body, &body))
	require.Equal(t, map[string]any{
		"type": "execution.failed", "execution_id": id, "task_id": task.ID, "task_name": task.Name, "task_state": "active",
		"scheduled_for": slot.Format(time.RFC3339Nano), "trigger": "schedule", "state": "failed", "attempts": float64(1),
		"last_status_code": float64(400), "last_error": "HTTP 400 Bad Request", "error_class": "http_4xx",
		"finished_at": body["finished_at"], "sla": nil, "recovered": nil,
	}, body)
	require.NotEmpty(t, body["finished_at"])
	alerts.quiet(t, 200*time.Millisecond)
}

// TestAlertFailureDoesNotAlert: an alert endpoint that refuses the alert
// gets it once (a permanent failure), the failure is recorded, and no
// alert about the alert follows.
func TestAlertFailureDoesNotAlert(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusUnprocessableEntity})
	alerts := newScript(t, response{Status: http.StatusBadRequest})
	alertEP := h.endpoint(alerts.srv.URL, nil)
	// The alert endpoint alerts to itself: still one request.
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.AlertEndpointID = alertEP.ID })
	id := h.fire(task, fireOpts{})
	alerts.next(t)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		evs, err := h.loadEvents(id)
		assert.NoError(c, err)
		assert.Equal(c, service.EventAlertFailed, lastType(evs), "timeline %v", eventTypes(evs))
	}, 10*time.Second, 10*time.Millisecond)
	evs := h.events(id)
	last := evs[len(evs)-1]
	require.Equal(t, 400, *last.StatusCode)
	require.Contains(t, *last.Message, "alert given up after attempt 1: HTTP 400 Bad Request")
	alerts.quiet(t, 300*time.Millisecond)
	var n int
	require.NoError(t, h.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'alert'`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestAlertRetried: an alert endpoint that fails transiently gets the
// same alert again under the same id.
func TestAlertRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusBadRequest})
	alerts := newScript(t, response{Status: http.StatusServiceUnavailable}, response{Status: http.StatusOK})
	alertEP := h.endpoint(alerts.srv.URL, nil)
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.AlertEndpointID = alertEP.ID })
	id := h.fire(task, fireOpts{})
	first, second := alerts.next(t), alerts.next(t) // River's first retry comes about 1 s later
	require.Equal(t, first.Header.Get("Webhook-Id"), second.Header.Get("Webhook-Id"))
	require.Equal(t, "2", second.Header.Get("X-Ax-Attempt"))
	require.Equal(t, first.Body, second.Body)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		evs, err := h.loadEvents(id)
		assert.NoError(c, err)
		assert.Equal(c, service.EventAlertSent, lastType(evs), "timeline %v", eventTypes(evs))
	}, 10*time.Second, 10*time.Millisecond)
}

// TestAlertBodiesUseNull: in every alert body a value that is absent is
// null, never "" and never a missing key: an SLA alert of an execution that
// has no response, no error and no end yet (last_status_code, last_error,
// error_class, finished_at), a failure alert's sla and recovered, a blocked run's state,
// slot and sla, an SLA-missed run's nodes.
func TestAlertBodiesUseNull(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 3, 1, 18, 0, 0, 0, time.UTC)
	due := slot.Add(time.Hour)
	decode := func(b []byte, err error) map[string]any {
		t.Helper()
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		return m
	}
	w := &AlertWorker{}
	sla := decode(w.body(service.Alert{
		Type: service.AlertExecutionSLAMissed, ExecutionID: "x", TaskID: "t", TaskName: "n",
		TaskState: service.TaskActive, ScheduledFor: slot, Trigger: service.TriggerSchedule, State: service.ExecRunning,
		Attempts: 1, SLAFinishWithin: time.Hour, SLADueAt: &due,
	}))
	require.Equal(t, map[string]any{
		"type": "execution.sla_missed", "execution_id": "x", "task_id": "t", "task_name": "n", "task_state": "active",
		"scheduled_for": "2026-03-01T18:00:00Z", "trigger": "schedule", "state": "running", "attempts": float64(1),
		"last_status_code": nil, "last_error": nil, "error_class": nil, "finished_at": nil,
		"sla": map[string]any{"finish_within_ms": float64(3600000), "due_at": "2026-03-01T19:00:00Z"}, "recovered": nil,
	}, sla)
	code := 503
	failed := decode(w.body(service.Alert{
		Type: service.AlertExecutionFailed, ExecutionID: "x", State: service.ExecFailed,
		LastStatusCode: &code, LastError: "HTTP 503", ErrorClass: "http_5xx", FinishedAt: &due,
	}))
	require.Contains(t, failed, "sla")
	require.Nil(t, failed["sla"])
	require.Contains(t, failed, "recovered")
	require.Nil(t, failed["recovered"])
	require.Equal(t, "HTTP 503", failed["last_error"])
	require.Equal(t, "http_5xx", failed["error_class"])

	ww := &WorkflowAlertWorker{}
	blocked := decode(ww.body(service.WorkflowAlertArgs{
		Type: service.AlertWorkflowRunBlocked, WorkflowID: "w", RunID: "r",
		Nodes: []string{"report"},
	}, service.WorkflowAlert{WorkflowName: "etl"}))
	require.Equal(t, map[string]any{
		"type": "workflow_run.blocked", "workflow_id": "w", "workflow_name": "etl",
		"workflow_run_id": "r", "nodes": []any{"report"}, "state": nil, "scheduled_for": nil, "sla": nil,
	}, blocked)
	missed := decode(ww.body(service.WorkflowAlertArgs{
		Type: service.AlertWorkflowRunSLAMissed, WorkflowID: "w", RunID: "r",
		State: service.RunRunning, ScheduledFor: &slot, SLAFinishWithinMS: 3600000, SLADueAt: &due,
	}, service.WorkflowAlert{WorkflowName: "etl"}))
	require.Equal(t, map[string]any{
		"type": "workflow_run.sla_missed", "workflow_id": "w", "workflow_name": "etl",
		"workflow_run_id": "r", "nodes": nil, "state": "running", "scheduled_for": "2026-03-01T18:00:00Z",
		"sla": map[string]any{"finish_within_ms": float64(3600000), "due_at": "2026-03-01T19:00:00Z"},
	}, missed)
}
