package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// successPath is how a test's success is recorded: the batched statement
// (db.SucceedDeliveries), the row-by-row finish (Deliveries.finishRow: an
// endpoint with max_concurrency holds a permit, which the batch leaves
// alone), or a callback completion (Deliveries.Complete).
type successPath string

const (
	pathBatched  successPath = "batched"
	pathRow      successPath = "row"
	pathCallback successPath = "callback"
)

// recoveryRig is a task with an alert endpoint, whose executions fail or
// succeed as a test says, on one success path.
type recoveryRig struct {
	h      *harness
	path   successPath
	recv   *script
	alerts *script
	task   service.Task
}

// newRecoveryRig builds the rig; the task's receiver answers the script
// (a callback task's answers 202, then its completion decides).
func newRecoveryRig(t *testing.T, path successPath, format string, answers []response, change func(*service.TaskInput)) *recoveryRig {
	t.Helper()
	r := &recoveryRig{path: path, alerts: newScript(t, response{Status: http.StatusOK})}
	if path == pathRow {
		r.h, _ = limitedHarness(t, 1)
	} else {
		r.h = newHarness(t, harnessOpts{})
	}
	alertEP := r.h.endpoint(r.alerts.srv.URL, func(in *service.EndpointInput) { in.Format = format })
	if path == pathCallback {
		answers = []response{{Status: http.StatusAccepted}}
	}
	r.recv = newScript(t, answers...)
	ep := r.h.endpoint(r.recv.srv.URL, func(in *service.EndpointInput) {
		if path == pathRow {
			in.MaxConcurrency = ref(5)
		}
	})
	r.task = r.h.task(ep.ID, func(in *service.TaskInput) {
		in.AlertEndpointID = alertEP.ID
		in.Retry.MaxAttempts = 1
		if path == pathCallback {
			in.Completion = service.Completion{Mode: service.CompletionCallback, Timeout: time.Minute, HeartbeatTimeout: 30 * time.Second}
		}
		if change != nil {
			change(in)
		}
	})
	return r
}

// run fires one execution that ends in state (failed or succeeded) and
// returns its id once it has.
func (r *recoveryRig) run(t *testing.T, state string) string {
	t.Helper()
	id := r.h.fire(r.task, fireOpts{})
	hit := r.recv.next(t)
	require.Equal(t, id, hit.Header.Get("Idempotency-Key"))
	if r.path == pathCallback {
		_, grant := r.h.grantOf(hit)
		r.h.waitEvent(id, service.EventAccepted)
		in := service.CompletionInput{Status: state}
		if state == service.ExecFailed {
			in.Retryable = ref(false)
		}
		_, err := r.h.deliveries.Complete(t.Context(), r.h.tenant, id, grant, in)
		require.NoError(t, err)
	}
	r.h.waitState(id, state)
	if state == service.ExecSucceeded {
		r.requirePath(t, id)
	}
	return id
}

// requirePath checks that the success of id took the rig's path: only the
// batched statement leaves its succeeded event implied by the row.
func (r *recoveryRig) requirePath(t *testing.T, id string) {
	t.Helper()
	var implied bool
	var explicit int
	require.NoError(t, r.h.pool.QueryRow(context.Background(), `SELECT e.implicit_events & 4 <> 0,
			(SELECT count(*) FROM execution_events v WHERE v.tenant_id = e.tenant_id AND v.execution_id = e.id AND v.type = 'succeeded')
		FROM executions e WHERE e.tenant_id = $1 AND e.id = $2`, r.h.tenant, id).Scan(&implied, &explicit))
	if r.path == pathBatched {
		require.True(t, implied, "a batched success")
		require.Zero(t, explicit)
	} else {
		require.False(t, implied, "a success recorded row by row")
		require.Equal(t, 1, explicit)
	}
}

// alertJobs returns the types of the alert jobs queued for an execution
// (they are queued in the transaction that ended it).
func (r *recoveryRig) alertJobs(t *testing.T, id string) []string {
	t.Helper()
	var types []string
	require.NoError(t, r.h.pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(coalesce(args->>'type', '') ORDER BY id), '{}')
		FROM river_job WHERE kind = 'alert' AND args->>'execution_id' = $1`, id).Scan(&types))
	return types
}

// nextAlert waits for the next alert and returns its body.
func (r *recoveryRig) nextAlert(t *testing.T, typ, executionID string) map[string]any {
	t.Helper()
	got := r.alerts.next(t)
	require.Equal(t, typ, got.Header.Get("X-Ax-Alert-Type"))
	require.Equal(t, executionID, got.Header.Get("X-Ax-Alert-Execution-Id"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(got.Body, &body))
	return body
}

// TestAlertRecovered: on each of the three success paths, a failure that
// was alerted, then a success: the success sends one execution.recovered
// alert (ax format: the succeeded execution, "recovered": {"failures":
// 1}), and the next success none.
func TestAlertRecovered(t *testing.T) {
	t.Parallel()
	for _, path := range []successPath{pathBatched, pathRow, pathCallback} {
		t.Run(string(path), func(t *testing.T) {
			t.Parallel()
			r := newRecoveryRig(t, path, service.AlertFormatAx,
				[]response{{Status: http.StatusBadRequest}, {Status: http.StatusOK}}, nil)

			failed := r.run(t, service.ExecFailed)
			require.Equal(t, "execution.failed", r.nextAlert(t, service.AlertExecutionFailed, failed)["type"])

			ok := r.run(t, service.ExecSucceeded)
			require.Equal(t, []string{service.AlertExecutionRecovered}, r.alertJobs(t, ok))
			body := r.nextAlert(t, service.AlertExecutionRecovered, ok)
			require.Equal(t, map[string]any{
				"type": "execution.recovered", "execution_id": ok, "task_id": r.task.ID, "task_name": r.task.Name,
				"task_state": "active", "scheduled_for": body["scheduled_for"], "trigger": "schedule", "state": "succeeded",
				"attempts": float64(1), "last_status_code": body["last_status_code"], "last_error": nil, "error_class": nil,
				"finished_at": body["finished_at"], "sla": nil, "recovered": map[string]any{"failures": float64(1)},
			}, body)
			require.NotNil(t, body["finished_at"])
			r.h.waitEvent(ok, service.EventAlertSent)

			again := r.run(t, service.ExecSucceeded)
			require.Empty(t, r.alertJobs(t, again), "recovered is sent once per alerted streak")
			var failures int
			var alerted bool
			require.NoError(t, r.h.pool.QueryRow(context.Background(),
				`SELECT consecutive_failures, failure_alerted FROM tasks WHERE tenant_id = $1 AND id = $2`,
				r.h.tenant, r.task.ID).Scan(&failures, &alerted))
			require.Zero(t, failures)
			require.False(t, alerted)
		})
	}
}

// TestAlertRecoveredSlack: a slack-format alert endpoint gets the
// recovered alert as a readable line that counts the failures.
func TestAlertRecoveredSlack(t *testing.T) {
	t.Parallel()
	r := newRecoveryRig(t, pathBatched, service.AlertFormatSlack,
		[]response{{Status: http.StatusBadRequest}, {Status: http.StatusBadRequest}, {Status: http.StatusOK}}, nil)
	for range 2 {
		id := r.run(t, service.ExecFailed)
		r.nextAlert(t, service.AlertExecutionFailed, id)
	}
	ok := r.run(t, service.ExecSucceeded)
	body := r.nextAlert(t, service.AlertExecutionRecovered, ok)
	text, _ := body["text"].(string)
	require.Contains(t, text, ":white_check_mark: *"+r.task.Name+"* recovered after 2 failures: succeeded (slot ")
	require.Contains(t, text, "/v1/executions/"+ok+"|execution "+ok+">")
	require.Len(t, body, 1, "a Slack message: text only")
}

// TestAlertAfterFailures: with alert_after_failures 3 the first two
// failures in a row alert nothing, the third and the fourth alert, and
// the success after them sends recovered counting 4; the count starts
// again after it, and a success after failures that never reached 3
// sends no recovered alert.
func TestAlertAfterFailures(t *testing.T) {
	t.Parallel()
	bad := response{Status: http.StatusBadRequest}
	good := response{Status: http.StatusOK}
	r := newRecoveryRig(t, pathBatched, service.AlertFormatAx,
		[]response{bad, bad, bad, bad, good, bad, bad, good},
		func(in *service.TaskInput) { in.AlertAfterFailures = 3 })

	for range 2 {
		id := r.run(t, service.ExecFailed)
		require.Empty(t, r.alertJobs(t, id), "below alert_after_failures")
		require.NotContains(t, eventTypes(r.h.events(id)), service.EventAlertQueued)
	}
	for range 2 {
		id := r.run(t, service.ExecFailed)
		require.Equal(t, []string{""}, r.alertJobs(t, id), "the failure alert")
		r.nextAlert(t, service.AlertExecutionFailed, id)
	}
	ok := r.run(t, service.ExecSucceeded)
	body := r.nextAlert(t, service.AlertExecutionRecovered, ok)
	require.Equal(t, map[string]any{"failures": float64(4)}, body["recovered"])

	for range 2 {
		id := r.run(t, service.ExecFailed)
		require.Empty(t, r.alertJobs(t, id), "the success started the count again")
	}
	quiet := r.run(t, service.ExecSucceeded)
	require.Empty(t, r.alertJobs(t, quiet), "no failure of the streak was alerted")
	r.alerts.quiet(t, 300*time.Millisecond)
}

// TestAlertRecoveredAfterResume: a task paused by its alerted failure and
// resumed (which restarts the count) still sends execution.recovered at
// its first success, counting the failures since the resume (none).
func TestAlertRecoveredAfterResume(t *testing.T) {
	t.Parallel()
	r := newRecoveryRig(t, pathBatched, service.AlertFormatAx,
		[]response{{Status: http.StatusBadRequest}, {Status: http.StatusOK}},
		func(in *service.TaskInput) { in.PauseAfterFailures = 1 })
	failed := r.run(t, service.ExecFailed)
	require.Equal(t, service.TaskPaused, r.nextAlert(t, service.AlertExecutionFailed, failed)["task_state"])
	_, err := r.h.tasks.Resume(t.Context(), r.h.tenant, r.task.ID)
	require.NoError(t, err)

	ok := r.run(t, service.ExecSucceeded)
	body := r.nextAlert(t, service.AlertExecutionRecovered, ok)
	require.Equal(t, map[string]any{"failures": float64(0)}, body["recovered"])
	again := r.run(t, service.ExecSucceeded)
	require.Empty(t, r.alertJobs(t, again))
}
