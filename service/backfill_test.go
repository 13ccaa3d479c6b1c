package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// TestBackfillConcurrency runs the one concurrency check of a backfill
// through both its targets, a task's executions and a workflow's runs:
// each pump pass tops the backfill up to max_concurrency unfinished and
// never beyond, starts nothing while the target is paused, and once every
// slot ran the backfill ends, failed when one of them failed.
func TestBackfillConcurrency(t *testing.T) {
	t.Parallel()
	const slots, maxConc = 5, 2
	for _, target := range []string{"task", "workflow"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			f := newWFFixture(t)
			ctx := context.Background()
			bf := service.NewBackfills(f.pool, f.enq, f.tasks)
			from := time.Now().UTC().Truncate(time.Hour).Add(-10 * time.Hour)
			in := service.BackfillInput{From: from, To: from.Add(slots * time.Hour), MaxConcurrency: maxConc}

			var (
				b       service.Backfill
				err     error
				pause   func(bool)
				live    func() []string // unfinished executions (runs) of the backfill
				runOne  func(id string, ok bool)
				started = func() int { return f.count(t, `SELECT count(*) FROM executions WHERE backfill_id = $1`, b.ID) }
			)
			if target == "task" {
				task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{Name: "hourly", EndpointID: f.endpoint,
					Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *"}, Retry: service.RetryPolicy{MaxAttempts: 1}})
				require.NoError(t, err)
				b, _, err = bf.Create(ctx, f.tenant, task.ID, in)
				require.NoError(t, err)
				pause = func(on bool) {
					var err error
					if on {
						_, err = f.tasks.Pause(ctx, f.tenant, task.ID)
					} else {
						_, err = f.tasks.Resume(ctx, f.tenant, task.ID)
					}
					require.NoError(t, err)
				}
				live = func() []string {
					return f.ids(t, `SELECT id::text FROM executions WHERE backfill_id = $1 AND state IN ('pending', 'running', 'retrying')
						ORDER BY scheduled_for`, b.ID)
				}
				runOne = func(id string, ok bool) {
					lease := f.count(t, `SELECT lease_attempt + 1 FROM executions WHERE id = $1`, id)
					d, err := f.del.Begin(ctx, f.tenant, id, lease)
					require.NoError(t, err)
					require.Equal(t, service.ActionSend, d.Action, d.Reason)
					o := service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200}
					if !ok {
						o = service.Outcome{Kind: service.OutcomePermanent, StatusCode: 400, ErrorClass: "http_4xx", Error: "HTTP 400"}
					}
					_, err = f.del.Finish(ctx, f.tenant, id, d.Lease, o)
					require.NoError(t, err)
				}
			} else {
				w := f.scheduled(t, "hourly", 10)
				b, _, err = bf.CreateForWorkflow(ctx, f.tenant, w.ID, in)
				require.NoError(t, err)
				pause = func(on bool) {
					var err error
					if on {
						_, err = f.wf.Pause(ctx, f.tenant, w.ID)
					} else {
						_, err = f.wf.Resume(ctx, f.tenant, w.ID)
					}
					require.NoError(t, err)
				}
				live = func() []string { return f.backfillRuns(t, b.ID, `state IN ('pending', 'running', 'blocked')`) }
				runOne = func(id string, ok bool) {
					f.deliver(t, id, "a", ok)
					f.deliver(t, id, "b", true)
				}
				started = func() int { return f.count(t, `SELECT count(*) FROM workflow_runs WHERE backfill_id = $1`, b.ID) }
			}
			pump := func() {
				t.Helper()
				_, err := bf.Pump(ctx)
				require.NoError(t, err)
				require.LessOrEqual(t, len(live()), maxConc, "never more than max_concurrency unfinished")
			}

			pump()
			require.Len(t, live(), maxConc, "a pass tops the backfill up to max_concurrency")
			pump()
			require.Equal(t, maxConc, started(), "and no further")

			runOne(live()[0], false) // the first slot fails
			pump()
			require.Len(t, live(), maxConc)
			require.Equal(t, maxConc+1, started())

			for _, id := range live() {
				runOne(id, true)
			}
			pause(true)
			pump()
			require.Equal(t, maxConc+1, started(), "nothing starts while the target is paused")
			pause(false)

			for range 2 * slots {
				pump()
				got, err := bf.Get(ctx, f.tenant, b.ID)
				require.NoError(t, err)
				if got.State != service.BackfillRunning {
					require.Equal(t, service.BackfillFailed, got.State, "one slot failed")
					require.Equal(t, slots, started())
					require.Equal(t, slots-1, got.Succeeded)
					return
				}
				for _, id := range live() {
					runOne(id, true)
				}
			}
			t.Fatal("the backfill did not end")
		})
	}
}

// ids runs a query of ids.
func (f *fixture) ids(t *testing.T, sql string, args ...any) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}
