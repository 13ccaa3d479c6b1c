package execution

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/calendar"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/resource"
	"github.com/axhq/ax/service/schedule"
)

// SkipReason is the last_error of a slot skipped through the API.
const SkipReason = "skipped by request"

// Skip records in tx the future slot at of task taskID, whose schedule is
// sched (its calendars not yet applied) and which fires shards executions
// a slot, as skipped: the scheduler will not fire it. A slot already
// materialised that has not started is moved to skipped (changed counts
// the executions that ended so); one that started is a conflict. A time
// that is not a slot of the schedule (calendars applied), or one that has
// passed, is a validation error. Skipping a skipped slot again returns it.
// The skip is audited under the task.
func Skip(ctx context.Context, tx db.Tx, tenant, taskID string, sched *schedule.Schedule, shards int, at time.Time,
) (out Detail, changed int, err error) {
	cals, err := calendar.Load(ctx, tx, tenant, sched.CalendarIDs(), false)
	if err != nil {
		return Detail{}, 0, err
	}
	sched = sched.Excluding(cals)
	if next, ok := sched.Next(at.Add(-time.Nanosecond)); !ok || !next.Equal(at) {
		msg := "is not a slot of the task's schedule"
		if ok {
			msg += "; the next slot from there is " + next.UTC().Format(time.RFC3339Nano)
		}
		return Detail{}, 0, errs.Field("scheduled_for", msg)
	}
	now, err := db.Now(ctx, tx)
	if err != nil {
		return Detail{}, 0, errs.Store(err, "read the clock")
	}
	if !at.After(now) {
		msg := "has passed: only a future slot can be skipped; the schedule has no slot ahead"
		if next, ok := sched.Next(now); ok {
			msg = "has passed: only a future slot can be skipped; the next slot is " + next.UTC().Format(time.RFC3339Nano)
		}
		return Detail{}, 0, errs.Field("scheduled_for", msg)
	}
	ids := make([]string, shards) // one execution per shard
	for i := range ids {
		ids[i] = resource.NewID()
	}
	id, changed, err := db.SkipSlot(ctx, tx, tenant, taskID, ids, at, SkipReason)
	if err != nil {
		return Detail{}, 0, errs.Store(err, "store the skipped slot")
	}
	if id == "" {
		return Detail{}, changed, errs.Conflictf("the slot %s has already started or finished", at.UTC().Format(time.RFC3339Nano))
	}
	e, err := db.GetExecution(ctx, tx, tenant, id, false)
	if err != nil {
		return Detail{}, changed, errs.Store(err, "load skipped execution")
	}
	if err := audit.Record(ctx, tx, tenant, audit.Skip, audit.ResourceTask, taskID, map[string]any{
		"scheduled_for": at.UTC().Format(time.RFC3339Nano), "execution_id": id,
	}); err != nil {
		return Detail{}, changed, err
	}
	out, err = WithEvents(ctx, tx, e)
	return out, changed, err
}
