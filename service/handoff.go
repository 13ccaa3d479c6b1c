package service

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
)

// HandOff inserts, in one transaction, a DeliverArgs job for each of refs
// that continues it outside its batch job, available at at (at once when
// zero), with leases above leaseBase, and records the job as the
// execution's (queue.Enqueuer.HandOff).
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
	return s.enqueuer.HandOff(ctx, tx, refs, leaseBase, priority, handOffMaxAttempts, at, q)
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
