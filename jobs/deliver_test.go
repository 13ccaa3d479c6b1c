package jobs

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestDeliverSuccess: one signed request with exactly ax's headers and the
// payload byte for byte; the execution succeeds with its timeline.
func TestDeliverSuccess(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusOK, Body: "ok"})
	ep := h.endpoint(recv.srv.URL+"/hook?src=ax", func(in *service.EndpointInput) {
		in.Headers = map[string]string{"X-Env": "prod"}
	})
	payload := []byte(`{"b":1,  "a":[1,2],` + "\n" + `"s":"caf\u00e9 ü"}`)
	task := h.task(ep.ID, func(in *service.TaskInput) { in.Payload = payload })
	slot := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	id := h.fire(task, fireOpts{ScheduledFor: slot})

	got := recv.next(t)
	e := h.waitState(id, service.ExecSucceeded)

	require.Equal(t, payload, got.Body, "the body is the payload byte for byte")
	names := make([]string, 0, len(got.Header))
	for k := range got.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	require.Equal(t, []string{
		"Content-Length", "Content-Type", "Idempotency-Key", "User-Agent", "Webhook-Id",
		"Webhook-Signature", "Webhook-Timestamp", "X-Ax-Attempt", "X-Ax-Execution-Id", "X-Ax-Round", "X-Ax-Scheduled-For",
		"X-Ax-Task-Id", "X-Env",
	}, names)
	hd := got.Header
	require.Equal(t, "application/json", hd.Get("Content-Type"))
	require.Equal(t, id, hd.Get("Idempotency-Key"))
	require.Equal(t, id, hd.Get("Webhook-Id"))
	require.Equal(t, id, hd.Get("X-Ax-Execution-Id"))
	require.Equal(t, task.ID, hd.Get("X-Ax-Task-Id"))
	require.Equal(t, slot.Format(time.RFC3339Nano), hd.Get("X-Ax-Scheduled-For"))
	require.Equal(t, "1", hd.Get("X-Ax-Attempt"))
	require.Equal(t, testUserAgent, hd.Get("User-Agent"))
	require.Equal(t, "prod", hd.Get("X-Env"))
	ts, err := strconv.ParseInt(hd.Get("Webhook-Timestamp"), 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), ts, 10)
	key, err := service.ParseSecret(ep.Secret)
	require.NoError(t, err)
	require.Equal(t, Sign(key, id, time.Unix(ts, 0), payload), hd.Get("Webhook-Signature"))

	require.Equal(t, 1, e.Attempts)
	require.Equal(t, 200, *e.LastStatusCode)
	require.Nil(t, e.LastError)
	require.NotNil(t, e.StartedAt)
	require.NotNil(t, e.FinishedAt)
	evs := h.events(id)
	require.Equal(t, []string{"fired", "attempt_started", "attempt_succeeded", "succeeded"}, eventTypes(evs))
	require.Equal(t, 1, *evs[1].Attempt)
	require.Equal(t, 200, *evs[2].StatusCode)
	require.NotNil(t, evs[2].LatencyMS)
	require.GreaterOrEqual(t, *evs[2].LatencyMS, 0)
	h.waitJobState(*e.RiverJobID, "completed")
}

// TestDeliverManualPayload: a manual execution's payload override is sent
// instead of the task's.
func TestDeliverManualPayload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t)
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, nil)
	override := []byte(`{"override": true ,"x":[ ]}`)
	id := h.fire(task, fireOpts{Trigger: service.TriggerManual, Payload: override})
	require.Equal(t, override, recv.next(t).Body)
	h.waitState(id, service.ExecSucceeded)
}

// TestDeliverRetriesKeepIdempotencyKey: two 503s then a 200: three
// attempts, one idempotency key, backoff delays on the timeline.
func TestDeliverRetriesKeepIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t,
		response{Status: http.StatusServiceUnavailable, Body: "busy, come back"},
		response{Status: http.StatusServiceUnavailable},
		response{Status: http.StatusOK})
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, nil) // backoff 100 ms doubling to 200 ms
	id := h.fire(task, fireOpts{})

	e := h.waitState(id, service.ExecSucceeded)
	hits := recv.hitsSoFar()
	require.Len(t, hits, 3)
	for i, hit := range hits {
		require.Equal(t, id, hit.Header.Get("Idempotency-Key"))
		require.Equal(t, id, hit.Header.Get("Webhook-Id"))
		require.Equal(t, strconv.Itoa(i+1), hit.Header.Get("X-Ax-Attempt"))
	}
	require.GreaterOrEqual(t, hits[1].At.Sub(hits[0].At), 100*time.Millisecond)
	require.GreaterOrEqual(t, hits[2].At.Sub(hits[1].At), 200*time.Millisecond)
	require.Equal(t, 3, e.Attempts)
	require.Equal(t, 200, *e.LastStatusCode)

	evs := h.events(id)
	require.Equal(t, []string{
		"fired",
		"attempt_started", "attempt_failed", "retry_scheduled",
		"attempt_started", "attempt_failed", "retry_scheduled",
		"attempt_started", "attempt_succeeded", "succeeded",
	}, eventTypes(evs))
	failed := evs[2]
	require.Equal(t, 1, *failed.Attempt)
	require.Equal(t, 503, *failed.StatusCode)
	require.NotNil(t, failed.LatencyMS)
	require.Equal(t, ErrorClassHTTP5xx, *failed.ErrorClass)
	require.Equal(t, "HTTP 503 Service Unavailable: busy, come back", *failed.Message)
	require.InDelta(t, 100, evs[3].Data["delay_ms"], 0)
	require.Equal(t, "backoff", evs[3].Data["reason"])
	require.InDelta(t, 200, evs[6].Data["delay_ms"], 0)
	require.Equal(t, 3, *evs[7].Attempt)
}

// TestDeliverClassification drives each classification row end to end.
func TestDeliverClassification(t *testing.T) {
	t.Parallel()
	type want struct {
		state    string
		requests int
		events   []string // after "fired"
		class    string   // of the last attempt_failed
	}
	tests := []struct {
		name      string
		responses []response
		task      func(*service.TaskInput)
		want      want
		check     func(t *testing.T, h *harness, id string, recv *script)
	}{{
		name:      "200 succeeds",
		responses: []response{{Status: http.StatusOK}},
		want:      want{state: "succeeded", requests: 1, events: []string{"attempt_started", "attempt_succeeded", "succeeded"}},
	}, {
		name:      "500 is retried",
		responses: []response{{Status: http.StatusInternalServerError}, {Status: http.StatusNoContent}},
		want: want{state: "succeeded", requests: 2, class: ErrorClassHTTP5xx, events: []string{
			"attempt_started", "attempt_failed", "retry_scheduled", "attempt_started", "attempt_succeeded", "succeeded",
		}},
	}, {
		name: "429 Retry-After is honoured",
		responses: []response{
			{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "1"}},
			{Status: http.StatusOK},
		},
		task: func(in *service.TaskInput) { in.Retry.MaxBackoff = 5 * time.Second },
		want: want{state: "succeeded", requests: 2, class: ErrorClassHTTP4xx, events: []string{
			"attempt_started", "attempt_failed", "retry_scheduled", "attempt_started", "attempt_succeeded", "succeeded",
		}},
		check: func(t *testing.T, h *harness, id string, recv *script) {
			t.Helper()
			retry := h.events(id)[3]
			require.InDelta(t, 1000, retry.Data["delay_ms"], 0)
			require.Equal(t, "retry_after", retry.Data["reason"])
			hits := recv.hitsSoFar()
			require.GreaterOrEqual(t, hits[1].At.Sub(hits[0].At), 950*time.Millisecond)
		},
	}, {
		name: "429 Retry-After is capped by max backoff",
		responses: []response{
			{Status: http.StatusTooManyRequests, Header: map[string]string{"Retry-After": "3600"}},
			{Status: http.StatusOK},
		},
		task: func(in *service.TaskInput) { in.Retry.MaxBackoff = 300 * time.Millisecond },
		want: want{state: "succeeded", requests: 2, class: ErrorClassHTTP4xx, events: []string{
			"attempt_started", "attempt_failed", "retry_scheduled", "attempt_started", "attempt_succeeded", "succeeded",
		}},
		check: func(t *testing.T, h *harness, id string, _ *script) {
			t.Helper()
			require.InDelta(t, 300, h.events(id)[3].Data["delay_ms"], 0)
		},
	}, {
		name:      "400 fails without retry",
		responses: []response{{Status: http.StatusBadRequest, Body: `{"error":"bad payload"}`}},
		want:      want{state: "failed", requests: 1, class: ErrorClassHTTP4xx, events: []string{"attempt_started", "attempt_failed", "failed"}},
		check: func(t *testing.T, h *harness, id string, _ *script) {
			t.Helper()
			e := h.execution(id)
			require.Equal(t, 400, *e.LastStatusCode)
			require.Equal(t, "HTTP 400 Bad Request", *e.LastError)
			require.Equal(t, ErrorClassHTTP4xx, *e.LastErrorClass)
			require.Equal(t, `HTTP 400 Bad Request: {"error":"bad payload"}`, *h.events(id)[2].Message)
			h.waitJobState(*e.RiverJobID, "cancelled")
		},
	}, {
		name:      "410 fails and disables the endpoint",
		responses: []response{{Status: http.StatusGone}},
		want: want{state: "failed", requests: 1, class: ErrorClassGone, events: []string{
			"attempt_started", "attempt_failed", "failed", "endpoint_disabled",
		}},
		check: func(t *testing.T, h *harness, id string, recv *script) {
			t.Helper()
			task := h.taskOf(id)
			ep, err := h.endpoints.Get(t.Context(), h.tenant, task.EndpointID)
			require.NoError(t, err)
			require.False(t, ep.Enabled)
			require.Contains(t, ep.DisabledReason, "410")
			require.NotNil(t, ep.DisabledAt)
			// The next fire sends nothing.
			next := h.fire(task, fireOpts{})
			h.waitState(next, service.ExecCancelled)
			require.Len(t, recv.hitsSoFar(), 1)
		},
	}, {
		name:      "302 fails and is not followed",
		responses: []response{{Status: http.StatusFound}}, // Location set in check's receiver below
		want:      want{state: "failed", requests: 1, class: ErrorClassHTTP3xx, events: []string{"attempt_started", "attempt_failed", "failed"}},
		check: func(t *testing.T, h *harness, id string, _ *script) {
			t.Helper()
			require.Contains(t, *h.execution(id).LastError, "redirects are never followed")
		},
	}, {
		name:      "max_attempts 1 never retries",
		responses: []response{{Status: http.StatusServiceUnavailable}},
		task:      func(in *service.TaskInput) { in.Retry.MaxAttempts = 1 },
		want:      want{state: "failed", requests: 1, class: ErrorClassHTTP5xx, events: []string{"attempt_started", "attempt_failed", "failed"}},
		check: func(t *testing.T, h *harness, id string, _ *script) {
			t.Helper()
			require.Contains(t, *h.events(id)[3].Message, "attempts exhausted (max_attempts 1)")
			h.waitJobState(*h.execution(id).RiverJobID, "cancelled")
			// The attempt ended the execution: counted as permanent, not
			// as a retry.
			attempts := h.deps.Metrics.Attempts
			require.InDelta(t, 1, testutil.ToFloat64(attempts.WithLabelValues("permanent", ErrorClassHTTP5xx)), 0)
			require.InDelta(t, 0, testutil.ToFloat64(attempts.WithLabelValues("retry", ErrorClassHTTP5xx)), 0)
		},
	}, {
		name:      "exhausted retries fail",
		responses: []response{{Status: http.StatusBadGateway}},
		task:      func(in *service.TaskInput) { in.Retry.MaxAttempts = 3 },
		want: want{state: "failed", requests: 3, class: ErrorClassHTTP5xx, events: []string{
			"attempt_started", "attempt_failed", "retry_scheduled",
			"attempt_started", "attempt_failed", "retry_scheduled",
			"attempt_started", "attempt_failed", "failed",
		}},
		check: func(t *testing.T, h *harness, id string, _ *script) {
			t.Helper()
			evs := h.events(id)
			last := evs[len(evs)-1]
			require.Equal(t, 3, *last.Attempt)
			require.Equal(t, 502, *last.StatusCode)
			require.Contains(t, *last.Message, "attempts exhausted (max_attempts 3): HTTP 502 Bad Gateway")
			e := h.execution(id)
			require.Equal(t, 3, e.Attempts)
			h.waitJobState(*e.RiverJobID, "cancelled")
		},
	}, {
		name:      "a timeout is retried",
		responses: []response{{Status: -1}, {Status: http.StatusOK}}, // -1: hang past the timeout
		task:      func(in *service.TaskInput) { in.Timeout = 200 * time.Millisecond },
		want: want{state: "succeeded", requests: 2, class: ErrorClassTimeout, events: []string{
			"attempt_started", "attempt_failed", "retry_scheduled", "attempt_started", "attempt_succeeded", "succeeded",
		}},
		check: func(t *testing.T, h *harness, id string, _ *script) {
			t.Helper()
			require.Equal(t, "no response within 200ms", *h.events(id)[2].Message)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{})
			elsewhere := newScript(t)
			responses := tt.responses
			for i, r := range responses {
				if r.Status == http.StatusFound {
					responses[i].Header = map[string]string{"Location": elsewhere.srv.URL}
				}
			}
			recv := newScript(t, responses...)
			task := h.task(h.endpoint(recv.srv.URL, nil).ID, tt.task)
			id := h.fire(task, fireOpts{})
			h.waitState(id, tt.want.state)
			require.Len(t, recv.hitsSoFar(), tt.want.requests)
			evs := h.events(id)
			require.Equal(t, append([]string{"fired"}, tt.want.events...), eventTypes(evs))
			if tt.want.class != "" {
				var class string
				for _, e := range evs {
					if e.Type == service.EventAttemptFailed {
						class = *e.ErrorClass
					}
				}
				require.Equal(t, tt.want.class, class)
			}
			if tt.check != nil {
				tt.check(t, h, id, recv)
			}
			require.Empty(t, elsewhere.hitsSoFar(), "redirects are never followed")
		})
	}
}

// taskOf returns the task of an execution.
func (h *harness) taskOf(executionID string) service.Task {
	h.t.Helper()
	var taskID string
	require.NoError(h.t, h.pool.QueryRow(context.Background(),
		`SELECT task_id::text FROM executions WHERE tenant_id = $1 AND id = $2`, h.tenant, executionID).Scan(&taskID))
	task, err := h.tasks.Get(h.t.Context(), h.tenant, taskID)
	require.NoError(h.t, err)
	return task
}

// TestDeliverNotSent: a paused task (unless triggered manually), a deleted
// task and a disabled endpoint send nothing: the execution is cancelled.
func TestDeliverNotSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t)
	ep := h.endpoint(recv.srv.URL, nil)
	ctx := t.Context()

	paused := h.task(ep.ID, nil)
	_, err := h.tasks.Pause(ctx, h.tenant, paused.ID)
	require.NoError(t, err)
	pausedExec := h.fire(paused, fireOpts{})

	deleted := h.task(ep.ID, nil)
	require.NoError(t, h.tasks.Delete(ctx, h.tenant, deleted.ID))
	deletedExec := h.fire(deleted, fireOpts{})

	other := h.endpoint(recv.srv.URL, nil)
	_, err = h.endpoints.Update(ctx, h.tenant, other.ID, func(in *service.EndpointInput) error {
		in.Enabled = false
		return nil
	})
	require.NoError(t, err)
	disabledExec := h.fire(h.task(other.ID, nil), fireOpts{})

	for id, reason := range map[string]string{
		pausedExec: "the task is paused", deletedExec: "the task was deleted", disabledExec: "the endpoint is disabled",
	} {
		e := h.waitState(id, service.ExecCancelled)
		require.Equal(t, reason, *e.LastError)
		require.Equal(t, 0, e.Attempts)
		evs := h.events(id)
		require.Equal(t, []string{"fired", "cancelled"}, eventTypes(evs))
		require.Equal(t, reason, *evs[1].Message)
	}
	require.Empty(t, recv.hitsSoFar())

	// A manual trigger of the paused task still runs.
	manual := h.fire(paused, fireOpts{Trigger: service.TriggerManual})
	h.waitState(manual, service.ExecSucceeded)
	require.Equal(t, manual, recv.next(t).Header.Get("Idempotency-Key"))
}

// TestDeliverCancelRequestedWhileRunning: a cancel requested during the
// attempt turns its failure into cancelled (no retry); a River cancel of
// the running job cuts the attempt short and cancels too.
func TestDeliverCancelRequestedWhileRunning(t *testing.T) {
	t.Parallel()
	t.Run("cancel_requested", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOpts{})
		recv := newScript(t, response{Status: http.StatusServiceUnavailable}).holdRequests()
		id := h.fire(h.task(h.endpoint(recv.srv.URL, nil).ID, nil), fireOpts{})
		recv.next(t)
		_, err := h.pool.Exec(t.Context(), `UPDATE executions SET cancel_requested = true WHERE tenant_id = $1 AND id = $2`,
			h.tenant, id)
		require.NoError(t, err)
		recv.releaseAll()
		e := h.waitState(id, service.ExecCancelled)
		require.Equal(t, 503, *e.LastStatusCode)
		require.Equal(t, []string{"fired", "attempt_started", "attempt_failed", "cancelled"}, eventTypes(h.events(id)))
		h.waitJobState(*e.RiverJobID, "cancelled")
		recv.quiet(t, 300*time.Millisecond)
	})
	t.Run("river job cancel", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOpts{})
		recv := newScript(t).holdRequests()
		id := h.fire(h.task(h.endpoint(recv.srv.URL, nil).ID, nil), fireOpts{})
		recv.next(t)
		_, err := h.client.JobCancel(t.Context(), *h.execution(id).RiverJobID)
		require.NoError(t, err)
		e := h.waitState(id, service.ExecCancelled)
		require.Equal(t, ErrorClassCanceled, *e.LastErrorClass)
		require.Equal(t, []string{"fired", "attempt_started", "attempt_failed", "cancelled"}, eventTypes(h.events(id)))
		h.waitJobState(*e.RiverJobID, "cancelled")
	})
}

// TestDeliverFencing: a late outcome from an attempt a newer run took over
// is rejected and the newer outcome stands.
func TestDeliverFencing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{NoStart: true})
	ctx := t.Context()
	task := h.task(h.endpoint("http://127.0.0.1:1/unused", nil).ID, nil)
	id := h.fire(task, fireOpts{})
	d := h.deliveries

	first, err := d.Begin(ctx, h.tenant, id, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, first.Action)
	require.Equal(t, 1, first.Attempt)
	require.False(t, first.Resumed)

	// River rescued the job (its process looked dead) and ran it again.
	second, err := d.Begin(ctx, h.tenant, id, 2)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, second.Action)
	require.Equal(t, 2, second.Attempt)
	require.True(t, second.Resumed)

	// The first run comes back late: rejected, nothing changes.
	_, err = d.Finish(ctx, h.tenant, id, first.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
	require.ErrorIs(t, err, service.ErrConflict)
	require.Equal(t, service.ExecRunning, h.execution(id).State)
	// A stale Begin does not take the execution back.
	stale, err := d.Begin(ctx, h.tenant, id, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionDone, stale.Action)

	fin, err := d.Finish(ctx, h.tenant, id, second.Lease, service.Outcome{
		Kind: service.OutcomeRetry, StatusCode: 503, ErrorClass: ErrorClassHTTP5xx, Error: "HTTP 503", RetryAfter: time.Second,
	})
	require.NoError(t, err)
	require.Equal(t, service.ExecRetrying, fin.State)
	e := h.execution(id)
	require.Equal(t, service.ExecRetrying, e.State)
	require.NotNil(t, e.NextAttemptAt)
	stale, err = d.Begin(ctx, h.tenant, id, 2)
	require.NoError(t, err)
	require.Equal(t, service.ActionDone, stale.Action, "a retrying execution is not restarted by the attempt that failed")

	third, err := d.Begin(ctx, h.tenant, id, 3)
	require.NoError(t, err)
	require.Equal(t, 3, third.Attempt)
	_, err = d.Finish(ctx, h.tenant, id, second.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
	require.ErrorIs(t, err, service.ErrConflict)
	fin, err = d.Finish(ctx, h.tenant, id, third.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 201, Latency: 7 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, service.ExecSucceeded, fin.State)
	e = h.execution(id)
	require.Equal(t, 201, *e.LastStatusCode)
	require.Equal(t, 3, e.Attempts)
	require.Equal(t, []string{
		"fired", "attempt_started", "rescued", "attempt_started", "attempt_failed", "retry_scheduled",
		"attempt_started", "attempt_succeeded", "succeeded",
	}, eventTypes(h.events(id)))

	// Finished is final: every later attempt is a no-op.
	late, err := d.Begin(ctx, h.tenant, id, 4)
	require.NoError(t, err)
	require.Equal(t, service.ActionDone, late.Action)
	_, err = d.Finish(ctx, h.tenant, id, 3, service.Outcome{Kind: service.OutcomePermanent, StatusCode: 400})
	require.ErrorIs(t, err, service.ErrConflict)
}

// TestDeliverAtMostOnce: with max_attempts 1, a run interrupted by a crash
// is never sent again: the re-run fails the execution instead.
func TestDeliverAtMostOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{NoStart: true})
	ctx := t.Context()
	task := h.task(h.endpoint("http://127.0.0.1:1/unused", nil).ID, func(in *service.TaskInput) { in.Retry.MaxAttempts = 1 })
	id := h.fire(task, fireOpts{})
	first, err := h.deliveries.Begin(ctx, h.tenant, id, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, first.Action)

	again, err := h.deliveries.Begin(ctx, h.tenant, id, 2)
	require.NoError(t, err)
	require.Equal(t, service.ActionDone, again.Action)
	require.Equal(t, service.ExecFailed, again.State)
	e := h.execution(id)
	require.Equal(t, service.ExecFailed, e.State)
	require.Equal(t, service.ErrorClassInterrupted, *e.LastErrorClass)
	require.Equal(t, []string{"fired", "attempt_started", "rescued", "failed"}, eventTypes(h.events(id)))
}

// TestDeliverShutdownResumes: a soft stop that cuts an attempt short does
// not count it as a failure; the next client resumes the execution with
// the same idempotency key (and, with max_attempts 1, fails it unsent).
func TestDeliverShutdownResumes(t *testing.T) {
	t.Parallel()
	for _, maxAttempts := range []int{5, 1} {
		t.Run("max_attempts "+strconv.Itoa(maxAttempts), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{NoStart: true, River: RiverConfig{SoftStopTimeout: 100 * time.Millisecond}})
			recv := newScript(t).holdRequests()
			task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.Retry.MaxAttempts = maxAttempts })
			id := h.fire(task, fireOpts{})
			first := h.client
			require.NoError(t, first.Start(context.Background()))
			require.Equal(t, "1", recv.next(t).Header.Get("X-Ax-Attempt"))

			stopCtx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			require.NoError(t, first.Stop(stopCtx))
			e := h.execution(id)
			require.Equal(t, service.ExecRunning, e.State, "an interrupted attempt is not a failure")
			state, attempt := h.jobState(*e.RiverJobID)
			require.Equal(t, "available", state)
			require.Equal(t, 0, attempt, "River does not count an interrupted attempt")

			recv.mu.Lock()
			recv.hold = false
			recv.mu.Unlock()
			h.start(h.newClient())
			if maxAttempts == 1 {
				e = h.waitState(id, service.ExecFailed)
				require.Equal(t, service.ErrorClassInterrupted, *e.LastErrorClass)
				recv.quiet(t, 300*time.Millisecond)
				return
			}
			again := recv.next(t)
			require.Equal(t, id, again.Header.Get("Idempotency-Key"))
			require.Equal(t, "2", again.Header.Get("X-Ax-Attempt"))
			h.waitState(id, service.ExecSucceeded)
			require.Equal(t, []string{"fired", "attempt_started", "rescued", "attempt_started", "attempt_succeeded", "succeeded"},
				eventTypes(h.events(id)))
		})
	}
}

// TestDeliverOverlap: "skip" skips a fire while an earlier execution is
// unfinished; "queue" holds one fire until the earlier one ends and skips
// any more, and gives up after QueueWaitMax. Its slots are a minute ago,
// within a misfire threshold of an hour.
func TestDeliverOverlap(t *testing.T) {
	t.Parallel()
	t0 := time.Now().Add(-time.Minute).UTC()
	onTime := service.DeliveriesConfig{MisfireThreshold: time.Hour}
	t.Run("skip", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOpts{Deliveries: onTime})
		recv := newScript(t).holdRequests()
		task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.OverlapPolicy = service.OverlapSkip })
		a := h.fire(task, fireOpts{ScheduledFor: t0})
		recv.next(t)
		b := h.fire(task, fireOpts{ScheduledFor: t0.Add(time.Second)})
		h.waitState(b, service.ExecSkipped)
		evs := h.events(b)
		require.Equal(t, []string{"fired", "skipped"}, eventTypes(evs))
		require.Contains(t, *evs[1].Message, "overlap_policy skip")
		recv.releaseAll()
		h.waitState(a, service.ExecSucceeded)
		// With nothing unfinished, the next fire runs.
		c := h.fire(task, fireOpts{ScheduledFor: t0.Add(2 * time.Second)})
		h.waitState(c, service.ExecSucceeded)
		require.Len(t, recv.hitsSoFar(), 2)
	})
	t.Run("queue", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOpts{Deliveries: onTime})
		recv := newScript(t).holdRequests()
		task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.OverlapPolicy = service.OverlapQueue })
		a := h.fire(task, fireOpts{ScheduledFor: t0})
		recv.next(t)
		b := h.fire(task, fireOpts{ScheduledFor: t0.Add(time.Second)})
		c := h.fire(task, fireOpts{ScheduledFor: t0.Add(2 * time.Second)})
		h.waitState(c, service.ExecSkipped)
		require.Contains(t, *h.events(c)[1].Message, "already queued")
		recv.quiet(t, 300*time.Millisecond) // b waits
		require.Equal(t, service.ExecPending, h.execution(b).State)

		recv.mu.Lock()
		recv.hold = false
		recv.mu.Unlock()
		recv.releaseAll()
		h.waitState(a, service.ExecSucceeded)
		hb := recv.next(t)
		require.Equal(t, b, hb.Header.Get("Idempotency-Key"))
		h.waitState(b, service.ExecSucceeded)
		require.Equal(t, []string{"fired", "attempt_started", "attempt_succeeded", "succeeded"}, eventTypes(h.events(b)))
	})
	t.Run("queue wait is bounded", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOpts{Deliveries: service.DeliveriesConfig{QueueWaitMax: 300 * time.Millisecond}})
		recv := newScript(t).holdRequests()
		task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.OverlapPolicy = service.OverlapQueue })
		h.fire(task, fireOpts{})
		recv.next(t)
		b := h.fire(task, fireOpts{ScheduledFor: time.Now().UTC()})
		h.waitState(b, service.ExecSkipped)
		require.Contains(t, *h.events(b)[1].Message, "waited more than 300ms")
	})
}

// TestDeliverAutoPause: pause_after_failures consecutive failed executions
// pause the task, whose fires then send nothing; a success resets the
// count.
func TestDeliverAutoPause(t *testing.T) {
	t.Parallel()
	t.Run("pause", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOpts{})
		recv := newScript(t, response{Status: http.StatusBadRequest})
		task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.PauseAfterFailures = 2 })
		pending := h.fire(task, fireOpts{ScheduledFor: time.Now().Add(time.Hour).UTC()}) // not due yet
		h.waitState(h.fire(task, fireOpts{}), service.ExecFailed)
		tk, err := h.tasks.Get(t.Context(), h.tenant, task.ID)
		require.NoError(t, err)
		require.Equal(t, service.TaskActive, tk.State)
		require.Equal(t, 1, tk.ConsecutiveFails)

		second := h.fire(task, fireOpts{})
		h.waitState(second, service.ExecFailed)
		tk, err = h.tasks.Get(t.Context(), h.tenant, task.ID)
		require.NoError(t, err)
		require.Equal(t, service.TaskPaused, tk.State)
		require.Equal(t, 2, tk.ConsecutiveFails)
		evs := h.events(second)
		require.Equal(t, []string{"fired", "attempt_started", "attempt_failed", "failed", "task_paused"}, eventTypes(evs))
		require.Contains(t, *evs[4].Message, "2 consecutive failed executions")
		// A fire still ahead stays pending (a resume in time sends it); one
		// that comes due while the task is paused is cancelled at its start.
		require.Equal(t, service.ExecPending, h.execution(pending).State)
		due := h.fire(task, fireOpts{})
		e := h.waitState(due, service.ExecCancelled)
		require.Equal(t, "the task is paused", *e.LastError)
	})
	t.Run("a success resets the count", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, harnessOpts{})
		recv := newScript(t, response{Status: http.StatusBadRequest}, response{Status: http.StatusOK}, response{Status: http.StatusBadRequest})
		task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) { in.PauseAfterFailures = 2 })
		for _, want := range []string{service.ExecFailed, service.ExecSucceeded, service.ExecFailed} {
			h.waitState(h.fire(task, fireOpts{}), want)
		}
		tk, err := h.tasks.Get(t.Context(), h.tenant, task.ID)
		require.NoError(t, err)
		require.Equal(t, service.TaskActive, tk.State)
		require.Equal(t, 1, tk.ConsecutiveFails)
	})
}

// TestDeliverFailureText keeps URLs (which may carry tokens) out of
// transport error messages.
func TestDeliverFailureText(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	task := h.task(h.endpoint("http://127.0.0.1:1/hook?token=s3cret", nil).ID, func(in *service.TaskInput) { in.Retry.MaxAttempts = 1 })
	id := h.fire(task, fireOpts{})
	e := h.waitState(id, service.ExecFailed)
	require.Equal(t, ErrorClassConnection, *e.LastErrorClass)
	require.NotContains(t, *e.LastError, "s3cret")
	require.Contains(t, *e.LastError, "refused")
}
