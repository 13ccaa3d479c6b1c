package console

import (
	"time"

	"github.com/axhq/ax/service"
)

// Where a run stands with its workflow's SLA (runSLAView.Status).
const (
	slaNone    = "none"    // the workflow has no SLA
	slaOpen    = "open"    // unfinished, before its deadline
	slaOverdue = "overdue" // unfinished, past its deadline, the miss not recorded yet
	slaMissed  = "missed"  // recorded as missed (sla_missed_at, its sla_missed event)
	slaMet     = "met"     // succeeded by its deadline
	slaLate    = "late"    // succeeded after its deadline, no miss recorded
	slaEnded   = "ended"   // failed or cancelled, no miss recorded
)

// runSLAView is a run's SLA: its deadline (slot + the workflow's
// sla.finish_within_ms) and whether and when it missed it.
type runSLAView struct {
	Status string
	Within time.Duration
	// DueAt: the deadline (the one the miss recorded, when it missed).
	DueAt *time.Time
	// MissedAt is when the miss was recorded.
	MissedAt *time.Time
	// Message is the sla_missed event's text.
	Message string
}

// runSLA tells where run stands with w's SLA at now, from the run's
// sla_missed_at and its sla_missed event (GetRun's timeline).
func runSLA(w service.Workflow, r service.WorkflowRun, now time.Time) runSLAView {
	v := runSLAView{Within: w.SLAFinishWithin, MissedAt: r.SLAMissedAt}
	if v.Within > 0 {
		due := r.ScheduledFor.Add(v.Within)
		v.DueAt = &due
	}
	for _, ev := range r.Events {
		if ev.Type != service.EventSLAMissed {
			continue
		}
		v.Message = ev.Message
		if s, ok := ev.Data["due_at"].(string); ok {
			if due, err := time.Parse(time.RFC3339Nano, s); err == nil {
				due = due.UTC()
				v.DueAt = &due
			}
		}
		if v.MissedAt == nil {
			at := ev.At
			v.MissedAt = &at
		}
	}
	switch {
	case v.MissedAt != nil:
		v.Status = slaMissed
	case v.DueAt == nil:
		v.Status = slaNone
	case r.State == service.RunSucceeded:
		v.Status = slaMet
		if r.FinishedAt != nil && r.FinishedAt.After(*v.DueAt) {
			v.Status = slaLate
		}
	case r.State == service.RunFailed || r.State == service.RunCancelled:
		v.Status = slaEnded
	case now.Before(*v.DueAt):
		v.Status = slaOpen
	default:
		v.Status = slaOverdue
	}
	return v
}
