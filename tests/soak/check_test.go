package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The checker must find each kind of violation, and must accept what a
// pause legitimately does.
func TestEvaluate(t *testing.T) {
	t0 := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ptr := func(v time.Time) *time.Time { return &v }
	// A task every 10 s from t0; paused at 100 s (final), so slots 0..60
	// must fire, 70..100 may (30 s before the pause), later ones are not
	// counted.
	task := func() map[string]*taskRow {
		return map[string]*taskRow{"T": {
			id: "T", kind: "interval", interval: 10, startAt: ptr(at(0)), createdAt: at(-5),
			paused: [][2]time.Time{{at(100), time.Now().Add(time.Hour)}},
		}}
	}
	ok := func() ([]execRow, []request) {
		var xs []execRow
		var qs []request
		for s := 0; s <= 60; s += 10 {
			id := "E" + time.Duration(s).String()
			xs = append(xs, execRow{
				id: id, taskID: "T", state: "succeeded", trigger: "schedule", slot: at(s), round: 1,
				attempts: 1, finishedAt: ptr(at(s)),
			})
			qs = append(qs, request{
				at: at(s), key: id, webhookID: id, execID: id, taskID: "T",
				sched: at(s).Format(time.RFC3339Nano), attempt: 1, answered: 200,
			})
		}
		return xs, qs
	}

	xs, qs := ok()
	r := evaluate(task(), xs, qs)
	require.True(t, r.ok(), "%v", r.samples)
	require.Equal(t, 7, r.expected)
	require.Equal(t, 7, r.delivered)
	require.Equal(t, 3, r.mayFire, "70, 80 and 90 s; from 100 s on, in the final pause and without executions, none is counted")

	// A duplicate request with the same key is at-least-once, not a violation.
	xs, qs = ok()
	qs = append(qs, qs[0])
	qs[len(qs)-1].at = qs[0].at.Add(time.Second)
	r = evaluate(task(), xs, qs)
	require.True(t, r.ok(), "%v", r.samples)
	require.Equal(t, 1, r.duplicateRequests)
	require.Equal(t, 1, r.dupAfter2xx)

	// A retry cancelled while the task was paused is the pause's doing.
	tk := task()
	tk["T"].paused = append([][2]time.Time{{at(45), at(48)}}, tk["T"].paused...)
	xs, qs = ok()
	xs[1].state, xs[1].finishedAt = "cancelled", ptr(at(46))
	r = evaluate(tk, xs, qs)
	require.True(t, r.ok(), "%v", r.samples)
	require.Equal(t, 1, r.cancelledByPause)

	for name, c := range map[string]struct {
		mutate func(xs []execRow, qs []request) ([]execRow, []request)
		field  func(r *result) int
	}{
		"lost slot": {
			func(xs []execRow, qs []request) ([]execRow, []request) { return xs[1:], qs[1:] },
			func(r *result) int { return r.lost },
		},
		"cancelled while active": {func(xs []execRow, qs []request) ([]execRow, []request) {
			xs[2].state, xs[2].attempts = "cancelled", 1
			return xs, qs
		}, func(r *result) int { return r.lost }},
		"two round-1 executions": {func(xs []execRow, qs []request) ([]execRow, []request) {
			d := xs[3]
			d.id = "dup"
			return append(xs, d), qs
		}, func(r *result) int { return r.duplicatedSlots }},
		"non-final": {func(xs []execRow, qs []request) ([]execRow, []request) {
			xs[0].state = "retrying"
			return xs, qs
		}, func(r *result) int { return r.nonFinal }},
		"succeeded, never received": {
			func(xs []execRow, qs []request) ([]execRow, []request) { return xs, qs[1:] },
			func(r *result) int { return r.notReceived },
		},
		"cancelled before start, received": {func(xs []execRow, qs []request) ([]execRow, []request) {
			xs[4].state, xs[4].attempts = "cancelled", 0
			return xs, qs
		}, func(r *result) int { return r.cancelledButSent }},
		"keys disagree": {func(xs []execRow, qs []request) ([]execRow, []request) {
			qs[0].webhookID = "other"
			return xs, qs
		}, func(r *result) int { return r.keyMismatch }},
		"unknown key": {func(xs []execRow, qs []request) ([]execRow, []request) {
			q := qs[0]
			q.key, q.webhookID, q.execID = "nope", "nope", "nope"
			return xs, append(qs, q)
		}, func(r *result) int { return r.unknownKey }},
		"a slot under two keys": {func(xs []execRow, qs []request) ([]execRow, []request) {
			// a second execution of slot 30 s, marked rescheduled so that
			// only the receiver's log shows the second key
			d := xs[3]
			d.id, d.rescheduled = "second", true
			q := qs[3]
			q.key, q.webhookID, q.execID = "second", "second", "second"
			return append(xs, d), append(qs, q)
		}, func(r *result) int { return r.slotManyKeys }},
		"early": {func(xs []execRow, qs []request) ([]execRow, []request) {
			qs[5].at = xs[5].slot.Add(-2 * time.Second)
			return xs, qs
		}, func(r *result) int { return r.early }},
		"off schedule": {func(xs []execRow, qs []request) ([]execRow, []request) {
			xs[6].slot = xs[6].slot.Add(time.Second)
			qs[6].sched = xs[6].slot.Format(time.RFC3339Nano)
			return xs, qs
		}, func(r *result) int { return r.offSchedule }},
	} {
		t.Run(name, func(t *testing.T) {
			xs, qs := ok()
			xs, qs = c.mutate(xs, qs)
			r := evaluate(task(), xs, qs)
			require.False(t, r.ok())
			require.Positive(t, c.field(r), "%v", r.samples)
		})
	}
}
