// Package reconcile guards the invariant that every unfinished execution
// is carried by a live River job (docs/architecture.md,
// "Reconciliation").
package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/queue"
)

// Reconciliation: the guard of the invariant that every unfinished
// execution is carried by a live River job. Delivery keeps it by itself —
// the scheduler inserts executions with their jobs, a hand-off records the
// new job in the transaction that inserts it, and every transition that
// ends an execution commits durably before its job is marked finished — so
// an execution that breaks it was left by a fault outside ax's control or
// by an operator: a job cancelled or deleted by hand in River UI, a job
// discarded after 25 runs while the database was unreachable, an outcome
// lost with a storage that acknowledged an fsync it did not do. Without
// the guard such an execution would stay unfinished for ever, and an
// overlap_policy skip task would skip every later fire.
const (
	// AfterDefault is how long after its slot an unfinished execution may
	// go without a live job before it is resumed.
	AfterDefault = 30 * time.Second
	// batch bounds the executions one pass resumes.
	batch = 500
)

// Reconciler resumes the executions no live River job carries.
type Reconciler struct {
	Pool     *db.Pool
	Enqueuer *queue.Enqueuer
	Logger   *slog.Logger
	// Event is the timeline event of a resumed execution.
	Event string
	// MaxAttempts is the River attempts of a job that continues an
	// execution (a hand-off's); LeaseCeiling is above every lease its
	// earlier jobs could have used.
	MaxAttempts int
}

// LeaseCeiling is the last lease a job inserted with an execution may
// use: a deliver_batch job's River attempts, or a single fire's deliver
// job's (its task's max_attempts plus the margin, within MaxAttempts).
func (r Reconciler) LeaseCeiling() int { return max(queue.BatchMaxAttempts, r.MaxAttempts) }

// Run resumes the unfinished executions whose slot is more than
// olderThan ago and that no live River job carries: each gets a new
// deliver job, available at once, whose leases are above every lease its
// earlier jobs could have used, recorded as its river_job_id in the same
// transaction, with a reconciled event that says which job it lost. The
// new job's Begin decides as for any run (decideStart): a cancel requested
// meanwhile cancels it, a run that was interrupted resumes with the same
// idempotency key as the next attempt (or fails when none is left), a
// first fire picked up late follows the misfire policy. Replicas take
// turns; it returns how many executions it resumed.
func (r Reconciler) Run(ctx context.Context, olderThan time.Duration) (int, error) {
	resumed := 0
	err := db.InReconcileTurn(ctx, r.Pool, func(tx db.Tx) error {
		resumed = 0
		orphans, err := db.FindOrphanedExecutions(ctx, tx, olderThan, batch, r.LeaseCeiling())
		if err != nil || len(orphans) == 0 {
			return err
		}
		for _, o := range orphans {
			msg, data := describe(o)
			ok, err := Resume(ctx, tx, r.Enqueuer, o, r.MaxAttempts, r.Event, msg, data)
			if err != nil {
				return err
			}
			if ok {
				resumed++
				r.Logger.Warn("resumed an execution no job carried", "tenant", o.TenantID, "execution_id", o.ID,
					"state", o.State, "reason", msg)
			}
		}
		return nil
	})
	return resumed, errs.Store(err, "reconcile")
}

// Resume gives orphaned execution o a new deliver job of maxAttempts
// River attempts, available at once, whose leases are above every lease
// its earlier jobs could have used, records it as the execution's
// river_job_id and appends an event (the job's id is appended to message
// and added to data). It reports false, and leaves nothing, when the
// execution changed since it was read.
func Resume(ctx context.Context, tx db.Tx, enq *queue.Enqueuer, o db.OrphanedExecution, maxAttempts int, event, message string,
	data map[string]any,
) (bool, error) {
	jobs, err := enq.Enqueue(ctx, tx, []river.InsertManyParams{{
		Args: job.DeliverArgs{TenantID: o.TenantID, ExecutionID: o.ID, LeaseBase: o.LeaseCeiling},
		// Not unique: a finished job with the same args must not stand in
		// for this one.
		InsertOpts: &river.InsertOpts{Queue: queue.Deliver, Priority: o.Priority, MaxAttempts: maxAttempts},
	}})
	if err != nil {
		return false, err
	}
	id := jobs[0].Job.ID
	data["job_id"] = id
	message += fmt.Sprintf("; resumed by job %d with the same idempotency key", id)
	ok, err := db.ResumeOrphaned(ctx, tx, o.TenantID, o.ID, o.RiverJobID, id, event, message, data)
	if err != nil || ok {
		return ok, errs.Store(err, "resume orphaned execution")
	}
	return false, enq.DeleteTx(ctx, tx, id)
}

// describe is a reconciled event's message and data.
func describe(o db.OrphanedExecution) (string, map[string]any) {
	data := map[string]any{"state": o.State}
	lost := "its River job is gone"
	switch {
	case o.RiverJobID == nil:
		lost = "no live River job carried it"
	case o.JobState != nil:
		data["previous_job_id"], data["previous_job_state"] = *o.RiverJobID, *o.JobState
		lost = fmt.Sprintf("its River job %d is %s", *o.RiverJobID, *o.JobState)
	default:
		data["previous_job_id"] = *o.RiverJobID
	}
	return fmt.Sprintf("the execution was %s but %s", o.State, lost), data
}
