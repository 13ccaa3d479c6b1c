package service

import (
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

// loadZone validates and loads an IANA zone name; "" means UTC.
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
		t := time.Unix(p, 0).In(loc)
		_, off := t.Zone()
		start, end := t.ZoneBounds()
		zp := zonePeriod{start: math.MinInt64, end: math.MaxInt64, offset: int64(off)}
		if !start.IsZero() {
			zp.start = start.Unix()
		}
		if !end.IsZero() {
			zp.end = end.Unix()
		}
		periods[n] = zp
		n++
		if zp.end > w+zoneWindow || zp.end <= p {
			break
		}
		p = zp.end
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

// periodAt returns the end (exclusive; math.MaxInt64 when no later
// transition is known) and UTC offset of the zone period holding instant x.
func periodAt(loc *time.Location, x int64) (end, offset int64) {
	t := time.Unix(x, 0).In(loc)
	_, off := t.Zone()
	_, e := t.ZoneBounds()
	if e.IsZero() {
		return math.MaxInt64, int64(off)
	}
	return e.Unix(), int64(off)
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
// walks one period per transition, across the 400-year horizon.)
func (s *Schedule) nextElapsed(after time.Time) (time.Time, bool) {
	loc, c := s.loc, s.cron
	x := after.Unix() + 1 // fires are on whole seconds
	y, _, _ := civilFromDays(floorDiv(wallOf(after, loc), secondsPerDay))
	maxYear := min(y+cronCheckYears+1, 10000)
	scanLo, scanHi := int64(math.MaxInt64), int64(math.MaxInt64)
	for {
		end, off := periodAt(loc, x)
		lo, from := x+off, x+off
		if lo >= scanLo && lo < scanHi {
			lo, from = scanHi, scanLo
		}
		if end == math.MaxInt64 || lo-off < end {
			w, ok := c.nextWall(lo, maxYear)
			if !ok {
				return time.Time{}, false
			}
			if end == math.MaxInt64 || w-off < end {
				return time.Unix(w-off, 0).UTC(), true
			}
			scanLo, scanHi = from, w
		}
		// No fire before end. Instants from scanLo+zoneWindow on have wall
		// clocks at or above scanLo, and those before scanHi-zoneWindow
		// below scanHi: in between, none matches.
		x = end
		if x >= scanLo+zoneWindow && scanHi-zoneWindow > x {
			x = scanHi - zoneWindow
		}
	}
}
