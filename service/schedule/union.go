package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UnionMembersMin and UnionMembersMax bound a union's members
// (schedule.schedules).
const (
	UnionMembersMin = 2
	UnionMembersMax = 10
)

// parseUnion is Parse for a union: every member is parsed as a schedule of
// its own (cron or interval, with the same anchor), its problems reported
// under schedule.schedules[i]. The union's own fields are its bounds
// (start_at, end_at) and calendars, which apply to every member; the
// fields that make a slot (cron, interval_seconds, timezone, dialect,
// dst_policy) belong to the members.
func parseUnion(spec Spec, anchor time.Time) (*Schedule, error) {
	var verr ValidationError
	onMembers := func(field string) {
		verr.Add(field, "must not be set when schedule.type is union: each of schedule.schedules has its own")
	}
	if strings.TrimSpace(spec.Cron) != "" {
		onMembers("schedule.cron")
	}
	if spec.IntervalSeconds != 0 {
		onMembers("schedule.interval_seconds")
	}
	if spec.RunAt != nil {
		verr.Add("schedule.run_at", "must not be set when schedule.type is union")
	}
	// "UTC" is accepted as it is read back (the default, as a client may
	// send it again); any other zone would be a member's.
	if spec.Timezone != "" && spec.Timezone != "UTC" {
		onMembers("schedule.timezone")
	}
	checkChoice(&verr, Union, "schedule.dialect", spec.Dialect, DialectStandard, DialectQuartz)
	checkChoice(&verr, Union, "schedule.dst_policy", spec.DSTPolicy, DSTVixie, DSTOncePerLocalTime)

	var members []*Schedule
	if n := len(spec.Schedules); n < UnionMembersMin || n > UnionMembersMax {
		verr.Add("schedule.schedules", fmt.Sprintf("must hold %d to %d schedules, not %d", UnionMembersMin, UnionMembersMax, n))
	} else {
		members = make([]*Schedule, 0, n)
		for i, m := range spec.Schedules {
			field := fmt.Sprintf("schedule.schedules[%d]", i)
			if msg := memberTypeProblem(m.Type); msg != "" {
				verr.Add(field+".type", msg)
				continue
			}
			ms, err := Parse(m, anchor)
			var mv *ValidationError
			switch {
			case errors.As(err, &mv):
				for _, f := range mv.Fields {
					verr.Add(field+strings.TrimPrefix(f.Field, "schedule"), strings.ReplaceAll(f.Message, "schedule.", field+"."))
				}
			case err != nil:
				verr.Add(field, err.Error())
			default:
				members = append(members, ms)
			}
		}
	}

	for _, t := range []struct {
		field string
		at    *time.Time
	}{{"schedule.start_at", spec.StartAt}, {"schedule.end_at", spec.EndAt}} {
		if t.at != nil && (t.at.Year() < 1 || t.at.After(maxFire())) {
			verr.Add(t.field, "must be between years 0001 and 9999")
		}
	}
	if spec.StartAt != nil && spec.EndAt != nil && !spec.StartAt.Before(*spec.EndAt) {
		verr.Add("schedule.end_at", "must be after schedule.start_at")
	}
	checkCalendarRefs(&verr, spec.ExcludeCalendars)
	if err := verr.Err(); err != nil {
		return nil, err
	}

	s := &Schedule{spec: normalizeSpec(spec), loc: time.UTC, end: maxFire(), members: members}
	if spec.StartAt != nil {
		s.start = spec.StartAt.UTC()
	}
	if spec.EndAt != nil {
		s.end = spec.EndAt.UTC()
	}
	return s, nil
}

// memberTypeProblem says why a union's member may not have type typ, or
// "" when it may: a member is a cron or an interval schedule.
func memberTypeProblem(typ string) string {
	switch typ {
	case Cron, Interval:
		return ""
	case "":
		return `is required; a union's member is "cron" or "interval"`
	case Union:
		return `a union cannot hold a union: list its members here instead; a member is "cron" or "interval"`
	default:
		return fmt.Sprintf(`%q is not allowed in a union; a member is "cron" or "interval"`, typ)
	}
}

// nextMember is next for a union: the earliest of its members' next fires
// (each with its own bounds and calendars), so an instant two members
// produce is one fire.
func (s *Schedule) nextMember(after time.Time) (time.Time, bool, error) {
	var first time.Time
	found := false
	for _, m := range s.members {
		t, ok, err := m.NextErr(after)
		if err != nil {
			return time.Time{}, false, err
		}
		if ok && (!found || t.Before(first)) {
			first, found = t, true
		}
	}
	return first, found, nil
}

// Members returns a union's member schedules, in their order (nil for
// any other type).
func (s *Schedule) Members() []*Schedule {
	return slices.Clone(s.members)
}

// MemberAt returns the index of the union member that produces slot t:
// the lowest index among the members that fire at t (their own calendars
// applied), or, for a slot calendars removed, among those whose
// expression or interval has t. It is -1 when no member has t, and for a
// schedule that is not a union.
func (s *Schedule) MemberAt(t time.Time) int {
	raw := -1
	for i, m := range s.members {
		if !m.has(t) {
			continue
		}
		if m.excludedBy(t) == nil {
			return i
		}
		if raw < 0 {
			raw = i
		}
	}
	return raw
}

// has reports whether t is a slot of s, calendars aside.
func (s *Schedule) has(t time.Time) bool {
	next, ok, err := s.next(t.Add(-time.Nanosecond))
	return err == nil && ok && next.Equal(t)
}

// LocationAt returns the time zone a fire at t is local to: a union's is
// its producing member's (MemberAt; the first member's for an instant no
// member has, such as a manual trigger's), any other schedule's is
// Location.
func (s *Schedule) LocationAt(t time.Time) *time.Location {
	if s.members == nil {
		return s.loc
	}
	return s.members[max(s.MemberAt(t), 0)].loc
}

// CalendarIDs returns every calendar id the schedule excludes: its own
// and, for a union, its members', each once, in the order they are first
// named. Excluding wants these calendars.
func (s *Schedule) CalendarIDs() []string {
	ids := slices.Clone(s.spec.ExcludeCalendars)
	for _, m := range s.members {
		for _, id := range m.spec.ExcludeCalendars {
			if !slices.ContainsFunc(ids, func(x string) bool { return strings.EqualFold(x, id) }) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// excludingUnion is Excluding for a union: each member, and the union
// itself, applies the calendars it names (matched by Calendar.ID).
func (s *Schedule) excludingUnion(cals []Calendar) *Schedule {
	c := *s
	c.members = make([]*Schedule, len(s.members))
	for i, m := range s.members {
		c.members[i] = m.Excluding(named(cals, m.spec.ExcludeCalendars))
	}
	c.excl = exclusions(named(cals, s.spec.ExcludeCalendars))
	return &c
}

// named returns the calendars of cals whose id is one of ids.
func named(cals []Calendar, ids []string) []Calendar {
	var out []Calendar
	for _, c := range cals {
		if slices.ContainsFunc(ids, func(id string) bool { return strings.EqualFold(id, c.ID) }) {
			out = append(out, c)
		}
	}
	return out
}

// membersExcluded adds to a union's preview (fires, excluded) the slots
// its members' calendars removed in the same span: those no other member
// fires, within the union's bounds, up to excludedPreviewMax.
func (s *Schedule) membersExcluded(ctx context.Context, after time.Time, n int, fires, excluded []time.Time) ([]time.Time, []time.Time, error) {
	last := s.end
	if len(fires) >= n {
		last = fires[len(fires)-1]
	}
	fired := make(map[time.Time]bool, len(fires))
	for _, t := range fires {
		fired[t] = true
	}
	added := false
	for _, m := range s.members {
		if m.excl == nil {
			continue
		}
		_, mex, err := m.PreviewExcluded(ctx, after, n)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range mex {
			if t.After(last) || fired[t] || !s.start.IsZero() && t.Before(s.start) {
				continue
			}
			excluded = append(excluded, t)
			added = true
		}
	}
	if added {
		slices.SortFunc(excluded, time.Time.Compare)
		excluded = slices.CompactFunc(excluded, time.Time.Equal)
		excluded = excluded[:min(len(excluded), excludedPreviewMax)]
	}
	return fires, excluded, nil
}

// Normalize returns spec as Parse keeps it (Spec): the default zone,
// dialect and DST policy filled, the expression trimmed, times in UTC, a
// union's members likewise.
func Normalize(spec Spec) Spec {
	return normalizeSpec(spec)
}
