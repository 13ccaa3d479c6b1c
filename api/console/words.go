package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axhq/ax/service/schedule"
)

// describeSchedule says a schedule in words: the common cron shapes in
// plain English, anything else as its expression; always with its zone.
func describeSchedule(s schedule.Spec) string {
	zone := s.Timezone
	if zone == "" {
		zone = "UTC"
	}
	var out string
	switch s.Type {
	case "interval":
		out = "every " + durationWords(time.Duration(s.IntervalSeconds)*time.Second)
		zone = ""
	case "once":
		if s.RunAt != nil {
			out = "once, at " + s.RunAt.UTC().Format("2006-01-02 15:04:05") + " UTC"
		} else {
			out = "once"
		}
		zone = ""
	case "cron":
		out = cronWords(s.Cron)
	case "union":
		out = fmt.Sprintf("the union of %d schedules", len(s.Schedules))
		zone = ""
	case "event":
		out = "on each event " + s.Event
		zone = ""
	default:
		out = s.Type
	}
	if zone != "" {
		out += " (" + zone + ")"
	}
	return out
}

var descriptors = map[string]string{
	"@yearly": "every year on 1 January at 00:00", "@annually": "every year on 1 January at 00:00",
	"@monthly": "every month on the 1st at 00:00", "@weekly": "every Sunday at 00:00",
	"@daily": "every day at 00:00", "@midnight": "every day at 00:00", "@hourly": "every hour, on the hour",
}

var dayNames = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// cronWords describes the usual shapes of a standard cron expression;
// others are shown as "cron <expr>".
func cronWords(expr string) string {
	expr = strings.TrimSpace(expr)
	if d, ok := descriptors[strings.ToLower(expr)]; ok {
		return d
	}
	raw := "cron " + expr
	f := strings.Fields(expr)
	sec := "0"
	switch len(f) {
	case 5:
	case 6:
		sec, f = f[0], f[1:]
	default:
		return raw
	}
	minute, hour, dom, month, dow := f[0], f[1], f[2], f[3], f[4]
	if month != "*" || (dom != "*" && dom != "?") {
		if month == "*" && isNum(dom) && isNum(minute) && isNum(hour) && (dow == "*" || dow == "?") {
			return fmt.Sprintf("every month on day %s at %s", dom, clock(hour, minute, sec))
		}
		return raw
	}
	days := ""
	switch dow {
	case "*", "?":
	case "1-5", "MON-FRI", "mon-fri":
		days = " on weekdays"
	case "0,6", "6,0", "SAT,SUN", "sat,sun":
		days = " on weekends"
	default:
		if n, err := strconv.Atoi(dow); err == nil && n >= 0 && n <= 7 {
			days = " on " + dayNames[n] + "s"
		} else {
			return raw
		}
	}
	switch {
	case sec == "*" && minute == "*" && hour == "*":
		return "every second" + days
	case sec != "0":
		if strings.HasPrefix(sec, "*/") && minute == "*" && hour == "*" {
			return "every " + sec[2:] + " seconds" + days
		}
		if !isNum(sec) || !isNum(minute) || !isNum(hour) {
			return raw
		}
		return "every day at " + clock(hour, minute, sec) + days
	case minute == "*" && hour == "*":
		return "every minute" + days
	case strings.HasPrefix(minute, "*/") && hour == "*":
		return "every " + minute[2:] + " minutes" + days
	case isNum(minute) && hour == "*":
		return "every hour at minute " + minute + days
	case isNum(minute) && strings.HasPrefix(hour, "*/"):
		return "every " + hour[2:] + " hours at minute " + minute + days
	case isNum(minute) && isNum(hour):
		if days == "" {
			return "every day at " + clock(hour, minute, sec)
		}
		return "at " + clock(hour, minute, sec) + days
	}
	return raw
}

func isNum(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

func clock(hour, minute, sec string) string {
	h, _ := strconv.Atoi(hour)
	m, _ := strconv.Atoi(minute)
	s, _ := strconv.Atoi(sec)
	if s != 0 {
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

func durationWords(d time.Duration) string {
	unit := func(n int64, one string) string {
		if n == 1 {
			return one
		}
		return strconv.FormatInt(n, 10) + " " + one + "s"
	}
	switch {
	case d <= 0:
		return "?"
	case d%(24*time.Hour) == 0:
		return unit(int64(d/(24*time.Hour)), "day")
	case d%time.Hour == 0:
		return unit(int64(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return unit(int64(d/time.Minute), "minute")
	}
	return unit(int64(d/time.Second), "second")
}

// unionMember is one of a union's schedules as the task page lists it.
type unionMember struct {
	Index     int
	Words     string // describeSchedule's
	Expr      string // the cron expression, or "every N s"
	Timezone  string
	Dialect   string // cron only
	DSTPolicy string // cron only
}

// unionMembers returns a union's members (nil for another schedule).
func unionMembers(s schedule.Spec) []unionMember {
	var out []unionMember
	for i, m := range s.Schedules {
		u := unionMember{Index: i, Words: describeSchedule(m), Timezone: m.Timezone, Dialect: m.Dialect, DSTPolicy: m.DSTPolicy}
		if u.Timezone == "" {
			u.Timezone = "UTC"
		}
		if m.Type == "cron" {
			u.Expr = m.Cron
		} else {
			u.Expr = fmt.Sprintf("every %d s", m.IntervalSeconds)
		}
		out = append(out, u)
	}
	return out
}
