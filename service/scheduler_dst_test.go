package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// dstDay is a New York day whose clock changes: 2027-03-14 (02:00 EST
// jumps to 03:00 EDT at 07:00Z, a 23-hour day) and 2027-11-07 (02:00 EDT
// falls back to 01:00 EST at 06:00Z, 25 hours). past is the same change
// a year earlier, a day a backfill may cover (a backfill runs past
// slots only).
type dstDay struct {
	name  string
	date  string
	past  string
	hours int
	// fires is how many slots each expression has that day, by policy
	// (docs/schedules.md, Daylight saving time); at, instants it must
	// have.
	fires map[string][2]int // expression → {vixie, once_per_local_time}
	at    map[string][]string
}

var dstDays = []dstDay{
	{
		name: "spring forward", date: "2027-03-14", past: "2026-03-08", hours: 23,
		fires: map[string][2]int{
			"30 2 * * *":   {1, 1},     // 02:30 does not exist: 07:00Z, the end of the gap
			"30 1 * * *":   {1, 1},     // 06:30Z
			"30 * * * *":   {23, 24},   // vixie: hourly in real time; once: and 02:30 shifted to 07:00Z
			"*/10 1 * * *": {6, 6},     // 06:00Z … 06:50Z
			"*/5 * * * *":  {276, 276}, // once: 02:00 … 02:55 collapse into 03:00 EDT's fire
			"*/15 * * * *": {92, 92},
		},
		at: map[string][]string{"30 2 * * *": {"2027-03-14T07:00:00Z"}, "30 1 * * *": {"2027-03-14T06:30:00Z"}},
	},
	{
		name: "fall back", date: "2027-11-07", past: "2026-11-01", hours: 25,
		fires: map[string][2]int{
			"30 2 * * *":   {1, 1},     // 07:30Z (02:30 EST)
			"30 1 * * *":   {1, 1},     // 05:30Z (01:30 EDT) only
			"30 * * * *":   {25, 24},   // once: not 06:30Z, 01:30 EST again
			"*/10 1 * * *": {6, 6},     // 05:00Z … 05:50Z, nothing in the EST pass
			"*/5 * * * *":  {300, 288}, // once: nothing from 06:00Z to 06:55Z
			"*/15 * * * *": {100, 96},
		},
		at: map[string][]string{"30 2 * * *": {"2027-11-07T07:30:00Z"}, "30 1 * * *": {"2027-11-07T05:30:00Z"}},
	},
}

// TestSchedulerAcrossDST runs the real scheduler pass (Tick, its claim
// and plan, with a clock injected through SchedulerConfig.Now) across New
// York's 23-hour and 25-hour days, under both DST policies, stepping the
// clock from slot to slot as a scheduler loop on time would. Every
// task's executions are exactly the schedule's slots that day, as the
// preview lists them (none lost, none doubled, none late), and as many as
// docs/schedules.md says. Then a backfill of the day on fresh tasks
// plans and creates exactly the preview's slots in its range.
func TestSchedulerAcrossDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	for _, day := range dstDays {
		for pi, policy := range []string{schedule.DSTVixie, schedule.DSTOncePerLocalTime} {
			t.Run(day.name+"/"+policy, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				ctx := context.Background()
				date, err := time.ParseInLocation("2006-01-02", day.date, ny)
				require.NoError(t, err)
				from, to := date.UTC(), date.AddDate(0, 0, 1).UTC()
				require.Equal(t, time.Duration(day.hours)*time.Hour, to.Sub(from))
				last := to.Add(-time.Second) // end_at is inclusive

				create := func(expr, name string, start, end time.Time) service.Task {
					task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
						Name: name, EndpointID: f.endpoint,
						Schedule: schedule.Spec{
							Type: schedule.Cron, Cron: expr, Timezone: "America/New_York",
							DSTPolicy: policy, StartAt: &start, EndAt: &end,
						},
					})
					require.NoError(t, err)
					return task
				}
				preview := func(id string, from, to time.Time) []string {
					p, err := f.tasks.Preview(ctx, f.tenant, id, schedule.PreviewMax)
					require.NoError(t, err)
					var out []string
					for _, at := range p.Fires {
						if !at.Before(from) && at.Before(to) {
							out = append(out, at.UTC().Format(time.RFC3339Nano))
						}
					}
					return out
				}
				slotsOf := func(sql string, args ...any) []string {
					rows, err := f.pool.Query(ctx, sql, args...)
					require.NoError(t, err)
					defer rows.Close()
					var out []string
					for rows.Next() {
						var at time.Time
						require.NoError(t, rows.Scan(&at))
						out = append(out, at.UTC().Format(time.RFC3339Nano))
					}
					require.NoError(t, rows.Err())
					return out
				}

				// The scheduler, its clock stepped to each next slot.
				tasks := map[string]service.Task{}
				for expr := range day.fires {
					tasks[expr] = create(expr, fmt.Sprintf("tick.%d", len(tasks)), from, last)
				}
				now := from.Add(-time.Minute)
				s := f.scheduler(service.SchedulerConfig{Now: func() time.Time { return now }})
				for passes := 0; ; passes++ {
					require.Less(t, passes, 5000, "the passes end")
					res, err := s.Tick(ctx)
					require.NoError(t, err)
					if res.More {
						continue
					}
					var next *time.Time
					require.NoError(t, f.pool.QueryRow(ctx, `SELECT min(next_run_at) FROM tasks WHERE state = 'active'`).Scan(&next))
					if next == nil {
						break
					}
					if !next.After(now.Add(s.Config().LookAhead)) {
						require.Positive(t, res.Tasks, "a pass at %s claims the task due at %s", now, next)
						continue
					}
					now = *next
				}
				for expr, task := range tasks {
					want := day.fires[expr][pi]
					got := slotsOf(`SELECT scheduled_for FROM executions WHERE task_id = $1 ORDER BY scheduled_for`, task.ID)
					require.Equal(t, preview(task.ID, from, to), got, "%s (%s) on %s: the executions are the preview's slots", expr, policy, day.date)
					require.Len(t, got, want, "%s (%s) on %s", expr, policy, day.date)
					for _, at := range day.at[expr] {
						require.Contains(t, got, at, "%s (%s)", expr, policy)
					}
					require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND (late OR trigger <> 'schedule')`, task.ID),
						"%s (%s): every slot fired on time", expr, policy)
					final, err := f.tasks.Get(ctx, f.tenant, task.ID)
					require.NoError(t, err)
					require.Zero(t, final.MissedCount, "%s (%s)", expr, policy)
					require.Equal(t, service.TaskCompleted, final.State, "%s (%s): the task ends at end_at", expr, policy)
				}

				// A backfill of the same change a year earlier (a backfill
				// runs past slots), on tasks whose schedules start the day
				// before: its range alone bounds it.
				// The slots it must plan are the schedule's in its range.
				pastDate, err := time.ParseInLocation("2006-01-02", day.past, ny)
				require.NoError(t, err)
				from, to = pastDate.UTC(), pastDate.AddDate(0, 0, 1).UTC()
				require.Equal(t, time.Duration(day.hours)*time.Hour, to.Sub(from))
				backfills := service.NewBackfills(f.pool, f.enq, f.tasks)
				for i, expr := range []string{"30 2 * * *", "30 1 * * *", "30 * * * *", "*/10 1 * * *", "*/15 * * * *"} {
					start := from.AddDate(0, 0, -1) // no end_at: one that has passed is refused
					task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
						Name: fmt.Sprintf("backfill.%d", i), EndpointID: f.endpoint,
						Schedule: schedule.Spec{Type: schedule.Cron, Cron: expr, Timezone: "America/New_York", DSTPolicy: policy, StartAt: &start},
					})
					require.NoError(t, err)
					sched, err := schedule.Parse(task.Schedule, task.CreatedAt)
					require.NoError(t, err)
					var want []string
					for at, ok := sched.Next(from.Add(-time.Nanosecond)); ok && at.Before(to); at, ok = sched.Next(at) {
						want = append(want, at.UTC().Format(time.RFC3339Nano))
					}
					require.Len(t, want, day.fires[expr][pi], "%s (%s): the slots of %s", expr, policy, day.past)
					in := service.BackfillInput{From: from, To: to, MaxConcurrency: service.BackfillConcurrencyMax, DryRun: true}
					_, plan, err := backfills.Create(ctx, f.tenant, task.ID, in)
					require.NoError(t, err)
					var planned []string
					for _, p := range plan {
						require.Equal(t, service.SlotCreate, p.Action)
						planned = append(planned, p.ScheduledFor.UTC().Format(time.RFC3339Nano))
					}
					require.Equal(t, want, planned, "%s (%s): the dry run plans the preview's slots", expr, policy)
					in.DryRun = false
					b, _, err := backfills.Create(ctx, f.tenant, task.ID, in)
					require.NoError(t, err)
					require.Equal(t, len(want), b.Total)
					for range 3 {
						_, err := backfills.Pump(ctx)
						require.NoError(t, err)
					}
					b, err = backfills.Get(ctx, f.tenant, b.ID)
					require.NoError(t, err)
					require.Equal(t, len(want), b.Created, "%s (%s): the backfill created every slot", expr, policy)
					got := slotsOf(`SELECT scheduled_for FROM executions WHERE task_id = $1 AND trigger = 'backfill' ORDER BY scheduled_for`, task.ID)
					require.Equal(t, want, got, "%s (%s): the backfill created exactly the preview's slots", expr, policy)
					require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND trigger <> 'backfill'`, task.ID))
				}
			})
		}
	}
}
