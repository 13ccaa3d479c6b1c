package service

import (
	"context"
	"time"

	"github.com/axhq/ax/service/reconcile"
)

// ReconcileAfterDefault is how long after its slot an unfinished execution
// may go without a live job before it is resumed (reconcile.AfterDefault).
const ReconcileAfterDefault = reconcile.AfterDefault

// reconcileLeaseCeiling is the last lease a job inserted with an execution
// may use (reconcile.Reconciler.LeaseCeiling).
var reconcileLeaseCeiling = reconcile.Reconciler{MaxAttempts: handOffMaxAttempts}.LeaseCeiling()

// Reconcile resumes the unfinished executions whose slot is more than
// olderThan ago and that no live River job carries (reconcile.Reconciler);
// it returns how many it resumed.
func (s *Scheduler) Reconcile(ctx context.Context, olderThan time.Duration) (int, error) {
	return reconcile.Reconciler{
		Pool: s.pool, Enqueuer: s.enq.Enqueuer, Logger: s.logger, Event: EventReconciled, MaxAttempts: handOffMaxAttempts,
	}.Run(ctx, olderThan)
}
