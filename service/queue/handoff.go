package queue

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/job"
)

// HandOff inserts in tx a job.DeliverArgs job for each of refs that
// continues it outside its batch job (HandOffInsert: available at at, at
// once when zero, with leases above leaseBase — the batch's own lease, so
// that the new job's attempts are newer than the batch's — and maxAttempts
// River attempts), and records the job as the execution's (river_job_id):
// from then on the batch, run again or not, leaves the execution alone. An
// execution that already has a live or completed deliver job keeps it (the
// jobs are unique per execution) and that job is recorded instead; the
// job's Begin decides what an execution still needs, which may be nothing.
func (e *Enqueuer) HandOff(ctx context.Context, tx db.Tx, refs []job.ExecutionRef, leaseBase, priority, maxAttempts int,
	at time.Time, q string,
) error {
	seen := make(map[job.ExecutionRef]bool, len(refs))
	params := make([]river.InsertManyParams, 0, len(refs))
	owned := make([]db.ExecutionRef, 0, len(refs))
	for _, r := range refs {
		if seen[r] { // the same key twice aborts a unique InsertMany
			continue
		}
		seen[r] = true
		params = append(params, HandOffInsert(r, leaseBase, priority, maxAttempts, at, q))
		owned = append(owned, db.ExecutionRef{TenantID: r.TenantID, ID: r.ExecutionID})
	}
	res, err := e.Enqueue(ctx, tx, params)
	if err != nil {
		return err
	}
	jobIDs := make([]int64, len(res))
	for i, r := range res {
		jobIDs[i] = r.Job.ID
	}
	return errs.Store(db.SetExecutionJobs(ctx, tx, owned, jobIDs), "record hand-off jobs")
}
