package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCronDialects pins the fire times of each syntax element in both
// dialects, in UTC. The quartz rows include the examples of Quartz's
// CronTrigger tutorial; others follow cases from public suites (robfig/cron,
// croniter, gorhill/cronexpr, adhocore/gronx), with the expected times
// worked out by hand from the 2026 calendar (1 January 2026 is a Thursday;
// months start on Thu, Sun, Sun, Wed, Fri, Mon, Wed, Sat, Tue, Thu, Sun,
// Tue).
func TestCronDialects(t *testing.T) {
	t.Parallel()
	const q, std = DialectQuartz, DialectStandard
	tests := []struct {
		name    string
		dialect string
		expr    string
		after   string
		want    []string
	}{
		// Quartz's CronTrigger tutorial.
		{
			"quartz noon every day", q, "0 0 12 * * ?", "2026-01-01T12:00:00Z",
			[]string{"2026-01-02T12:00:00Z", "2026-01-03T12:00:00Z"},
		},
		{
			"quartz 10:15 every day, ? in day-of-month", q, "0 15 10 ? * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T10:15:00Z", "2026-01-02T10:15:00Z"},
		},
		{
			"quartz year *", q, "0 15 10 * * ? *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T10:15:00Z", "2026-01-02T10:15:00Z"},
		},
		{
			"quartz every day of 2005", q, "0 15 10 * * ? 2005", "2004-12-31T00:00:00Z",
			[]string{"2005-01-01T10:15:00Z", "2005-01-02T10:15:00Z"},
		},
		{"quartz 2005 is over", q, "0 15 10 * * ? 2005", "2005-12-31T10:15:00Z", nil},
		{
			"quartz every minute of 14h", q, "0 * 14 * * ?", "2026-01-01T14:58:00Z",
			[]string{"2026-01-01T14:59:00Z", "2026-01-02T14:00:00Z"},
		},
		{
			"quartz every 5 minutes at 14h and 18h", q, "0 0/5 14,18 * * ?", "2026-01-01T14:50:00Z",
			[]string{"2026-01-01T14:55:00Z", "2026-01-01T18:00:00Z", "2026-01-01T18:05:00Z"},
		},
		{
			"quartz minute range", q, "0 0-5 14 * * ?", "2026-01-01T14:04:00Z",
			[]string{"2026-01-01T14:05:00Z", "2026-01-02T14:00:00Z"},
		},
		{
			"quartz Wednesdays of March", q, "0 10,44 14 ? 3 WED", "2026-01-01T00:00:00Z",
			[]string{"2026-03-04T14:10:00Z", "2026-03-04T14:44:00Z", "2026-03-11T14:10:00Z"},
		},
		{
			"quartz weekdays", q, "0 15 10 ? * MON-FRI", "2026-01-02T11:00:00Z",
			[]string{"2026-01-05T10:15:00Z", "2026-01-06T10:15:00Z", "2026-01-07T10:15:00Z"},
		},
		{
			"quartz the 15th", q, "0 15 10 15 * ?", "2026-01-01T00:00:00Z",
			[]string{"2026-01-15T10:15:00Z", "2026-02-15T10:15:00Z"},
		},
		{
			"quartz last day of the month", q, "0 15 10 L * ?", "2026-01-01T00:00:00Z",
			[]string{"2026-01-31T10:15:00Z", "2026-02-28T10:15:00Z", "2026-03-31T10:15:00Z"},
		},
		{
			"quartz L-2", q, "0 15 10 L-2 * ?", "2026-01-01T00:00:00Z",
			[]string{"2026-01-29T10:15:00Z", "2026-02-26T10:15:00Z", "2026-03-29T10:15:00Z"},
		},
		{
			"quartz last Friday (6L)", q, "0 15 10 ? * 6L", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T10:15:00Z", "2026-02-27T10:15:00Z", "2026-03-27T10:15:00Z", "2026-04-24T10:15:00Z", "2026-05-29T10:15:00Z"},
		},
		{
			"quartz last Friday in 2002-2005", q, "0 15 10 ? * 6L 2002-2005", "2001-06-01T00:00:00Z",
			[]string{"2002-01-25T10:15:00Z", "2002-02-22T10:15:00Z", "2002-03-29T10:15:00Z", "2002-04-26T10:15:00Z", "2002-05-31T10:15:00Z"},
		},
		{
			"quartz last Friday in 2002-2005 ends", q, "0 15 10 ? * 6L 2002-2005", "2005-12-01T00:00:00Z",
			[]string{"2005-12-30T10:15:00Z"},
		},
		{
			"quartz third Friday (6#3)", q, "0 15 10 ? * 6#3", "2026-01-01T00:00:00Z",
			[]string{"2026-01-16T10:15:00Z", "2026-02-20T10:15:00Z", "2026-03-20T10:15:00Z"},
		},
		{
			"quartz every 5 days from the 1st", q, "0 0 12 1/5 * ?", "2026-01-01T00:00:00Z",
			[]string{
				"2026-01-01T12:00:00Z", "2026-01-06T12:00:00Z", "2026-01-11T12:00:00Z", "2026-01-16T12:00:00Z",
				"2026-01-21T12:00:00Z", "2026-01-26T12:00:00Z", "2026-01-31T12:00:00Z", "2026-02-01T12:00:00Z",
			},
		},
		{
			"quartz 11 November 11:11", q, "0 11 11 11 11 ?", "2026-01-01T00:00:00Z",
			[]string{"2026-11-11T11:11:00Z", "2027-11-11T11:11:00Z"},
		},
		// Quartz day-of-week numbering and L.
		{"quartz 1 is Sunday", q, "0 0 12 ? * 1", "2026-01-01T00:00:00Z", []string{"2026-01-04T12:00:00Z", "2026-01-11T12:00:00Z"}},
		{"quartz 7 is Saturday", q, "0 0 12 ? * 7", "2026-01-01T00:00:00Z", []string{"2026-01-03T12:00:00Z", "2026-01-10T12:00:00Z"}},
		{"quartz L alone is Saturday", q, "0 0 12 ? * L", "2026-01-01T00:00:00Z", []string{"2026-01-03T12:00:00Z", "2026-01-10T12:00:00Z"}},
		{
			"quartz first Monday (2#1)", q, "0 0 9 ? * 2#1", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T09:00:00Z", "2026-02-02T09:00:00Z", "2026-03-02T09:00:00Z"},
		},
		{
			"quartz name with #", q, "0 0 9 ? * MON#1", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T09:00:00Z", "2026-02-02T09:00:00Z"},
		},
		{
			"quartz wrapped weekdays by number", q, "0 0 0 ? * 6-2", "2026-01-01T00:00:00Z",
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-09T00:00:00Z"},
		},
		{
			"quartz W", q, "0 0 12 15W * ?", "2026-01-01T00:00:00Z",
			[]string{"2026-01-15T12:00:00Z", "2026-02-16T12:00:00Z", "2026-03-16T12:00:00Z", "2026-04-15T12:00:00Z"},
		},
		{
			"quartz LW", q, "0 0 12 LW * ?", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T12:00:00Z", "2026-02-27T12:00:00Z", "2026-03-31T12:00:00Z", "2026-04-30T12:00:00Z", "2026-05-29T12:00:00Z"},
		},
		{
			"quartz year step", q, "0 0 0 1 1 ? 2030/30", "2026-01-01T00:00:00Z",
			[]string{"2030-01-01T00:00:00Z", "2060-01-01T00:00:00Z", "2090-01-01T00:00:00Z"},
		},
		{
			"quartz year list", q, "0 0 0 29 2 ? 2027,2028,2032", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"},
		},
		{"quartz descriptor", q, "@daily", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},

		// Standard dialect: the same elements, Vixie's numbering.
		{"standard 0 is Sunday", std, "0 12 * * 0", "2026-01-01T00:00:00Z", []string{"2026-01-04T12:00:00Z"}},
		{"standard 1 is Monday", std, "0 12 * * 1", "2026-01-01T00:00:00Z", []string{"2026-01-05T12:00:00Z"}},
		{"standard L alone is Saturday", std, "0 12 * * L", "2026-01-01T00:00:00Z", []string{"2026-01-03T12:00:00Z", "2026-01-10T12:00:00Z"}},
		{
			"standard last Friday (5L)", std, "0 12 * * 5L", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T12:00:00Z", "2026-02-27T12:00:00Z", "2026-03-27T12:00:00Z"},
		},
		{"standard last Friday by name", std, "0 12 * * FRIL", "2026-01-01T00:00:00Z", []string{"2026-01-30T12:00:00Z"}},
		{"standard last Sunday (7L)", std, "0 12 * * 7L", "2026-01-01T00:00:00Z", []string{"2026-01-25T12:00:00Z", "2026-02-22T12:00:00Z"}},
		{
			"standard first Monday (1#1)", std, "0 9 * * 1#1", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T09:00:00Z", "2026-02-02T09:00:00Z", "2026-03-02T09:00:00Z"},
		},
		{
			"standard fifth Thursday", std, "0 12 * * 4#5", "2026-01-01T00:00:00Z",
			[]string{"2026-01-29T12:00:00Z", "2026-04-30T12:00:00Z", "2026-07-30T12:00:00Z", "2026-10-29T12:00:00Z", "2026-12-31T12:00:00Z"},
		},
		{
			"standard # list", std, "0 12 * * MON#1,FRI#3", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T12:00:00Z", "2026-01-16T12:00:00Z", "2026-02-02T12:00:00Z", "2026-02-20T12:00:00Z"},
		},
		{
			"standard wrapped weekdays", std, "0 0 * * FRI-MON", "2026-01-01T00:00:00Z",
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-09T00:00:00Z"},
		},
		{
			"standard wrapped weekdays by number", std, "0 0 * * 5-1", "2026-01-01T00:00:00Z",
			[]string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-09T00:00:00Z"},
		},
		{
			"standard SAT-SUN", std, "0 0 * * SAT-SUN", "2026-01-01T00:00:00Z",
			[]string{"2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-10T00:00:00Z"},
		},
		{
			"standard wrapped months", std, "0 0 1 NOV-FEB *", "2026-01-15T00:00:00Z",
			[]string{"2026-02-01T00:00:00Z", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z"},
		},
		{
			"standard wrapped hours", std, "0 22-2 * * *", "2026-01-01T03:00:00Z",
			[]string{"2026-01-01T22:00:00Z", "2026-01-01T23:00:00Z", "2026-01-02T00:00:00Z", "2026-01-02T01:00:00Z", "2026-01-02T02:00:00Z", "2026-01-02T22:00:00Z"},
		},
		{
			"standard wrapped hours with a step", std, "0 22-2/2 * * *", "2026-01-01T03:00:00Z",
			[]string{"2026-01-01T22:00:00Z", "2026-01-02T00:00:00Z", "2026-01-02T02:00:00Z", "2026-01-02T22:00:00Z"},
		},
		{
			"standard wrapped minutes with a step", std, "50-10/5 * * * *", "2026-01-01T00:10:00Z",
			[]string{"2026-01-01T00:50:00Z", "2026-01-01T00:55:00Z", "2026-01-01T01:00:00Z", "2026-01-01T01:05:00Z", "2026-01-01T01:10:00Z", "2026-01-01T01:50:00Z"},
		},
		{
			"standard wrapped days of the month", std, "0 0 25-5 2 *", "2026-01-31T00:00:00Z",
			[]string{
				"2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-03T00:00:00Z", "2026-02-04T00:00:00Z", "2026-02-05T00:00:00Z",
				"2026-02-25T00:00:00Z", "2026-02-26T00:00:00Z", "2026-02-27T00:00:00Z", "2026-02-28T00:00:00Z", "2027-02-01T00:00:00Z",
			},
		},
		{
			"standard W", std, "0 12 15W * *", "2026-05-01T00:00:00Z",
			[]string{"2026-05-15T12:00:00Z", "2026-06-15T12:00:00Z", "2026-07-15T12:00:00Z", "2026-08-14T12:00:00Z"},
		},
		{
			"standard 1W stays in the month", std, "0 12 1W * *", "2026-07-15T00:00:00Z",
			[]string{"2026-08-03T12:00:00Z", "2026-09-01T12:00:00Z", "2026-10-01T12:00:00Z", "2026-11-02T12:00:00Z"},
		},
		{
			"standard 31W only in 31-day months, never in the next", std, "0 12 31W * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T12:00:00Z", "2026-03-31T12:00:00Z", "2026-05-29T12:00:00Z", "2026-07-31T12:00:00Z", "2026-08-31T12:00:00Z", "2026-10-30T12:00:00Z"},
		},
		{
			"standard LW", std, "0 12 LW * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T12:00:00Z", "2026-02-27T12:00:00Z", "2026-03-31T12:00:00Z"},
		},
		{
			"standard W and L in a list", std, "0 12 1W,L * *", "2026-01-15T00:00:00Z",
			[]string{"2026-01-31T12:00:00Z", "2026-02-02T12:00:00Z", "2026-02-28T12:00:00Z", "2026-03-02T12:00:00Z"},
		},
		{
			"standard Vixie OR with the new items", std, "0 12 1 * 5L", "2026-01-01T13:00:00Z",
			[]string{"2026-01-30T12:00:00Z", "2026-02-01T12:00:00Z", "2026-02-27T12:00:00Z", "2026-03-01T12:00:00Z"},
		},
		{"standard AND when a day field starts with *", std, "0 12 */2 * 5L", "2026-01-01T00:00:00Z", // odd days that are a last Friday
			[]string{"2026-02-27T12:00:00Z", "2026-03-27T12:00:00Z", "2026-05-29T12:00:00Z"}},
		{"standard ? in both day fields", std, "0 12 ? * ?", "2026-01-01T00:00:00Z", []string{"2026-01-01T12:00:00Z"}},
		{
			"standard 7 fields with a year", std, "0 30 9 * * MON-FRI 2027", "2026-06-01T00:00:00Z",
			[]string{"2027-01-01T09:30:00Z", "2027-01-04T09:30:00Z"},
		},
		{"standard year range ends", std, "0 0 0 1 1 * 2026-2027", "2026-06-01T00:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"standard leap day (robfig)", std, "0 0 0 29 2 ?", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCronWith(t, tt.expr, "UTC", tt.dialect, "")
			require.Equal(t, tt.dialect, s.Spec().Dialect)
			got := s.Preview(ts(t, tt.after), max(len(tt.want), 1)+1)
			if len(got) > len(tt.want) && tt.want != nil {
				got = got[:len(tt.want)]
			}
			require.Equal(t, tt.want, formatTimesNil(got))
		})
	}
}

func formatTimesNil(times []time.Time) []string {
	if len(times) == 0 {
		return nil
	}
	return formatTimes(times)
}

// TestCronDialectErrors pins the messages: each names the field and what
// is wrong.
func TestCronDialectErrors(t *testing.T) {
	t.Parallel()
	const q, std = DialectQuartz, DialectStandard
	tests := []struct {
		name    string
		dialect string
		expr    string
		want    string // a substring of the one schedule.cron message
	}{
		{
			"quartz needs ? in a day field", q, "0 0 12 * * *",
			`day-of-month and day-of-week fields: the quartz dialect needs ? in exactly one of them (got "*" and "*"); e.g. "0 0 12 ? * MON" or "0 0 12 1 * ?"`,
		},
		{"quartz ? in both day fields", q, "0 0 12 ? * ?", "day-of-month and day-of-week fields: the quartz dialect allows ? in only one of them"},
		{"quartz five fields", q, "0 12 * * ?", "must have 6 fields (second minute hour day-of-month month day-of-week) or 7 with a year last in the quartz dialect; got 5"},
		{"quartz eight fields", q, "0 0 12 ? * * 2026 1", "in the quartz dialect; got 8"},
		{"quartz weekday 0", q, "0 0 12 ? * 0", "day-of-week field: value 0 is out of range 1-7 (the quartz dialect counts 1 = Sunday to 7 = Saturday)"},
		{"quartz weekday 8", q, "0 0 12 ? * 8", "day-of-week field: value 8 is out of range 1-7"},
		{"quartz # beyond 5", q, "0 0 12 ? * 6#6", `day-of-week field: "6#6": the number after # must be 1 to 5`},
		{"quartz # without a weekday", q, "0 0 12 ? * #2", `day-of-week field: "#2": # needs a single weekday before it, as in "2#2" (the 2nd Monday)`},
		{"# after a range", std, "0 12 * * 1-2#2", `day-of-week field: "1-2#2": # needs a single weekday before it, as in "1#2" (the 2nd Monday): "1-2" is not a number or a weekday name`},
		{"W in day-of-week", std, "0 12 * * 5W", `day-of-week field: "5W" is not a number or a weekday name (SUN-SAT); W (the nearest weekday) is only allowed in the day-of-month field`},
		{"W in hour", std, "0 5W * * *", `hour field: "5W" is not a number; L and W are only allowed in the day-of-month field, and L in the day-of-week field`},
		{"quartz L after a range", q, "0 0 12 ? * 1-5L", `day-of-week field: "1-5L": L after a weekday needs a single weekday before it, as in "6L"`},
		{"standard L after a range", std, "0 12 * * 1-5L", `as in "5L"`},
		{"W after 31", q, "0 0 12 32W * ?", `day-of-month field: "32W": W needs a single day of the month (1-31) before it, as in "15W"`},
		{"W after a range", std, "0 12 1-5W * *", `day-of-month field: "1-5W": W needs a single day`},
		{"L-W", std, "0 12 L-3W * *", `day-of-month field: "L-3W": Quartz's L-nW (the weekday nearest n days before the month's last day) is not supported; use "L-n" or "LW"`},
		{"quartz L-W", q, "0 0 12 L-3W * ?", `day-of-month field: "L-3W": Quartz's L-nW`},
		{"L ends a range", std, "0 12 29-L * *", `day-of-month field: "29-L": L (the month's last day) cannot be part of a range or a step; list it instead, as in "29,30,L"`},
		{"L starts a range", q, "0 0 12 L-2/2 * ?", `day-of-month field: "L-2/2": L (the month's last day) cannot be part of a range or a step`},
		{"W in a range's end", std, "0 12 1-15W * *", `day-of-month field: "1-15W": W needs a single day`},
		{"# in day-of-month", std, "0 12 1#1 * *", "day-of-month field: # (the n-th weekday of the month) is only allowed in the day-of-week field"},
		{"# in minute", std, "1#1 12 * * *", "minute field: # (the n-th weekday of the month) is only allowed in the day-of-week field"},
		{"year before 1970", q, "0 0 12 ? * 2#1 1969", "year field: value 1969 is out of range 1970-2099"},
		{"year after 2099", std, "0 0 12 * * * 2100", "year field: value 2100 is out of range 1970-2099"},
		{"year backwards", q, "0 0 12 1 * ? 2005-2002", "year field: range 2005-2002 is backwards (2005 > 2002); the year field does not wrap around"},
		{"year step too large", std, "0 0 12 * * * */130", "year field: step 130 is out of range 1-129"},
		{"year ?", q, "0 0 12 1 * ? ?", "year field: ? is only allowed in the day-of-month and day-of-week fields"},
		{"never fires in quartz", q, "0 0 0 30 2 ? *", "never fires: no date matches the day-of-month, month and day-of-week fields (e.g. 30 February)"},
		{"never fires in the years given", q, "0 0 0 29 2 ? 2025-2027", "never fires: no date in the year field's years matches"},
		{"never fires: 5th Monday in February of a year without one", std, "0 0 0 * 2 1#5 2026", "never fires: no date in the year field's years"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(Spec{Type: Cron, Cron: tt.expr, Dialect: tt.dialect}, time.Now())
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Len(t, verr.Fields, 1, "%v", verr)
			require.Equal(t, "schedule.cron", verr.Fields[0].Field)
			require.Contains(t, verr.Fields[0].Message, tt.want)
		})
	}
}

// TestScheduleDSTNote: the preview's note on fires near a transition.
func TestScheduleDSTNote(t *testing.T) {
	t.Parallel()
	const ny = "America/New_York"
	tests := []struct {
		expr, policy, at, want string
	}{
		{"30 2 * * *", DSTVixie, "2026-03-08T07:00:00Z", DSTShifted},
		{"30 2 * * *", DSTOncePerLocalTime, "2026-03-08T07:00:00Z", DSTShifted},
		{"30 2 * * *", DSTVixie, "2026-03-09T06:30:00Z", ""},
		{"0 * * * *", DSTOncePerLocalTime, "2026-03-08T07:00:00Z", ""}, // 03:00 is its own slot too
		{"*/30 * * * *", DSTVixie, "2026-11-01T05:30:00Z", ""},
		{"*/30 * * * *", DSTVixie, "2026-11-01T06:30:00Z", DSTRepeated},
		{"*/30 * * * *", DSTVixie, "2026-11-01T07:00:00Z", ""},
	}
	for _, tt := range tests {
		s := mustCronWith(t, tt.expr, ny, "", tt.policy)
		at := ts(t, tt.at)
		next, ok := s.Next(at.Add(-time.Second))
		require.True(t, ok)
		require.Equal(t, at, next, "%s is a fire of %s", tt.at, tt.expr)
		require.Equal(t, tt.want, s.DSTNote(at), "%s (%s) at %s", tt.expr, tt.policy, tt.at)
	}
	every := mustCron(t, "*/30 * * * *", "UTC")
	require.Empty(t, every.DSTNote(ts(t, "2026-11-01T06:30:00Z")))
}

// TestScheduleDialectAndPolicyFields covers schedule.dialect and
// schedule.dst_policy: defaults, unknown values, and the other types.
func TestScheduleDialectAndPolicyFields(t *testing.T) {
	t.Parallel()
	s, err := Parse(Spec{Type: Cron, Cron: "@daily"}, time.Now())
	require.NoError(t, err)
	require.Equal(t, DialectStandard, s.Spec().Dialect)
	require.Equal(t, DSTVixie, s.Spec().DSTPolicy)

	s, err = Parse(Spec{Type: Cron, Cron: "0 0 12 ? * MON", Dialect: DialectQuartz, DSTPolicy: DSTOncePerLocalTime}, time.Now())
	require.NoError(t, err)
	require.Equal(t, DialectQuartz, s.Spec().Dialect)
	require.Equal(t, DSTOncePerLocalTime, s.Spec().DSTPolicy)

	// Interval and once schedules have neither: the defaults are accepted
	// (a client may send them back as it read them) and dropped.
	s, err = Parse(Spec{Type: Interval, IntervalSeconds: 60, Dialect: DialectStandard, DSTPolicy: DSTVixie}, time.Now())
	require.NoError(t, err)
	require.Empty(t, s.Spec().Dialect)
	require.Empty(t, s.Spec().DSTPolicy)
	s, err = Parse(Spec{Type: Once, RunAt: tsp(t, "2026-01-01T00:00:00Z"), Dialect: DialectStandard}, time.Now())
	require.NoError(t, err)
	require.Empty(t, s.Spec().Dialect)

	tests := []struct {
		name string
		spec Spec
		want []FieldError
	}{
		{
			"unknown dialect",
			Spec{Type: Cron, Cron: "@daily", Dialect: "vixie"},
			[]FieldError{{"schedule.dialect", `"vixie" is not allowed; must be one of "standard", "quartz"`}},
		},
		{
			"unknown policy",
			Spec{Type: Cron, Cron: "@daily", DSTPolicy: "skip"},
			[]FieldError{{"schedule.dst_policy", `"skip" is not allowed; must be one of "vixie", "once_per_local_time"`}},
		},
		{
			"quartz on an interval",
			Spec{Type: Interval, IntervalSeconds: 60, Dialect: DialectQuartz},
			[]FieldError{{"schedule.dialect", `must not be "quartz": it applies to cron schedules only, not to interval schedules`}},
		},
		{
			"policy on a once",
			Spec{Type: Once, RunAt: tsp(t, "2026-01-01T00:00:00Z"), DSTPolicy: DSTOncePerLocalTime},
			[]FieldError{{"schedule.dst_policy", `must not be "once_per_local_time": it applies to cron schedules only, not to once schedules`}},
		},
		{
			"unknown dialect on an interval",
			Spec{Type: Interval, IntervalSeconds: 60, Dialect: "cron"},
			[]FieldError{{"schedule.dialect", `"cron" is not allowed`}},
		},
		{
			"an unknown dialect does not also report the expression",
			Spec{Type: Cron, Cron: "0 0 12 ? * MON", Dialect: "Quartz"},
			[]FieldError{{"schedule.dialect", `"Quartz" is not allowed`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.spec, time.Now())
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Len(t, verr.Fields, len(tt.want), "%v", verr)
			for i, w := range tt.want {
				require.Equal(t, w.Field, verr.Fields[i].Field)
				require.Contains(t, verr.Fields[i].Message, w.Message)
			}
		})
	}
}
