package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRunSLA: where a run stands with its workflow's SLA.
func TestRunSLA(t *testing.T) {
	t.Parallel()
	slot := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := slot.Add(d); return &x }
	run := func(state string, finished *time.Time) WorkflowRun {
		return WorkflowRun{ScheduledFor: slot, State: state, FinishedAt: finished}
	}
	for _, c := range []struct {
		r    WorkflowRun
		now  time.Duration
		want string
	}{
		{run(RunRunning, nil), 30 * time.Minute, SLAOpen},
		{run(RunPending, nil), 30 * time.Minute, SLAOpen},
		{run(RunBlocked, nil), 2 * time.Hour, SLAOverdue},
		{run(RunSucceeded, at(59*time.Minute)), 2 * time.Hour, SLAMet},
		{run(RunSucceeded, at(61*time.Minute)), 2 * time.Hour, SLALate},
		{run(RunFailed, at(10*time.Minute)), 2 * time.Hour, SLAEnded},
		{run(RunCancelled, at(10*time.Minute)), 2 * time.Hour, SLAEnded},
	} {
		v := runSLA(time.Hour, c.r, slot.Add(c.now))
		assert.Equal(t, c.want, v.Status, c.r.State)
		assert.Equal(t, slot.Add(time.Hour), *v.DueAt)
	}
	assert.Equal(t, SLANone, runSLA(0, run(RunRunning, nil), slot).Status)
	missed := run(RunSucceeded, at(2*time.Hour))
	missed.SLAMissedAt = at(65 * time.Minute)
	assert.Equal(t, SLAMissed, runSLA(time.Hour, missed, slot.Add(3*time.Hour)).Status, "a recorded miss stays a miss")

	// The miss's event gives the deadline it applied and its text.
	ev := run(RunRunning, nil)
	ev.Events = []WorkflowRunEvent{{
		At: slot.Add(70 * time.Minute), Type: EventSLAMissed, Message: "not succeeded",
		Data: map[string]any{"due_at": "2026-01-02T03:30:00Z"},
	}}
	v := runSLA(time.Hour, ev, slot.Add(3*time.Hour))
	assert.Equal(t, SLAMissed, v.Status)
	assert.Equal(t, slot.Add(30*time.Minute), *v.DueAt)
	assert.Equal(t, slot.Add(70*time.Minute), *v.MissedAt)
	assert.Equal(t, "not succeeded", v.Message)
}
