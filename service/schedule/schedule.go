// Package schedule computes when a schedule fires: cron expressions in
// two dialects (standard and Quartz) on a time zone's wall clock under a
// DST policy, fixed intervals, a single instant, start and end bounds, and
// the calendars of local dates a schedule excludes. It is pure time
// arithmetic on the standard library: the caller loads calendars and
// stores schedules. Validation reports every problem at once, under the
// API's field names (schedule.cron, schedule.timezone, ...).
package schedule

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Schedule types, as schedule.type spells them.
const (
	Cron     = "cron"
	Interval = "interval"
	Once     = "once"
	// Union fires at every slot of its member schedules (Spec.Schedules):
	// an instant two members produce is one slot.
	Union = "union"
	// Event schedules have no time slots: each matching event fires
	// (Spec.Event names it), so Next never answers.
	Event = "event"
)

// EventNameMax bounds an event's name (schedule.event, an event's name).
const EventNameMax = 200

// ValidEventName reports whether name is an event name: 1 to EventNameMax
// characters among letters, digits and "._:-".
func ValidEventName(name string) bool {
	if name == "" || len(name) > EventNameMax {
		return false
	}
	for _, r := range name {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (r < '0' || r > '9') && !strings.ContainsRune("._:-", r) {
			return false
		}
	}
	return true
}

// EventNameRule says what ValidEventName accepts, for error messages.
const EventNameRule = "must be 1 to 200 characters among letters, digits and . _ : -"

// DST policies, as schedule.dst_policy spells them (see Schedule).
const (
	// DSTVixie treats a slot whose hour field is fixed as a wall-clock
	// appointment (once per local time) and one whose hour field is * or a
	// step as elapsed time (every instant whose wall clock matches).
	DSTVixie = "vixie"
	// DSTOncePerLocalTime fires every slot at most once per local time,
	// whatever its fields.
	DSTOncePerLocalTime = "once_per_local_time"
)

const (
	// IntervalSecondsMin and IntervalSecondsMax bound schedule.interval_seconds
	// (the maximum is 366 days).
	IntervalSecondsMin = 1
	IntervalSecondsMax = 366 * secondsPerDay
	// PreviewMax caps the number of fire times Preview returns.
	PreviewMax = 1000
)

// minFire returns the first instant a schedule may fire at, 0001-01-01Z.
func minFire() time.Time {
	return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
}

// maxFire returns the last instant a schedule may fire at: later times have
// no RFC 3339 form, so Next treats it as an implicit end_at.
func maxFire() time.Time {
	return time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
}

// Spec is the schedule as a client gives it (README, "Tasks").
type Spec struct {
	Type            string     // "cron" | "interval" | "once"
	Cron            string     // cron: 5 fields, or 6 with seconds first; or a descriptor
	Timezone        string     // IANA name; "" means "UTC"
	IntervalSeconds int64      // interval: >= 1
	RunAt           *time.Time // once
	StartAt, EndAt  *time.Time // optional bounds, any type
	// ExcludeCalendars names calendars whose local dates no slot fires on.
	ExcludeCalendars []string
	// Dialect and DSTPolicy apply to cron only: "standard" (default) or
	// "quartz"; "vixie" (default) or "once_per_local_time".
	Dialect, DSTPolicy string
	// Schedules are a union's members (UnionMembersMin to
	// UnionMembersMax cron or interval schedules), each with its own
	// zone, dialect, DST policy, bounds and calendars.
	Schedules []Spec `json:",omitempty"`
	// Event is the event name of an event schedule.
	Event string
}

// Schedule is a validated schedule that computes fire times. It is immutable
// and safe for concurrent use.
//
// # Cron
//
// Two dialects (Spec.Dialect). Standard (DialectStandard): five
// fields "minute hour day-of-month month day-of-week" (second 0), six with a
// leading second field, or seven with a leading second and a trailing year;
// day-of-week 0 and 7 are Sunday. Quartz (DialectQuartz): six or seven
// fields, seconds first; day-of-week 1 is Sunday .. 7 Saturday; ? is
// required in exactly one of the day fields. Descriptors (@yearly,
// @annually, @monthly, @weekly, @daily, @midnight, @hourly) and names
// (JAN-DEC, SUN-SAT, case-insensitive) mean the same in both.
//
// Each field is a comma-separated list of *, values, ranges a-b, and steps
// (*/15, 10-40/5, and 5/10 meaning 5-max/10). A range whose end is below its
// start wraps around the field's cycle (FRI-MON, NOV-FEB, 22-2 in hours; a
// step counts on across the wrap: 22-2/2 is 22, 0, 2), except in the year.
// ? means * in a day field. Day-of-month items may also be L (the month's
// last day), L-n (n days before it), nW (the weekday nearest day n, within
// the month) and LW (the month's last weekday); day-of-week items dL (the
// month's last weekday d), d#n (its n-th weekday d) and L (Saturday). The
// year field takes 1970-2099.
//
// Day matching: standard follows Vixie cron: when both day fields are
// restricted, a day matches if either matches; a field that starts with * or
// ? is not restricted, and then a day must match both (so "0 0 */2 * MON" is
// odd-numbered Mondays). Quartz: the field that is not ? alone decides.
//
// # Time zones and DST
//
// Cron fields are evaluated on the wall clock of the schedule's IANA zone.
// Spec.DSTPolicy decides what a jump of that clock does:
//
//   - DSTOncePerLocalTime, and DSTVixie for an expression whose hour field is
//     fixed (no * and no step: a value, a list or a range): a wall clock that
//     does not exist (spring forward) fires once, at the first instant after
//     the gap: every matching time inside the gap collapses into that single
//     fire, shared with a match at the gap's end. A wall clock that occurs
//     twice (fall back) fires once, at its first occurrence; the repeated
//     stretch fires nothing. So "*/10 1 * * *" fires 01:00 .. 01:50 once each.
//   - DSTVixie for an hour field with * or a step: elapsed time. Every instant
//     whose wall clock matches fires: a wall clock that does not exist never
//     fires, one that occurs twice fires twice.
//
// Fire times are never duplicated and strictly increase.
//
// # Interval and once
//
// Interval slots are base + k*interval_seconds (k >= 0) in real seconds,
// unaffected by DST, where base is start_at when set and otherwise the anchor
// given to Parse, truncated to the millisecond. Tasks created one
// after another therefore fire spread over the second as they were
// created, not all at its start (a thousand tasks created through the API
// in a loop, anchored on whole seconds, fired together every second: a
// burst where each could have been on time). A once schedule fires at
// run_at.
//
// # Bounds
//
// start_at and end_at are inclusive and apply to every type.
type Schedule struct {
	spec     Spec
	loc      *time.Location
	cron     *cronExpr
	elapsed  bool      // cron slots follow elapsed time (DSTVixie, hour * or step)
	interval int64     // seconds
	base     time.Time // interval slot 0
	runAt    time.Time
	event    bool      // an event schedule: no time slots
	start    time.Time // zero: unbounded
	end      time.Time // always set: end_at or maxFire()
	excl     []exclusion
	members  []*Schedule // a union's members, in their order
}

// Parse validates spec and returns a Schedule. anchor is the task's
// creation time: interval slots are StartAt + k*interval when StartAt is set,
// otherwise anchor + k*interval (k >= 0), with anchor truncated to the
// millisecond so slots do not depend on the precision the anchor was stored
// with.
//
// Every problem is reported in one *ValidationError whose field names are the
// API's (schedule.type, schedule.cron, ...). A cron expression that can never
// fire (such as 30 February) is invalid.
func Parse(spec Spec, anchor time.Time) (*Schedule, error) {
	if spec.Type == Union {
		return parseUnion(spec, anchor)
	}
	var verr ValidationError
	s := &Schedule{spec: normalizeSpec(spec), end: maxFire()}

	loc, msg := loadZone(spec.Timezone)
	if msg != "" {
		verr.Add("schedule.timezone", msg)
	}
	s.loc = loc

	cronSet := strings.TrimSpace(spec.Cron) != ""
	notFor := func(field string) {
		verr.Add(field, "must not be set when schedule.type is "+spec.Type)
	}
	dialectOK := checkChoice(&verr, spec.Type, "schedule.dialect", spec.Dialect, DialectStandard, DialectQuartz)
	checkChoice(&verr, spec.Type, "schedule.dst_policy", spec.DSTPolicy, DSTVixie, DSTOncePerLocalTime)
	switch spec.Type {
	case Cron:
		switch {
		case !cronSet:
			verr.Add("schedule.cron", "is required for a cron schedule")
		case dialectOK:
			c, msgs := parseCron(spec.Cron, s.spec.Dialect)
			for _, m := range msgs {
				verr.Add("schedule.cron", m)
			}
			s.cron = c
			s.elapsed = c != nil && s.spec.DSTPolicy == DSTVixie && !c.fixedHour
		}
		if spec.IntervalSeconds != 0 {
			notFor("schedule.interval_seconds")
		}
		if spec.RunAt != nil {
			notFor("schedule.run_at")
		}
	case Interval:
		switch n := spec.IntervalSeconds; {
		case n == 0:
			verr.Add("schedule.interval_seconds", "is required for an interval schedule")
		case n < IntervalSecondsMin || n > IntervalSecondsMax:
			verr.Add("schedule.interval_seconds",
				fmt.Sprintf("must be between %d and %d (366 days)", IntervalSecondsMin, IntervalSecondsMax))
		}
		s.interval = spec.IntervalSeconds
		if cronSet {
			notFor("schedule.cron")
		}
		if spec.RunAt != nil {
			notFor("schedule.run_at")
		}
	case Once:
		if spec.RunAt == nil {
			verr.Add("schedule.run_at", "is required when schedule.type is once")
		}
		if cronSet {
			notFor("schedule.cron")
		}
		if spec.IntervalSeconds != 0 {
			notFor("schedule.interval_seconds")
		}
	case Event:
		if !ValidEventName(spec.Event) {
			verr.Add("schedule.event", EventNameRule)
		}
		s.event = true
		if cronSet {
			notFor("schedule.cron")
		}
		if spec.IntervalSeconds != 0 {
			notFor("schedule.interval_seconds")
		}
		if spec.RunAt != nil {
			notFor("schedule.run_at")
		}
	case "":
		verr.Add("schedule.type", `is required; must be one of "cron", "interval", "once", "union", "event"`)
	default:
		verr.Add("schedule.type", fmt.Sprintf(`%q is not a schedule type; must be one of "cron", "interval", "once", "union", "event"`, spec.Type))
	}
	if len(spec.Schedules) > 0 {
		verr.Add("schedule.schedules", "must not be set when schedule.type is not union")
	}
	if spec.Type != Event && spec.Event != "" {
		notFor("schedule.event")
	}

	for _, t := range []struct {
		field string
		at    *time.Time
	}{{"schedule.run_at", spec.RunAt}, {"schedule.start_at", spec.StartAt}, {"schedule.end_at", spec.EndAt}} {
		if t.at != nil && (t.at.Year() < 1 || t.at.After(maxFire())) {
			verr.Add(t.field, "must be between years 0001 and 9999")
		}
	}
	if spec.StartAt != nil && spec.EndAt != nil && !spec.StartAt.Before(*spec.EndAt) {
		verr.Add("schedule.end_at", "must be after schedule.start_at")
	}
	checkCalendarRefs(&verr, spec.ExcludeCalendars)
	if spec.Type == Once && spec.RunAt != nil &&
		(spec.StartAt != nil && spec.RunAt.Before(*spec.StartAt) || spec.EndAt != nil && spec.RunAt.After(*spec.EndAt)) {
		verr.Add("schedule.run_at", "must be within schedule.start_at and schedule.end_at")
	}
	if err := verr.Err(); err != nil {
		return nil, err
	}

	if spec.RunAt != nil {
		s.runAt = spec.RunAt.UTC()
	}
	if spec.StartAt != nil {
		s.start = spec.StartAt.UTC()
	}
	if spec.EndAt != nil {
		s.end = spec.EndAt.UTC()
	}
	s.base = anchor.UTC().Truncate(time.Millisecond)
	if spec.StartAt != nil {
		s.base = s.start
	}
	return s, nil
}

// checkChoice validates an enumerated field that applies to cron schedules
// only: "" or one of choices, the first being the default. Interval and
// once schedules have no such field: they accept "" and the default (which
// a client may send back as it read it from a cron task) and ignore them,
// and reject any other value, as they reject a cron expression. It
// reports whether value is usable.
func checkChoice(verr *ValidationError, typ, field, value string, choices ...string) bool {
	switch {
	case value == "" || value == choices[0]:
		return true
	case !slices.Contains(choices, value):
		quoted := make([]string, len(choices))
		for i, c := range choices {
			quoted[i] = strconv.Quote(c)
		}
		verr.Add(field, fmt.Sprintf("%q is not allowed; must be one of %s", value, strings.Join(quoted, ", ")))
		return false
	case typ != Cron && typ != "":
		verr.Add(field, fmt.Sprintf("must not be %q: it applies to cron schedules only, not to %s schedules", value, typ))
		return false
	}
	return true
}

// normalizeSpec fills the default zone (and, for cron, dialect and DST
// policy; other types have neither), trims the expression and copies the
// times (in UTC) so the Schedule shares nothing with the caller.
func normalizeSpec(spec Spec) Spec {
	if spec.Timezone == "" {
		spec.Timezone = "UTC"
	}
	if spec.Type == Cron {
		spec.Dialect = cmp.Or(spec.Dialect, DialectStandard)
		spec.DSTPolicy = cmp.Or(spec.DSTPolicy, DSTVixie)
	} else {
		spec.Dialect, spec.DSTPolicy = "", ""
	}
	spec.Cron = strings.TrimSpace(spec.Cron)
	spec.RunAt = copyTime(spec.RunAt)
	spec.StartAt = copyTime(spec.StartAt)
	spec.EndAt = copyTime(spec.EndAt)
	spec.ExcludeCalendars = slices.Clone(spec.ExcludeCalendars)
	if spec.Schedules != nil {
		members := make([]Spec, len(spec.Schedules))
		for i, m := range spec.Schedules {
			members[i] = normalizeSpec(m)
		}
		spec.Schedules = members
	}
	return spec
}

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Spec returns the normalised schedule: Timezone filled ("UTC" when it was
// empty), for cron Dialect and DSTPolicy filled ("standard", "vixie"; empty
// for other types), Cron trimmed, times in UTC.
func (s *Schedule) Spec() Spec {
	return normalizeSpec(s.spec)
}

// Location returns the schedule's time zone (UTC unless one was given).
func (s *Schedule) Location() *time.Location {
	return s.loc
}

// Next returns the first fire time strictly after `after`, in UTC, honouring
// start_at and end_at (both inclusive); ok is false when the schedule never
// fires again. Feeding each result back in yields a strictly increasing
// sequence. Fire times are limited to years 0001-9999 (the RFC 3339 range).
// Its cost is bounded (microseconds) for every valid schedule; with
// calendars, it grows with the excluded dates it crosses (nextIncluded).
// A computation that would exceed its bound answers false (NextErr says
// why).
func (s *Schedule) Next(after time.Time) (t time.Time, ok bool) {
	t, ok, _ = s.NextErr(after)
	return t, ok
}

// NextErr is Next, with an error (ErrTooManySteps, ErrNoProgress) when the
// computation was cut short rather than finding that the schedule ends:
// its work is bounded (nextStepsMax loop steps), and every loop must move
// its cursor forward. Neither should happen for a valid schedule; the API
// refuses one that does (422), rather than spin.
func (s *Schedule) NextErr(after time.Time) (t time.Time, ok bool, err error) {
	if s.excl != nil {
		return s.nextIncluded(after)
	}
	return s.next(after)
}

// nextStepsMax bounds the loop steps of one fire-time computation. The
// costliest valid walk, an elapsed-time expression whose every match falls
// in a skipped stretch, takes one step per zone period over the 400-year
// horizon (about 800).
const nextStepsMax = 1 << 14

// next is NextErr without calendars.
func (s *Schedule) next(after time.Time) (t time.Time, ok bool, err error) {
	if !s.start.IsZero() && after.Before(s.start) {
		after = s.start.Add(-time.Nanosecond)
	}
	if after.Before(minFire()) {
		after = minFire().Add(-time.Nanosecond)
	}
	if !after.Before(s.end) {
		return time.Time{}, false, nil
	}
	switch {
	case s.event:
		return time.Time{}, false, nil
	case s.members != nil:
		t, ok, err = s.nextMember(after)
	case s.elapsed:
		t, ok, err = s.nextElapsed(after)
	case s.cron != nil:
		t, ok, err = s.nextCron(after)
	case s.interval > 0:
		t, ok = s.nextInterval(after), true
	default:
		t, ok = s.runAt, s.runAt.After(after)
	}
	if err != nil {
		return time.Time{}, false, err
	}
	if !ok || t.After(s.end) {
		return time.Time{}, false, nil
	}
	if !t.After(after) {
		return time.Time{}, false, ErrNoProgress
	}
	return t, true, nil
}

// Preview returns up to n fire times strictly after `after` (n clamped to
// 1..PreviewMax).
func (s *Schedule) Preview(after time.Time, n int) []time.Time {
	n = min(max(n, 1), PreviewMax)
	out := make([]time.Time, 0, min(n, 16))
	for len(out) < n {
		t, ok := s.Next(after)
		if !ok {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}

// nextInterval returns the first slot base + k*interval after `after`.
func (s *Schedule) nextInterval(after time.Time) time.Time {
	if after.Before(s.base) {
		return s.base
	}
	// Whole seconds elapsed since base, rounded down.
	q := after.Unix() - s.base.Unix()
	if after.Nanosecond() < s.base.Nanosecond() {
		q--
	}
	k := q/s.interval + 1
	return time.Unix(s.base.Unix()+k*s.interval, int64(s.base.Nanosecond())).UTC()
}

// nextCron returns the first cron fire strictly after `after` under the
// once-per-local-time rule (DSTOncePerLocalTime, and DSTVixie with a fixed
// hour).
//
// Fire instants are resolveWall(w) for matching wall clocks w, a
// non-decreasing mapping, so the answer is the instant of the first matching
// wall clock at or after firstWallAfter.
func (s *Schedule) nextCron(after time.Time) (time.Time, bool, error) {
	a := after.Unix() // whole seconds; fires are on whole seconds
	ws := firstWallAfter(s.loc, a)
	y, _, _ := civilFromDays(floorDiv(ws, secondsPerDay))
	maxYear := min(y+cronCheckYears+1, 10000)
	for range nextStepsMax {
		w, ok := s.cron.nextWall(ws, maxYear)
		if !ok {
			return time.Time{}, false, nil
		}
		if x := resolveWall(s.loc, w); x > a {
			return time.Unix(x, 0).UTC(), true, nil
		}
		ws = w + 1 // not reached given the mapping is monotonic; kept for safety
	}
	return time.Time{}, false, ErrTooManySteps
}
