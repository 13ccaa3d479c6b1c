package schedule

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	// Embed the IANA database so zones resolve on hosts without tzdata
	// (distroless images, Windows); time.LoadLocation falls back to it.
	_ "time/tzdata"
)

// Local wall clocks are handled as "wall seconds": the civil date and time
// counted in seconds since 1970-01-01T00:00:00 as if it were UTC. They compare
// and step like integers and never meet DST; resolveWall turns one into the
// instant it fires at.

const (
	secondsPerDay = 86400
	// zoneNameMaxLen bounds a timezone name; the longest IANA name is 32.
	zoneNameMaxLen = 64
	// zoneWindow is how far around a wall clock resolveWall looks for zone
	// periods: more than any UTC offset ever used (Manila's LMT was ±15:56).
	zoneWindow = 30 * 3600
)

// checkZoneName rejects names that are not plausible IANA zone names before
// time.LoadLocation sees them: LoadLocation reads files named after its
// argument, and "Local" would mean the server's own zone. It returns a message
// for schedule.timezone, or "" when the name may be loaded.
func checkZoneName(name string) string {
	if len(name) > zoneNameMaxLen {
		return fmt.Sprintf("must be at most %d characters", zoneNameMaxLen)
	}
	if strings.EqualFold(name, "Local") {
		return `"Local" is not allowed; use an IANA name such as "Europe/Berlin" or "UTC"`
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '_' || r == '+' || r == '-' || r == '/'
		if !ok {
			return fmt.Sprintf("%q is not an IANA time zone name (allowed: letters, digits, _ + - /)", name)
		}
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Sprintf("%q is not an IANA time zone name", name)
		}
	}
	return ""
}

// LoadZone validates and loads an IANA zone name; "" means UTC. The
// error's text is written for the client, as the message of the field
// that named the zone.
func LoadZone(name string) (*time.Location, error) {
	loc, msg := loadZone(name)
	if msg != "" {
		return nil, errors.New(msg)
	}
	return loc, nil
}

// loadZone is LoadZone with the message as a string ("" when the zone
// loaded).
func loadZone(name string) (*time.Location, string) {
	if name == "" || name == "UTC" {
		return time.UTC, ""
	}
	if msg := checkZoneName(name); msg != "" {
		return nil, msg
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("unknown time zone %q", name)
	}
	return loc, ""
}

// wallOf returns the wall seconds of the (whole-second floor of) instant t in
// loc.
func wallOf(t time.Time, loc *time.Location) int64 {
	_, off := t.In(loc).Zone()
	return t.Unix() + int64(off)
}

// zonePeriod is a span [start, end) of instants with one UTC offset.
type zonePeriod struct {
	start, end int64
	offset     int64
}

// resolveWall returns the instant (Unix seconds) at which wall clock w fires
// in loc under ax's DST rule: a wall clock that occurs once fires then; one
// that occurs twice (fall back) fires at its first occurrence; one that does
// not occur (spring forward) fires at the first instant after the gap, i.e.
// the transition itself.
//
// time.Date's choice for such times is documented as unspecified, so the
// zone periods around w are enumerated with ZoneBounds and every candidate
// offset is checked to round-trip. The mapping is non-decreasing in w, which
// Next relies on.
func resolveWall(loc *time.Location, w int64) int64 {
	if loc == time.UTC {
		return w
	}
	var periods [8]zonePeriod
	n := 0
	for p := w - zoneWindow; n < len(periods); {
		zp := zoneSpan(loc, p)
		periods[n] = zp
		n++
		if zp.end > w+zoneWindow {
			break
		}
		p = zp.end // > p: zoneSpan's end always lies after its instant
	}
	// Periods are in time order, so the first one containing w is the
	// first occurrence.
	for _, zp := range periods[:n] {
		if x := w - zp.offset; x >= zp.start && x < zp.end {
			return x
		}
	}
	// w falls in a gap: fire when the wall clock first passes it.
	for _, zp := range periods[1:n] {
		if zp.start+zp.offset > w {
			return zp.start
		}
	}
	return w - periods[0].offset // unreachable for real zones
}

// firstWallAfter returns the smallest wall clock (wall seconds) whose
// instant under resolveWall lies after instant a (Unix seconds). Usually
// that is the wall clock one second after a's own; when a lies in the
// repeat of a fall-back stretch, the wall clocks that follow it already
// fired at their first occurrence, so the answer is found by binary search
// over the monotonic mapping.
func firstWallAfter(loc *time.Location, a int64) int64 {
	wa := wallOf(time.Unix(a, 0), loc)
	if loc == time.UTC || resolveWall(loc, wa) == a {
		return wa + 1
	}
	// resolveWall(wa+zoneWindow) > a: no offset change spans zoneWindow.
	lo, hi := wa+1, wa+zoneWindow
	for lo < hi {
		mid := lo + (hi-lo)/2
		if resolveWall(loc, mid) > a {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// daysFromCivil returns the days since 1970-01-01 of a proleptic Gregorian
// date (Howard Hinnant's algorithm); m is 1-12.
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// weekdayOfDays returns the weekday (0 = Sunday) of a day count from
// daysFromCivil; 1970-01-01 was a Thursday.
func weekdayOfDays(days int64) int {
	return int(floorMod(days+4, 7))
}

func daysInMonth(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	default:
		return 31
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	return a - floorDiv(a, b)*b
}

// zoneSpan returns the zone period of loc holding instant x (Unix seconds):
// start (math.MinInt64 when no earlier transition is known), end (exclusive;
// math.MaxInt64 when no later one is known) and UTC offset, always with
// start <= x < end.
//
// time.Time.ZoneBounds alone does not keep that promise: past the last
// transition the zone file lists (2037 in Go's tzdata), zones with DST
// rules get their bounds from the rule string, year by year, and for
// every instant of 31 December (UTC) of a leap year the reported end is
// that day's 00:00 UTC, before the instant (2040-12-31T12:00Z in
// America/New_York: end 2040-12-31T00:00Z). A loop that moves to the end
// of the period then never moves forward. Such a bound is replaced by
// probing the offset: the first instant after x with another offset, found
// hour by hour and then to the second; with no change within a probe
// window, the bound reported at the window's end when it lies beyond it,
// else the window's end (a boundary between two periods of one offset,
// which every caller handles as any other).
func zoneSpan(loc *time.Location, x int64) zonePeriod {
	t := time.Unix(x, 0).In(loc)
	_, off := t.Zone()
	start, end := t.ZoneBounds()
	zp := zonePeriod{start: math.MinInt64, end: math.MaxInt64, offset: int64(off)}
	if !start.IsZero() {
		zp.start = start.Unix()
	}
	if !end.IsZero() {
		zp.end = end.Unix()
	}
	if zp.start > x {
		zp.start = probeOffsetChange(loc, x, zp.offset, -1)
	}
	if zp.end <= x {
		zp.end = probeOffsetChange(loc, x, zp.offset, 1)
	}
	return zp
}

// zoneProbeWindow is how far probeOffsetChange looks, in hours: more than
// the day ZoneBounds gets wrong.
const zoneProbeWindow = 48

// probeOffsetChange returns the bound, in direction dir, of the stretch of
// instants around x whose UTC offset in loc is off: after (dir 1), the
// first instant with another offset; before (dir -1), the first instant
// with off. It looks zoneProbeWindow hours away at most; with no change
// there, it returns the window's far end (after: the bound ZoneBounds
// reports there, when that lies beyond).
// Zone offsets change at most once an hour, so hourly probes miss none.
func probeOffsetChange(loc *time.Location, x, off int64, dir int64) int64 {
	offsetAt := func(u int64) int64 {
		_, o := time.Unix(u, 0).In(loc).Zone()
		return int64(o)
	}
	for h := int64(1); h <= zoneProbeWindow; h++ {
		p := x + dir*h*3600
		if offsetAt(p) == off {
			continue
		}
		// Bisect between the last probe with off (near) and p (far).
		near := p - dir*3600
		for (p-near)*dir > 1 {
			mid := near + (p-near)/2
			if offsetAt(mid) == off {
				near = mid
			} else {
				p = mid
			}
		}
		if dir > 0 {
			return p // the period's end: the first instant with the other offset
		}
		return near // the period's start: the first instant with off
	}
	far := x + dir*zoneProbeWindow*3600
	if dir > 0 {
		if _, e := time.Unix(far, 0).In(loc).ZoneBounds(); !e.IsZero() && e.Unix() > far {
			return e.Unix()
		}
	}
	return far
}

// periodAt returns the end (exclusive; math.MaxInt64 when no later
// transition is known; always after x) and UTC offset of the zone period
// holding instant x.
func periodAt(loc *time.Location, x int64) (end, offset int64) {
	zp := zoneSpan(loc, x)
	return zp.end, zp.offset
}

// nextElapsed returns the first cron fire strictly after `after` under the
// elapsed-time rule (DSTVixie with an hour field that has * or a step):
// the first instant whose own wall clock matches. A wall clock the clock
// jumps over never fires; one it shows twice fires twice.
//
// It walks the zone periods from `after`, searching each period's stretch
// of wall clocks with nextWall. It remembers the last stretch of wall
// clocks searched without a match, [scanLo, scanHi), so it never searches
// one twice and jumps over the periods whose wall clocks all lie in it: the
// cost is a few nextWall calls, not one per transition up to a distant
// fire. (Only an expression whose every match lies in a skipped stretch
// walks one period per transition, across the 400-year horizon: about a
// millisecond, once, for a schedule that then never fires.)
func (s *Schedule) nextElapsed(after time.Time) (time.Time, bool, error) {
	loc, c := s.loc, s.cron
	x := after.Unix() + 1 // fires are on whole seconds
	y, _, _ := civilFromDays(floorDiv(wallOf(after, loc), secondsPerDay))
	maxYear := min(y+cronCheckYears+1, 10000)
	scanLo, scanHi := int64(math.MaxInt64), int64(math.MaxInt64)
	for steps := 0; ; steps++ {
		if steps == nextStepsMax {
			return time.Time{}, false, ErrTooManySteps
		}
		end, off := periodAt(loc, x)
		lo, from := x+off, x+off
		if lo >= scanLo && lo < scanHi {
			lo, from = scanHi, scanLo
		}
		if end == math.MaxInt64 || lo-off < end {
			w, ok := c.nextWall(lo, maxYear)
			if !ok {
				return time.Time{}, false, nil
			}
			if end == math.MaxInt64 || w-off < end {
				return time.Unix(w-off, 0).UTC(), true, nil
			}
			scanLo, scanHi = from, w
		}
		// No fire before end. Instants from scanLo+zoneWindow on have wall
		// clocks at or above scanLo, and those before scanHi-zoneWindow
		// below scanHi: in between, none matches.
		next := end
		if next >= scanLo+zoneWindow && scanHi-zoneWindow > next {
			next = scanHi - zoneWindow
		}
		if next <= x {
			return time.Time{}, false, ErrNoProgress
		}
		x = next
	}
}

// Notes on a cron fire time's relation to DST (Schedule.DSTNote).
const (
	// DSTShifted: the local time the slot is for does not exist (a
	// spring-forward skipped it); it fires at the first instant after the
	// gap.
	DSTShifted = "shifted"
	// DSTRepeated: the slot's local time occurs twice (a fall-back) and
	// this fire is its second pass (vixie, with an hour of * or a step).
	DSTRepeated = "repeated"
)

// DSTNote says how fire time t of s relates to its zone's DST transitions:
// DSTShifted, DSTRepeated, or "" for a fire at its own local time's only or
// first occurrence (and for interval and once schedules). A union's note
// is that of the member that produces t (MemberAt).
func (s *Schedule) DSTNote(t time.Time) string {
	if s.members != nil {
		if i := s.MemberAt(t); i >= 0 {
			return s.members[i].DSTNote(t)
		}
		return ""
	}
	if s.cron == nil || s.loc == time.UTC {
		return ""
	}
	w := wallOf(t, s.loc)
	y, _, _ := civilFromDays(floorDiv(w, secondsPerDay))
	if m, ok := s.cron.nextWall(w, y); !ok || m != w {
		return DSTShifted
	}
	if resolveWall(s.loc, w) != t.Unix() {
		return DSTRepeated
	}
	return ""
}
