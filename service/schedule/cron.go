package schedule

import (
	"fmt"
	"math/bits"
	"strings"
)

const (
	// cronMaxLen bounds a cron expression; real ones are far shorter.
	cronMaxLen = 256
	// cronCheckYears is how far Parse searches for a first fire to
	// reject expressions that never fire. The Gregorian calendar (leap
	// years and weekdays) repeats every 400 years, so an expression with no
	// match in 400 years has none at all, and one that has a match has one
	// in every 400-year window: Next searches the same horizon. Typical
	// gaps are far shorter (8 years for "0 0 29 2 *" across 2100; a few
	// decades for "Feb 29 AND Sunday").
	cronCheckYears = 400
	// cronYearMin and cronYearMax bound the optional year field (Quartz's
	// range). Without a year field, or with *, every year matches.
	cronYearMin = 1970
	cronYearMax = 2099
	allDow      = 1<<7 - 1
)

// Cron dialects, as schedule.dialect spells them.
const (
	// DialectStandard is Vixie cron's syntax: day-of-week 0 and 7 are
	// Sunday, and a day matches either restricted day field.
	DialectStandard = "standard"
	// DialectQuartz is Quartz's CronTrigger syntax: seconds first, ? in
	// exactly one day field, day-of-week 1 = Sunday .. 7 = Saturday.
	DialectQuartz = "quartz"
)

// cronExpr is a parsed cron expression: one bit per allowed value.
type cronExpr struct {
	second, minute, hour uint64 // bits 0-59, 0-59, 0-23
	dom                  uint64 // bits 1-31
	month                uint64 // bits 1-12
	dow                  uint64 // bits 0-6, 0 = Sunday, in both dialects
	// last has bit k set for "L-k" (k = 0 is "L"): the day k days before
	// the month's last day.
	last uint64
	// nearest has bit d set for "dW": the weekday nearest to day d, within
	// the month. lastWeekday is "LW": the month's last weekday.
	nearest     uint64
	lastWeekday bool
	// dowLast has bit w set for "wL": the month's last weekday w (0 =
	// Sunday). dowNth has bit w*5+n-1 set for "w#n": its n-th weekday w.
	dowLast, dowNth uint64
	// years has bit y-cronYearMin set for each allowed year when hasYears
	// (a year field other than *).
	years    [3]uint64
	hasYears bool
	// both reports that a day must match both day fields; otherwise
	// either. Vixie cron's rule (standard): both when either field starts
	// with * or ?. Quartz: always, the ? field matching every day.
	both bool
	// fixedHour reports an hour field with neither * nor a step: its slots
	// are wall-clock appointments (see DSTVixie).
	fixedHour bool
}

// cronField identifies one of the seven fields, seconds first.
type cronField int

const (
	fieldSecond cronField = iota
	fieldMinute
	fieldHour
	fieldDom
	fieldMonth
	fieldDow
	fieldYear
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
	case fieldDow:
		return "day-of-week"
	default:
		return "year"
	}
}

// period is the length of the field's cycle, by which a range whose end is
// below its start wraps around (FRI-MON, NOV-FEB, 22-2); 0 for the year.
func (f cronField) period() int {
	switch f {
	case fieldSecond, fieldMinute:
		return 60
	case fieldHour:
		return 24
	case fieldDom:
		return 31
	case fieldMonth:
		return 12
	case fieldDow:
		return 7
	default:
		return 0
	}
}

// cronParser parses the fields of one dialect into c.
type cronParser struct {
	quartz bool
	c      *cronExpr
}

// bounds returns the values the field accepts. A * or an open-ended step
// ("5/10") covers lo..starHi; standard day-of-week accepts 7 for Sunday
// only when written explicitly.
func (p cronParser) bounds(f cronField) (lo, hi, starHi int) {
	switch f {
	case fieldSecond, fieldMinute:
		return 0, 59, 59
	case fieldHour:
		return 0, 23, 23
	case fieldDom:
		return 1, 31, 31
	case fieldMonth:
		return 1, 12, 12
	case fieldDow:
		if p.quartz {
			return 1, 7, 7
		}
		return 0, 7, 6
	default:
		return cronYearMin, cronYearMax, cronYearMax
	}
}

// bit returns the bit of value v (within lo..hi of the field, or beyond hi
// by less than a period for a wrapped range).
func (p cronParser) bit(f cronField, v int) int {
	lo, _, _ := p.bounds(f)
	if n := f.period(); n > 0 {
		v = lo + (v-lo)%n
	}
	switch f {
	case fieldDow:
		if p.quartz {
			return v - 1 // 1 = Sunday
		}
		return v % 7 // 0 and 7 = Sunday
	case fieldYear:
		return v - cronYearMin
	default:
		return v
	}
}

// names returns the three-letter names the field accepts, concatenated,
// with the value of the first name.
func (p cronParser) names(f cronField) (names string, first int) {
	switch f {
	case fieldMonth:
		return "JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC", 1
	case fieldDow:
		if p.quartz {
			return "SUNMONTUEWEDTHUFRISAT", 1
		}
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

// parseCron parses a cron expression in a dialect (DialectStandard or
// DialectQuartz). Standard: five fields (minute hour day-of-month month
// day-of-week, second 0), six with seconds first, or seven with seconds
// first and a year last. Quartz: six or seven fields, seconds first. A
// descriptor (@daily ...) means the same in both dialects. It returns every
// problem found, one message per field at most, worded for the
// schedule.cron field.
func parseCron(raw, dialect string) (*cronExpr, []string) {
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
	p := cronParser{quartz: dialect == DialectQuartz, c: &cronExpr{}}
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
		p.quartz = false // a descriptor means the same in both dialects
	}
	switch n := len(fields); {
	case p.quartz && n != 6 && n != 7:
		return nil, []string{fmt.Sprintf("must have 6 fields (second minute hour day-of-month month day-of-week) or 7 with a year last in the quartz dialect; got %d", n)}
	case n == 5 && !p.quartz:
		fields = append([]string{"0"}, fields...)
	case n == 6 || n == 7:
	default:
		return nil, []string{fmt.Sprintf("must have 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or 7 with seconds first and a year last; got %d", n)}
	}

	c := p.c
	var errs []string
	for i, text := range fields {
		f := cronField(i)
		set, msg := p.parseField(f, text)
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
			c.fixedHour = !strings.ContainsAny(text, "*/")
		case fieldDom:
			c.dom = set
		case fieldMonth:
			c.month = set
		case fieldDow:
			c.dow = set
		}
	}
	domStar := strings.HasPrefix(fields[fieldDom], "*") || fields[fieldDom] == "?"
	dowStar := strings.HasPrefix(fields[fieldDow], "*") || fields[fieldDow] == "?"
	c.both = domStar || dowStar
	if p.quartz {
		c.both = true
		switch domQ, dowQ := fields[fieldDom] == "?", fields[fieldDow] == "?"; {
		case domQ && dowQ:
			errs = append(errs, "day-of-month and day-of-week fields: the quartz dialect allows ? in only one of them")
		case !domQ && !dowQ:
			errs = append(errs, fmt.Sprintf(`day-of-month and day-of-week fields: the quartz dialect needs ? in exactly one of them (got %q and %q); e.g. "0 0 12 ? * MON" or "0 0 12 1 * ?"`,
				fields[fieldDom], fields[fieldDow]))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	from, maxYear := int64(2000), int64(2000+cronCheckYears)
	if c.hasYears {
		from, maxYear = c.nextYear(cronYearMin), cronYearMax
	}
	if _, ok := c.nextWall(daysFromCivil(from, 1, 1)*secondsPerDay, maxYear); !ok {
		if c.hasYears {
			return nil, []string{"never fires: no date in the year field's years matches the day-of-month, month and day-of-week fields"}
		}
		return nil, []string{"never fires: no date matches the day-of-month, month and day-of-week fields (e.g. 30 February)"}
	}
	return c, nil
}

// parseField parses one field into a value set (bits as in cronExpr). The
// day fields' special items (L, W, #) and the year set go to p.c directly.
func (p cronParser) parseField(f cronField, text string) (set uint64, msg string) {
	lo, _, starHi := p.bounds(f)
	if text == "?" {
		if f != fieldDom && f != fieldDow {
			return 0, "? is only allowed in the day-of-month and day-of-week fields"
		}
		for v := lo; v <= starHi; v++ {
			set |= 1 << p.bit(f, v)
		}
		return set, ""
	}
	if strings.Contains(text, "?") {
		return 0, "? must be the whole field"
	}
	if f != fieldDow && strings.Contains(text, "#") {
		return 0, "# (the n-th weekday of the month) is only allowed in the day-of-week field"
	}
	if f == fieldYear {
		if text == "*" {
			return 0, ""
		}
		var years [3]uint64
		for item := range strings.SplitSeq(text, ",") {
			if msg := p.parseItem(f, item, func(b int) { years[b/64] |= 1 << (b % 64) }); msg != "" {
				return 0, msg
			}
		}
		p.c.years, p.c.hasYears = years, true
		return 0, ""
	}
	for item := range strings.SplitSeq(text, ",") {
		var msg string
		switch f {
		case fieldDom:
			msg = p.parseDomItem(item, &set)
		case fieldDow:
			msg = p.parseDowItem(item, &set)
		default:
			msg = p.parseItem(f, item, func(b int) { set |= 1 << b })
		}
		if msg != "" {
			return 0, msg
		}
	}
	return set, ""
}

// parseDomItem parses a day-of-month item: L, L-n, LW, nW or a plain item.
func (p cronParser) parseDomItem(item string, set *uint64) string {
	up := strings.ToUpper(item)
	switch {
	case up == "L":
		p.c.last |= 1
	case up == "LW":
		p.c.lastWeekday = true
	case strings.HasPrefix(up, "L"):
		rest, ok := strings.CutPrefix(up, "L-")
		n, isNum := parseNumber(rest)
		if _, nW := parseNumber(strings.TrimSuffix(rest, "W")); ok && nW && strings.HasSuffix(rest, "W") {
			return fmt.Sprintf(`%q: Quartz's L-nW (the weekday nearest n days before the month's last day) is not supported; `+
				`use "L-n" or "LW"`, item)
		}
		if strings.ContainsAny(up, "/") || ok && strings.Contains(rest, "-") {
			return lInRange(item)
		}
		if !ok || !isNum || n < 1 || n > 30 {
			return fmt.Sprintf(`%q: L is the month's last day; use "L", "L-n" (n days before it, n from 1 to 30) or "LW" (its last weekday)`, item)
		}
		p.c.last |= 1 << n
	case strings.Contains(up, "L") && strings.ContainsAny(up, "-/"):
		return lInRange(item)
	case strings.HasSuffix(up, "W"):
		n, ok := parseNumber(up[:len(up)-1])
		if !ok || n < 1 || n > 31 {
			return fmt.Sprintf(`%q: W needs a single day of the month (1-31) before it, as in "15W" (the weekday nearest the 15th)`, item)
		}
		p.c.nearest |= 1 << n
	default:
		return p.parseItem(fieldDom, item, func(b int) { *set |= 1 << b })
	}
	return ""
}

// lInRange is the message of a day-of-month item that puts L in a range
// or a step (29-L, L-2/2): L is an item of its own.
func lInRange(item string) string {
	return fmt.Sprintf(`%q: L (the month's last day) cannot be part of a range or a step; list it instead, as in "29,30,L"`, item)
}

// parseDowItem parses a day-of-week item: L (Saturday, the week's last
// day), dL (the month's last weekday d), d#n (its n-th weekday d) or a
// plain item.
func (p cronParser) parseDowItem(item string, set *uint64) string {
	up := strings.ToUpper(item)
	example := [2]string{"5L", "1#2"} // the last Friday, the 2nd Monday
	if p.quartz {
		example = [2]string{"6L", "2#2"}
	}
	switch {
	case up == "L":
		*set |= 1 << 6
	case strings.Contains(up, "#"):
		day, nth, _ := strings.Cut(up, "#")
		v, msg := p.parseValue(fieldDow, day)
		if msg != "" {
			return fmt.Sprintf("%q: # needs a single weekday before it, as in %q (the 2nd Monday)%s", item, example[1], because(day, msg))
		}
		n, ok := parseNumber(nth)
		if !ok || n < 1 || n > 5 {
			return fmt.Sprintf("%q: the number after # must be 1 to 5 (the n-th such weekday of the month)", item)
		}
		p.c.dowNth |= 1 << (p.bit(fieldDow, v)*5 + n - 1)
	case strings.HasSuffix(up, "L"):
		v, msg := p.parseValue(fieldDow, up[:len(up)-1])
		if msg != "" {
			return fmt.Sprintf("%q: L after a weekday needs a single weekday before it, as in %q (the month's last Friday)%s", item, example[0], because(up[:len(up)-1], msg))
		}
		p.c.dowLast |= 1 << p.bit(fieldDow, v)
	default:
		return p.parseItem(fieldDow, item, func(b int) { *set |= 1 << b })
	}
	return ""
}

// because appends the reason a part of an item was refused, unless the
// part is empty.
func because(part, msg string) string {
	if part == "" {
		return ""
	}
	return ": " + msg
}

// parseItem parses one list item: *, a value, a range a-b, each optionally
// with /step; "a/step" means a through the field's maximum. A range whose
// end is below its start wraps around the field's cycle (22-2 is 22, 23, 0,
// 1, 2; FRI-MON is FRI, SAT, SUN, MON); a step counts on across the wrap.
// add receives the bit of each value.
func (p cronParser) parseItem(f cronField, item string, add func(bit int)) string {
	if item == "" {
		return "empty list item (check for stray commas)"
	}
	flo, _, starHi := p.bounds(f)
	rng, stepText, hasStep := strings.Cut(item, "/")
	step := 1
	if hasStep {
		maxStep := starHi - flo
		n, ok := parseNumber(stepText)
		switch {
		case strings.Contains(stepText, "/"):
			return fmt.Sprintf("%q has more than one /", item)
		case !ok:
			return fmt.Sprintf("step %q is not a number", stepText)
		case n < 1 || n > maxStep:
			return fmt.Sprintf("step %s is out of range 1-%d", stepText, maxStep)
		}
		step = n
	}
	var lo, hi int
	switch rng {
	case "*":
		lo, hi = flo, starHi
	case "":
		return fmt.Sprintf("%q has no value before /", item)
	default:
		a, b, isRange := strings.Cut(rng, "-")
		var msg string
		if lo, msg = p.parseValue(f, a); msg != "" {
			return msg
		}
		switch {
		case isRange:
			if hi, msg = p.parseValue(f, b); msg != "" {
				return msg
			}
			if lo > hi {
				if f.period() == 0 {
					return fmt.Sprintf("range %s is backwards (%d > %d); the year field does not wrap around", rng, lo, hi)
				}
				hi += f.period()
			}
		case hasStep:
			hi = max(lo, starHi)
		default:
			hi = lo
		}
	}
	for v := lo; v <= hi; v += step {
		add(p.bit(f, v))
	}
	return ""
}

// parseValue parses a number or, for month and day-of-week, a three-letter
// name (case-insensitive), checking the field's range.
func (p cronParser) parseValue(f cronField, s string) (int, string) {
	lo, hi, _ := p.bounds(f)
	if s == "" {
		return 0, "missing value in range"
	}
	if n, ok := parseNumber(s); ok {
		if n < lo || n > hi {
			if f == fieldDow && p.quartz && n == 0 {
				return 0, "value 0 is out of range 1-7 (the quartz dialect counts 1 = Sunday to 7 = Saturday)"
			}
			return 0, fmt.Sprintf("value %s is out of range %d-%d", s, lo, hi)
		}
		return n, ""
	}
	names, first := p.names(f)
	if len(s) == 3 {
		if i := strings.Index(names, strings.ToUpper(s)); i >= 0 && i%3 == 0 {
			return first + i/3, ""
		}
	}
	up := strings.ToUpper(s)
	switch {
	case f == fieldMonth:
		return 0, fmt.Sprintf("%q is not a number or a month name (JAN-DEC)", s)
	case f == fieldDow && strings.HasSuffix(up, "W"):
		return 0, fmt.Sprintf("%q is not a number or a weekday name (SUN-SAT); W (the nearest weekday) is only allowed in the day-of-month field", s)
	case f == fieldDow:
		return 0, fmt.Sprintf("%q is not a number or a weekday name (SUN-SAT)", s)
	case strings.ContainsAny(up, "LW"):
		return 0, fmt.Sprintf("%q is not a number; L and W are only allowed in the day-of-month field, and L in the day-of-week field", s)
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

// nextYear returns the first allowed year at or after y, or -1.
func (c *cronExpr) nextYear(y int64) int64 {
	if !c.hasYears {
		return y
	}
	from := max(y, cronYearMin) - cronYearMin
	for i := from; i <= cronYearMax-cronYearMin; i++ {
		if c.years[i/64]&(1<<(i%64)) != 0 {
			return i + cronYearMin
		}
	}
	return -1
}

// nearestWeekday returns the weekday (Monday-Friday) nearest to day d of a
// month of dim days, without leaving the month (Quartz's W): a Saturday
// moves to the Friday before, or to Monday the 3rd for the 1st; a Sunday
// moves to the Monday after, or to the Friday before for the last day. wd
// is d's weekday, 0 = Sunday.
func nearestWeekday(d, dim, wd int) int {
	switch {
	case wd == 6 && d == 1:
		return 3
	case wd == 6:
		return d - 1
	case wd == 0 && d == dim:
		return d - 2
	case wd == 0:
		return d + 1
	default:
		return d
	}
}

// dayMask returns the days (bits 1-31) of month m of year y that match the
// day-of-month and day-of-week fields.
func (c *cronExpr) dayMask(y int64, m int) uint64 {
	dim := daysInMonth(y, m)
	valid := uint64(1)<<(dim+1) - 2
	first := weekdayOfDays(daysFromCivil(y, m, 1)) // of day 1
	dom := c.dom & valid
	for l := c.last; l != 0; l &= l - 1 {
		if d := dim - bits.TrailingZeros64(l); d >= 1 {
			dom |= 1 << d
		}
	}
	for n := c.nearest; n != 0; n &= n - 1 {
		if d := bits.TrailingZeros64(n); d <= dim {
			dom |= 1 << nearestWeekday(d, dim, (first+d-1)%7)
		}
	}
	if c.lastWeekday {
		dom |= 1 << nearestWeekday(dim, dim, (first+dim-1)%7)
	}
	dow := valid
	if c.dow != allDow {
		dow = 0
		for d := 1; d <= dim; d++ {
			wd := (first + d - 1) % 7
			if c.dow&(1<<wd) != 0 || c.dowLast&(1<<wd) != 0 && d+7 > dim || c.dowNth&(1<<(wd*5+(d-1)/7)) != 0 {
				dow |= 1 << d
			}
		}
	}
	if c.both {
		return dom & dow
	}
	return dom | dow
}

// nextWall returns the first wall clock (wall seconds) at or after ws that
// matches the expression, searching no later than the end of year maxYear.
// It advances field by field (year, month, day, hour, minute, second),
// resetting the smaller fields, so its cost does not depend on the
// distance.
func (c *cronExpr) nextWall(ws int64, maxYear int64) (int64, bool) {
	days := floorDiv(ws, secondsPerDay)
	sod := int(ws - days*secondsPerDay)
	y, mo, d := civilFromDays(days)
	h, mi, s := sod/3600, sod/60%60, sod%60
	for y <= maxYear {
		if ny := c.nextYear(y); ny != y {
			if ny < 0 {
				return 0, false
			}
			y, mo, d, h, mi, s = ny, 1, 1, 0, 0, 0
			continue
		}
		if c.month&(1<<mo) == 0 {
			if next := nextBit(c.month, mo); next >= 0 {
				mo = next
			} else {
				y, mo = y+1, nextBit(c.month, 0)
			}
			d, h, mi, s = 1, 0, 0, 0
			continue
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
