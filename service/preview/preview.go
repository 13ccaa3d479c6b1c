// Package preview is a task's upcoming slots as its preview shows them:
// the slots that fire, computed by the same code the scheduler uses, and
// beside them those that will not (skipped on request, or whose queued
// execution was cancelled) and those its calendars removed.
package preview

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/schedule"
)

// Preview is a task's upcoming fire times.
type Preview struct {
	// Fires are the slots that fire.
	Fires []time.Time
	// Skipped are the slots in the same span that do not fire: skipped on
	// request (Executions.Skip), or whose queued execution was cancelled.
	Skipped []time.Time
	// Excluded are the slots in the same span that calendars removed.
	Excluded []time.Time
	// Paused: the task is paused and fires nothing (Fires is empty).
	Paused bool
	// Event: the schedule is this event's, without time slots (Fires is
	// empty): each event of that name fires the task once.
	Event    string
	Schedule *schedule.Schedule
}

// Task returns the next n slots after now of task id, whose schedule is
// sched (its calendars applied), that fire, leaving out those that will
// not (Skipped), with the slots its calendars removed in the same span.
func Task(ctx context.Context, q db.Querier, tenant, id string, sched *schedule.Schedule, now time.Time, n int) (Preview, error) {
	// Ask the schedule for as many more slots as the span holds slots
	// that do not fire, until the count of those settles.
	want := n
	for {
		slots, excluded, err := sched.PreviewExcluded(ctx, now, want)
		if err != nil {
			return Preview{}, errs.Schedule(err)
		}
		p := Preview{Excluded: excluded, Schedule: sched}
		if len(slots) == 0 {
			return p, nil
		}
		latest, err := db.LatestSlotStates(ctx, q, tenant, id, now, slots[len(slots)-1].Add(time.Microsecond)) // timestamptz: microseconds
		if err != nil {
			return Preview{}, errs.Store(err, "read slots")
		}
		ended := make(map[int64]bool, len(latest))
		for _, l := range latest {
			if l.State == lifecycle.ExecSkipped || l.State == lifecycle.ExecCancelled {
				ended[l.ScheduledFor.UnixNano()] = true
			}
		}
		for _, at := range slots {
			if ended[at.UnixNano()] {
				p.Skipped = append(p.Skipped, at)
			} else {
				p.Fires = append(p.Fires, at)
			}
		}
		if len(p.Fires) >= n || len(slots) < want || want >= schedule.PreviewMax {
			return p, nil
		}
		want = min(n+len(p.Skipped), schedule.PreviewMax)
	}
}

// Schedule returns the next n fire times of sched after now (1 to
// schedule.PreviewMax of them), with the slots its calendars removed in
// the same span: the preview of a schedule not saved yet, so nothing of
// the task's own slots is read.
func Schedule(ctx context.Context, sched *schedule.Schedule, now time.Time, n int) (Preview, error) {
	fires, excluded, err := sched.PreviewExcluded(ctx, now, min(max(n, 1), schedule.PreviewMax))
	if err != nil {
		return Preview{}, errs.Schedule(err)
	}
	return Preview{Fires: fires, Excluded: excluded, Schedule: sched}, nil
}
