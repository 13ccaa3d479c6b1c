package service

import (
	"context"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/db"
)

// An operator's hold on one pending execution. Held is a flag on pending
// (executions.held_at), not a state of its own: a held execution is still
// pending to everything else (a cancel, a schedule change, a paused task,
// the pending lists), but it does not start. That is a rule of the start
// decision (decideStart parks it: the job that comes for it ends and
// writes nothing; db.StartsWithoutDecision leaves it to the row-by-row
// path), not a check of the worker. A held execution holds no later one
// of its task back (the overlap count leaves it out), and the reconciler
// does not resume it. Its release clears the flag and gives it a new
// deliver job, due at its slot or now, in one transaction: the job's
// Begin decides as for any first fire, so a release after the misfire
// threshold is a misfire its task's misfire_policy decides.

// Execution timeline events of a hold.
const (
	EventHeld     = "held"
	EventReleased = "released"
)

// heldOf reports whether an operator holds the execution row: held_at is
// set and it is pending (a final execution keeps held_at as it was).
func heldOf(row db.Execution) bool { return row.HeldAt != nil && row.State == ExecPending }

// Hold holds a pending execution: it does not start until it is
// released, whenever its job comes for it. A held execution can be
// cancelled. An execution that started or ended, or is held already, is a
// conflict.
func (s *Executions) Hold(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	var done ended
	out, err := s.change(ctx, tenant, id, AuditHold, &done, func(tx db.Tx, row db.Execution) error {
		switch {
		case row.State != ExecPending:
			return conflictf("the execution is %s; only a pending execution can be held", row.State)
		case heldOf(row):
			return conflictf("the execution is held already")
		}
		ok, err := db.HoldExecution(ctx, tx, tenant, row.ID)
		if err != nil {
			return storeError(err, "hold execution")
		}
		if !ok { // the row is locked: cannot happen
			return conflictf("the execution changed state; try again")
		}
		return nil
	})
	if err != nil {
		return ExecutionDetail{}, err
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// Release lets a held execution start: at its slot when that is still
// ahead, else now. It gets a new deliver job (not unique: a finished job
// with the same args must not stand in for it) whose leases are above
// every lease its earlier jobs could use, recorded as its river_job_id in
// the transaction that clears the hold, so that an earlier job still
// queued or running finds it another job's and leaves it; a queued one is
// cancelled. The new job's Begin decides as for any fire: a slot now more
// than the misfire threshold ago is a misfire, which the task's
// misfire_policy sends late or misses. An execution that is not held is a
// conflict.
func (s *Executions) Release(ctx context.Context, tenant, id string) (ExecutionDetail, error) {
	var done ended
	out, err := s.change(ctx, tenant, id, AuditRelease, &done, func(tx db.Tx, row db.Execution) error {
		if !heldOf(row) {
			return conflictf("the execution is not held (it is %s)", row.State)
		}
		c, err := db.GetReleaseCarrier(ctx, tx, tenant, row.ID, reconcileLeaseCeiling)
		if err != nil {
			return storeError(err, "load execution")
		}
		// The jobs that carried it until now: a queued one is cancelled; a
		// running one (a worker waiting for the slot, or parking it) will
		// find it another job's.
		earlier, err := db.ExecutionJobs(ctx, tx, DeliverArgs{}.Kind(), tenant, row.ID, row.RiverJobID)
		if err != nil {
			return storeError(err, "list execution jobs")
		}
		for _, j := range earlier {
			switch rivertype.JobState(j.State) {
			case rivertype.JobStateRunning, rivertype.JobStateCompleted:
			default:
				if err := s.enq.cancelTx(ctx, tx, j.ID); err != nil {
					return err
				}
			}
		}
		args := DeliverArgs{TenantID: tenant, ExecutionID: row.ID, LeaseBase: c.LeaseCeiling, EndpointID: c.EndpointID}
		opts := &river.InsertOpts{Queue: QueueDeliver, Priority: c.Priority, MaxAttempts: handOffMaxAttempts}
		data := map[string]any{}
		if c.ScheduledFor.After(c.Now) {
			// The worker waits for the slot by the database's clock, as for
			// a scheduled fire.
			args.ScheduledFor = c.ScheduledFor.UTC()
			if due := c.ScheduledFor.Add(-s.cfg.FetchAhead); due.After(c.Now) {
				opts.ScheduledAt = due
			}
			data["starts_at"] = args.ScheduledFor
		}
		jobs, err := s.enq.insertMany(ctx, tx, []river.InsertManyParams{{Args: args, InsertOpts: opts}})
		if err != nil {
			return err
		}
		data["job_id"] = jobs[0].Job.ID
		ok, err := db.ReleaseExecution(ctx, tx, tenant, row.ID, jobs[0].Job.ID, data)
		if err != nil {
			return storeError(err, "release execution")
		}
		if !ok { // the row is locked: cannot happen
			return conflictf("the execution changed state; try again")
		}
		return nil
	})
	if err != nil {
		return ExecutionDetail{}, err
	}
	done.report(s.cfg.Metrics)
	return out, nil
}
