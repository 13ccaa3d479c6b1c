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
				task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
					Name: "hourly", EndpointID: f.endpoint,
					Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *"}, Retry: service.RetryPolicy{MaxAttempts: 1},
				})
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

// TestFailedForGoodClearedByARerun: a slot's failure is failed for good
// (Executions.FailedSince, the console's alerts) until a backfill re-runs
// the slot: a later round that succeeds clears it, one that fails is
// listed instead, for a task's slots and for a workflow's.
func TestFailedForGoodClearedByARerun(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	slot := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	in := service.BackfillInput{From: slot, To: slot.Add(time.Minute)}
	failed := func() []string {
		t.Helper()
		xs, err := f.ex.FailedSince(ctx, f.tenant, time.Now().Add(-time.Hour), 50)
		require.NoError(t, err)
		var ids []string
		for _, x := range xs {
			ids = append(ids, x.ID)
		}
		return ids
	}
	send := func(id string, ok bool) {
		t.Helper()
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

	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "hourly", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *"}, Retry: service.RetryPolicy{MaxAttempts: 1},
	})
	require.NoError(t, err)
	rerun := func(mode string) string {
		t.Helper()
		r := in
		r.Rerun = mode
		_, _, err := bf.Create(ctx, f.tenant, task.ID, r)
		require.NoError(t, err)
		_, err = bf.Pump(ctx)
		require.NoError(t, err)
		ids := f.ids(t, `SELECT id::text FROM executions WHERE task_id = $1 AND state = 'pending'`, task.ID)
		require.Len(t, ids, 1)
		return ids[0]
	}
	round1 := rerun(service.RerunMissing)
	send(round1, false)
	require.Equal(t, []string{round1}, failed())
	round2 := rerun(service.RerunFailed)
	require.Empty(t, failed(), "a re-run under way supersedes the failure")
	send(round2, false)
	require.Equal(t, []string{round2}, failed(), "the failed re-run is listed, not both")
	round3 := rerun(service.RerunFailed)
	send(round3, true)
	require.Empty(t, failed(), "the slot's latest round succeeded")

	// A workflow's slot: its run's failed step, until a later run of the
	// slot succeeds.
	w := f.scheduled(t, "hourly", 10)
	runOf := func(mode string) string {
		t.Helper()
		r := in
		r.Rerun = mode
		b, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, r)
		require.NoError(t, err)
		_, err = bf.Pump(ctx)
		require.NoError(t, err)
		ids := f.backfillRuns(t, b.ID, `true`)
		require.Len(t, ids, 1)
		return ids[0]
	}
	run1 := runOf(service.RerunMissing)
	f.deliver(t, run1, "a", false)
	f.deliver(t, run1, "b", true) // all_done: the run ends failed
	step := f.execsOf(t, run1, "a")
	require.Equal(t, step, failed())
	run2 := runOf(service.RerunFailed)
	f.deliver(t, run2, "a", true)
	f.deliver(t, run2, "b", true)
	require.Empty(t, failed(), "the slot's latest run succeeded")
}

// TestBackfillRefusesSlotsToCome: a backfill runs past slots; a range
// that reaches into the future is a 422 on "to" (a future slot would be
// sent now, early, and the scheduler's fire of it dropped), for tasks and
// workflows alike, and nothing is created.
func TestBackfillRefusesSlotsToCome(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "hourly", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *"},
	})
	require.NoError(t, err)
	w := f.scheduled(t, "hourly-wf", 10)
	from := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	in := service.BackfillInput{From: from, To: from.Add(6 * time.Hour)}
	for _, create := range []func() error{
		func() error { _, _, err := bf.Create(ctx, f.tenant, task.ID, in); return err },
		func() error { _, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, in); return err },
		func() error {
			dry := in
			dry.DryRun = true
			_, _, err := bf.Create(ctx, f.tenant, task.ID, dry)
			return err
		},
	} {
		err := create()
		var ve *service.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Len(t, ve.Fields, 1)
		require.Equal(t, "to", ve.Fields[0].Field)
		require.Contains(t, ve.Fields[0].Message, "lies in the future")
	}
	require.Zero(t, f.count(t, `SELECT count(*) FROM backfills`))
	// Up to now is a backfill.
	in.To = time.Now().UTC().Add(-time.Second)
	_, _, err = bf.Create(ctx, f.tenant, task.ID, in)
	require.NoError(t, err)
}
