package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/axhq/ax/service"
)

// TestIdent: an id is its name when it has one, else its tail, which
// tells apart UUIDv7 ids of one millisecond (same first 12 hex digits);
// the full id is in the title; both are escaped.
func TestIdent(t *testing.T) {
	a, b := "01938a2b-7c00-7abc-8def-0123456789ab", "01938a2b-7c00-7abc-9fed-ba9876543210"
	assert.Equal(t, a[:8], b[:8])
	assert.Equal(t, `<code class="ident" title="`+a+`">…456789ab</code>`, string(ident(a)))
	assert.Equal(t, `<code class="ident" title="`+b+`">…76543210</code>`, string(ident(b)))
	assert.Equal(t, `<span class="ident" title="`+a+`">nightly</span>`, string(ident(a, "nightly")))
	assert.Equal(t, `<code class="ident" title="`+a+`">…456789ab</code>`, string(ident(a, "")), "an empty name is no name")
	assert.Equal(t, `<span class="ident" title="&lt;x&gt;">&lt;b&gt;</span>`, string(ident("<x>", "<b>")))
	assert.Equal(t, `<code class="ident" title="short">short</code>`, string(ident("short")))
}

// TestRunSLA: where a run stands with its workflow's SLA.
func TestRunSLA(t *testing.T) {
	slot := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	w := service.Workflow{WorkflowInput: service.WorkflowInput{SLAFinishWithin: time.Hour}}
	at := func(d time.Duration) *time.Time { x := slot.Add(d); return &x }
	run := func(state string, finished *time.Time) service.WorkflowRun {
		return service.WorkflowRun{ScheduledFor: slot, State: state, FinishedAt: finished}
	}
	for _, c := range []struct {
		r    service.WorkflowRun
		now  time.Duration
		want string
	}{
		{run(service.RunRunning, nil), 30 * time.Minute, slaOpen},
		{run(service.RunBlocked, nil), 2 * time.Hour, slaOverdue},
		{run(service.RunSucceeded, at(59*time.Minute)), 2 * time.Hour, slaMet},
		{run(service.RunSucceeded, at(61*time.Minute)), 2 * time.Hour, slaLate},
		{run(service.RunFailed, at(10*time.Minute)), 2 * time.Hour, slaEnded},
	} {
		v := runSLA(w, c.r, slot.Add(c.now))
		assert.Equal(t, c.want, v.Status, c.r.State)
		assert.Equal(t, slot.Add(time.Hour), *v.DueAt)
	}
	assert.Equal(t, slaNone, runSLA(service.Workflow{}, run(service.RunRunning, nil), slot).Status)
	missed := run(service.RunSucceeded, at(2*time.Hour))
	missed.SLAMissedAt = at(65 * time.Minute)
	assert.Equal(t, slaMissed, runSLA(w, missed, slot.Add(3*time.Hour)).Status, "a recorded miss stays a miss")
}
