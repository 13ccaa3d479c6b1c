package service

import (
	"fmt"
	"math/bits"
	"strings"
)

const (
	// cronMaxLen bounds a cron expression; real ones are far shorter.
	cronMaxLen = 256
	// cronCheckYears is how far ParseSchedule searches for a first fire to
	// reject expressions that never fire. The Gregorian calendar (leap
	// years and weekdays) repeats every 400 years, so an expression with no
	// match in 400 years has none at all, and one that has a match has one
	// in every 400-year window: Next searches the same horizon. Typical
	// gaps are far shorter (8 years for "0 0 29 2 *" across 2100; a few
	// decades for "Feb 29 AND Sunday").
	cronCheckYears = 400
	allDow         = 1<<7 - 1
)

// cronExpr is a parsed cron expression: one bit per allowed value.
type cronExpr struct {
	second, minute, hour uint64 // bits 0-59, 0-59, 0-23
	dom                  uint64 // bits 1-31
	month                uint64 // bits 1-12
	dow                  uint64 // bits 0-6, 0 = Sunday
	// last has bit k set for "L-k" (k = 0 is "L"): the day k days before
	// the month's last day.
	last uint64
	// domStar and dowStar record a field that starts with * or ? (Vixie
	// cron's rule): if either is set a day must match both fields,
	// otherwise either.
	domStar, dowStar bool
}

// cronField identifies one of the six fields, seconds first.
type cronField int

const (
	fieldSecond cronField = iota
	fieldMinute
	fieldHour
	fieldDom
	fieldMonth
	fieldDow
)

func (f cronField) String() string {
	switch f {
	case fieldSecond:
		return "second"
	case fieldMinute:
		return "minute"
	case fieldHour:
		return "hour"
	case fieldDom:
		return "day-of-month"
	case fieldMonth:
		return "month"
	default:
		return "day-of-week"
	}
}

// bounds returns the values the field accepts. A * or an open-ended step
// ("5/10") covers lo..starHi; day-of-week accepts 7 for Sunday only when
// written explicitly.
func (f cronField) bounds() (lo, hi, starHi int) {
	switch f {
	case fieldSecond, fieldMinute:
		return 0, 59, 59
	case fieldHour:
		return 0, 23, 23
	case fieldDom:
		return 1, 31, 31
	case fieldMonth:
		return 1, 12, 12
	default:
		return 0, 7, 6
	}
}

// names returns the three-letter names the field accepts, concatenated,
// with the value of the first name.
func (f cronField) names() (names string, first int) {
	switch f {
	case fieldMonth:
		return "JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC", 1
	case fieldDow:
		return "SUNMONTUEWEDTHUFRISAT", 0
	default:
		return "", 0
	}
}

// cronDescriptor expands a predefined schedule.
func cronDescriptor(d string) (string, bool) {
	switch strings.ToLower(d) {
	case "@yearly", "@annually":
		return "0 0 1 1 *", true
	case "@monthly":
		return "0 0 1 * *", true
	case "@weekly":
		return "0 0 * * 0", true
	case "@daily", "@midnight":
		return "0 0 * * *", true
	case "@hourly":
		return "0 * * * *", true
	default:
		return "", false
	}
}

// parseCron parses a cron expression: five fields (minute hour day-of-month
// month day-of-week, second 0) or six with seconds first, or a descriptor.
// It returns every problem found, one message per field at most, worded for
// the schedule.cron field.
func parseCron(raw string) (*cronExpr, []string) {
	if len(raw) > cronMaxLen {
		return nil, []string{fmt.Sprintf("must be at most %d characters", cronMaxLen)}
	}
	expr := strings.TrimSpace(raw)
	if expr == "" {
		return nil, []string{"is required"}
	}
	upper := strings.ToUpper(expr)
	if strings.HasPrefix(upper, "TZ=") || strings.HasPrefix(upper, "CRON_TZ=") {
		return nil, []string{"must not start with TZ= or CRON_TZ=; set schedule.timezone instead"}
	}
	fields := strings.Fields(expr)
	if strings.HasPrefix(fields[0], "@") {
		if strings.EqualFold(fields[0], "@every") {
			return nil, []string{`@every is not supported; use schedule.type "interval" with schedule.interval_seconds`}
		}
		std, ok := cronDescriptor(fields[0])
		if !ok {
			return nil, []string{fmt.Sprintf("unknown descriptor %q; use one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly", fields[0])}
		}
		if len(fields) > 1 {
			return nil, []string{fmt.Sprintf("descriptor %s must be the whole expression", fields[0])}
		}
		fields = strings.Fields(std)
	}
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, []string{fmt.Sprintf("must have 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first; got %d", len(fields))}
	}

	c := &cronExpr{}
	var errs []string
	for i, text := range fields {
		f := cronField(i)
		set, star, msg := c.parseField(f, text)
		if msg != "" {
			errs = append(errs, fmt.Sprintf("%s field: %s", f, msg))
			continue
		}
		switch f {
		case fieldSecond:
			c.second = set
		case fieldMinute:
			c.minute = set
		case fieldHour:
			c.hour = set
		case fieldDom:
			c.dom, c.domStar = set, star
		case fieldMonth:
			c.month = set
		case fieldDow:
			c.dow, c.dowStar = set, star
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if _, ok := c.nextWall(daysFromCivil(2000, 1, 1)*secondsPerDay, 2000+cronCheckYears); !ok {
		return nil, []string{"never fires: no date matches the day-of-month, month and day-of-week fields (e.g. 30 February)"}
	}
	return c, nil
}

// parseField parses one field into a value set. star reports a field that
// starts with * or ? (see cronExpr.domStar). For day-of-month, "L" and "L-n"
// set c.last instead and return an empty set.
func (c *cronExpr) parseField(f cronField, text string) (set uint64, star bool, msg string) {
	lo, _, starHi := f.bounds()
	if text == "?" {
		if f != fieldDom && f != fieldDow {
			return 0, false, "? is only allowed in the day-of-month and day-of-week fields"
		}
		for v := lo; v <= starHi; v++ {
			set |= 1 << v
		}
		return set, true, ""
	}
	if strings.Contains(text, "?") {
		return 0, false, "? must be the whole field"
	}
	if f == fieldDom && strings.ContainsAny(text, "Ll") {
		k, msg := parseLast(text)
		if msg != "" {
			return 0, false, msg
		}
		c.last = 1 << k
		return 0, false, ""
	}
	for item := range strings.SplitSeq(text, ",") {
		b, msg := parseItem(f, item)
		if msg != "" {
			return 0, false, msg
		}
		set |= b
	}
	return set, strings.HasPrefix(text, "*"), ""
}

// parseLast parses "L" (last day of the month) or "L-n" (n days before it,
// 1 <= n <= 30), which must be the whole day-of-month field.
func parseLast(text string) (k int, msg string) {
	const usage = `L must be the whole day-of-month field, as "L" or "L-n" with n from 1 to 30`
	if strings.EqualFold(text, "L") {
		return 0, ""
	}
	rest, ok := strings.CutPrefix(strings.ToUpper(text), "L-")
	if !ok {
		return 0, usage
	}
	n, ok := parseNumber(rest)
	if !ok || n < 1 || n > 30 {
		return 0, usage
	}
	return n, ""
}

// parseItem parses one list item: *, a value, a range a-b, each optionally
// with /step; "a/step" means a through the field's maximum.
func parseItem(f cronField, item string) (uint64, string) {
	if item == "" {
		return 0, "empty list item (check for stray commas)"
	}
	flo, _, starHi := f.bounds()
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		maxStep := starHi - flo
		n, ok := parseNumber(stepText)
		switch {
		case strings.Contains(stepText, "/"):
			return 0, fmt.Sprintf("%q has more than one /", item)
		case !ok:
			return 0, fmt.Sprintf("step %q is not a number", stepText)
		case n < 1 || n > maxStep:
			return 0, fmt.Sprintf("step %s is out of range 1-%d", stepText, maxStep)
		}
		step = n
	}
	var lo, hi int
	switch rng {
	case "*":
		lo, hi = flo, starHi
	case "":
		return 0, fmt.Sprintf("%q has no value before /", item)
	default:
		a, b, isRange := strings.Cut(rng, "-")
		var msg string
		if lo, msg = parseValue(f, a); msg != "" {
			return 0, msg
		}
		switch {
		case isRange:
			if hi, msg = parseValue(f, b); msg != "" {
				return 0, msg
			}
			if lo > hi {
				return 0, fmt.Sprintf("range %s is backwards (%d > %d); ranges do not wrap around", rng, lo, hi)
			}
		case hasStep:
			hi = max(lo, starHi)
		default:
			hi = lo
		}
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		if f == fieldDow && v == 7 {
			set |= 1 // 7 is Sunday too
			continue
		}
		set |= 1 << v
	}
	return set, ""
}

// parseValue parses a number or, for month and day-of-week, a three-letter
// name (case-insensitive), checking the field's range.
func parseValue(f cronField, s string) (int, string) {
	lo, hi, _ := f.bounds()
	if s == "" {
		return 0, "missing value in range"
	}
	if n, ok := parseNumber(s); ok {
		if n < lo || n > hi {
			return 0, fmt.Sprintf("value %s is out of range %d-%d", s, lo, hi)
		}
		return n, ""
	}
	names, first := f.names()
	if len(s) == 3 {
		if i := strings.Index(names, strings.ToUpper(s)); i >= 0 && i%3 == 0 {
			return first + i/3, ""
		}
	}
	switch f {
	case fieldMonth:
		return 0, fmt.Sprintf("%q is not a number or a month name (JAN-DEC)", s)
	case fieldDow:
		return 0, fmt.Sprintf("%q is not a number or a weekday name (SUN-SAT)", s)
	default:
		return 0, fmt.Sprintf("%q is not a number", s)
	}
}

// parseNumber parses a non-empty string of ASCII digits, saturating at a
// value larger than any field accepts so range checks report it.
func parseNumber(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = min(n*10+int(s[i]-'0'), 1_000_000)
	}
	return n, true
}

// dayMask returns the days (bits 1-31) of month m of year y that match the
// day-of-month, L and day-of-week fields.
func (c *cronExpr) dayMask(y int64, m int) uint64 {
	dim := daysInMonth(y, m)
	valid := uint64(1)<<(dim+1) - 2
	dom := c.dom & valid
	for l := c.last; l != 0; l &= l - 1 {
		if d := dim - bits.TrailingZeros64(l); d >= 1 {
			dom |= 1 << d
		}
	}
	dow := valid
	if c.dow != allDow {
		dow = 0
		wd := weekdayOfDays(daysFromCivil(y, m, 1))
		for d := 1; d <= dim; d++ {
			if c.dow&(1<<((wd+d-1)%7)) != 0 {
				dow |= 1 << d
			}
		}
	}
	if c.domStar || c.dowStar {
		return dom & dow
	}
	return dom | dow
}

// nextWall returns the first wall clock (wall seconds) at or after ws that
// matches the expression, searching no later than the end of year maxYear.
// It advances field by field (month, day, hour, minute, second), resetting
// the smaller fields, so its cost does not depend on the distance.
func (c *cronExpr) nextWall(ws int64, maxYear int64) (int64, bool) {
	days := floorDiv(ws, secondsPerDay)
	sod := int(ws - days*secondsPerDay)
	y, mo, d := civilFromDays(days)
	h, mi, s := sod/3600, sod/60%60, sod%60
	for y <= maxYear {
		if c.month&(1<<mo) == 0 {
			if next := nextBit(c.month, mo); next >= 0 {
				mo = next
			} else {
				y, mo = y+1, nextBit(c.month, 0)
			}
			d, h, mi, s = 1, 0, 0, 0
		}
		next := nextBit(c.dayMask(y, mo), d)
		if next < 0 {
			if mo++; mo > 12 {
				y, mo = y+1, 1
			}
			d, h, mi, s = 1, 0, 0, 0
			continue
		}
		if next != d {
			d, h, mi, s = next, 0, 0, 0
		}
		if next = nextBit(c.hour, h); next < 0 {
			d, h, mi, s = d+1, 0, 0, 0
			continue
		}
		if next != h {
			h, mi, s = next, 0, 0
		}
		if next = nextBit(c.minute, mi); next < 0 {
			h, mi, s = h+1, 0, 0
			continue
		}
		if next != mi {
			mi, s = next, 0
		}
		if next = nextBit(c.second, s); next < 0 {
			mi, s = mi+1, 0
			continue
		}
		return daysFromCivil(y, mo, d)*secondsPerDay + int64(h*3600+mi*60+next), true
	}
	return 0, false
}

// nextBit returns the smallest set bit of mask at or above from, or -1.
func nextBit(mask uint64, from int) int {
	if from >= 64 {
		return -1
	}
	m := mask &^ (1<<from - 1)
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(m)
}
