package execution

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/queue"
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

// Held reports whether an operator holds the execution row: held_at is
// set and it is pending (a final execution keeps held_at as it was).
func Held(row db.Execution) bool { return row.HeldAt != nil && row.State == lifecycle.ExecPending }

// Hold holds row, a pending execution locked in tx: it does not start
// until it is released, whenever its job comes for it. A held execution
// can be cancelled. An execution that started or ended, or is held
// already, is a conflict.
func Hold(ctx context.Context, tx db.Tx, tenant string, row db.Execution) error {
	switch {
	case row.State != lifecycle.ExecPending:
		return errs.Conflictf("the execution is %s; only a pending execution can be held", row.State)
	case Held(row):
		return errs.Conflictf("the execution is held already")
	}
	ok, err := db.HoldExecution(ctx, tx, tenant, row.ID)
	if err != nil {
		return errs.Store(err, "hold execution")
	}
	if !ok { // the row is locked: cannot happen
		return errs.Conflictf("the execution changed state; try again")
	}
	return nil
}

// Release lets row, a held execution locked in tx, start: at its slot
// when that is still ahead (its job due fetchAhead before it), else now.
// It gets a new deliver job of maxAttempts River attempts (not unique: a
// finished job with the same args must not stand in for it) whose leases
// are above leaseCeiling, every lease its earlier jobs could use,
// recorded as its river_job_id in the transaction that clears the hold,
// so that an earlier job still queued or running finds it another job's
// and leaves it; a queued one is cancelled. The new job's Begin decides
// as for any fire: a slot now more than the misfire threshold ago is a
// misfire, which the task's misfire_policy sends late or misses. An
// execution that is not held is a conflict.
func Release(ctx context.Context, tx db.Tx, enq *queue.Enqueuer, tenant string, row db.Execution, fetchAhead time.Duration,
	maxAttempts, leaseCeiling int,
) error {
	if !Held(row) {
		return errs.Conflictf("the execution is not held (it is %s)", row.State)
	}
	c, err := db.GetReleaseCarrier(ctx, tx, tenant, row.ID, leaseCeiling)
	if err != nil {
		return errs.Store(err, "load execution")
	}
	// The jobs that carried it until now: a queued one is cancelled; a
	// running one (a worker waiting for the slot, or parking it) will
	// find it another job's.
	earlier, err := db.ExecutionJobs(ctx, tx, job.DeliverArgs{}.Kind(), tenant, row.ID, row.RiverJobID)
	if err != nil {
		return errs.Store(err, "list execution jobs")
	}
	for _, j := range earlier {
		switch rivertype.JobState(j.State) {
		case rivertype.JobStateRunning, rivertype.JobStateCompleted:
		default:
			if err := enq.CancelTx(ctx, tx, j.ID); err != nil {
				return err
			}
		}
	}
	args := job.DeliverArgs{TenantID: tenant, ExecutionID: row.ID, LeaseBase: c.LeaseCeiling, EndpointID: c.EndpointID}
	opts := &river.InsertOpts{Queue: queue.Deliver, Priority: c.Priority, MaxAttempts: maxAttempts}
	data := map[string]any{}
	if c.ScheduledFor.After(c.Now) {
		// The worker waits for the slot by the database's clock, as for
		// a scheduled fire.
		args.ScheduledFor = c.ScheduledFor.UTC()
		if due := c.ScheduledFor.Add(-fetchAhead); due.After(c.Now) {
			opts.ScheduledAt = due
		}
		data["starts_at"] = args.ScheduledFor
	}
	jobs, err := enq.Enqueue(ctx, tx, []river.InsertManyParams{{Args: args, InsertOpts: opts}})
	if err != nil {
		return err
	}
	data["job_id"] = jobs[0].Job.ID
	ok, err := db.ReleaseExecution(ctx, tx, tenant, row.ID, jobs[0].Job.ID, data)
	if err != nil {
		return errs.Store(err, "release execution")
	}
	if !ok { // the row is locked: cannot happen
		return errs.Conflictf("the execution changed state; try again")
	}
	return nil
}
