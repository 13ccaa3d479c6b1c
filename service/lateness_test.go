package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
)

// TestFiringLatenessOneDefinition runs every case of the firing lateness
// through its Go definition (Execution.FiringLateness: the console, and
// the histogram through Delivery.FiringLateness) and its SQL mirror
// (GET /v1/stats, db.OnTimeFire and db.FiringLatenessMS): both count the
// same executions and agree on the value — first attempt start − slot,
// on-time scheduled fires only, never below zero.
func TestFiringLatenessOneDefinition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	stats := service.NewStats(pool)
	execs := service.NewExecutions(pool, nil, service.ExecutionsConfig{})
	ms := func(v int) *int { return &v }
	for i, tc := range []struct {
		trigger     string
		late        bool
		firstMS     *int // first_started_at − slot; nil: never started
		lastMS      *int // started_at − slot (the latest attempt); nil: as first
		want        *float64
		wantNoneWhy string
	}{
		{trigger: "schedule", firstMS: ms(120), want: new(120.0)},
		{trigger: "schedule", firstMS: ms(120), lastMS: ms(60_000), want: new(120.0)}, // retried: its first attempt counts
		{trigger: "schedule", firstMS: ms(-40), want: new(0.0)},                       // a hair early: on time
		{trigger: "schedule", wantNoneWhy: "not started"},
		{trigger: "schedule", late: true, firstMS: ms(3_600_000), wantNoneWhy: "a misfire catch-up"},
		{trigger: "backfill", firstMS: ms(86_400_000), wantNoneWhy: "a backfill"},
		{trigger: "manual", firstMS: ms(15), wantNoneWhy: "a manual fire"},
		{trigger: "dependency", firstMS: ms(900_000), wantNoneWhy: "a workflow step waiting for its rule"},
		{trigger: "retry", firstMS: ms(15), wantNoneWhy: "an API retry"},
	} {
		t.Run(fmt.Sprint(i, tc.trigger), func(t *testing.T) {
			tenant := fmt.Sprintf("t%d", i)
			_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
			require.NoError(t, err)
			slot := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
			var first, last *time.Time
			if tc.firstMS != nil {
				f := slot.Add(time.Duration(*tc.firstMS) * time.Millisecond)
				first, last = &f, &f
				if tc.lastMS != nil {
					l := slot.Add(time.Duration(*tc.lastMS) * time.Millisecond)
					last = &l
				}
			}
			_, err = pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, late, created_at,
					first_started_at, started_at, last_error)
				VALUES ($1, $2, gen_random_uuid(), $3, $4, CASE WHEN $6::timestamptz IS NULL THEN 'skipped' ELSE 'succeeded' END,
					$5, $3, $6, $7, CASE WHEN $6::timestamptz IS NULL THEN 'fixture' END)`,
				tenant, uuid.Must(uuid.NewV7()).String(), slot, tc.trigger, tc.late, first, last)
			require.NoError(t, err)

			xs, _, err := execs.List(ctx, tenant, service.ExecutionFilter{}, service.Page{Limit: 1})
			require.NoError(t, err)
			require.Len(t, xs, 1)
			goValue, goOK := xs[0].FiringLateness()
			s, err := stats.Get(ctx, tenant, 24*time.Hour)
			require.NoError(t, err)

			if tc.want == nil {
				require.False(t, goOK, tc.wantNoneWhy)
				require.Zero(t, s.FiringLateness.Count, tc.wantNoneWhy)
				return
			}
			require.True(t, goOK)
			require.InDelta(t, *tc.want, float64(goValue)/float64(time.Millisecond), 0.001)
			require.EqualValues(t, 1, s.FiringLateness.Count)
			require.InDelta(t, *tc.want, *s.FiringLateness.P50, 0.1, "stats round to 0.1 ms")
		})
	}
}

// TestFiringLatenessOfAStart: the lateness a first start reports for the
// histogram (Delivery.FiringLateness) is the execution's, as the API and
// the stats read it afterwards: exactly first_started_at − slot, by the
// database clock; a manual fire and a second attempt report none.
func TestFiringLatenessOfAStart(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	f.insertTasks(t, 1, 3600, time.Now().UTC().Add(-2*time.Second), "fire_once")
	f.exec(t, `UPDATE tasks SET max_attempts = 3`)
	_, err := f.scheduler(service.SchedulerConfig{}).Tick(ctx)
	require.NoError(t, err)
	ids := f.ids(t, `SELECT id::text FROM executions`)
	require.Len(t, ids, 1)

	d, err := f.del.Begin(ctx, f.tenant, ids[0], 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action, d.Reason)
	require.NotNil(t, d.FiringLateness, "a scheduled fire's first start")
	require.GreaterOrEqual(t, *d.FiringLateness, 2*time.Second)
	x, err := f.ex.Get(ctx, f.tenant, ids[0])
	require.NoError(t, err)
	stored, ok := x.FiringLateness()
	require.True(t, ok)
	require.Equal(t, stored, *d.FiringLateness, "the start's lateness is the stored one")

	_, err = f.del.Finish(ctx, f.tenant, ids[0], d.Lease, service.Outcome{
		Kind: service.OutcomeRetry, StatusCode: 503,
		ErrorClass: "http_5xx", Error: "HTTP 503",
	})
	require.NoError(t, err)
	f.exec(t, `UPDATE executions SET next_attempt_at = now()`)
	d, err = f.del.Begin(ctx, f.tenant, ids[0], 2)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action, d.Reason)
	require.Nil(t, d.FiringLateness, "a second attempt is not a fire")

	task := f.ids(t, `SELECT id::text FROM tasks`)[0]
	m, err := f.ex.Trigger(ctx, f.tenant, task, service.TriggerInput{})
	require.NoError(t, err)
	d, err = f.del.Begin(ctx, f.tenant, m.ID, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action, d.Reason)
	require.Nil(t, d.FiringLateness, "a manual fire has no slot to be late for")
}
