package service

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/sla"
)

// SLASweep is what one SweepSLA pass did.
type SLASweep = sla.Sweep

// SweepSLA records the unfinished executions and workflow runs that are
// past their SLA deadline, each once with its alert (sla.Sweeper).
func (s *Deliveries) SweepSLA(ctx context.Context) (SLASweep, error) {
	return sla.Sweeper{
		Pool: s.pool, Enqueuer: s.enqueuer.Enqueuer, AlertMaxAttempts: s.cfg.AlertMaxAttempts,
		MissedEvent: EventSLAMissed, AlertQueuedEvent: EventAlertQueued,
		RunAlert: func(m db.RunSLAMiss, alertTo, state string) []river.InsertManyParams {
			due, scheduled := m.DueAt.UTC(), m.ScheduledFor.UTC()
			return workflowAlertInsert(WorkflowAlertArgs{
				TenantID: m.TenantID, WorkflowID: m.WorkflowID, RunID: m.RunID, EndpointID: alertTo,
				Type: AlertWorkflowRunSLAMissed, State: state, ScheduledFor: &scheduled,
				SLAFinishWithinMS: m.FinishWithinMS, SLADueAt: &due,
			})
		},
	}.Run(ctx)
}
