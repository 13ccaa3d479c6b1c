package service

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/queue"
)

// HandOff inserts, in one transaction, a DeliverArgs job for each of refs
// that continues it outside its batch job, available at at (at once when
// zero), with leases above leaseBase — the batch's own lease, so that the
// new job's attempts are newer than the batch's — and records the job as
// the execution's (river_job_id): from then on the batch, run again or
// not, leaves the execution alone. An execution that already has a live
// or completed deliver job keeps it (the jobs are unique per execution)
// and that job is recorded instead; the job's Begin decides what an
// execution still needs, which may be nothing.
func (s *Deliveries) HandOff(ctx context.Context, refs []ExecutionRef, leaseBase, priority int, at time.Time, q string) error {
	if len(refs) == 0 {
		return nil
	}
	return storeError(db.InTx(ctx, s.pool, func(tx db.Tx) error {
		return s.handOff(ctx, tx, refs, leaseBase, priority, at, q)
	}), "hand off")
}

func (s *Deliveries) handOff(ctx context.Context, tx db.Tx, refs []ExecutionRef, leaseBase, priority int, at time.Time,
	q string,
) error {
	seen := make(map[ExecutionRef]bool, len(refs))
	params := make([]river.InsertManyParams, 0, len(refs))
	owned := make([]db.ExecutionRef, 0, len(refs))
	for _, r := range refs {
		if seen[r] { // the same key twice aborts a unique InsertMany
			continue
		}
		seen[r] = true
		params = append(params, queue.HandOffInsert(r, leaseBase, priority, handOffMaxAttempts, at, q))
		owned = append(owned, db.ExecutionRef{TenantID: r.TenantID, ID: r.ExecutionID})
	}
	res, err := s.enqueuer.insertMany(ctx, tx, params)
	if err != nil {
		return err
	}
	jobIDs := make([]int64, len(res))
	for i, r := range res {
		jobIDs[i] = r.Job.ID
	}
	return storeError(db.SetExecutionJobs(ctx, tx, owned, jobIDs), "record hand-off jobs")
}

// CancelRequested returns the ids of those of refs that are running with
// a cancel requested through the API.
func (s *Deliveries) CancelRequested(ctx context.Context, refs []ExecutionRef) ([]string, error) {
	in := make([]db.ExecutionRef, len(refs))
	for i, r := range refs {
		in[i] = db.ExecutionRef{TenantID: r.TenantID, ID: r.ExecutionID}
	}
	ids, err := db.CancelRequested(ctx, s.pool, in)
	return ids, storeError(err, "read cancel requests")
}
