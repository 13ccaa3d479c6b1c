package db

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTimelinePutsImpliedEventsInPlace(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ptr := func(v int32) *int32 { return &v }
	tptr := func(v time.Time) *time.Time { return &v }
	stored := func(types ...string) []ExecutionEvent {
		out := make([]ExecutionEvent, len(types))
		for i, ty := range types {
			out[i] = ExecutionEvent{Type: ty, At: at(100 * (i + 1))}
		}
		return out
	}
	types := func(evs []ExecutionEvent) []string {
		out := make([]string, len(evs))
		for i, e := range evs {
			out[i] = e.Type
		}
		return out
	}
	base := Execution{
		ScheduledFor: at(-5), CreatedAt: at(0), FirstStartedAt: tptr(at(50)), StartedAt: tptr(at(900)),
		FinishedAt: tptr(at(1000)), Attempts: 2, LastStatusCode: ptr(201), LastLatencyMS: ptr(12),
	}

	tests := []struct {
		name     string
		implicit int16
		stored   []string
		want     []string
	}{
		{"nothing implied", 0, []string{"fired", "attempt_started", "cancelled"}, []string{"fired", "attempt_started", "cancelled"}},
		{"implied fire, then a cancel", ImplicitFired, []string{"cancelled"}, []string{"fired", "cancelled"}},
		{
			"stored late fire after misses, implied start", ImplicitStarted,
			[]string{"missed", "fired", "attempt_failed"},
			[]string{"missed", "fired", "attempt_started", "attempt_failed"},
		},
		{
			"the happy path, nothing stored", ImplicitFired | ImplicitStarted | ImplicitSucceeded, nil,
			[]string{"fired", "attempt_started", "attempt_succeeded", "succeeded"},
		},
		{
			"held and released before its first start", ImplicitFired | ImplicitStarted | ImplicitSucceeded,
			[]string{"held", "released", "held", "released"},
			[]string{"fired", "held", "released", "held", "released", "attempt_started", "attempt_succeeded", "succeeded"},
		},
		{
			"held after a retry: its start is stored", ImplicitFired | ImplicitStarted,
			[]string{"attempt_failed", "failed", "retried", "held", "released", "attempt_started"},
			[]string{"fired", "attempt_started", "attempt_failed", "failed", "retried", "held", "released", "attempt_started"},
		},
		{
			"retried, then succeeded", ImplicitFired | ImplicitStarted | ImplicitSucceeded,
			[]string{"attempt_failed", "failed", "retried", "attempt_started"},
			[]string{"fired", "attempt_started", "attempt_failed", "failed", "retried", "attempt_started", "attempt_succeeded", "succeeded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			row := base
			row.ImplicitEvents = tt.implicit
			got := Timeline(row, stored(tt.stored...))
			require.Equal(t, tt.want, types(got))
		})
	}

	row := base
	row.ImplicitEvents = ImplicitFired | ImplicitStarted | ImplicitSucceeded
	got := Timeline(row, nil)
	require.Equal(t, ExecutionEvent{Type: "fired", At: at(0), Data: map[string]any{"scheduled_for": "2026-11-29T11:59:59.995Z"}}, got[0])
	require.Equal(t, ExecutionEvent{Type: "attempt_started", At: at(50), Attempt: ptr(1)}, got[1])
	require.Equal(t, ExecutionEvent{Type: "attempt_succeeded", At: at(1000), Attempt: ptr(2), StatusCode: ptr(201), LatencyMS: ptr(12)}, got[2])
	require.Equal(t, ExecutionEvent{Type: "succeeded", At: at(1000), Attempt: ptr(2), StatusCode: ptr(201)}, got[3])
}
