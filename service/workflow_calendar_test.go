package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

func TestWorkflowCalendars(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	cals := service.NewCalendars(f.pool, f.tasks)
	now := time.Now().UTC()
	natural := time.Date(now.Year(), now.Month(), now.Day(), 2, 0, 0, 0, time.UTC)
	for !natural.After(now.Add(time.Minute)) {
		natural = natural.Add(24 * time.Hour)
	}
	day := func(t time.Time) string { return t.Format(time.DateOnly) }
	cal, err := cals.Create(ctx, f.tenant, service.CalendarInput{Name: "holidays", Dates: []string{day(natural)}})
	require.NoError(t, err)

	// No run on an excluded date: the first slot skips it.
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "daily", MaxActiveRuns: 5,
		Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "0 2 * * *", Timezone: "UTC", ExcludeCalendars: []string{cal.ID}},
		Nodes:    []service.WorkflowNodeInput{f.node("a")},
	})
	require.NoError(t, err)
	require.Equal(t, []string{cal.ID}, w.Schedule.ExcludeCalendars)
	require.Equal(t, natural.Add(24*time.Hour), *w.NextRunAt)

	// A run materialised ahead for the next slot; a calendar change that
	// excludes its date cancels it and moves the next slot on.
	second := natural.Add(24 * time.Hour)
	runID := service.NewID()
	ok, err := db.InsertWorkflowRun(ctx, f.pool, db.WorkflowRun{
		TenantID: f.tenant, ID: runID, WorkflowID: w.ID, Version: 1,
		ScheduledFor: second, Trigger: service.TriggerSchedule,
	})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = f.wf.Sweep(ctx) // starts it: its root's execution waits for the slot
	require.NoError(t, err)
	require.Len(t, f.execsOf(t, runID, "a"), 1)
	_, err = cals.Update(ctx, f.tenant, cal.ID, func(in *service.CalendarInput) error {
		in.Dates = []string{day(natural), day(second)}
		return nil
	})
	require.NoError(t, err)
	r, err := f.wf.GetRun(ctx, f.tenant, runID)
	require.NoError(t, err)
	require.Equal(t, service.RunCancelled, r.State)
	w, err = f.wf.Get(ctx, f.tenant, w.ID)
	require.NoError(t, err)
	require.Equal(t, natural.Add(48*time.Hour), *w.NextRunAt)

	// The dates go away again: the slots come back, and the cancelled
	// run gave its slot up, so the schedule can start it again.
	_, err = cals.Update(ctx, f.tenant, cal.ID, func(in *service.CalendarInput) error {
		in.Dates = []string{}
		return nil
	})
	require.NoError(t, err)
	w, err = f.wf.Get(ctx, f.tenant, w.ID)
	require.NoError(t, err)
	require.Equal(t, natural, *w.NextRunAt)
	again := service.NewID()
	ok, err = db.InsertWorkflowRun(ctx, f.pool, db.WorkflowRun{
		TenantID: f.tenant, ID: again, WorkflowID: w.ID, Version: 1,
		ScheduledFor: second, Trigger: service.TriggerSchedule,
	})
	require.NoError(t, err)
	require.True(t, ok, "the rescheduled run left its slot free")
	_, err = f.wf.Sweep(ctx)
	require.NoError(t, err)
	require.Len(t, f.execsOf(t, again, "a"), 1, "and its root's slot too")

	// A calendar a workflow uses cannot be deleted.
	err = cals.Delete(ctx, f.tenant, cal.ID)
	require.ErrorIs(t, err, service.ErrConflict)
	require.Contains(t, err.Error(), "workflow "+w.Name+" ("+w.ID+")")
	_, err = f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error {
		in.Schedule.ExcludeCalendars = nil
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, cals.Delete(ctx, f.tenant, cal.ID))

	// An unknown calendar is refused.
	_, err = f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name:     "bad",
		Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "0 2 * * *", ExcludeCalendars: []string{cal.ID}},
		Nodes:    []service.WorkflowNodeInput{f.node("a")},
	})
	var ve *service.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Contains(t, ve.Error(), "no such calendar")
}

// A backfill's slots skip the excluded dates; the scheduler fires none on them.
func TestWorkflowCalendarBackfillAndScheduler(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	cals := service.NewCalendars(f.pool, f.tasks)
	past := time.Now().UTC().Truncate(24 * time.Hour).Add(-5 * 24 * time.Hour)
	cal, err := cals.Create(ctx, f.tenant, service.CalendarInput{Name: "off", Dates: []string{past.Format(time.DateOnly)}})
	require.NoError(t, err)
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "hourly", MaxActiveRuns: 100,
		Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *", Timezone: "UTC", ExcludeCalendars: []string{cal.ID}},
		Nodes:    []service.WorkflowNodeInput{f.node("a")},
	})
	require.NoError(t, err)
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	_, plan, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{
		From: past.Add(-24 * time.Hour),
		To:   past.Add(48 * time.Hour), DryRun: true,
	})
	require.NoError(t, err)
	require.Len(t, plan, 48, "the excluded day's 24 slots are not in the plan")
	for _, s := range plan {
		require.NotEqual(t, past.Format(time.DateOnly), s.ScheduledFor.Format(time.DateOnly))
	}

	// The scheduler, with the workflow's cursor moved back over the
	// excluded day (fire_all catches up): no run on it.
	f.exec(t, `UPDATE workflows SET next_run_at = $2, misfire_policy = 'fire_all' WHERE id = $1`, w.ID, past.Add(-2*time.Hour))
	s := f.scheduler(service.SchedulerConfig{CatchUpWindow: 10 * 24 * time.Hour, CatchUpMax: 1000})
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID))
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1
		AND scheduled_for >= $2 AND scheduled_for < $3`, w.ID, past, past.Add(24*time.Hour)))
}
