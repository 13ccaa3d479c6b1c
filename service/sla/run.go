package sla

import (
	"time"

	"github.com/axhq/ax/service/lifecycle"
)

// Where a workflow run stands with its workflow's SLA (RunStatus.Status).
const (
	// None: the workflow has no SLA.
	None = "none"
	// Open: unfinished, before its deadline (not due).
	Open = "open"
	// Overdue: unfinished and past its deadline; the sweep has not
	// recorded the miss yet.
	Overdue = "overdue"
	// Missed: recorded as missed (sla_missed_at, its sla_missed event).
	Missed = "missed"
	// Met: succeeded by its deadline.
	Met = "met"
	// Late: succeeded after its deadline, before a miss was recorded.
	Late = "late"
	// Ended: failed or cancelled without a miss recorded.
	Ended = "ended"
)

// Run is what a workflow run's standing with its SLA is told from.
type Run struct {
	ScheduledFor time.Time
	State        string
	FinishedAt   *time.Time
	// MissedAt is the run's sla_missed_at.
	MissedAt *time.Time
	// Misses are its sla_missed events, when they were read (GetRun).
	Misses []Miss
}

// Miss is a run's sla_missed event.
type Miss struct {
	At      time.Time
	Message string
	Data    map[string]any
}

// RunStatus is where a run stands with its workflow's SLA: its deadline
// (slot + sla.finish_within_ms) and whether and when it missed it.
type RunStatus struct {
	// Status is one of None, Open, Overdue, Missed, Met, Late, Ended.
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

// Of tells where run r stands at now with an SLA of within (0: none),
// from the run's sla_missed_at and, when they were read, its sla_missed
// event. The one home of the rule: the API's runs and the console show it.
func Of(within time.Duration, r Run, now time.Time) RunStatus {
	v := RunStatus{Within: within, MissedAt: r.MissedAt}
	if within > 0 {
		due := r.ScheduledFor.Add(within)
		v.DueAt = &due
	}
	for _, ev := range r.Misses {
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
		v.Status = Missed
	case v.DueAt == nil:
		v.Status = None
	case r.State == lifecycle.RunSucceeded:
		v.Status = Met
		if r.FinishedAt != nil && r.FinishedAt.After(*v.DueAt) {
			v.Status = Late
		}
	case r.State == lifecycle.RunFailed || r.State == lifecycle.RunCancelled:
		v.Status = Ended
	case now.Before(*v.DueAt):
		v.Status = Open
	default:
		v.Status = Overdue
	}
	return v
}
