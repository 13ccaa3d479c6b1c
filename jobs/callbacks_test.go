package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// The callback tests: a real receiver (httptest) answers 202, the real
// River workers deliver, and a sweeper loop runs as cmd/server runs it;
// the receiver's reports go through the service as the API calls it.

// sweeper runs the callback sweeper's loops (CallbackLoops) for d on a
// Runner until the returned stop is called (or the test ends).
func (h *harness) sweeper(d *service.Deliveries, m *metrics.Metrics) (stop func()) {
	h.t.Helper()
	return startLoops(h.t, CallbackLoops(d, CallbackLoopConfig{Every: 100 * time.Millisecond, Logger: testLogger(), Metrics: m})...)
}

// callbackTask creates a task in callback mode on a new endpoint for recv.
func (h *harness) callbackTask(recv *script, timeout, heartbeat time.Duration, change func(*service.TaskInput)) service.Task {
	h.t.Helper()
	return h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) {
		in.Completion = service.Completion{Mode: service.CompletionCallback, Timeout: timeout, HeartbeatTimeout: heartbeat}
		if change != nil {
			change(in)
		}
	})
}

// grantOf resolves the callback token a request carried.
func (h *harness) grantOf(hit hit) (string, *service.CallbackGrant) {
	h.t.Helper()
	token := hit.Header.Get("X-Ax-Callback-Token")
	require.NotEmpty(h.t, token, "a callback-mode request carries X-Ax-Callback-Token")
	g, err := h.deliveries.CallbackGrant(h.t.Context(), token)
	require.NoError(h.t, err)
	return token, &g
}

// waitEvent waits until the execution's timeline holds an event of type typ.
func (h *harness) waitEvent(id, typ string) []event {
	h.t.Helper()
	var evs []event
	require.EventuallyWithT(h.t, func(c *assert.CollectT) {
		var err error
		evs, err = h.loadEvents(id)
		assert.NoError(c, err)
		assert.Contains(c, eventTypes(evs), typ, "the timeline")
	}, 20*time.Second, 10*time.Millisecond, "execution %s never got a %s event", id, typ)
	return evs
}

// waitAccepted waits until an execution's timeline has n accepted events.
func waitAccepted(t *testing.T, h *harness, id string, n int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		evs, err := h.loadEvents(id)
		assert.NoError(c, err)
		assert.Equal(c, n, countEvents(evs, service.EventAccepted), "timeline %v", eventTypes(evs))
	}, 20*time.Second, 10*time.Millisecond)
}

func countEvents(evs []event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func TestCallbackAcceptHeartbeatComplete(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusAccepted})
	task := h.callbackTask(recv, time.Minute, 30*time.Second, nil)
	id := h.fire(task, fireOpts{})
	hit := recv.next(t)
	require.Equal(t, id, hit.Header.Get("Idempotency-Key"))
	require.Equal(t, "30000", hit.Header.Get("X-Ax-Heartbeat-Timeout-Ms"), "the receiver learns its heartbeat timeout")
	token, grant := h.grantOf(hit)
	require.Equal(t, []any{h.tenant, id, 1}, []any{grant.TenantID, grant.ExecutionID, grant.Attempt}, "the token's grant")

	// Accepted: running, and no River job holds it.
	evs := h.waitEvent(id, service.EventAccepted)
	require.Equal(t, service.ExecRunning, h.execution(id).State)
	jobID := *h.execution(id).RiverJobID
	h.waitJobState(jobID, "completed")
	ctx := t.Context()
	accepted := evs[slices.Index(eventTypes(evs), service.EventAccepted)]
	require.Equal(t, http.StatusAccepted, *accepted.StatusCode)

	// A heartbeat keeps progress; the token itself is never stored.
	require.NoError(t, h.deliveries.Heartbeat(ctx, h.tenant, id, grant, json.RawMessage(`{"done":40}`)))
	var stored int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM callback_attempts WHERE position(convert_to($1, 'UTF8') IN token_hash) > 0`,
		token[len(service.CallbackTokenPrefix):len(service.CallbackTokenPrefix)+8]).Scan(&stored))
	require.Zero(t, stored)

	out, err := h.deliveries.Complete(ctx, h.tenant, id, grant, service.CompletionInput{
		Status: service.ExecSucceeded, Output: json.RawMessage(`{"rows":1200}`),
	})
	require.NoError(t, err)
	require.Equal(t, service.ExecSucceeded, out.State)
	e := h.execution(id)
	require.Equal(t, service.ExecSucceeded, e.State)
	require.Equal(t, http.StatusAccepted, *e.LastStatusCode, "the 2xx that accepted the attempt")
	x, err := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{}).Get(ctx, h.tenant, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows":1200}`, string(x.Output))
	require.JSONEq(t, `{"done":40}`, string(x.Progress))
	types := eventTypes(h.events(id))
	require.Subset(t, types, []string{service.EventAccepted, service.EventCompleted, service.EventSucceeded})

	// The execution is over: the token (and a tenant token) can do nothing more.
	_, err = h.deliveries.Complete(ctx, h.tenant, id, grant, service.CompletionInput{Status: service.ExecFailed})
	require.ErrorIs(t, err, service.ErrConflict)
	require.ErrorIs(t, h.deliveries.Heartbeat(ctx, h.tenant, id, grant, nil), service.ErrConflict)
	_, err = h.deliveries.Complete(ctx, h.tenant, id, nil, service.CompletionInput{Status: service.ExecSucceeded})
	require.ErrorIs(t, err, service.ErrConflict)
	require.Equal(t, types, eventTypes(h.events(id)), "a refused report changes nothing")
	recv.quiet(t, 300*time.Millisecond)
}

func TestCallbackFailedRetryableThenFinal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusAccepted})
	task := h.callbackTask(recv, time.Minute, 0, nil)
	id := h.fire(task, fireOpts{})
	ctx := t.Context()

	firstHit := recv.next(t)
	require.Empty(t, firstHit.Header.Get("X-Ax-Heartbeat-Timeout-Ms"), "no heartbeat timeout, no header")
	_, first := h.grantOf(firstHit)
	h.waitEvent(id, service.EventAccepted)
	fin, err := h.deliveries.Complete(ctx, h.tenant, id, first, service.CompletionInput{
		Status: service.ExecFailed, Error: "upstream export failed",
	})
	require.NoError(t, err)
	require.Equal(t, service.ExecRetrying, fin.State)

	// The retry: same idempotency key, attempt 2, a new token.
	hit2 := recv.next(t)
	require.Equal(t, id, hit2.Header.Get("Idempotency-Key"))
	require.Equal(t, "2", hit2.Header.Get("X-Ax-Attempt"))
	_, second := h.grantOf(hit2)
	require.Equal(t, 2, second.Attempt)
	h.waitEvent(id, service.EventRetryScheduled)
	waitAccepted(t, h, id, 2)

	// The first attempt's token is stale.
	_, err = h.deliveries.Complete(ctx, h.tenant, id, first, service.CompletionInput{Status: service.ExecSucceeded})
	require.ErrorIs(t, err, service.ErrConflict)
	require.ErrorIs(t, h.deliveries.Heartbeat(ctx, h.tenant, id, first, nil), service.ErrConflict)

	no := false
	fin, err = h.deliveries.Complete(ctx, h.tenant, id, second, service.CompletionInput{
		Status: service.ExecFailed, Error: "the input file is corrupt", Retryable: &no,
	})
	require.NoError(t, err)
	require.Equal(t, service.ExecFailed, fin.State)
	e := h.execution(id)
	require.Equal(t, service.ExecFailed, e.State)
	require.Equal(t, service.ErrorClassCallbackFailed, *e.LastErrorClass)
	require.Equal(t, "the input file is corrupt", *e.LastError)
	recv.quiet(t, 300*time.Millisecond)
}

func TestCallbackHeartbeatTimeoutRetriesWithNewToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	m := metrics.New(nil)
	h.sweeper(h.deliveries, m)
	recv := newScript(t, response{Status: http.StatusAccepted})
	task := h.callbackTask(recv, time.Minute, time.Second, nil)
	id := h.fire(task, fireOpts{})
	ctx := t.Context()

	oldToken, first := h.grantOf(recv.next(t))
	h.waitEvent(id, service.EventAccepted)
	// No heartbeat: the sweeper fails the attempt and a new job retries it.
	hit2 := recv.next(t)
	require.Equal(t, id, hit2.Header.Get("Idempotency-Key"))
	require.Equal(t, "2", hit2.Header.Get("X-Ax-Attempt"))
	newToken, second := h.grantOf(hit2)
	require.NotEqual(t, oldToken, newToken)

	evs := h.events(id)
	i := slices.IndexFunc(evs, func(ev event) bool { return ev.Type == service.EventAttemptFailed })
	require.GreaterOrEqual(t, i, 0, "timeline %v", eventTypes(evs))
	require.Equal(t, service.ErrorClassHeartbeatTimeout, *evs[i].ErrorClass)
	require.Equal(t, 1, *evs[i].Attempt)

	_, err := h.deliveries.Complete(ctx, h.tenant, id, first, service.CompletionInput{Status: service.ExecSucceeded})
	require.ErrorIs(t, err, service.ErrConflict, "the old token is refused")
	waitAccepted(t, h, id, 2)
	// Heartbeats keep the second attempt alive past its heartbeat timeout.
	for range 4 {
		require.NoError(t, h.deliveries.Heartbeat(ctx, h.tenant, id, second, nil))
		time.Sleep(400 * time.Millisecond)
	}
	_, err = h.deliveries.Complete(ctx, h.tenant, id, second, service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
	require.Equal(t, service.ExecSucceeded, h.execution(id).State)
	require.Equal(t, 1, countEvents(h.events(id), service.EventAttemptFailed))
	recv.quiet(t, 300*time.Millisecond)
}

func TestCallbackDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.sweeper(h.deliveries, metrics.New(nil))
	recv := newScript(t, response{Status: http.StatusAccepted})
	task := h.callbackTask(recv, 2*time.Second, time.Second, func(in *service.TaskInput) { in.Retry.MaxAttempts = 1 })
	id := h.fire(task, fireOpts{})
	_, grant := h.grantOf(recv.next(t))
	h.waitEvent(id, service.EventAccepted)
	// Heartbeats never let the heartbeat timeout pass, but the deadline
	// does: the attempt fails callback_timeout, and with no attempt left
	// the execution fails.
	for h.execution(id).State == service.ExecRunning {
		err := h.deliveries.Heartbeat(t.Context(), h.tenant, id, grant, nil)
		if err != nil {
			require.ErrorIs(t, err, service.ErrConflict)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	e := h.waitState(id, service.ExecFailed)
	require.Equal(t, service.ErrorClassCallbackTimeout, *e.LastErrorClass)
	recv.quiet(t, 300*time.Millisecond)
}

// TestCallbackCompletionRacesTimeout completes executions right at their
// heartbeat deadline while the sweeper fails them: each ends exactly one
// way, and the timeline says which.
func TestCallbackCompletionRacesTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.sweeper(h.deliveries, metrics.New(nil))
	recv := newScript(t, response{Status: http.StatusAccepted})
	const n = 12
	task := h.callbackTask(recv, time.Minute, time.Second, func(in *service.TaskInput) { in.Retry.MaxAttempts = 1 })
	ids := make([]string, n)
	for i := range ids {
		ids[i] = h.fire(task, fireOpts{})
	}
	grants := map[string]*service.CallbackGrant{}
	for range n {
		_, g := h.grantOf(recv.next(t))
		grants[g.ExecutionID] = g
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	completed := make([]bool, n)
	for i, id := range ids {
		h.waitEvent(id, service.EventAccepted)
		var expires time.Time
		require.NoError(t, h.pool.QueryRow(ctx, `SELECT expires_at FROM callback_attempts WHERE tenant_id = $1 AND execution_id = $2`,
			h.tenant, id).Scan(&expires))
		wg.Go(func() {
			// Around the deadline: some before, some after the sweeper.
			time.Sleep(time.Until(expires) + time.Duration(i%4-2)*30*time.Millisecond)
			_, err := h.deliveries.Complete(ctx, h.tenant, id, grants[id], service.CompletionInput{Status: service.ExecSucceeded})
			if err != nil {
				assert.ErrorIs(t, err, service.ErrConflict)
			}
			completed[i] = err == nil
		})
	}
	wg.Wait()
	wins := map[bool]int{}
	for i, id := range ids {
		var e execution
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var err error
			e, err = h.loadExecution(id)
			assert.NoError(c, err)
			assert.NotEqual(c, service.ExecRunning, e.State)
		}, 20*time.Second, 10*time.Millisecond)
		evs := h.events(id)
		if completed[i] {
			require.Equal(t, service.ExecSucceeded, e.State)
			require.Equal(t, 1, countEvents(evs, service.EventCompleted))
			require.Zero(t, countEvents(evs, service.EventAttemptFailed), "timeline %v", eventTypes(evs))
		} else {
			require.Equal(t, service.ExecFailed, e.State)
			require.Equal(t, service.ErrorClassHeartbeatTimeout, *e.LastErrorClass)
			require.Zero(t, countEvents(evs, service.EventCompleted), "timeline %v", eventTypes(evs))
			require.Equal(t, 1, countEvents(evs, service.EventAttemptFailed))
		}
		wins[completed[i]]++
	}
	t.Logf("completed first: %d, timed out first: %d", wins[true], wins[false])
}

// TestCallbackRestartWhileWaiting stops River and the sweeper while
// executions wait (ax's restart) and starts new ones on the same
// database: the waits hold nothing in memory, the reconciler does not
// resume them, a completion still lands and a timeout is still enforced.
func TestCallbackRestartWhileWaiting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	stopSweeper := h.sweeper(h.deliveries, metrics.New(nil))
	recv := newScript(t, response{Status: http.StatusAccepted})
	done := h.callbackTask(recv, time.Minute, 0, nil)
	late := h.callbackTask(recv, time.Minute, 2*time.Second, func(in *service.TaskInput) { in.Retry.MaxAttempts = 1 })
	a, b := h.fire(done, fireOpts{}), h.fire(late, fireOpts{})
	grants := map[string]*service.CallbackGrant{}
	for range 2 {
		_, g := h.grantOf(recv.next(t))
		grants[g.ExecutionID] = g
	}
	h.waitEvent(a, service.EventAccepted)
	h.waitEvent(b, service.EventAccepted)

	// "Restart": River and the sweeper stop; new ones start.
	ctx := t.Context()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	require.NoError(t, h.client.Stop(stopCtx))
	cancel()
	stopSweeper()
	h.deliveries = service.NewDeliveries(h.pool, h.enq, service.DeliveriesConfig{})
	h.deps.Deliveries = h.deliveries
	h.client = h.newClient()
	h.start(h.client)
	h.sweeper(h.deliveries, metrics.New(nil))

	// The reconciler sees no orphan: a wait is carried by its row.
	sched := service.NewScheduler(h.pool, h.enq, service.SchedulerConfig{}, testLogger())
	n, err := sched.Reconcile(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = h.deliveries.Complete(ctx, h.tenant, a, grants[a], service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
	require.Equal(t, service.ExecSucceeded, h.execution(a).State)
	e := h.waitState(b, service.ExecFailed)
	require.Equal(t, service.ErrorClassHeartbeatTimeout, *e.LastErrorClass)
	recv.quiet(t, 300*time.Millisecond)
}

func TestCallbackTokenIsBoundToItsExecution(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusAccepted})
	task := h.callbackTask(recv, time.Minute, 0, nil)
	a, b := h.fire(task, fireOpts{}), h.fire(task, fireOpts{})
	grants := map[string]*service.CallbackGrant{}
	for range 2 {
		_, g := h.grantOf(recv.next(t))
		grants[g.ExecutionID] = g
	}
	h.waitEvent(a, service.EventAccepted)
	h.waitEvent(b, service.EventAccepted)
	ctx := t.Context()
	// a's grant names attempt 1 of a; used for b (same attempt number)
	// it is refused by the API (403) before the service; here: another
	// tenant cannot even see b.
	_, err := h.deliveries.Complete(ctx, "other", b, grants[a], service.CompletionInput{Status: service.ExecSucceeded})
	require.ErrorIs(t, err, service.ErrNotFound)
	_, err = h.deliveries.CallbackGrant(ctx, service.CallbackTokenPrefix+"forged")
	require.ErrorIs(t, err, service.ErrInvalidCallbackToken)
	_, err = h.deliveries.CallbackGrant(ctx, "eyJhbGciOiJIUzI1NiJ9.e30.x")
	require.ErrorIs(t, err, service.ErrInvalidCallbackToken)
	require.Equal(t, service.ExecRunning, h.execution(b).State)

	// A cancel ends the wait at once and revokes the token.
	_, err = service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{}).Cancel(ctx, h.tenant, b)
	require.NoError(t, err)
	require.Equal(t, service.ExecCancelled, h.execution(b).State)
	_, err = h.deliveries.Complete(ctx, h.tenant, b, grants[b], service.CompletionInput{Status: service.ExecSucceeded})
	require.ErrorIs(t, err, service.ErrConflict)
	_, err = h.deliveries.Complete(ctx, h.tenant, a, grants[a], service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
}

// TestSLAMissedWhileRetrying: an execution that keeps failing is still
// retrying at its SLA deadline: one sla_missed event, one alert (slack
// format), on time, and its retries go on.
func TestSLAMissedWhileRetrying(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	m := metrics.New(nil)
	h.sweeper(h.deliveries, m)
	recv := newScript(t, response{Status: http.StatusServiceUnavailable})
	alerts := newScript(t, response{Status: http.StatusOK})
	alertEP := h.endpoint(alerts.srv.URL, func(in *service.EndpointInput) { in.Format = service.AlertFormatSlack })
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, func(in *service.TaskInput) {
		in.AlertEndpointID = alertEP.ID
		in.SLA = service.SLA{FinishWithin: 1500 * time.Millisecond}
		in.Retry = service.RetryPolicy{MaxAttempts: 100, InitialBackoff: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}
	})
	slot := time.Now().UTC()
	id := h.fire(task, fireOpts{ScheduledFor: slot})
	alert := alerts.next(t)
	require.Equal(t, service.AlertExecutionSLAMissed, alert.Header.Get("X-Ax-Alert-Type"))
	var body SlackBody
	require.NoError(t, json.Unmarshal(alert.Body, &body))
	require.Contains(t, body.Text, "missed its SLA")
	require.Contains(t, body.Text, "/v1/executions/"+id)

	evs := h.events(id)
	require.Equal(t, 1, countEvents(evs, service.EventSLAMissed))
	var due, at time.Time
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT s.due_at, (SELECT at FROM execution_events
			WHERE tenant_id = s.tenant_id AND execution_id = s.execution_id AND type = 'sla_missed')
		FROM sla_misses s WHERE tenant_id = $1 AND execution_id = $2`, h.tenant, id).Scan(&due, &at))
	require.WithinDuration(t, slot.Add(1500*time.Millisecond), due, time.Millisecond)
	require.False(t, at.Before(due), "never before the deadline")
	t.Logf("sla_missed recorded %s after the deadline", at.Sub(due))
	require.Less(t, at.Sub(due), 5*time.Second, "about a sweep after the deadline")
	require.Equal(t, service.ExecRetrying, h.execution(id).State, "the retries go on")

	// Once: more sweeps and more retries add nothing.
	require.Empty(t, recv.next(t).Header.Get("X-Ax-Callback-Token"), "a plain task's request carries no callback token")
	recv.next(t)
	alerts.quiet(t, 500*time.Millisecond)
	require.Equal(t, 1, countEvents(h.events(id), service.EventSLAMissed))
	require.InDelta(t, 1, testutil.ToFloat64(m.SLAMissed.WithLabelValues(metrics.SLAKindExecution)), 0)
	_, err := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{}).Cancel(t.Context(), h.tenant, id)
	require.NoError(t, err)
}

// TestSLAMissedWhileWaitingForCallback: the SLA counts while ax waits for
// a callback; the alert uses the ax format.
func TestSLAMissedWhileWaitingForCallback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.sweeper(h.deliveries, metrics.New(nil))
	recv := newScript(t, response{Status: http.StatusAccepted})
	alerts := newScript(t, response{Status: http.StatusOK})
	alertEP := h.endpoint(alerts.srv.URL, nil)
	task := h.callbackTask(recv, time.Minute, 0, func(in *service.TaskInput) {
		in.AlertEndpointID = alertEP.ID
		in.SLA = service.SLA{FinishWithin: time.Second}
	})
	id := h.fire(task, fireOpts{})
	_, grant := h.grantOf(recv.next(t))
	alert := alerts.next(t)
	var body AlertBody
	require.NoError(t, json.Unmarshal(alert.Body, &body))
	require.Equal(t, service.AlertExecutionSLAMissed, body.Type)
	require.Equal(t, id, body.ExecutionID)
	require.Equal(t, service.ExecRunning, body.State)
	require.NotNil(t, body.SLA)
	require.EqualValues(t, 1000, body.SLA.FinishWithinMS)
	// What it has not got yet is null on the wire, not "".
	var raw map[string]any
	require.NoError(t, json.Unmarshal(alert.Body, &raw))
	for _, k := range []string{"last_error", "error_class", "finished_at"} { // its 202 is last_status_code
		require.Contains(t, raw, k)
		require.Nil(t, raw[k], k)
	}
	_, err := h.deliveries.Complete(t.Context(), h.tenant, id, grant, service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
	require.Equal(t, 1, countEvents(h.events(id), service.EventSLAMissed))
}

// TestSlackText: a slack-format alert is one readable line with the
// execution's link, Slack's control characters escaped.
func TestSlackText(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 3, 1, 18, 0, 0, 0, time.UTC)
	failed := SlackText(service.Alert{
		Type: service.AlertExecutionFailed, ExecutionID: "x1", TaskName: "a<b>&c", Attempts: 5,
		ScheduledFor: slot, LastError: "HTTP 503 <Service Unavailable>",
	}, "https://ax.example.com")
	require.Equal(t, ":x: *a&lt;b&gt;&amp;c* failed after 5 attempts (slot 2026-03-01T18:00:00Z): HTTP 503 &lt;Service Unavailable&gt; "+
		"<https://ax.example.com/v1/executions/x1|execution x1>", failed)
	sla := SlackText(service.Alert{
		Type: service.AlertExecutionSLAMissed, ExecutionID: "x2", TaskID: "t2", Attempts: 3,
		State: service.ExecRetrying, ScheduledFor: slot, SLAFinishWithin: 2 * time.Hour,
	}, "https://ax.example.com")
	require.Equal(t, ":hourglass: *t2* missed its SLA: not succeeded within 2h0m0s of its 2026-03-01T18:00:00Z slot "+
		"(it is retrying after 3 attempts) <https://ax.example.com/v1/executions/x2|execution x2>", sla)
}
