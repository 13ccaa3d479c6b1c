package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// fieldsOf returns the fields a *ValidationError names, in order.
func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	var ve *service.ValidationError
	require.ErrorAs(t, err, &ve)
	out := make([]string, len(ve.Fields))
	for i, f := range ve.Fields {
		out[i] = f.Field
	}
	return out
}

// TestPayloadTemplateValidation: a templated payload whose templates do
// not parse or name unknown data is a 422 naming each string's field, at
// create and at patch; payload_template is off by default, and then the
// same text is a plain payload.
func TestPayloadTemplateValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	bad := []byte(`{"rows":"{{ .nodes.extract.output.rows }}","items":[1,"{{ .business_date","{{ .round }}"],"k":{"d":"{{ .day }}"}}`)
	in := service.TaskInput{
		Name: "report", EndpointID: f.endpoint, Payload: bad,
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 2 * * *", Timezone: "Asia/Shanghai"},
	}

	plain, err := f.tasks.Create(ctx, f.tenant, in)
	require.NoError(t, err, "off by default: any JSON")
	require.False(t, plain.PayloadTemplate)
	require.Equal(t, bad, plain.Payload)

	in.Name, in.PayloadTemplate = "report.templated", true
	_, err = f.tasks.Create(ctx, f.tenant, in)
	require.Equal(t, []string{"payload.rows", "payload.items[1]", "payload.k.d"}, fieldsOf(t, err))

	_, err = f.tasks.Update(ctx, f.tenant, plain.ID, func(in *service.TaskInput) error {
		in.PayloadTemplate = true
		return nil
	})
	require.Equal(t, []string{"payload.rows", "payload.items[1]", "payload.k.d"}, fieldsOf(t, err), "a patch that turns it on")

	good := []byte(`{"day":"{{ date_add .business_date -1 }}","n":"{{ .round }}"}`)
	got, err := f.tasks.Update(ctx, f.tenant, plain.ID, func(in *service.TaskInput) error {
		in.PayloadTemplate, in.Payload = true, good
		return nil
	})
	require.NoError(t, err)
	require.True(t, got.PayloadTemplate)
	_, err = f.tasks.Update(ctx, f.tenant, plain.ID, func(in *service.TaskInput) error {
		in.Payload = []byte(`{"x":"{{ .nope }}"}`)
		return nil
	})
	require.Equal(t, []string{"payload.x"}, fieldsOf(t, err), "a patch of a templated task's payload")
}

// TestRenderTask: Render returns what a slot would send (the slot given,
// else the next one), in the schedule's zone across a DST change; an
// untemplated task's payload as it is; a failing render is a 422 naming
// the field; another tenant's task is not found.
func TestRenderTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "other"))
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "paris", EndpointID: f.endpoint, PayloadTemplate: true,
		Payload:  []byte(`{"date":"{{ .business_date }}", "local":"{{ .scheduled_for_local }}", "round":"{{ .round }}"}`),
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "30 2 * * *", Timezone: "Europe/Paris"},
	})
	require.NoError(t, err)

	for _, c := range []struct{ slot, want string }{
		{"2026-03-29T00:30:00Z", `{"date":"2026-03-29", "local":"2026-03-29T01:30:00+01:00", "round":1}`},
		{"2026-03-29T01:30:00Z", `{"date":"2026-03-29", "local":"2026-03-29T03:30:00+02:00", "round":1}`},
		{"2026-03-29T22:30:00Z", `{"date":"2026-03-30", "local":"2026-03-30T00:30:00+02:00", "round":1}`},
	} {
		slot, err := time.Parse(time.RFC3339, c.slot)
		require.NoError(t, err)
		r, err := f.tasks.Render(ctx, f.tenant, task.ID, service.RenderInput{ScheduledFor: &slot})
		require.NoError(t, err)
		require.Equal(t, c.want, string(r.Body), "the original key order and spacing are kept")
		require.True(t, slot.Equal(r.ScheduledFor))
	}
	r, err := f.tasks.Render(ctx, f.tenant, task.ID, service.RenderInput{})
	require.NoError(t, err)
	require.Equal(t, *task.NextRunAt, r.ScheduledFor, "no slot given: the next one")

	_, err = f.tasks.Render(ctx, "other", task.ID, service.RenderInput{})
	require.ErrorIs(t, err, service.ErrNotFound, "another tenant's task")
	_, err = f.tasks.Render(ctx, f.tenant, service.NewID(), service.RenderInput{})
	require.ErrorIs(t, err, service.ErrNotFound)
	_, err = f.tasks.Render(ctx, f.tenant, task.ID, service.RenderInput{Inputs: map[string]json.RawMessage{"a": json.RawMessage(`1`)}})
	require.Equal(t, []string{"inputs"}, fieldsOf(t, err))

	plainPayload := []byte(`{"b": "{{ .round }}", "a": 1}`)
	plain, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "plain", EndpointID: f.endpoint, Payload: plainPayload,
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *"},
	})
	require.NoError(t, err)
	r, err = f.tasks.Render(ctx, f.tenant, plain.ID, service.RenderInput{})
	require.NoError(t, err)
	require.Equal(t, plainPayload, r.Body, "an untemplated task's body is its payload's bytes")

	failing, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "failing", EndpointID: f.endpoint, PayloadTemplate: true,
		Payload:  []byte(`{"ok":"{{ .round }}","d":"{{ date_add .task_name 1 }}"}`),
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *"},
	})
	require.NoError(t, err, "it parses; it fails only when rendered")
	_, err = f.tasks.Render(ctx, f.tenant, failing.ID, service.RenderInput{})
	require.Equal(t, []string{"payload.d"}, fieldsOf(t, err))
}

// TestTemplateTurnedOnRendersUnfinished: executions created before a
// task's payload became a template (they carry no payload of their own,
// and would send the task's) get their rendering when it changes, each
// for its own slot and id; a template that fails for one of them refuses
// the change.
func TestTemplateTurnedOnRendersUnfinished(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "every2s", EndpointID: f.endpoint, Payload: []byte(`{}`),
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "*/2 * * * * *", Timezone: "Asia/Shanghai"},
	})
	require.NoError(t, err)
	_, err = f.scheduler(service.SchedulerConfig{}).Tick(ctx)
	require.NoError(t, err)
	pending := f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND payload IS NULL`, task.ID)
	require.Positive(t, pending)

	_, err = f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
		in.PayloadTemplate, in.Payload = true, []byte(`{"d":"{{ date_add .task_name 1 }}"}`)
		return nil
	})
	require.Equal(t, []string{"payload"}, fieldsOf(t, err))
	require.Equal(t, pending, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND payload IS NULL`, task.ID),
		"a refused change renders nothing")

	_, err = f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
		in.PayloadTemplate, in.Payload = true, []byte(`{"id":"{{ .execution_id }}","at":"{{ .scheduled_for }}"}`)
		return nil
	})
	require.NoError(t, err)
	rows, err := f.pool.Query(ctx, `SELECT id::text, scheduled_for, payload FROM executions WHERE task_id = $1`, task.ID)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var (
			id   string
			at   time.Time
			body []byte
		)
		require.NoError(t, rows.Scan(&id, &at, &body))
		require.JSONEq(t, `{"id":"`+id+`","at":"`+at.UTC().Format(time.RFC3339Nano)+`"}`, string(body))
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, pending, n)
}

// TestCatchUpRendersItsSlot: a fire-once catch-up after downtime renders
// the payload for the slot it stands for (the latest missed one), as the
// scheduler's on-time fires do.
func TestCatchUpRendersItsSlot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "hourly", EndpointID: f.endpoint, PayloadTemplate: true,
		Payload:  []byte(`{"at":"{{ .scheduled_for }}","date":"{{ .business_date }}","trigger":"{{ .trigger }}"}`),
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *", Timezone: "Asia/Shanghai"},
	})
	require.NoError(t, err)
	// ax was down for two days: the task's next slot is long past.
	f.exec(t, `UPDATE tasks SET next_run_at = date_trunc('hour', now()) - interval '48 hours' WHERE id = $1`, task.ID)
	_, err = f.scheduler(service.SchedulerConfig{}).Tick(ctx)
	require.NoError(t, err)

	var (
		at   time.Time
		body []byte
	)
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT scheduled_for, payload FROM executions WHERE task_id = $1 AND late`, task.ID).
		Scan(&at, &body))
	require.Less(t, time.Since(at), 2*time.Hour, "the catch-up is the latest missed slot")
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	require.JSONEq(t, `{"at":"`+at.UTC().Format(time.RFC3339)+`","date":"`+at.In(shanghai).Format(time.DateOnly)+`","trigger":"schedule"}`,
		string(body))
}

// TestSchedulerRendersThePatchedTemplate: the scheduler keeps a task's
// parsed template from claim to claim, and a patch of the payload reaches
// the next claim's fires: the cache is per task version.
func TestSchedulerRendersThePatchedTemplate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "every1s", EndpointID: f.endpoint, PayloadTemplate: true,
		Payload:  []byte(`{"v":"one","id":"{{ .execution_id }}"}`),
		Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 1},
	})
	require.NoError(t, err)
	clock := time.Now()
	s := f.scheduler(service.SchedulerConfig{Now: func() time.Time { return clock }})
	bodies := func() map[string]int {
		rows, err := f.pool.Query(ctx, `SELECT convert_from(payload, 'UTF8')::jsonb->>'v', count(*) FROM executions WHERE task_id = $1 GROUP BY 1`, task.ID)
		require.NoError(t, err)
		out := map[string]int{}
		var (
			v string
			n int
		)
		_, err = pgx.ForEachRow(rows, []any{&v, &n}, func() error { out[v] = n; return nil })
		require.NoError(t, err)
		return out
	}

	res, err := s.Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, res.Fired)
	first := bodies()
	require.Equal(t, map[string]int{"one": res.Fired}, first)

	// Claimed again, unpatched: the same template (from the cache).
	clock = clock.Add(20 * time.Second)
	res, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, res.Fired)
	require.Equal(t, map[string]int{"one": first["one"] + res.Fired}, bodies())

	_, err = f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
		in.Payload = []byte(`{"v":"two","id":"{{ .execution_id }}"}`)
		return nil
	})
	require.NoError(t, err)
	before := bodies()
	clock = clock.Add(20 * time.Second)
	res, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, res.Fired)
	after := bodies()
	require.Equal(t, res.Fired, after["two"], "the claim after the patch renders the new template")
	require.Equal(t, before["one"], after["one"])
}
