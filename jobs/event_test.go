package jobs

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	events "github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/schedule"
)

// TestDeliverEvent: an event's fire reaches its task's receiver with
// X-Ax-Event-Id, X-Ax-Scheduled-For the event's arrival and the payload
// rendered with the event's data.
func TestDeliverEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusOK, Body: "ok"})
	ep := h.endpoint(recv.srv.URL+"/hook", nil)
	task := h.task(ep.ID, func(in *service.TaskInput) {
		in.Schedule = schedule.Spec{Type: schedule.Event, Event: "files.ready"}
		in.Payload, in.PayloadTemplate = []byte(`{"file": "{{ .event.payload.file }}", "date": "{{ .event.key }}"}`), true
	})
	posted := service.NewEvents(h.pool, h.enq, nil, nil)
	ev, err := posted.Post(t.Context(), h.tenant, events.Input{
		Name: "files.ready", Key: "2026-12-03", Payload: json.RawMessage(`{"file": "a.csv"}`),
	})
	require.NoError(t, err)
	require.Equal(t, 1, ev.Matched.Tasks)

	got := recv.next(t)
	require.Equal(t, ev.ID, got.Header.Get("X-Ax-Event-Id"))
	require.Equal(t, task.ID, got.Header.Get("X-Ax-Task-Id"))
	require.Equal(t, ev.ReceivedAt.Format(time.RFC3339Nano), got.Header.Get("X-Ax-Scheduled-For"))
	require.JSONEq(t, `{"file": "a.csv", "date": "2026-12-03"}`, string(got.Body))
	h.waitState(ev.Matches[0].ExecutionID, service.ExecSucceeded)
}

// startEventRunner returns a harness whose River client's EventRunner
// runs, stopped when the test ends; the River client itself is started
// only when river is set.
func startEventRunner(t *testing.T, river bool) (*harness, *EventRunner) {
	t.Helper()
	er := NewEventRunner()
	h := newHarness(t, harnessOpts{Events: er, NoStart: !river})
	require.NoError(t, er.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, er.Stop(context.Background())) })
	return h, er
}

// TestEventRunnerFiresOnce: events posted at once, their fires claimed
// and sent by the EventRunner (River's client is not started: nothing
// else sends), each reach the receiver once; their claimed jobs end
// completed. When River then runs each job again (as a job released
// while its attempt was over would be), the execution is final and
// nothing is sent twice.
func TestEventRunnerFiresOnce(t *testing.T) {
	t.Parallel()
	h, er := startEventRunner(t, false)
	recv := newScript(t, response{Status: http.StatusOK})
	ep := h.endpoint(recv.srv.URL+"/hook", nil)
	h.task(ep.ID, func(in *service.TaskInput) {
		in.Schedule = schedule.Spec{Type: schedule.Event, Event: "tick"}
	})
	posted := service.NewEventsRunBy(h.pool, h.enq, nil, nil, er)
	const n = 40
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  []string
		errs []error
	)
	for range 8 {
		wg.Go(func() {
			for range n / 8 {
				ev, err := posted.Post(context.Background(), h.tenant, events.Input{Name: "tick"})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					for _, m := range ev.Matches {
						ids = append(ids, m.ExecutionID)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	require.Len(t, ids, n)
	for _, id := range ids {
		e := h.waitState(id, service.ExecSucceeded)
		require.Equal(t, 1, e.Attempts)
	}
	ctx := t.Context()
	jobsOf := `SELECT count(*) FROM river_job WHERE kind = 'deliver' AND args->>'execution_id' = ANY($1) AND state = $2`
	require.Eventually(t, func() bool {
		var done int
		err := h.pool.QueryRow(ctx, jobsOf, ids, "completed").Scan(&done)
		return err == nil && done == n
	}, 10*time.Second, 20*time.Millisecond, "each claimed job ends completed")

	for range n {
		recv.next(t)
	}

	// River runs every job again: each Begin finds its execution final.
	h.start(h.client)
	_, err := h.pool.Exec(ctx, `UPDATE river_job SET state = 'available', attempt = 0, finalized_at = NULL, scheduled_at = now()
		WHERE kind = 'deliver' AND args->>'execution_id' = ANY($1)`, ids)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var done int
		err := h.pool.QueryRow(ctx, jobsOf, ids, "completed").Scan(&done)
		return err == nil && done == n
	}, 10*time.Second, 20*time.Millisecond, "River ran each job again")
	recv.quiet(t, 200*time.Millisecond)
	seen := map[string]int{}
	for _, hit := range recv.hitsSoFar() {
		seen[hit.Header.Get("webhook-id")]++
	}
	require.Len(t, seen, n)
	for id, times := range seen {
		require.Equal(t, 1, times, "execution %s sent once", id)
	}
	for _, id := range ids {
		require.Equal(t, 1, h.execution(id).Attempts)
	}
}

// droppedFires is a FireRunner that claims fires and loses them, as a
// process that dies once the event committed.
type droppedFires struct{ client string }

func (d droppedFires) Claimant() string        { return d.client }
func (droppedFires) Run([]service.ClaimedFire) {}

// TestEventRunnerDroppedFireDeliversViaRiver: a fire claimed for the
// process and never run leaves its job running under the process's
// River client, which River does not fetch; once released as stranded
// (or as a dead replica's), River delivers it, once.
func TestEventRunnerDroppedFireDeliversViaRiver(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusOK})
	ep := h.endpoint(recv.srv.URL+"/hook", nil)
	h.task(ep.ID, func(in *service.TaskInput) {
		in.Schedule = schedule.Spec{Type: schedule.Event, Event: "tick"}
	})
	posted := service.NewEventsRunBy(h.pool, h.enq, nil, nil, droppedFires{client: h.client.ID()})
	ev, err := posted.Post(t.Context(), h.tenant, events.Input{Name: "tick"})
	require.NoError(t, err)
	require.Len(t, ev.Matches, 1)
	exec := ev.Matches[0].ExecutionID

	var (
		jobID    int64
		state    string
		attempt  int
		claimant string
	)
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT id, state, attempt, attempted_by[array_upper(attempted_by, 1)]
		FROM river_job WHERE kind = 'deliver' AND args->>'execution_id' = $1`, exec).Scan(&jobID, &state, &attempt, &claimant))
	require.Equal(t, "running", state, "claimed in the event's transaction")
	require.Equal(t, 1, attempt)
	require.Equal(t, h.client.ID(), claimant)
	recv.quiet(t, 300*time.Millisecond) // River leaves a claimed job alone

	n, err := service.NewReplicas(h.pool).ReleaseStranded(t.Context(), "r1", h.client.ID(), nil, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got := recv.next(t)
	require.Equal(t, exec, got.Header.Get("webhook-id"))
	e := h.waitState(exec, service.ExecSucceeded)
	require.Equal(t, 1, e.Attempts)
	h.waitJobState(jobID, "completed")
	recv.quiet(t, 200*time.Millisecond)
}

// TestEventRunnerCancel: a cancel requested through the API while the
// EventRunner's attempt is in flight cuts it short at the runner's next
// watch (CancelLoop), and the execution ends cancelled.
func TestEventRunnerCancel(t *testing.T) {
	t.Parallel()
	h, er := startEventRunner(t, true)
	recv := newScript(t, response{Status: http.StatusOK}).holdRequests()
	ep := h.endpoint(recv.srv.URL+"/hook", func(in *service.EndpointInput) { in.Timeout = time.Minute })
	h.task(ep.ID, func(in *service.TaskInput) {
		in.Schedule = schedule.Spec{Type: schedule.Event, Event: "tick"}
	})
	posted := service.NewEventsRunBy(h.pool, h.enq, nil, nil, er)
	ev, err := posted.Post(t.Context(), h.tenant, events.Input{Name: "tick"})
	require.NoError(t, err)
	exec := ev.Matches[0].ExecutionID
	recv.next(t) // in flight
	_, err = h.executionsAPI().Cancel(t.Context(), h.tenant, exec)
	require.NoError(t, err)
	require.Equal(t, service.ExecRunning, h.execution(exec).State, "a cancel of a running attempt is a request")
	_, err = er.CancelLoop().Pass(t.Context())
	require.NoError(t, err)
	e := h.waitState(exec, service.ExecCancelled)
	require.Equal(t, 1, e.Attempts)
}

// TestEventRunnerStopReleasesToRiver: a shutdown that cuts the
// EventRunner's attempt short releases the claimed job to River, whose
// run resumes the execution under the same lease (the same webhook-id,
// its idempotency key) and ends it once.
func TestEventRunnerStopReleasesToRiver(t *testing.T) {
	t.Parallel()
	h, er := startEventRunner(t, true)
	recv := newScript(t, response{Status: http.StatusOK}).holdRequests()
	ep := h.endpoint(recv.srv.URL+"/hook", func(in *service.EndpointInput) { in.Timeout = time.Minute })
	h.task(ep.ID, func(in *service.TaskInput) {
		in.Schedule = schedule.Spec{Type: schedule.Event, Event: "tick"}
	})
	posted := service.NewEventsRunBy(h.pool, h.enq, nil, nil, er)
	ev, err := posted.Post(t.Context(), h.tenant, events.Input{Name: "tick"})
	require.NoError(t, err)
	exec := ev.Matches[0].ExecutionID
	first := recv.next(t) // the runner's attempt, in flight

	stop, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	require.NoError(t, er.Stop(stop))
	recv.releaseAll()
	again := recv.next(t) // River's run of the released job
	require.Equal(t, exec, first.Header.Get("webhook-id"))
	require.Equal(t, exec, again.Header.Get("webhook-id"), "resumed with the same idempotency key")
	e := h.waitState(exec, service.ExecSucceeded)
	require.Equal(t, 1, e.LeaseAttempt, "River's run holds the claim's lease")
	recv.quiet(t, 200*time.Millisecond)
}
