package service

import (
	"context"
	"errors"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/schedule"
)

// workflowRetireEvery is how often Workflows.Sweep looks for old versions
// to retire (the backstop: a version is retired in the transaction that
// ends its last run).
const workflowRetireEvery = 30 * time.Second

// withWorkflowCalendars returns sched (nil: none) with the calendars its
// spec excludes; share locks them against a change or delete until the
// transaction ends.
func withWorkflowCalendars(ctx context.Context, q db.Querier, tenant string, sched *schedule.Schedule, share bool) (*schedule.Schedule, error) {
	if sched == nil {
		return nil, nil
	}
	cals, err := loadCalendars(ctx, q, tenant, sched.Spec().ExcludeCalendars, share)
	if err != nil {
		return nil, err
	}
	return sched.Excluding(cals), nil
}

// workflowSchedule parses a workflow's stored schedule (it must have one)
// with its calendars.
func workflowSchedule(ctx context.Context, q db.Querier, tenant string, w Workflow, share bool) (*schedule.Schedule, error) {
	sched, err := parseSchedule(*w.Schedule, w.CreatedAt)
	if err != nil {
		return nil, err
	}
	return withWorkflowCalendars(ctx, q, tenant, sched, share)
}

// isSlot reports whether t is a fire time of sched (nil: none).
func isSlot(sched *schedule.Schedule, t time.Time) bool {
	if sched == nil {
		return false
	}
	next, ok := sched.Next(t.Add(-time.Nanosecond))
	return ok && next.Equal(t)
}

// rescheduleRuns cancels the workflow's scheduled runs materialised ahead
// of now (none of their executions started) whose slot sched (nil: no
// schedule any more) no longer has — a schedule patch, or a calendar that
// now excludes their date — and gives their slots up (rescheduled). The
// caller holds the workflow's row lock; m counts the runs cancelled, done
// their executions.
func rescheduleRuns(ctx context.Context, tx db.Tx, tenant, workflowID string, sched *schedule.Schedule, now time.Time,
	m *metrics.Metrics, done *ended,
) error {
	runs, err := db.FutureScheduledRuns(ctx, tx, tenant, workflowID, now)
	if err != nil {
		return storeError(err, "find future runs")
	}
	for _, r := range runs {
		if isSlot(sched, r.ScheduledFor) {
			continue
		}
		n, err := cancelRunLocked(ctx, tx, r, "the workflow's schedule or calendars no longer have this slot", m)
		if err != nil {
			return err
		}
		done.add(ExecCancelled, n)
		if err := db.MarkRunRescheduled(ctx, tx, tenant, r.ID); err != nil {
			return storeError(err, "reschedule run")
		}
	}
	return nil
}

// cancelRunLocked cancels a run the caller has locked: its nodes that
// have not fired, its executions not started (running ones are asked to
// stop), the run itself. It returns how many executions it cancelled.
// The caller promotes the workflow's pending runs afterwards. m counts
// the run cancelled.
func cancelRunLocked(ctx context.Context, tx db.Tx, run db.WorkflowRun, reason string, m *metrics.Metrics) (int64, error) {
	nodes, err := db.GetRunNodes(ctx, tx, run.TenantID, run.ID)
	if err != nil {
		return 0, storeError(err, "load run nodes")
	}
	var keys, states []string
	for _, n := range nodes {
		if lifecycle.NodeOpen.Has(n.State) {
			keys, states = append(keys, n.Key), append(states, NodeCancelled)
		}
	}
	if err := db.SetRunNodeStates(ctx, tx, run.TenantID, run.ID, keys, states); err != nil {
		return 0, storeError(err, "cancel run nodes")
	}
	n, err := db.CancelRunExecutions(ctx, tx, run.TenantID, run.ID, reason)
	if err != nil {
		return 0, storeError(err, "cancel run executions")
	}
	if err := lifecycle.Runs.Check([]string{run.State}, RunCancelled); err != nil {
		return 0, err
	}
	if err := db.SetWorkflowRunState(ctx, tx, run.TenantID, run.ID, RunCancelled); err != nil {
		return 0, storeError(err, "cancel workflow run")
	}
	m.WorkflowRunFinished(RunCancelled)
	return n, nil
}

// recalendarWorkflow reschedules a workflow whose calendar changed, as
// Tasks.recalendar does a task: its runs materialised ahead for slots the
// calendars now exclude are cancelled, its next slot is recomputed from
// now (active workflows; resume recomputes a paused one's), and its
// schedule version moves on (the scheduler re-reads the calendars). m
// counts the runs cancelled, done their executions.
func recalendarWorkflow(ctx context.Context, tx db.Tx, tenant, id string, m *metrics.Metrics, done *ended) error {
	row, err := db.GetWorkflow(ctx, tx, tenant, id, true)
	if err != nil {
		return storeError(err, "load workflow")
	}
	w, err := workflowFromRow(row)
	if err != nil || w.Schedule == nil {
		return err
	}
	sched, err := workflowSchedule(ctx, tx, tenant, w, false)
	if err != nil {
		return err
	}
	now, err := db.Now(ctx, tx)
	if err != nil {
		return storeError(err, "read the database clock")
	}
	if err := rescheduleRuns(ctx, tx, tenant, id, sched, now, m, done); err != nil {
		return err
	}
	row.ScheduleVersion++
	if row.State == WorkflowActive {
		row.NextRunAt = nil
		if next, ok := sched.Next(now); ok {
			row.NextRunAt = &next
		}
	}
	// A cancelled run leaves room: the sweep starts the pending ones
	// (Workflows.Sweep), as it does after any change made without the
	// engine.
	return storeError(db.UpdateWorkflow(ctx, tx, row), "update workflow")
}

// finishedRun is what the transaction that ends a run does for its
// workflow: it starts the pending runs there is now room for and, when
// the run's version is not the current one any more, retires the old
// versions no unfinished run uses.
//
// Both need the workflow's row lock, which the admissions of the
// workflow's triggers take too; most runs end on the current version
// with no pending run waiting for room (one that is pending only until
// its trigger admits it needs nothing from this run), so a read without
// the lock comes first and the lock is taken only when it finds work. A
// pending run it cannot see yet, or one left pending by an admission
// that still counted this run, is its trigger's or the sweep's
// (Workflows.Sweep promotes a workflow with a pending run and room).
func (e runEngine) finishedRun(ctx context.Context, tx db.Tx, run db.WorkflowRun) error {
	q, err := db.GetWorkflowQueue(ctx, tx, run.TenantID, run.WorkflowID)
	if err = storeError(err, "load workflow"); errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil || (!q.Waiting && run.Version >= q.Version) {
		return err
	}
	cur, err := e.promoteVersion(ctx, tx, run.TenantID, run.WorkflowID)
	if err != nil || cur == 0 || run.Version >= cur {
		return err
	}
	return retireVersions(ctx, tx, run.TenantID, run.WorkflowID)
}

// retireVersions retires the workflow's old versions that no unfinished
// run uses (db.RetireVersions), under the workflow's row lock.
func retireVersions(ctx context.Context, tx db.Tx, tenant, workflowID string) error {
	if _, err := db.RetireVersions(ctx, tx, tenant, workflowID); err != nil {
		return storeError(err, "retire workflow versions")
	}
	return nil
}

// sweepRetire is the backstop of version retirement: it retires the old
// versions whose last run ended without retiring them (a run of an old
// version whose execution was still running, versions older than this
// rule). It runs at most every workflowRetireEvery.
func (s *Workflows) sweepRetire(ctx context.Context) (int, error) {
	s.retireMu.Lock()
	due := time.Since(s.retiredAt) >= workflowRetireEvery
	if due {
		s.retiredAt = time.Now()
	}
	s.retireMu.Unlock()
	if !due {
		return 0, nil
	}
	refs, err := db.WorkflowsWithOldVersions(ctx, s.pool, workflowSweepBatch)
	if err != nil {
		return 0, storeError(err, "find old workflow versions")
	}
	for _, w := range refs {
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			if _, err := db.GetWorkflow(ctx, tx, w.TenantID, w.ID, true); err != nil {
				return storeError(err, "load workflow")
			}
			return retireVersions(ctx, tx, w.TenantID, w.ID)
		})
		if err = storeError(err, "retire workflow versions"); err != nil && !errors.Is(err, ErrNotFound) {
			return 0, err
		}
	}
	return len(refs), nil
}
