package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/retention"
	"github.com/axhq/ax/service/schedule"
)

// eventTask creates an active task of f's tenant whose schedule is event
// name, with payload (templated when it holds a template).
func (f *fixture) eventTask(t *testing.T, tenant, endpoint, taskName, name, payload string) string {
	t.Helper()
	task, err := f.tasks.Create(context.Background(), tenant, service.TaskInput{
		Name: taskName, EndpointID: endpoint, Schedule: schedule.Spec{Type: schedule.Event, Event: name},
		Payload: []byte(payload), PayloadTemplate: true,
	})
	require.NoError(t, err)
	return task.ID
}

// TestEventFiresTask: an event fires each active task whose schedule is
// its name once (trigger event, scheduled for its arrival, its payload
// rendered with .event…, a deliver job); a dedup_key repeated answers the
// first event and fires nothing; a paused task, another name and a time
// schedule fire nothing; the task has no time slots.
func TestEventFiresTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	events := service.NewEvents(f.pool, f.enq, nil, nil)
	task := f.eventTask(t, f.tenant, f.endpoint, "on-files", "files.ready",
		`{"file": "{{ .event.payload.file }}", "key": "{{ .event.key }}", "n": "{{ .event.payload.n }}", "trigger": "{{ .trigger }}"}`)
	paused := f.eventTask(t, f.tenant, f.endpoint, "paused", "files.ready", `{}`)
	_, err := f.tasks.Pause(ctx, f.tenant, paused)
	require.NoError(t, err)
	f.eventTask(t, f.tenant, f.endpoint, "other", "files.gone", `{}`)

	got, err := f.tasks.Get(ctx, f.tenant, task)
	require.NoError(t, err)
	require.Nil(t, got.NextRunAt, "an event schedule has no next run")
	require.Equal(t, "files.ready", got.Schedule.Event)
	p, err := f.tasks.Preview(ctx, f.tenant, task, 5)
	require.NoError(t, err)
	require.Empty(t, p.Fires)
	require.Equal(t, "files.ready", p.Event, "the preview says why it has no fires")

	in := event.Input{Name: "files.ready", Key: "2026-12-03", Payload: json.RawMessage(`{"file": "a.csv", "n": 3}`), DedupKey: "d1"}
	first, err := events.Post(ctx, f.tenant, in)
	require.NoError(t, err)
	require.Equal(t, event.Matched{Tasks: 1}, first.Matched)
	require.Len(t, first.Matches, 1)
	require.Equal(t, task, first.Matches[0].TaskID)

	var (
		trigger, eventID, payload string
		scheduledFor              string
	)
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT e.trigger, e.event_id::text, convert_from(e.payload, 'UTF8'),
			(e.scheduled_for = v.received_at)::text
		FROM executions e JOIN posted_events v ON v.tenant_id = e.tenant_id AND v.id = e.event_id WHERE e.id = $1`,
		first.Matches[0].ExecutionID).Scan(&trigger, &eventID, &payload, &scheduledFor))
	require.Equal(t, service.TriggerEvent, trigger)
	require.Equal(t, first.ID, eventID)
	require.Equal(t, "true", scheduledFor, "scheduled for the event's arrival")
	require.JSONEq(t, `{"file": "a.csv", "key": "2026-12-03", "n": 3, "trigger": "event"}`, payload)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'deliver' AND args->>'execution_id' = $1`,
		first.Matches[0].ExecutionID), "its delivery is queued")

	again, err := events.Post(ctx, f.tenant, in)
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID, "the same dedup_key answers the first event")
	require.Equal(t, first.Matched, again.Matched)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task), "and fires nothing again")

	third, err := events.Post(ctx, f.tenant, event.Input{Name: "files.ready"})
	require.NoError(t, err)
	require.NotEqual(t, first.ID, third.ID)
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task))
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, paused), "a paused task fires nothing")

	_, err = f.tasks.Resume(ctx, f.tenant, paused)
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, paused),
		"the events of its pause are not replayed")

	list, next, err := events.List(ctx, f.tenant, event.Filter{Name: "files.ready"}, service.Page{Limit: 1})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, third.ID, list[0].ID, "newest first")
	require.NotEmpty(t, next)
	stored, err := events.Get(ctx, f.tenant, first.ID)
	require.NoError(t, err)
	require.Equal(t, first.Matches, stored.Matches)
	require.JSONEq(t, `{"file": "a.csv", "n": 3}`, string(stored.Payload))
}

// TestEventTemplatePatched: an event task's parsed payload template is
// kept between events (per task version), and a patched template is the
// one the next event renders.
func TestEventTemplatePatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	events := service.NewEvents(f.pool, f.enq, nil, nil)
	task := f.eventTask(t, f.tenant, f.endpoint, "on-tick", "tick", `{"v": "one {{ .event.key }}"}`)
	payloadOf := func(key string) string {
		t.Helper()
		ev, err := events.Post(ctx, f.tenant, event.Input{Name: "tick", Key: key})
		require.NoError(t, err)
		require.Len(t, ev.Matches, 1)
		var p string
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT convert_from(payload, 'UTF8') FROM executions WHERE id = $1`,
			ev.Matches[0].ExecutionID).Scan(&p))
		return p
	}
	require.JSONEq(t, `{"v": "one a"}`, payloadOf("a"))
	require.JSONEq(t, `{"v": "one b"}`, payloadOf("b"), "the kept template renders each event's data")

	_, err := f.tasks.Update(ctx, f.tenant, task, func(in *service.TaskInput) error {
		in.Payload = []byte(`{"v": "two {{ .event.key }}"}`)
		return nil
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"v": "two c"}`, payloadOf("c"), "the patched template renders the next event")
}

// TestEventValidation: each bad field is a 422 naming it.
func TestEventValidation(t *testing.T) {
	t.Parallel()
	big := make([]byte, event.PayloadMax+1)
	for i := range big {
		big[i] = ' '
	}
	big[0] = '1'
	for _, c := range []struct {
		in    event.Input
		field string
	}{
		{event.Input{}, "name"},
		{event.Input{Name: "has space"}, "name"},
		{event.Input{Name: string(make([]byte, 201))}, "name"},
		{event.Input{Name: "ok", Payload: json.RawMessage(`{`)}, "payload"},
		{event.Input{Name: "ok", Payload: big}, "payload"},
		{event.Input{Name: "ok", Payload: json.RawMessage(`"\u0000"`)}, "payload"},
		{event.Input{Name: "ok", Key: "a\nb"}, "key"},
		{event.Input{Name: "ok", DedupKey: "a\x00"}, "dedup_key"},
	} {
		err := c.in.Validate()
		var ve *service.ValidationError
		require.ErrorAs(t, err, &ve, "%+v", c.in)
		require.Equal(t, c.field, ve.Fields[0].Field)
	}
	require.NoError(t, event.Input{Name: "files.ready:v2_x-1", Payload: json.RawMessage(`[1]`)}.Validate())
}

// TestEventTenantIsolation: another tenant's event of the same name fires
// none of this tenant's tasks, and its events are not found here.
func TestEventTenantIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	events := service.NewEvents(f.pool, f.enq, nil, nil)
	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "beta"))
	ep, err := service.NewEndpoints(f.pool).Create(ctx, "beta", service.EndpointInput{Name: "e", URL: "https://example.com/b"})
	require.NoError(t, err)
	taskA := f.eventTask(t, f.tenant, f.endpoint, "a", "files.ready", `{}`)
	taskB := f.eventTask(t, "beta", ep.ID, "b", "files.ready", `{}`)

	evB, err := events.Post(ctx, "beta", event.Input{Name: "files.ready", DedupKey: "same"})
	require.NoError(t, err)
	require.Equal(t, event.Matched{Tasks: 1}, evB.Matched)
	require.Equal(t, taskB, evB.Matches[0].TaskID)
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, taskA))

	// The same dedup key is another tenant's own.
	evA, err := events.Post(ctx, f.tenant, event.Input{Name: "files.ready", DedupKey: "same"})
	require.NoError(t, err)
	require.NotEqual(t, evB.ID, evA.ID)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, taskA))

	_, err = events.Get(ctx, f.tenant, evB.ID)
	require.ErrorIs(t, err, service.ErrNotFound)
	list, _, err := events.List(ctx, f.tenant, event.Filter{}, service.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, evA.ID, list[0].ID)
}

// TestEventsConcurrent: two service instances on one database post 1,000
// events at once, half of them twice under one dedup key, to two event
// tasks: each distinct event fires each task exactly once (no double
// fire, no lost fire), and each dedup key made one event.
func TestEventsConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	instances := []*event.Events{
		service.NewEvents(f.pool, f.enq, nil, nil),
		service.NewEvents(f.pool, f.enq, nil, nil),
	}
	t1 := f.eventTask(t, f.tenant, f.endpoint, "t1", "tick", `{}`)
	t2 := f.eventTask(t, f.tenant, f.endpoint, "t2", "tick", `{}`)
	const n = 1000
	var (
		mu      sync.Mutex
		ids     = map[string]int{} // event id → answers
		matched int
		errs    []error
		wg      sync.WaitGroup
		work    = make(chan int)
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range work {
				in := event.Input{Name: "tick"}
				if i%2 == 0 { // posted twice: i and i+1 share the key
					in.DedupKey = fmt.Sprintf("k%d", i/2)
				} else if i%4 == 1 {
					in.DedupKey = fmt.Sprintf("k%d", i/2)
				}
				e, err := instances[(i+w)%2].Post(ctx, f.tenant, in)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					ids[e.ID]++
					matched += e.Matched.Tasks
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	require.Empty(t, errs)
	// i%4 == 0 and i%4 == 1 share a key (250 events posted twice); i%4 == 2
	// has a key of its own, i%4 == 3 none: 750 distinct events.
	distinct := len(ids) // not require.Len: its message would print the whole map
	require.Equal(t, 750, distinct, "distinct events answered")
	require.Equal(t, 750, f.count(t, `SELECT count(*) FROM posted_events WHERE tenant_id = $1`, f.tenant))
	for _, task := range []string{t1, t2} {
		require.Equal(t, 750, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task), "no lost fire")
		require.Equal(t, 750, f.count(t, `SELECT count(DISTINCT event_id) FROM executions WHERE task_id = $1`, task),
			"no double fire")
	}
	require.Equal(t, 1500, f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'deliver'`), "one delivery each")
	require.Equal(t, 2*n, matched, "every answer, a duplicate's too, says what its event fired")
}

// TestRetentionRemovesOldEvents: retention removes the posted events
// older than the executions' retention, of every tenant, and the expired
// dedup keys, and keeps the recent ones.
func TestRetentionRemovesOldEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	events := service.NewEvents(f.pool, f.enq, nil, nil)
	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "other"))
	old, err := events.Post(ctx, f.tenant, event.Input{Name: "old", DedupKey: "k"})
	require.NoError(t, err)
	oldOther, err := events.Post(ctx, "other", event.Input{Name: "old"})
	require.NoError(t, err)
	recent, err := events.Post(ctx, f.tenant, event.Input{Name: "recent"})
	require.NoError(t, err)
	f.exec(t, `UPDATE posted_events SET received_at = now() - interval '40 days' WHERE id IN ($1, $2)`, old.ID, oldOther.ID)
	f.exec(t, `UPDATE event_dedup SET expires_at = now() - interval '39 days'`)

	res, err := retention.New(f.pool, retention.Config{Executions: 30 * 24 * time.Hour}).Sweep(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, res.PostedEvents)
	_, err = events.Get(ctx, f.tenant, old.ID)
	require.ErrorIs(t, err, service.ErrNotFound)
	_, err = events.Get(ctx, f.tenant, recent.ID)
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM event_dedup`), "the expired dedup key went too")
}

// TestEventStartsWorkflowRun: an event starts one run of each active
// workflow whose schedule is its name (trigger event, scheduled for the
// event's arrival); the run's nodes' templates read .event…, which only
// an event-scheduled workflow may name; a paused workflow starts none.
func TestEventStartsWorkflowRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newWFFixture(t)
	events := service.NewEvents(f.pool, f.enq, f.wf, nil)
	root := f.node("load")
	root.Payload, root.PayloadTemplate = []byte(`{"path": "{{ .event.payload.path }}", "date": "{{ .event.key }}"}`), true
	onFiles := &schedule.Spec{Type: schedule.Event, Event: "files.ready"}
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "import", MaxActiveRuns: 10, Schedule: onFiles, Nodes: []service.WorkflowNodeInput{root, f.node("after", "load")},
	})
	require.NoError(t, err)
	require.Nil(t, w.NextRunAt, "an event schedule has no next run")
	paused, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "paused", MaxActiveRuns: 10, Schedule: onFiles, Nodes: []service.WorkflowNodeInput{f.node("a")},
	})
	require.NoError(t, err)
	_, err = f.wf.Pause(ctx, f.tenant, paused.ID)
	require.NoError(t, err)
	_, err = f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "cron", MaxActiveRuns: 10, Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "0 2 * * *"},
		Nodes: []service.WorkflowNodeInput{root},
	})
	requireFields(t, err, "nodes[0].payload.path", "nodes[0].payload.date")

	ev, err := events.Post(ctx, f.tenant, event.Input{Name: "files.ready", Key: "2026-12-03", Payload: json.RawMessage(`{"path": "a.csv"}`)})
	require.NoError(t, err)
	require.Equal(t, event.Matched{Workflows: 1}, ev.Matched)
	require.Equal(t, w.ID, ev.Matches[0].WorkflowID)
	run, err := f.wf.GetRun(ctx, f.tenant, ev.Matches[0].RunID)
	require.NoError(t, err)
	require.Equal(t, service.TriggerEvent, run.Trigger)
	require.True(t, run.ScheduledFor.Equal(ev.ReceivedAt), "scheduled for the event's arrival")
	ids := f.execsOf(t, run.ID, "load")
	require.Len(t, ids, 1)
	var payload string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT convert_from(payload, 'UTF8') FROM executions WHERE id = $1`, ids[0]).Scan(&payload))
	require.JSONEq(t, `{"path": "a.csv", "date": "2026-12-03"}`, payload)
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, paused.ID), "a paused workflow starts none")
}
