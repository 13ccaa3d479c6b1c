package execution

import "time"

// Lateness is ax's one definition of how late a fire was: its first
// attempt's start minus its slot, for an on-time scheduled fire; ok is
// false for any other execution, which has none. The Prometheus histogram
// ax_firing_lateness_seconds (Delivery.FiringLateness), GET /v1/stats and
// its series (db.OnTimeFire and db.FiringLatenessMS, its SQL mirror) and
// the console (Execution.FiringLateness) all use it.
//
//   - The first attempt's start measures what ax controls: the scheduler
//     and the queue. A later attempt waits for the backoff a failing
//     receiver caused; counting it would blame ax for the receiver.
//   - Only scheduled fires (trigger schedule): a backfill re-runs a past
//     slot on purpose, and manual, retry and dependency fires have no slot
//     to be late for (a workflow step's wait for its rule is
//     ax_workflow_node_wait_seconds).
//   - Misfire catch-ups (late) are left out: they run late on purpose, by
//     the task's misfire policy, and are counted as late fires instead.
//   - Never below zero: a worker whose clock runs a hair ahead of the
//     database's may start a slot's attempt a little before it.
func Lateness(trigger string, late bool, scheduledFor time.Time, firstStarted *time.Time) (time.Duration, bool) {
	if trigger != TriggerSchedule || late || firstStarted == nil {
		return 0, false
	}
	return max(firstStarted.Sub(scheduledFor), 0), true
}

// FiringLateness is how late x fired (Lateness); ok is false when
// it has no firing lateness (not an on-time scheduled fire, or not started
// yet).
func (x Execution) FiringLateness() (d time.Duration, ok bool) {
	return Lateness(x.Trigger, x.Late, x.ScheduledFor, x.FirstStartedAt)
}
