package schedule

import (
	"context"
	"fmt"
	"time"
)

// Calendar limits.
const (
	// CalendarDatesMax bounds a calendar's dates (27 years of every day).
	CalendarDatesMax = 10_000
	// ExcludeCalendarsMax bounds the calendars one schedule excludes
	// (schedule.exclude_calendars).
	ExcludeCalendarsMax = 20
	// excludedPreviewMax bounds the excluded slots a preview lists.
	excludedPreviewMax = PreviewMax
	// calendarJumpsMax bounds the excluded days Next skips over in one
	// call: every calendar together has at most this many dates.
	calendarJumpsMax = ExcludeCalendarsMax*CalendarDatesMax + 1
)

// Calendar is a list of local dates a schedule excludes: no slot fires on
// them, in the calendar's time zone.
type Calendar struct {
	// ID is the calendar's id: a union gives each member, and itself, the
	// calendars its spec names (any other schedule applies them all).
	ID       string
	Timezone string   // IANA; a name that does not load means UTC
	Dates    []string // YYYY-MM-DD (at most CalendarDatesMax); others are ignored
}

// exclusion is one calendar as a schedule applies it: its dates as day
// numbers (days since 1970-01-01) on its zone's wall clock.
type exclusion struct {
	loc  *time.Location
	days map[int64]struct{}
}

// Excluding returns a copy of s that skips every slot whose local date, in
// a calendar's zone, is one of that calendar's dates. cals are the
// calendars s.CalendarIDs() names; a calendar whose zone no longer loads
// is applied in UTC.
func (s *Schedule) Excluding(cals []Calendar) *Schedule {
	if len(cals) == 0 {
		return s
	}
	if s.members != nil {
		return s.excludingUnion(cals)
	}
	c := *s
	c.excl = exclusions(cals)
	return &c
}

// exclusions returns cals as a schedule applies them (nil for none).
func exclusions(cals []Calendar) []exclusion {
	if len(cals) == 0 {
		return nil
	}
	excl := make([]exclusion, 0, len(cals))
	for _, cal := range cals {
		loc, msg := loadZone(cal.Timezone)
		if msg != "" {
			loc = time.UTC
		}
		e := exclusion{loc: loc, days: make(map[int64]struct{}, len(cal.Dates))}
		for _, d := range cal.Dates {
			if t, err := time.Parse(time.DateOnly, d); err == nil {
				e.days[floorDiv(t.Unix(), secondsPerDay)] = struct{}{}
			}
		}
		excl = append(excl, e)
	}
	return excl
}

// excludedBy returns the exclusion that removes slot t, or nil.
func (s *Schedule) excludedBy(t time.Time) *exclusion {
	for i := range s.excl {
		e := &s.excl[i]
		if _, ok := e.days[floorDiv(wallOf(t, e.loc), secondsPerDay)]; ok {
			return e
		}
	}
	return nil
}

// dayEnd returns the last instant of t's local date in e's zone: every
// slot up to it is excluded too.
func (e *exclusion) dayEnd(t time.Time) time.Time {
	y, m, d := t.In(e.loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, e.loc).Add(-time.Nanosecond)
}

// nextIncluded is Next for a schedule with calendars: the first fire
// after `after` that no calendar excludes. An excluded slot skips the rest
// of its excluded day at once, so the cost grows with the excluded dates
// crossed, not with the slots on them.
func (s *Schedule) nextIncluded(after time.Time) (time.Time, bool, error) {
	for range calendarJumpsMax {
		t, ok, err := s.next(after)
		if !ok {
			return time.Time{}, false, err
		}
		e := s.excludedBy(t)
		if e == nil {
			return t, true, nil
		}
		after = laterOf(e.dayEnd(t), t)
	}
	return time.Time{}, false, nil
}

// PreviewExcluded returns up to n fires after `after` (Preview) and the
// slots the calendars removed before the last of them (up to n, or up to
// PreviewMax slots when nothing fires any more); a union's are its own
// calendars' and its members' (a slot another member fires is not
// excluded). It stops with ctx's error when ctx ends, and with NextErr's
// when a computation is cut short.
func (s *Schedule) PreviewExcluded(ctx context.Context, after time.Time, n int) (fires, excluded []time.Time, err error) {
	n = min(max(n, 1), PreviewMax)
	fires, excluded, err = s.previewExcluded(ctx, after, n)
	if err != nil || s.members == nil {
		return fires, excluded, err
	}
	return s.membersExcluded(ctx, after, n, fires, excluded)
}

// previewExcluded is PreviewExcluded without a union's members' calendars.
func (s *Schedule) previewExcluded(ctx context.Context, after time.Time, n int) (fires, excluded []time.Time, err error) {
	for range n + calendarJumpsMax {
		if len(fires) >= n {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		t, ok, err := s.next(after)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			break
		}
		e := s.excludedBy(t)
		switch {
		case e == nil:
			fires = append(fires, t)
			after = t
		case len(excluded) < excludedPreviewMax:
			excluded = append(excluded, t)
			after = t
		default:
			after = laterOf(e.dayEnd(t), t)
		}
	}
	return fires, excluded, nil
}

// Excludes reports whether a calendar of s removes the slot t; for a
// union, its own or, when no member fires t, a member's.
func (s *Schedule) Excludes(t time.Time) bool {
	if s.excludedBy(t) != nil {
		return true
	}
	i := s.MemberAt(t)
	return i >= 0 && s.members[i].excludedBy(t) != nil
}

// checkCalendarRefs checks schedule.exclude_calendars: at most
// ExcludeCalendarsMax ids, each a calendar id, none twice.
func checkCalendarRefs(verr *ValidationError, ids []string) {
	if len(ids) > ExcludeCalendarsMax {
		verr.Add("schedule.exclude_calendars", fmt.Sprintf("at most %d calendars", ExcludeCalendarsMax))
		return
	}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		switch {
		case !isID(id):
			verr.Add(fmt.Sprintf("schedule.exclude_calendars[%d]", i), "must be the id of one of your calendars")
		case seen[id]:
			verr.Add(fmt.Sprintf("schedule.exclude_calendars[%d]", i), "is listed twice")
		}
		seen[id] = true
	}
}

// isID reports whether id has the form of a resource id: a UUID in its
// 36-character text form (8-4-4-4-12 hexadecimal digits, either case),
// the only form ax's ids are accepted in.
func isID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
