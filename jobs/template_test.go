package jobs

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/schedule"
)

// templated makes a task's payload the template payload.
func templated(payload string, change func(*service.TaskInput)) func(*service.TaskInput) {
	return func(in *service.TaskInput) {
		in.Payload, in.PayloadTemplate = []byte(payload), true
		if change != nil {
			change(in)
		}
	}
}

// onceSoon makes a task fire once, in zone, at a slot the scheduler
// claims now (within its look-ahead).
func onceSoon(zone string) func(*service.TaskInput) {
	return func(in *service.TaskInput) {
		at := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Millisecond)
		in.Schedule = schedule.Spec{Type: schedule.Once, RunAt: &at, Timezone: zone}
	}
}

// tick runs one scheduler pass (the real one, by the database's clock)
// and returns the executions it created for task.
func (h *harness) tick(task service.Task, m *metrics.Metrics) []string {
	h.t.Helper()
	s := service.NewScheduler(h.pool, h.enq, service.SchedulerConfig{Metrics: m}, testLogger())
	_, err := s.Tick(h.t.Context())
	require.NoError(h.t, err)
	rows, err := h.pool.Query(h.t.Context(), `SELECT id::text FROM executions WHERE task_id = $1 ORDER BY scheduled_for, shard`, task.ID)
	require.NoError(h.t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(h.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(h.t, rows.Err())
	return ids
}

// TestTemplatedFireRetriesSendIdenticalBytes: the scheduler renders a
// templated task's payload once, when it creates the execution; every
// attempt sends those bytes, signed, under the same idempotency key, and
// they say what the data says (the slot in UTC and in the schedule's
// zone, the ids, the types kept).
func TestTemplatedFireRetriesSendIdenticalBytes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusServiceUnavailable}, response{Status: http.StatusServiceUnavailable},
		response{Status: http.StatusOK})
	ep := h.endpoint(recv.srv.URL, nil)
	task := h.task(ep.ID, templated(`{"id":"{{ .execution_id }}","task":"{{ .task_id }}","name":"{{ .task_name }}",
		"at":"{{ .scheduled_for }}","local":"{{ .scheduled_for_local }}","date":"{{ .business_date }}",
		"day":"{{ date_format .business_date \"yyyyMMdd\" }}","round":"{{ .round }}","shard":"{{ .shard_index }}",
		"of":"{{ .shard_count }}","trigger":"{{ .trigger }}","zone":"{{ .timezone }}"}`, onceSoon("Asia/Shanghai")))

	ids := h.tick(task, nil)
	require.Len(t, ids, 1)
	id := ids[0]
	e := h.waitState(id, service.ExecSucceeded)
	require.Equal(t, 3, e.Attempts)

	hits := recv.hitsSoFar()
	require.Len(t, hits, 3)
	slot := task.Schedule.RunAt.UTC()
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	local := slot.In(shanghai)
	want := map[string]any{
		"id": id, "task": task.ID, "name": task.Name, "at": slot.Format(time.RFC3339Nano),
		"local": local.Format(time.RFC3339Nano), "date": local.Format(time.DateOnly), "day": local.Format("20060102"),
		"round": 1.0, "shard": 0.0, "of": 1.0, "trigger": "schedule", "zone": "Asia/Shanghai",
	}
	var got map[string]any
	require.NoError(t, json.Unmarshal(hits[0].Body, &got))
	require.Equal(t, want, got)

	key, err := service.ParseSecret(ep.Secret)
	require.NoError(t, err)
	for i, hit := range hits {
		require.Equal(t, hits[0].Body, hit.Body, "attempt %d sends the bytes of the first", i+1)
		require.Equal(t, id, hit.Header.Get("Idempotency-Key"))
		require.Equal(t, strconv.Itoa(i+1), hit.Header.Get("X-Ax-Attempt"))
		ts, err := strconv.ParseInt(hit.Header.Get("Webhook-Timestamp"), 10, 64)
		require.NoError(t, err)
		require.Equal(t, Sign(key, id, time.Unix(ts, 0), hit.Body), hit.Header.Get("Webhook-Signature"),
			"the signature covers the rendered bytes")
	}
}

// TestTemplateFailsAtFire: a template that fails to render when the
// scheduler creates the execution fails it then: failed, error_class
// template, the reason in last_error and on its timeline, counted as
// finished and as its task's failure; no job carries it, nothing is sent,
// and nothing retries it.
func TestTemplateFailsAtFire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t)
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, templated(`{"day":"{{ date_add .task_name -1 }}"}`, func(in *service.TaskInput) {
		in.Schedule = schedule.Spec{Type: schedule.Cron, Cron: "*/5 * * * * *", Timezone: "Europe/Paris"}
		in.PauseAfterFailures = 1
	}))
	m := metrics.New(nil)

	// A pass claims the slots due within its lookahead: the next */5 slot
	// may lie beyond the first pass's, so pass again until one is due.
	var ids []string
	for deadline := time.Now().Add(30 * time.Second); len(ids) == 0 && time.Now().Before(deadline); {
		if ids = h.tick(task, m); len(ids) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	require.NotEmpty(t, ids)
	for _, id := range ids[1:] {
		require.Equal(t, service.ExecFailed, h.execution(id).State, "every fire of the pass failed")
		require.Equal(t, []string{"fired", "failed"}, eventTypes(h.events(id)))
	}
	e := h.execution(ids[0])
	require.Equal(t, service.ExecFailed, e.State)
	require.Equal(t, service.ErrorClassTemplate, *e.LastErrorClass)
	require.Contains(t, *e.LastError, "render payload.day")
	require.Contains(t, *e.LastError, "neither a date")
	require.Nil(t, e.RiverJobID, "never enqueued")
	require.Zero(t, e.Attempts)
	require.NotNil(t, e.FinishedAt)
	var jobs int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind IN ('deliver', 'deliver_batch')`).Scan(&jobs))
	require.Zero(t, jobs, "no job carries them")

	evs := h.events(ids[0])
	require.Equal(t, []string{"fired", "failed", "task_paused"}, eventTypes(evs))
	require.Equal(t, service.ErrorClassTemplate, *evs[1].ErrorClass)
	require.Equal(t, *e.LastError, *evs[1].Message)
	require.InDelta(t, len(ids), testutil.ToFloat64(m.Finished.WithLabelValues(service.ExecFailed)), 0, "counted as finished")
	got, err := h.tasks.Get(t.Context(), h.tenant, task.ID)
	require.NoError(t, err)
	require.Equal(t, service.TaskPaused, got.State, "it counts as the task's failure (pause_after_failures)")

	// An API retry renders the task's template again: still failing, a
	// conflict; fixed, it is sent.
	_, err = h.tasks.Resume(t.Context(), h.tenant, task.ID)
	require.NoError(t, err)
	x := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{})
	_, err = x.Retry(t.Context(), h.tenant, ids[0])
	require.ErrorIs(t, err, service.ErrConflict)
	_, err = h.tasks.Update(t.Context(), h.tenant, task.ID, func(in *service.TaskInput) error {
		in.Payload = []byte(`{"day":"{{ date_add .business_date -1 }}"}`)
		return nil
	})
	require.NoError(t, err)
	_, err = x.Retry(t.Context(), h.tenant, ids[0])
	require.NoError(t, err)
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	var slot time.Time
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT scheduled_for FROM executions WHERE id = $1`, ids[0]).Scan(&slot))
	day := slot.In(paris).AddDate(0, 0, -1).Format(time.DateOnly)
	require.JSONEq(t, `{"day":"`+day+`"}`, string(recv.next(t).Body))
	h.waitState(ids[0], service.ExecSucceeded)
	require.Len(t, recv.hitsSoFar(), 1, "the failed render sent nothing")
}

// TestBackfillRendersEachSlot: a backfill of November for a daily task in
// Asia/Shanghai (02:30 local: 18:30 UTC the day before) sends thirty
// bodies with the thirty local dates, each its slot's own.
func TestBackfillRendersEachSlot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t)
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, templated(
		`{"date":"{{ .business_date }}","yesterday":"{{ date_add .business_date -1 }}","at":"{{ .scheduled_for }}","trigger":"{{ .trigger }}"}`,
		func(in *service.TaskInput) {
			in.Schedule = schedule.Spec{Type: schedule.Cron, Cron: "30 2 * * *", Timezone: "Asia/Shanghai"}
		}))
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	bf := service.NewBackfills(h.pool, h.enq, h.tasks)
	_, slots, err := bf.Create(t.Context(), h.tenant, task.ID, service.BackfillInput{
		From: time.Date(2026, 11, 1, 0, 0, 0, 0, shanghai), To: time.Date(2026, 12, 1, 0, 0, 0, 0, shanghai), MaxConcurrency: 100,
	})
	require.NoError(t, err)
	require.Len(t, slots, 30)
	_, err = bf.Pump(t.Context())
	require.NoError(t, err)

	var dates []string
	for range 30 {
		var body map[string]string
		require.NoError(t, json.Unmarshal(recv.next(t).Body, &body))
		at, err := time.Parse(time.RFC3339, body["at"])
		require.NoError(t, err)
		require.Equal(t, at.In(shanghai).Format(time.DateOnly), body["date"], "each body renders its own slot")
		require.NotEqual(t, at.Format(time.DateOnly), body["date"], "the local date, not UTC's")
		require.Equal(t, at.In(shanghai).AddDate(0, 0, -1).Format(time.DateOnly), body["yesterday"])
		require.Equal(t, "backfill", body["trigger"])
		dates = append(dates, body["date"])
	}
	slices.Sort(dates)
	var want []string
	for d := 1; d <= 30; d++ {
		want = append(want, time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC).Format(time.DateOnly))
	}
	require.Equal(t, want, dates, "thirty different local dates, November 1 to 30")
}

// TestTriggerRendersEachShard: a manual trigger renders the template for
// its instant, each shard its own; a trigger's payload override is sent
// as it is, not rendered.
func TestTriggerRendersEachShard(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t)
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, templated(`{"shard":"{{ .shard_index }}/{{ .shard_count }}","trigger":"{{ .trigger }}","id":"{{ .execution_id }}"}`,
		func(in *service.TaskInput) { in.Shards = 2 }))
	x := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{})
	_, err := x.Trigger(t.Context(), h.tenant, task.ID, service.TriggerInput{})
	require.NoError(t, err)
	var shards []string
	for range 2 {
		hit := recv.next(t)
		var body map[string]string
		require.NoError(t, json.Unmarshal(hit.Body, &body))
		require.Equal(t, "manual", body["trigger"])
		require.Equal(t, hit.Header.Get("Idempotency-Key"), body["id"], "each shard renders its own execution id")
		shards = append(shards, body["shard"])
	}
	slices.Sort(shards)
	require.Equal(t, []string{"0/2", "1/2"}, shards)

	override := `{"literal":"{{ .business_date }}"}`
	_, err = x.Trigger(t.Context(), h.tenant, task.ID, service.TriggerInput{Payload: []byte(override)})
	require.NoError(t, err)
	for range 2 {
		require.Equal(t, override, string(recv.next(t).Body), "an override is the body, byte for byte")
	}
}
