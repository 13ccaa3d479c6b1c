package sla

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/axhq/ax/service/lifecycle"
)

// TestRunSLA: where a run stands with its workflow's SLA.
func TestRunSLA(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := slot.Add(d); return &x }
	run := func(state string, finished *time.Time) Run {
		return Run{ScheduledFor: slot, State: state, FinishedAt: finished}
	}
	for _, c := range []struct {
		r    Run
		now  time.Duration
		want string
	}{
		{run(lifecycle.RunRunning, nil), 30 * time.Minute, Open},
		{run(lifecycle.RunPending, nil), 30 * time.Minute, Open},
		{run(lifecycle.RunBlocked, nil), 2 * time.Hour, Overdue},
		{run(lifecycle.RunSucceeded, at(59*time.Minute)), 2 * time.Hour, Met},
		{run(lifecycle.RunSucceeded, at(61*time.Minute)), 2 * time.Hour, Late},
		{run(lifecycle.RunFailed, at(10*time.Minute)), 2 * time.Hour, Ended},
		{run(lifecycle.RunCancelled, at(10*time.Minute)), 2 * time.Hour, Ended},
	} {
		v := Of(time.Hour, c.r, slot.Add(c.now))
		assert.Equal(t, c.want, v.Status, c.r.State)
		assert.Equal(t, slot.Add(time.Hour), *v.DueAt)
	}
	assert.Equal(t, None, Of(0, run(lifecycle.RunRunning, nil), slot).Status)
	missed := run(lifecycle.RunSucceeded, at(2*time.Hour))
	missed.MissedAt = at(65 * time.Minute)
	assert.Equal(t, Missed, Of(time.Hour, missed, slot.Add(3*time.Hour)).Status, "a recorded miss stays a miss")

	// The miss's event gives the deadline it applied and its text.
	ev := run(lifecycle.RunRunning, nil)
	ev.Misses = []Miss{{
		At: slot.Add(70 * time.Minute), Message: "not succeeded",
		Data: map[string]any{"due_at": "2026-01-02T03:30:00Z"},
	}}
	v := Of(time.Hour, ev, slot.Add(3*time.Hour))
	assert.Equal(t, Missed, v.Status)
	assert.Equal(t, slot.Add(30*time.Minute), *v.DueAt)
	assert.Equal(t, slot.Add(70*time.Minute), *v.MissedAt)
	assert.Equal(t, "not succeeded", v.Message)
}
