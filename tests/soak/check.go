package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The checker reads the soak tenant's tasks, executions and audit log and
// the receiver's log, and compares them with what each task's schedule
// says.

// raceMargin is how far around a pause or a resume a slot's fate is open:
// a slot that fell due (and was not yet fired, e.g. while PostgreSQL was
// down) up to 30 s before a pause may be dropped by it; a slot within 3 s
// after a resume may be before the resume's transaction.
const (
	beforePause = 30 * time.Second
	afterResume = 3 * time.Second
	earlyLimit  = time.Second
)

type taskRow struct {
	id, kind, cron string
	interval       int64
	runAt, startAt *time.Time
	createdAt      time.Time
	paused         [][2]time.Time // [pause, resume); resume is far future when never resumed
}

type execRow struct {
	id, taskID, state, trigger string
	slot                       time.Time
	finishedAt                 *time.Time
	round, attempts            int
	rescheduled                bool
}

type slotKey struct {
	task string
	at   int64 // unix microseconds
}

func keyOf(task string, t time.Time) slotKey { return slotKey{task, t.UnixMicro()} }

// result is what the checker found.
type result struct {
	expected, delivered, failed, lost, mayFire, cancelledByPause int
	duplicatedSlots, nonFinal, notReceived, cancelledButSent     int
	requests, distinctKeys, duplicateRequests, dupAfter2xx       int
	keyMismatch, unknownKey, slotManyKeys, early, offSchedule    int
	executions                                                   int
	samples                                                      []string
	suspects                                                     []string // executions whose timeline the report shows
	kills                                                        []*killTracker
}

func (r *result) violation(format string, args ...any) {
	if len(r.samples) < 20 {
		r.samples = append(r.samples, fmt.Sprintf(format, args...))
	}
}

func (r *result) ok() bool {
	return r.lost+r.duplicatedSlots+r.nonFinal+r.notReceived+r.cancelledButSent+r.keyMismatch+r.unknownKey+
		r.slotManyKeys+r.early+r.offSchedule == 0
}

func check(ctx context.Context, e *env) (*result, error) {
	tasks := map[string]*taskRow{}
	rows, err := e.pool.Query(ctx, `SELECT id::text, schedule_type, coalesce(cron, ''), coalesce(interval_seconds, 0), run_at,
		start_at, created_at FROM tasks WHERE tenant_id = 'soak'`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		t := &taskRow{}
		if err := rows.Scan(&t.id, &t.kind, &t.cron, &t.interval, &t.runAt, &t.startAt, &t.createdAt); err != nil {
			return nil, err
		}
		tasks[t.id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Pauses and resumes that changed the task's state, in order.
	rows, err = e.pool.Query(ctx, `SELECT resource_id, action, at FROM audit_log
		WHERE tenant_id = 'soak' AND resource_type = 'task' AND action IN ('pause', 'resume') AND changes ? 'state'
		ORDER BY at, id`)
	if err != nil {
		return nil, err
	}
	forever := time.Now().Add(100 * 365 * 24 * time.Hour)
	for rows.Next() {
		var id, action string
		var at time.Time
		if err := rows.Scan(&id, &action, &at); err != nil {
			return nil, err
		}
		t := tasks[id]
		if t == nil {
			continue
		}
		if action == "pause" {
			t.paused = append(t.paused, [2]time.Time{at, forever})
		} else if n := len(t.paused); n > 0 {
			t.paused[n-1][1] = at
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = e.pool.Query(ctx, `SELECT id::text, task_id::text, state, trigger, scheduled_for, round, attempts, rescheduled,
		finished_at FROM executions WHERE tenant_id = 'soak'`)
	if err != nil {
		return nil, err
	}
	var execs []execRow
	for rows.Next() {
		var x execRow
		if err := rows.Scan(&x.id, &x.taskID, &x.state, &x.trigger, &x.slot, &x.round, &x.attempts, &x.rescheduled, &x.finishedAt); err != nil {
			return nil, err
		}
		execs = append(execs, x)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	reqs := e.recv.requests()
	r := evaluate(tasks, execs, reqs)
	for _, id := range r.suspects[:min(len(r.suspects), 5)] {
		rows, err := e.pool.Query(ctx, `SELECT type, at, coalesce(attempt, 0), coalesce(message, ''), coalesce(data::text, '')
			FROM execution_events WHERE execution_id = $1 ORDER BY seq`, id)
		if err != nil {
			return nil, err
		}
		var lines []string
		for rows.Next() {
			var typ, msg, data string
			var at time.Time
			var attempt int
			if err := rows.Scan(&typ, &at, &attempt, &msg, &data); err != nil {
				return nil, err
			}
			lines = append(lines, fmt.Sprintf("%s %s attempt %d %s %s", fmtT(at), typ, attempt, msg, data))
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		r.samples = append(r.samples, "timeline of "+id+" (implied events not shown): "+strings.Join(lines, "; "))
	}
	return r, nil
}

// evaluate is the check proper.
func evaluate(tasks map[string]*taskRow, execs []execRow, reqs []request) *result {
	r := &result{executions: len(execs), requests: len(reqs)}
	byID := map[string]*execRow{}
	bySlot := map[slotKey][]*execRow{}
	horizon := time.Now() // every recurring task is paused by now, and no one-shot is due later
	for i := range execs {
		x := &execs[i]
		byID[x.id] = x
		if x.trigger == "schedule" && x.round == 1 && !x.rescheduled {
			bySlot[keyOf(x.taskID, x.slot)] = append(bySlot[keyOf(x.taskID, x.slot)], x)
		}
		switch x.state {
		case "succeeded", "failed", "cancelled", "skipped":
		default:
			r.nonFinal++
			r.violation("execution %s (task %s, slot %s) is %s at the end", x.id, x.taskID, fmtT(x.slot), x.state)
		}
	}

	received := map[string]int{}
	answered2xx := map[string]bool{}
	slotKeys := map[slotKey]map[string]bool{}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].at.Before(reqs[j].at) })
	for _, q := range reqs {
		if q.key == "" || q.key != q.webhookID || q.key != q.execID {
			r.keyMismatch++
			r.violation("request at %s: Idempotency-Key %q, webhook-id %q, X-Ax-Execution-Id %q differ",
				fmtT(q.at), q.key, q.webhookID, q.execID)
			continue
		}
		if received[q.key] > 0 {
			r.duplicateRequests++
			if answered2xx[q.key] {
				r.dupAfter2xx++
			}
		}
		received[q.key]++
		if q.answered/100 == 2 {
			answered2xx[q.key] = true
		}
		sched, err := time.Parse(time.RFC3339Nano, q.sched)
		x := byID[q.key]
		switch {
		case x == nil:
			r.unknownKey++
			r.violation("request at %s with key %s: no such execution", fmtT(q.at), q.key)
			continue
		case err != nil || q.taskID != x.taskID || !sched.Equal(x.slot):
			r.keyMismatch++
			r.violation("request for execution %s names task %s slot %s; the execution is task %s slot %s",
				x.id, q.taskID, q.sched, x.taskID, fmtT(x.slot))
			continue
		}
		if q.at.Before(x.slot.Add(-earlyLimit)) {
			r.early++
			r.violation("execution %s (slot %s) arrived early, at %s", x.id, fmtT(x.slot), fmtT(q.at))
		}
		k := keyOf(x.taskID, x.slot)
		if x.round == 1 && x.trigger == "schedule" {
			if slotKeys[k] == nil {
				slotKeys[k] = map[string]bool{}
			}
			slotKeys[k][q.key] = true
		}
	}
	r.distinctKeys = len(received)
	for k, keys := range slotKeys {
		if len(keys) > 1 {
			r.slotManyKeys++
			r.violation("slot %s of task %s was received under %d keys", fmtT(time.UnixMicro(k.at)), k.task, len(keys))
		}
	}
	for _, x := range execs {
		switch {
		case x.state == "succeeded" && received[x.id] == 0:
			r.notReceived++
			r.violation("execution %s (task %s, slot %s) succeeded but never reached the receiver", x.id, x.taskID, fmtT(x.slot))
		case x.state == "cancelled" && x.attempts == 0 && received[x.id] > 0:
			r.cancelledButSent++
			r.violation("execution %s was cancelled before it started, yet the receiver got it %d times", x.id, received[x.id])
		}
	}

	// Every slot of every task up to the horizon.
	for _, t := range tasks {
		onSchedule := map[int64]bool{}
		for _, s := range t.slots(horizon) {
			onSchedule[s.UnixMicro()] = true
			xs := bySlot[keyOf(t.id, s)]
			if len(xs) > 1 {
				r.duplicatedSlots++
				r.violation("slot %s of task %s has %d round-1 executions", fmtT(s), t.id, len(xs))
			}
			if t.mayMiss(s) {
				if len(xs) > 0 || !t.pausedForGood(s) {
					r.mayFire++
				}
				continue
			}
			r.expected++
			if len(xs) == 0 {
				r.lost++
				r.violation("slot %s of task %s (%s) has no execution", fmtT(s), t.id, t.describe())
				continue
			}
			switch x := xs[0]; x.state {
			case "succeeded":
				r.delivered++
			case "failed":
				r.failed++
			case "cancelled", "skipped":
				if x.state == "cancelled" && x.finishedAt != nil && t.pausedAt(*x.finishedAt) {
					// A pause cancels a due execution that has not started
					// and a retry at its next start, however old its slot.
					r.cancelledByPause++
					continue
				}
				r.lost++
				r.violation("slot %s of task %s (%s): execution %s is %s though the task was active", fmtT(s), t.id,
					t.describe(), x.id, x.state)
				r.suspects = append(r.suspects, x.id)
			}
		}
		for k, xs := range bySlot {
			if k.task == t.id && !onSchedule[k.at] {
				r.offSchedule += len(xs)
				r.violation("execution %s of task %s is for %s, not a slot of its schedule (%s)", xs[0].id, t.id,
					fmtT(xs[0].slot), t.describe())
			}
		}
	}
	return r
}

// slots lists the task's slots up to horizon.
func (t *taskRow) slots(horizon time.Time) []time.Time {
	var out []time.Time
	switch t.kind {
	case "once":
		if t.runAt != nil && !t.runAt.After(horizon) {
			out = append(out, *t.runAt)
		}
	case "interval":
		first := t.createdAt.Truncate(time.Millisecond)
		if t.startAt != nil {
			first = *t.startAt
		}
		for s := first; !s.After(horizon); s = s.Add(time.Duration(t.interval) * time.Second) {
			out = append(out, s)
		}
	case "cron":
		// The soak's cron tasks are "*/N * * * * *" in UTC.
		step, err := strconv.Atoi(strings.TrimPrefix(strings.Fields(t.cron)[0], "*/"))
		if err != nil || step <= 0 {
			return nil
		}
		s := t.createdAt.Truncate(time.Second).Add(time.Second)
		for s.Second()%step != 0 {
			s = s.Add(time.Second)
		}
		for ; !s.After(horizon); s = s.Add(time.Second) {
			if s.Second()%step == 0 {
				out = append(out, s)
			}
		}
	}
	return out
}

// mayMiss reports whether slot s may legitimately have no execution, or a
// cancelled one: near the task's creation, or in or near a pause.
func (t *taskRow) mayMiss(s time.Time) bool {
	if t.kind == "cron" && s.Before(t.createdAt.Add(2*time.Second)) {
		return true
	}
	return slices.ContainsFunc(t.paused, func(p [2]time.Time) bool {
		return !s.Before(p[0].Add(-beforePause)) && s.Before(p[1].Add(afterResume))
	})
}

// pausedAt reports whether the task was paused at t (with a second's
// margin on both sides for the transactions' own times).
func (t *taskRow) pausedAt(at time.Time) bool {
	return slices.ContainsFunc(t.paused, func(p [2]time.Time) bool {
		return !at.Before(p[0].Add(-time.Second)) && at.Before(p[1].Add(time.Second))
	})
}

// pausedForGood reports whether s is in a pause that never ended (the
// final one): such slots are not counted unless they have an execution.
func (t *taskRow) pausedForGood(s time.Time) bool {
	n := len(t.paused)
	return n > 0 && t.paused[n-1][1].After(time.Now()) && !s.Before(t.paused[n-1][0])
}

func (t *taskRow) describe() string {
	var pauses []string
	for _, p := range t.paused {
		pauses = append(pauses, fmtT(p[0])+"–"+fmtT(p[1]))
	}
	switch t.kind {
	case "interval":
		return fmt.Sprintf("every %d s, paused %v", t.interval, pauses)
	case "cron":
		return fmt.Sprintf("cron %q, paused %v", t.cron, pauses)
	}
	return "once"
}

func fmtT(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// print writes the summary.
func (r *result) print(o options) {
	fmt.Printf("\nsoak %s: %d executions, %d webhook requests\n", o.scenario, r.executions, r.requests)
	fmt.Printf("  expected slots          %d  (plus %d near a pause or resume, which may or may not fire)\n", r.expected, r.mayFire)
	fmt.Printf("  delivered               %d\n", r.delivered)
	fmt.Printf("  failed (retries spent)  %d\n", r.failed)
	fmt.Printf("  cancelled by a pause    %d  (due, not yet sent or retrying, when its task was paused)\n", r.cancelledByPause)
	fmt.Printf("  lost                    %d\n", r.lost)
	fmt.Printf("  duplicated slots        %d  (slots with two round-1 executions)\n", r.duplicatedSlots)
	fmt.Printf("  duplicate requests      %d  (a key received again; %d after a 2xx answer); keys received %d\n",
		r.duplicateRequests, r.dupAfter2xx, r.distinctKeys)
	fmt.Printf("  non-final executions    %d\n", r.nonFinal)
	fmt.Printf("  succeeded, not received %d\n", r.notReceived)
	fmt.Printf("  cancelled unstarted but received %d\n", r.cancelledButSent)
	fmt.Printf("  key violations          %d  (headers disagree %d, unknown key %d, a slot under two keys %d)\n",
		r.keyMismatch+r.unknownKey+r.slotManyKeys, r.keyMismatch, r.unknownKey, r.slotManyKeys)
	fmt.Printf("  early requests          %d  (more than %s before the slot)\n", r.early, earlyLimit)
	fmt.Printf("  off-schedule executions %d\n", r.offSchedule)
	var maxResume, maxFinal time.Duration
	unresolved := 0
	for _, k := range r.kills {
		if k.err != nil || k.resumed < 0 {
			unresolved++
		}
		maxResume, maxFinal = max(maxResume, k.resumed), max(maxFinal, k.delivered)
	}
	fmt.Printf("  kills                   %d; max resume time %s, max time until final %s", len(r.kills),
		maxResume.Round(10*time.Millisecond), maxFinal.Round(10*time.Millisecond))
	if unresolved > 0 {
		fmt.Printf(" (%d not resumed within %s)", unresolved, trackDeadline)
	}
	fmt.Println()
	for _, k := range r.kills {
		fmt.Printf("    %s\n", k)
	}
	if len(r.samples) > 0 {
		fmt.Println("  violations (first 20):")
		for _, s := range r.samples {
			fmt.Println("    " + s)
		}
	}
	if r.ok() {
		fmt.Println("soak: PASS")
	} else {
		fmt.Println("soak: FAIL")
	}
}
