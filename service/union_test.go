package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// A union task is stored whole and read back as it was given
// (normalised); its members' calendars are in use like any schedule's (a
// calendar a member names cannot be deleted, and its change reschedules
// the task), and one that does not exist is refused where the member
// names it. A schedule change that keeps the union is no change.
func TestUnionTaskStored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	cals := service.NewCalendars(f.pool, f.tasks)
	holidays, err := cals.Create(ctx, f.tenant, service.CalendarInput{Name: "holidays", Timezone: "Europe/Paris", Dates: []string{"2027-01-01"}})
	require.NoError(t, err)

	spec := schedule.Spec{Type: schedule.Union, Schedules: []schedule.Spec{
		{Type: schedule.Cron, Cron: "0 9 * * *", Timezone: "Europe/Paris", DSTPolicy: schedule.DSTOncePerLocalTime, ExcludeCalendars: []string{holidays.ID}},
		{Type: schedule.Interval, IntervalSeconds: 7200},
	}}
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{Name: "union", EndpointID: f.endpoint, Schedule: spec})
	require.NoError(t, err)
	want := schedule.Normalize(spec)
	require.Equal(t, want, task.Schedule)
	got, err := f.tasks.Get(ctx, f.tenant, task.ID)
	require.NoError(t, err)
	require.Equal(t, want, got.Schedule)
	require.NotNil(t, got.NextRunAt)

	p, err := f.tasks.Preview(ctx, f.tenant, task.ID, 30)
	require.NoError(t, err)
	require.Len(t, p.Fires, 30)
	members := map[int]int{}
	for _, at := range p.Fires {
		members[p.Schedule.MemberAt(at)]++
	}
	require.Positive(t, members[0], "the Paris member fires")
	require.Positive(t, members[1], "the interval member fires")
	require.Zero(t, members[-1])

	err = cals.Delete(ctx, f.tenant, holidays.ID)
	var conflict *service.ConflictError
	require.ErrorAs(t, err, &conflict, "a member's calendar is in use")

	version := got.Version
	updated, err := f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
		in.Schedule = schedule.Spec{Type: schedule.Union, Schedules: []schedule.Spec{
			{Type: schedule.Cron, Cron: "0 9 * * *", Timezone: "Europe/Paris", DSTPolicy: schedule.DSTOncePerLocalTime, ExcludeCalendars: []string{holidays.ID}},
			{Type: schedule.Interval, IntervalSeconds: 7200},
		}}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, got.NextRunAt, updated.NextRunAt, "the same union: nothing rescheduled")
	require.Equal(t, version+1, updated.Version)

	_, err = f.tasks.Create(ctx, f.tenant, service.TaskInput{Name: "missing", EndpointID: f.endpoint, Schedule: schedule.Spec{
		Type: schedule.Union, Schedules: []schedule.Spec{
			{Type: schedule.Cron, Cron: "0 9 * * *", ExcludeCalendars: []string{holidays.ID}},
			{Type: schedule.Cron, Cron: "0 10 * * *", ExcludeCalendars: []string{"0190a8a8-0000-7000-8000-00000000dead"}},
		},
	}})
	var ve *service.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []service.FieldError{{Field: "schedule.schedules[1].exclude_calendars[0]", Message: "no such calendar"}}, ve.Fields)
}

// A backfill over a union plans and creates the slots of every member in
// its window, an instant two members produce once: 00:00, 06:00, 12:00
// and 18:00 UTC, 13:00 in Paris (12:00Z, the UTC member's too) and 07:30
// UTC on 10 November 2026.
func TestUnionBackfill(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{Name: "union", EndpointID: f.endpoint, Schedule: schedule.Spec{
		Type: schedule.Union, StartAt: &start, Schedules: []schedule.Spec{
			{Type: schedule.Cron, Cron: "0 */6 * * *"},
			{Type: schedule.Cron, Cron: "0 13 * * *", Timezone: "Europe/Paris"},
			{Type: schedule.Cron, Cron: "30 7 * * *"},
		},
	}})
	require.NoError(t, err)
	from, to := time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	want := []time.Time{
		from, from.Add(6 * time.Hour), from.Add(7*time.Hour + 30*time.Minute), from.Add(12 * time.Hour), from.Add(18 * time.Hour),
	}
	backfills := service.NewBackfills(f.pool, f.enq, f.tasks)
	in := service.BackfillInput{From: from, To: to, MaxConcurrency: service.BackfillConcurrencyMax, DryRun: true}
	_, plan, err := backfills.Create(ctx, f.tenant, task.ID, in)
	require.NoError(t, err)
	var planned []time.Time
	for _, p := range plan {
		require.Equal(t, service.SlotCreate, p.Action)
		planned = append(planned, p.ScheduledFor.UTC())
	}
	require.Equal(t, want, planned)

	in.DryRun = false
	b, _, err := backfills.Create(ctx, f.tenant, task.ID, in)
	require.NoError(t, err)
	require.Equal(t, len(want), b.Total)
	for range 3 {
		_, err := backfills.Pump(ctx)
		require.NoError(t, err)
	}
	rows, err := f.pool.Query(ctx, `SELECT scheduled_for FROM executions WHERE task_id = $1 AND trigger = 'backfill' ORDER BY scheduled_for`, task.ID)
	require.NoError(t, err)
	defer rows.Close()
	var created []time.Time
	for rows.Next() {
		var at time.Time
		require.NoError(t, rows.Scan(&at))
		created = append(created, at.UTC())
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, created, "one execution per slot, 12:00Z once")
}
