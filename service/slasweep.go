package service

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/sla"
)

// Where a workflow run stands with its workflow's SLA (RunSLA.Status;
// service/sla).
const (
	SLANone    = sla.None
	SLAOpen    = sla.Open
	SLAOverdue = sla.Overdue
	SLAMissed  = sla.Missed
	SLAMet     = sla.Met
	SLALate    = sla.Late
	SLAEnded   = sla.Ended
)

type (
	// SLASweep is what one SweepSLA pass did.
	SLASweep = sla.Sweep
	// RunSLA is where a run stands with its workflow's SLA.
	RunSLA = sla.RunStatus
)

// runSLA tells where run stands at now with an SLA of within (0: none)
// (sla.Of, from the run's sla_missed events when they were read).
func runSLA(within time.Duration, r WorkflowRun, now time.Time) RunSLA {
	in := sla.Run{ScheduledFor: r.ScheduledFor, State: r.State, FinishedAt: r.FinishedAt, MissedAt: r.SLAMissedAt}
	for _, ev := range r.Events {
		if ev.Type == EventSLAMissed {
			in.Misses = append(in.Misses, sla.Miss{At: ev.At, Message: ev.Message, Data: ev.Data})
		}
	}
	return sla.Of(within, in, now)
}

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
