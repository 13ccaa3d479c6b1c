package service_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// scheduled creates a workflow a → b (all_done: a failed a ends the run
// failed rather than blocked) on an hourly schedule.
func (f *wfFixture) scheduled(t *testing.T, name string, maxActive int, cals ...string) service.Workflow {
	t.Helper()
	b := f.node("b", "a")
	b.TriggerRule = service.RuleAllDone
	w, err := f.wf.Create(context.Background(), f.tenant, service.WorkflowInput{
		Name: name, MaxActiveRuns: maxActive,
		Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *", Timezone: "UTC", ExcludeCalendars: cals},
		Nodes:    []service.WorkflowNodeInput{f.node("a"), b},
	})
	require.NoError(t, err)
	return w
}

// unfinishedRuns lists a backfill's runs that are not final.
func (f *wfFixture) backfillRuns(t *testing.T, backfillID, where string) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT id::text FROM workflow_runs WHERE backfill_id = $1 AND `+where+
		` ORDER BY scheduled_for`, backfillID)
	require.NoError(t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

// drive pumps the backfill and delivers its runs' nodes (ok, or a to fail
// for the slots fail says) until it ends, checking the concurrency bound
// at every step; it returns the deliveries of node a.
func (f *wfFixture) drive(t *testing.T, bf *service.Backfills, backfillID string, maxConc int, fail func(time.Time) bool) []service.Delivery {
	t.Helper()
	ctx := context.Background()
	var roots []service.Delivery
	for range 200 {
		_, err := bf.Pump(ctx)
		require.NoError(t, err)
		b, err := bf.Get(ctx, f.tenant, backfillID)
		require.NoError(t, err)
		if b.State != service.BackfillRunning {
			return roots
		}
		live := f.backfillRuns(t, backfillID, `state IN ('pending', 'running', 'blocked')`)
		require.LessOrEqual(t, len(live), maxConc, "at most max_concurrency runs unfinished")
		for _, id := range live {
			r, err := f.wf.GetRun(ctx, f.tenant, id)
			require.NoError(t, err)
			if r.State != service.RunRunning {
				continue
			}
			ok := fail == nil || !fail(r.ScheduledFor)
			roots = append(roots, f.deliver(t, id, "a", ok)...)
			f.deliver(t, id, "b", true)
		}
	}
	t.Fatal("the backfill did not end")
	return nil
}

func TestWorkflowBackfill(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	w := f.scheduled(t, "wf-backfill", 10)
	from := time.Now().UTC().Truncate(time.Hour).Add(-10 * time.Hour)
	to := from.Add(6 * time.Hour)

	// Dry run: six slots, all to create, nothing stored.
	_, plan, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: to, DryRun: true})
	require.NoError(t, err)
	require.Len(t, plan, 6)
	for i, s := range plan {
		require.Equal(t, from.Add(time.Duration(i)*time.Hour), s.ScheduledFor)
		require.Equal(t, service.SlotCreate, s.Action)
		require.Equal(t, 1, s.Round)
	}
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID))

	// missing: six runs of round 1, at most 2 unfinished; the slot at
	// from+2h fails.
	b, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: to, MaxConcurrency: 2})
	require.NoError(t, err)
	require.Equal(t, w.ID, b.WorkflowID)
	require.Empty(t, b.TaskID)
	require.Equal(t, 6, b.Total)
	failAt := from.Add(2 * time.Hour)
	roots := f.drive(t, bf, b.ID, 2, func(at time.Time) bool { return at.Equal(failAt) })
	require.Len(t, roots, 6)
	for _, d := range roots {
		require.Equal(t, service.TriggerBackfill, d.Trigger, "a backfilled run's roots are backfill executions")
		require.Equal(t, 1, d.Round)
	}
	b, err = bf.Get(ctx, f.tenant, b.ID)
	require.NoError(t, err)
	require.Equal(t, service.BackfillFailed, b.State) // one run failed
	require.Equal(t, 6, b.Created)
	require.Equal(t, 5, b.Succeeded)
	require.Equal(t, 6, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1 AND trigger = 'backfill' AND round = 1`, w.ID))
	require.Equal(t, 1, b.Failed)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM workflow_runs WHERE backfill_id = $1 AND state = 'failed'`, b.ID))

	// failed: only the failed slot is re-run, as round 2.
	_, plan, err = bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: to, Rerun: service.RerunFailed, DryRun: true})
	require.NoError(t, err)
	for _, s := range plan {
		if s.ScheduledFor.Equal(failAt) {
			require.Equal(t, service.BackfillSlot{ScheduledFor: failAt, Round: 2, Action: service.SlotRerun}, s)
		} else {
			require.Equal(t, service.SlotKeep, s.Action)
		}
	}
	b2, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: to, Rerun: service.RerunFailed})
	require.NoError(t, err)
	require.Equal(t, 1, b2.Total)
	roots = f.drive(t, bf, b2.ID, 4, nil)
	require.Len(t, roots, 1)
	require.Equal(t, 2, roots[0].Round, "a re-run's executions carry its round (X-Ax-Round)")
	require.Equal(t, failAt, roots[0].ScheduledFor.UTC(), "X-Ax-Scheduled-For is the slot")
	b2, err = bf.Get(ctx, f.tenant, b2.ID)
	require.NoError(t, err)
	require.Equal(t, service.BackfillSucceeded, b2.State)
	require.Equal(t, 1, b2.Succeeded)

	// missing again: nothing to do, the backfill is done at once.
	b3, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: to})
	require.NoError(t, err)
	require.Equal(t, 0, b3.Total)
	require.Equal(t, service.BackfillSucceeded, b3.State)

	// all: every slot once more; the lists filter by workflow.
	b4, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: to, Rerun: service.RerunAll, MaxConcurrency: 3})
	require.NoError(t, err)
	require.Equal(t, 6, b4.Total)
	f.drive(t, bf, b4.ID, 3, nil)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1 AND scheduled_for = $2 AND round = 3`, w.ID, failAt))
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM (SELECT scheduled_for, round FROM workflow_runs WHERE workflow_id = $1
		GROUP BY 1, 2 HAVING count(*) > 1) d`, w.ID), "no slot's round twice")
	list, _, err := bf.List(ctx, f.tenant, service.BackfillFilter{WorkflowID: w.ID}, service.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, list, 4)
}

func TestWorkflowBackfillRefusals(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "minutely", MaxActiveRuns: 1,
		Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "* * * * *", Timezone: "UTC"},
		Nodes:    []service.WorkflowNodeInput{f.node("a")},
	})
	require.NoError(t, err)
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, _, err = bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: from.Add(8 * 24 * time.Hour)})
	var ve *service.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Contains(t, ve.Error(), "more than 10000 slots")

	manual := f.create(t, "manual", f.node("a"))
	_, _, err = bf.CreateForWorkflow(ctx, f.tenant, manual.ID, service.BackfillInput{From: from, To: from.Add(time.Hour)})
	require.ErrorAs(t, err, &ve)
	require.Contains(t, ve.Error(), "no schedule")

	_, _, err = bf.CreateForWorkflow(ctx, "other-tenant", w.ID, service.BackfillInput{From: from, To: from.Add(time.Hour)})
	require.ErrorIs(t, err, service.ErrNotFound)
	_, _, err = bf.CreateForWorkflow(ctx, f.tenant, "nope", service.BackfillInput{From: from, To: from.Add(time.Hour)})
	require.ErrorIs(t, err, service.ErrNotFound)
}

// A cancel cancels the runs not started (waiting for max_active_runs);
// the started one goes on.
func TestWorkflowBackfillCancel(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	w := f.scheduled(t, "wf-cancel", 1)
	from := time.Now().UTC().Truncate(time.Hour).Add(-10 * time.Hour)
	b, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: from.Add(5 * time.Hour), MaxConcurrency: 3})
	require.NoError(t, err)
	_, err = bf.Pump(ctx)
	require.NoError(t, err)
	require.Len(t, f.backfillRuns(t, b.ID, `state = 'running'`), 1)
	require.Len(t, f.backfillRuns(t, b.ID, `state = 'pending'`), 2)
	b, err = bf.Cancel(ctx, f.tenant, b.ID)
	require.NoError(t, err)
	require.Equal(t, service.BackfillCancelled, b.State)
	require.Len(t, f.backfillRuns(t, b.ID, `state = 'cancelled'`), 2)
	require.Len(t, f.backfillRuns(t, b.ID, `state = 'running'`), 1)
	_, err = bf.Pump(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, f.count(t, `SELECT count(*) FROM workflow_runs WHERE backfill_id = $1`, b.ID), "nothing more is created")
}

// Four pumps (replicas, or a restarted ax beside the old one) and four
// backfills of the same range: each slot's round is created once, and a
// fresh Backfills (a restart) resumes where the last commit left off.
func TestWorkflowBackfillConcurrentAndRestart(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.scheduled(t, "wf-race", 1000)
	from := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
	var ids []string
	for range 4 {
		b, _, err := service.NewBackfills(f.pool, f.enq, f.tasks).CreateForWorkflow(ctx, f.tenant, w.ID,
			service.BackfillInput{From: from, To: from.Add(24 * time.Hour), Rerun: service.RerunAll, MaxConcurrency: 5})
		require.NoError(t, err)
		ids = append(ids, b.ID)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bf := service.NewBackfills(f.pool, f.enq, f.tasks) // a replica of its own
			for range 3 {
				_, err := bf.Pump(ctx)
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM (SELECT scheduled_for, round FROM workflow_runs WHERE workflow_id = $1
		GROUP BY 1, 2 HAVING count(*) > 1) d`, w.ID), "no slot's round twice")
	for _, id := range ids {
		require.LessOrEqual(t, len(f.backfillRuns(t, id, `state IN ('pending', 'running', 'blocked')`)), 5)
		var created, next int
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT created, next_index FROM backfills WHERE id = $1`, id).Scan(&created, &next))
		require.Equal(t, created, f.count(t, `SELECT count(*) FROM workflow_runs WHERE backfill_id = $1`, id),
			"the progress commits with the runs")
	}
	// A restart: a new Backfills drives them all to the end.
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	for _, id := range ids {
		f.drive(t, bf, id, 5, nil)
	}
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM (SELECT scheduled_for, round FROM workflow_runs WHERE workflow_id = $1
		GROUP BY 1, 2 HAVING count(*) > 1) d`, w.ID))
	require.Equal(t, 24, f.count(t, `SELECT count(DISTINCT scheduled_for) FROM workflow_runs WHERE workflow_id = $1`, w.ID))
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM (SELECT task_id, scheduled_for, round, shard FROM executions
		WHERE workflow_id = $1 AND node = 'a' GROUP BY 1, 2, 3, 4 HAVING count(*) > 1) d`, w.ID))
}
