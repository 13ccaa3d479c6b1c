package service

import "time"

// Where a workflow run stands with its workflow's SLA (RunSLA.Status).
const (
	// SLANone: the workflow has no SLA.
	SLANone = "none"
	// SLAOpen: unfinished, before its deadline (not due).
	SLAOpen = "open"
	// SLAOverdue: unfinished and past its deadline; the sweep has not
	// recorded the miss yet.
	SLAOverdue = "overdue"
	// SLAMissed: recorded as missed (sla_missed_at, its sla_missed event).
	SLAMissed = "missed"
	// SLAMet: succeeded by its deadline.
	SLAMet = "met"
	// SLALate: succeeded after its deadline, before a miss was recorded.
	SLALate = "late"
	// SLAEnded: failed or cancelled without a miss recorded.
	SLAEnded = "ended"
)

// RunSLA is where a run stands with its workflow's SLA: its deadline
// (slot + sla.finish_within_ms) and whether and when it missed it.
type RunSLA struct {
	// Status is one of the SLA constants.
	Status string
	// Within is the workflow's sla.finish_within_ms (0: none).
	Within time.Duration
	// DueAt is the deadline: the one its miss recorded, when it missed
	// it and the run's events were read (GetRun); slot + Within
	// otherwise. Nil without an SLA.
	DueAt *time.Time
	// MissedAt is when the miss was recorded.
	MissedAt *time.Time
	// Message is the sla_missed event's text (GetRun).
	Message string
}

// runSLA tells where run stands at now with an SLA of within (0: none),
// from the run's sla_missed_at and, when they were read, its sla_missed
// event. The one home of the rule: the API's runs and the console show it.
func runSLA(within time.Duration, r WorkflowRun, now time.Time) RunSLA {
	v := RunSLA{Within: within, MissedAt: r.SLAMissedAt}
	if within > 0 {
		due := r.ScheduledFor.Add(within)
		v.DueAt = &due
	}
	for _, ev := range r.Events {
		if ev.Type != EventSLAMissed {
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
		v.Status = SLAMissed
	case v.DueAt == nil:
		v.Status = SLANone
	case r.State == RunSucceeded:
		v.Status = SLAMet
		if r.FinishedAt != nil && r.FinishedAt.After(*v.DueAt) {
			v.Status = SLALate
		}
	case r.State == RunFailed || r.State == RunCancelled:
		v.Status = SLAEnded
	case now.Before(*v.DueAt):
		v.Status = SLAOpen
	default:
		v.Status = SLAOverdue
	}
	return v
}
