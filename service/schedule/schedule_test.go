package schedule

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ts parses an RFC 3339 time for test tables.
func ts(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

func tsp(t testing.TB, s string) *time.Time {
	t.Helper()
	v := ts(t, s)
	return &v
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// formatTimes renders fire times for readable diffs.
func formatTimes(times []time.Time) []string {
	out := make([]string, len(times))
	for i, v := range times {
		out[i] = v.Format(time.RFC3339)
	}
	return out
}

func mustCron(t testing.TB, expr, zone string) *Schedule {
	t.Helper()
	return mustCronWith(t, expr, zone, "", "")
}

// mustCronWith parses a cron schedule in a dialect and DST policy ("" for
// the defaults).
func mustCronWith(t testing.TB, expr, zone, dialect, policy string) *Schedule {
	t.Helper()
	s, err := Parse(Spec{Type: Cron, Cron: expr, Timezone: zone, Dialect: dialect, DSTPolicy: policy}, time.Time{})
	require.NoError(t, err, expr)
	return s
}

func TestScheduleCronNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		expr  string
		after string
		want  []string
	}{
		{
			"5 fields fire on second 0", "*/20 * * * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:20:00Z", "2026-01-01T00:40:00Z", "2026-01-01T01:00:00Z"},
		},
		{
			"seconds step", "*/20 * * * * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"},
		},
		{
			"seconds range step", "10-40/15 * * * * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:00:10Z", "2026-01-01T00:00:25Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:10Z"},
		},
		{
			"seconds start step", "5/20 * * * * *", "2026-01-01T00:00:05Z",
			[]string{"2026-01-01T00:00:25Z", "2026-01-01T00:00:45Z", "2026-01-01T00:01:05Z"},
		},
		{
			"six fields fixed time", "15 30 9 * * *", "2026-01-01T09:30:15Z",
			[]string{"2026-01-02T09:30:15Z", "2026-01-03T09:30:15Z"},
		},
		{
			"after with fraction", "* * * * * *", "2026-01-01T00:00:00.5Z",
			[]string{"2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"},
		},
		{
			"lists", "0 0,30 8,20 * * *", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T08:00:00Z", "2026-01-01T08:30:00Z", "2026-01-01T20:00:00Z", "2026-01-01T20:30:00Z", "2026-01-02T08:00:00Z"},
		},
		{
			"hour range step and weekday range", "0 9-17/4 * * MON-FRI", "2026-01-02T10:00:00Z",
			[]string{"2026-01-02T13:00:00Z", "2026-01-02T17:00:00Z", "2026-01-05T09:00:00Z"},
		},
		{
			"month names mixed case", "0 0 1 JAN,jul *", "2026-01-01T00:00:00Z",
			[]string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		},
		{
			"month name range", "0 0 1 feb-Apr *", "2026-01-01T00:00:00Z",
			[]string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z", "2027-02-01T00:00:00Z"},
		},
		{
			"weekday name", "0 12 * * sun", "2026-01-01T00:00:00Z",
			[]string{"2026-01-04T12:00:00Z", "2026-01-11T12:00:00Z"},
		},
		{
			"weekday 7 is sunday", "0 12 * * 7", "2026-01-01T00:00:00Z",
			[]string{"2026-01-04T12:00:00Z", "2026-01-11T12:00:00Z"},
		},
		{
			"weekday range to 7", "0 12 * * 6-7", "2026-01-01T00:00:00Z",
			[]string{"2026-01-03T12:00:00Z", "2026-01-04T12:00:00Z", "2026-01-10T12:00:00Z"},
		},
		{"weekday step", "0 0 * * */3", "2026-01-01T00:00:00Z", // SUN, WED, SAT
			[]string{"2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-07T00:00:00Z", "2026-01-10T00:00:00Z"}},
		{
			"question mark in dom", "0 0 ? * MON", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"},
		},
		{
			"question mark in dow", "0 0 1 * ?", "2026-01-01T00:00:00Z",
			[]string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		},
		{
			"L in leap year", "0 0 L * *", "2028-01-15T00:00:00Z",
			[]string{"2028-01-31T00:00:00Z", "2028-02-29T00:00:00Z", "2028-03-31T00:00:00Z", "2028-04-30T00:00:00Z", "2028-05-31T00:00:00Z", "2028-06-30T00:00:00Z"},
		},
		{
			"L in non-leap year", "0 0 l * *", "2026-01-31T00:00:00Z",
			[]string{"2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"},
		},
		{
			"L february only", "0 0 L 2 *", "2026-01-01T00:00:00Z",
			[]string{"2026-02-28T00:00:00Z", "2027-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z"},
		},
		{
			"L minus n", "0 0 L-3 * *", "2026-02-01T00:00:00Z",
			[]string{"2026-02-25T00:00:00Z", "2026-03-28T00:00:00Z", "2026-04-27T00:00:00Z"},
		},
		{
			"L with weekday is OR", "0 0 L * FRI", "2026-01-25T00:00:00Z",
			[]string{"2026-01-30T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-06T00:00:00Z"},
		},
		{
			"dom and dow restricted: OR", "0 0 1 * MON", "2026-01-31T00:00:00Z",
			[]string{"2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z", "2026-02-16T00:00:00Z", "2026-02-23T00:00:00Z", "2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z"},
		},
		{
			"dom starts with star: AND", "0 0 */2 * MON", "2026-02-01T00:00:00Z",
			[]string{"2026-02-09T00:00:00Z", "2026-02-23T00:00:00Z", "2026-03-09T00:00:00Z"},
		},
		{"dow starts with star: AND", "0 0 1-7 * */6", "2026-01-31T00:00:00Z", // first Saturday or Sunday
			[]string{"2026-02-01T00:00:00Z", "2026-02-07T00:00:00Z", "2026-03-01T00:00:00Z", "2026-03-07T00:00:00Z"}},
		{
			"feb 29 skips 2100", "0 0 29 2 *", "2096-03-01T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z", "2108-02-29T00:00:00Z"},
		},
		{
			"feb 29 on a weekend: sparse", "0 0 29 2 */6", "2032-03-01T00:00:00Z",
			[]string{"2048-02-29T00:00:00Z", "2060-02-29T00:00:00Z"},
		},
		{"@yearly", "@yearly", "2026-01-01T00:00:30Z", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{"@annually", "@annually", "2026-01-01T00:00:30Z", []string{"2027-01-01T00:00:00Z"}},
		{"@monthly", "@monthly", "2026-01-01T00:00:30Z", []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"}},
		{"@weekly", "@weekly", "2026-01-01T00:00:30Z", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"@daily", "@daily", "2026-01-01T00:00:30Z", []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{"@midnight upper case", "@MIDNIGHT", "2026-01-01T00:00:30Z", []string{"2026-01-02T00:00:00Z"}},
		{"@hourly", "  @hourly\t", "2026-01-01T00:00:30Z", []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{
			"year end rollover", "59 59 23 31 12 *", "2026-06-01T00:00:00Z",
			[]string{"2026-12-31T23:59:59Z", "2027-12-31T23:59:59Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCron(t, tt.expr, "")
			got := s.Preview(ts(t, tt.after), len(tt.want))
			require.Equal(t, tt.want, formatTimes(got))
		})
	}
}

// TestScheduleDST pins the once_per_local_time rule with exact instants: a
// wall clock in a spring-forward gap fires once at the end of the gap, a
// repeated wall clock fires once at its first occurrence. Under vixie the
// same holds for the expressions with a fixed hour (TestScheduleDSTVixie).
func TestScheduleDST(t *testing.T) {
	t.Parallel()
	const ny, london, shanghai = "America/New_York", "Europe/London", "Asia/Shanghai"
	tests := []struct {
		name  string
		zone  string
		expr  string
		after string
		want  []string
	}{
		// New York, 2026-03-08: 02:00 EST (07:00Z) jumps to 03:00 EDT.
		{
			"NY gap: daily inside the gap", ny, "30 2 * * *", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"},
		},
		{
			"NY gap: daily at gap start", ny, "0 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"},
		},
		{
			"NY gap: daily at gap end", ny, "0 3 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T07:00:00Z"},
		},
		{
			"NY gap: every 15 min of hour 2 fires once", ny, "*/15 2 * * *", "2026-03-07T00:00:00Z",
			[]string{
				"2026-03-07T07:00:00Z", "2026-03-07T07:15:00Z", "2026-03-07T07:30:00Z", "2026-03-07T07:45:00Z",
				"2026-03-08T07:00:00Z",
				"2026-03-09T06:00:00Z", "2026-03-09T06:15:00Z",
			},
		},
		{
			"NY gap: gap and 03:00 share one fire", ny, "*/15 2,3 * * *", "2026-03-08T06:50:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-08T07:15:00Z", "2026-03-08T07:30:00Z", "2026-03-08T07:45:00Z", "2026-03-09T06:00:00Z"},
		},
		{
			"NY gap: hourly", ny, "0 * * * *", "2026-03-08T04:00:00Z",
			[]string{"2026-03-08T05:00:00Z", "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"},
		},
		{
			"NY gap: hourly at half past", ny, "30 * * * *", "2026-03-08T05:00:00Z",
			[]string{"2026-03-08T05:30:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:30:00Z"},
		},
		{
			"NY gap: every minute", ny, "* * * * *", "2026-03-08T06:58:00Z",
			[]string{"2026-03-08T06:59:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:01:00Z"},
		},
		{
			"NY gap: every 15 seconds", ny, "*/15 * * * * *", "2026-03-08T06:59:30Z",
			[]string{"2026-03-08T06:59:45Z", "2026-03-08T07:00:00Z", "2026-03-08T07:00:15Z"},
		},
		{
			"NY gap: after inside nothing-fires stretch", ny, "30 2 * * *", "2026-03-08T06:59:59.5Z",
			[]string{"2026-03-08T07:00:00Z"},
		},
		// New York, 2026-11-01: 02:00 EDT (06:00Z) falls back to 01:00 EST.
		{
			"NY overlap: daily inside the repeated hour", ny, "30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		},
		{
			"NY overlap: daily at 01:00", ny, "0 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-02T06:00:00Z"},
		},
		{
			"NY overlap: daily at 02:00", ny, "0 2 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T07:00:00Z", "2026-11-02T07:00:00Z"},
		},
		{
			"NY overlap: hourly", ny, "0 * * * *", "2026-11-01T03:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"},
		},
		{
			"NY overlap: every minute", ny, "* * * * *", "2026-11-01T05:58:00Z",
			[]string{"2026-11-01T05:59:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:01:00Z"},
		},
		{
			"NY overlap: every 15 seconds", ny, "*/15 * * * * *", "2026-11-01T05:59:30Z",
			[]string{"2026-11-01T05:59:45Z", "2026-11-01T07:00:00Z", "2026-11-01T07:00:15Z"},
		},
		{
			"NY overlap: after inside the repeat", ny, "*/10 * * * *", "2026-11-01T06:30:00Z",
			[]string{"2026-11-01T07:00:00Z", "2026-11-01T07:10:00Z"},
		},
		{
			"NY overlap: after inside the repeat, daily", ny, "30 1 * * *", "2026-11-01T06:10:00.25Z",
			[]string{"2026-11-02T06:30:00Z"},
		},
		{
			"NY overlap: after at the transition", ny, "*/20 * * * *", "2026-11-01T06:00:00Z",
			[]string{"2026-11-01T07:00:00Z"},
		},
		{
			"NY overlap: after just before the transition", ny, "59 59 1 * * *", "2026-11-01T05:59:58Z",
			[]string{"2026-11-01T05:59:59Z", "2026-11-02T06:59:59Z"},
		},
		// London, 2026-03-29: 01:00 GMT (01:00Z) jumps to 02:00 BST.
		{
			"London gap: daily inside the gap", london, "30 1 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"},
		},
		{
			"London gap: hourly", london, "0 * * * *", "2026-03-28T23:30:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"},
		},
		{
			"London gap: every minute", london, "* * * * *", "2026-03-29T00:58:00Z",
			[]string{"2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:01:00Z"},
		},
		{
			"London gap: every 15 seconds", london, "*/15 * * * * *", "2026-03-29T00:59:30Z",
			[]string{"2026-03-29T00:59:45Z", "2026-03-29T01:00:00Z", "2026-03-29T01:00:15Z"},
		},
		// London, 2026-10-25: 02:00 BST (01:00Z) falls back to 01:00 GMT.
		{
			"London overlap: daily inside the repeated hour", london, "30 1 * * *", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"},
		},
		{
			"London overlap: hourly", london, "0 * * * *", "2026-10-24T22:30:00Z",
			[]string{"2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"},
		},
		{
			"London overlap: every minute", london, "* * * * *", "2026-10-25T00:58:00Z",
			[]string{"2026-10-25T00:59:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:01:00Z"},
		},
		{
			"London overlap: every 15 seconds", london, "*/15 * * * * *", "2026-10-25T00:59:30Z",
			[]string{"2026-10-25T00:59:45Z", "2026-10-25T02:00:00Z", "2026-10-25T02:00:15Z"},
		},
		// Samoa skipped Friday 2011-12-30: 23:59:59 -10 on the 29th was
		// followed by 00:00 +14 on the 31st (10:00Z). A daily noon job fires
		// once for the missing day, at the end of the gap.
		{
			"Apia skipped day", "Pacific/Apia", "0 12 * * *", "2011-12-29T00:00:00Z",
			[]string{"2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"},
		},
		// Lord Howe shifts by 30 minutes: 02:00 +1030 becomes 02:30 +11 on
		// 2026-10-04 (15:30Z), and 02:00 +11 becomes 01:30 +1030 on
		// 2026-04-05 (15:00Z).
		{
			"Lord Howe half-hour gap", "Australia/Lord_Howe", "*/20 2 * * *", "2026-10-03T15:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-03T15:40:00Z", "2026-10-04T15:00:00Z"},
		},
		{
			"Lord Howe half-hour overlap", "Australia/Lord_Howe", "*/20 1 * * *", "2026-04-04T14:00:00Z",
			[]string{"2026-04-04T14:20:00Z", "2026-04-04T14:40:00Z", "2026-04-05T14:30:00Z", "2026-04-05T14:50:00Z"},
		},
		// Shanghai has no DST: UTC+8 all year.
		{
			"Shanghai daily", shanghai, "0 2 * * *", "2026-03-07T00:00:00Z",
			[]string{"2026-03-07T18:00:00Z", "2026-03-08T18:00:00Z", "2026-03-09T18:00:00Z"},
		},
		{
			"Shanghai hourly across the NY and London dates", shanghai, "0 * * * *", "2026-10-25T00:30:00Z",
			[]string{"2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"},
		},
		{
			"Shanghai month end", shanghai, "0 0 L * *", "2026-02-01T00:00:00Z",
			[]string{"2026-02-27T16:00:00Z", "2026-03-30T16:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCronWith(t, tt.expr, tt.zone, "", DSTOncePerLocalTime)
			got := s.Preview(ts(t, tt.after), len(tt.want))
			require.Equal(t, tt.want, formatTimes(got))
			if !strings.ContainsAny(strings.Fields(tt.expr)[len(strings.Fields(tt.expr))-4], "*/") {
				// A fixed hour: vixie fires the same.
				v := mustCronWith(t, tt.expr, tt.zone, "", DSTVixie)
				require.Equal(t, tt.want, formatTimes(v.Preview(ts(t, tt.after), len(tt.want))), "vixie")
			}
		})
	}
}

// every returns the instants from first to last (inclusive) step apart.
func every(t testing.TB, first, last string, step time.Duration) []string {
	t.Helper()
	var out []string
	for x := ts(t, first); !x.After(ts(t, last)); x = x.Add(step) {
		out = append(out, x.Format(time.RFC3339))
	}
	return out
}

// TestScheduleDSTVixie pins the vixie policy: a fixed hour keeps the
// once-per-local-time rule, an hour field with * or a step follows elapsed
// time (no fire for wall clocks that do not exist, one in each pass of a
// repeated hour).
func TestScheduleDSTVixie(t *testing.T) {
	t.Parallel()
	const ny, london, lh = "America/New_York", "Europe/London", "Australia/Lord_Howe"
	tests := []struct {
		name  string
		zone  string
		expr  string
		after string
		want  []string
	}{
		// New York, 2026-11-01: 02:00 EDT (06:00Z) falls back to 01:00 EST.
		{
			"NY overlap: every 5 minutes through both passes", ny, "*/5 * * * *", "2026-11-01T04:50:00Z",
			every(t, "2026-11-01T04:55:00Z", "2026-11-01T07:10:00Z", 5*time.Minute),
		},
		{
			"NY overlap: hourly fires in both passes", ny, "0 * * * *", "2026-11-01T03:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"},
		},
		{
			"NY overlap: every minute", ny, "* * * * *", "2026-11-01T05:58:00Z",
			[]string{"2026-11-01T05:59:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:01:00Z"},
		},
		{
			"NY overlap: after inside the repeat", ny, "*/10 * * * *", "2026-11-01T06:30:00Z",
			[]string{"2026-11-01T06:40:00Z", "2026-11-01T06:50:00Z", "2026-11-01T07:00:00Z"},
		},
		{
			"NY overlap: step hour", ny, "30 */1 * * *", "2026-11-01T04:00:00Z",
			[]string{"2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"},
		},
		{
			"NY overlap: fixed hour fires once", ny, "30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"},
		},
		{
			"NY overlap: fixed hour with minute wildcard fires once per local time", ny, "*/10 1 * * *", "2026-11-01T04:00:00Z",
			[]string{
				"2026-11-01T05:00:00Z", "2026-11-01T05:10:00Z", "2026-11-01T05:20:00Z", "2026-11-01T05:30:00Z",
				"2026-11-01T05:40:00Z", "2026-11-01T05:50:00Z", "2026-11-02T06:00:00Z",
			},
		},
		{
			"NY overlap: hour range is fixed", ny, "0 0-3 * * *", "2026-11-01T03:30:00Z",
			[]string{"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z", "2026-11-02T05:00:00Z"},
		},
		// New York, 2026-03-08: 02:00 EST (07:00Z) jumps to 03:00 EDT.
		{
			"NY gap: fixed hour in the gap fires at its end", ny, "30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"},
		},
		{
			"NY gap: fixed hour before the gap fires once", ny, "30 1 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-09T05:30:00Z"},
		},
		{
			"NY gap: hourly skips the missing hour", ny, "0 * * * *", "2026-03-08T04:30:00Z",
			[]string{"2026-03-08T05:00:00Z", "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"},
		},
		{
			"NY gap: every 2 hours", ny, "0 */2 * * *", "2026-03-08T04:30:00Z",
			[]string{"2026-03-08T05:00:00Z", "2026-03-08T08:00:00Z", "2026-03-08T10:00:00Z"},
		},
		{
			"NY gap: every 15 seconds", ny, "*/15 * * * * *", "2026-03-08T06:59:30Z",
			[]string{"2026-03-08T06:59:45Z", "2026-03-08T07:00:00Z", "2026-03-08T07:00:15Z"},
		},
		// London, 2026-03-29: 01:00 GMT (01:00Z) jumps to 02:00 BST.
		{
			"London gap: 01:07 does not exist", london, "7 * * * *", "2026-03-28T23:30:00Z",
			[]string{"2026-03-29T00:07:00Z", "2026-03-29T01:07:00Z", "2026-03-29T02:07:00Z"},
		},
		// London, 2026-10-25: 02:00 BST (01:00Z) falls back to 01:00 GMT.
		{
			"London overlap: 01:07 fires twice", london, "7 * * * *", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:07:00Z", "2026-10-25T01:07:00Z", "2026-10-25T02:07:00Z"},
		},
		// Lord Howe: 02:00 +1030 becomes 02:30 +11 on 2026-10-04 (15:30Z),
		// 02:00 +11 becomes 01:30 +1030 on 2026-04-05 (15:00Z).
		{
			"Lord Howe half-hour overlap", lh, "*/15 * * * *", "2026-04-04T14:00:00Z",
			every(t, "2026-04-04T14:15:00Z", "2026-04-04T16:30:00Z", 15*time.Minute),
		},
		{
			"Lord Howe half-hour gap", lh, "*/15 * * * *", "2026-10-03T15:00:00Z",
			every(t, "2026-10-03T15:15:00Z", "2026-10-03T16:30:00Z", 15*time.Minute),
		},
		{
			"Lord Howe fixed hour in the gap", lh, "*/20 2 * * *", "2026-10-03T15:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-03T15:40:00Z", "2026-10-04T15:00:00Z"},
		},
		// Samoa skipped Friday 2011-12-30 (10:00Z: -10 became +14).
		{
			"Apia skipped day: fixed hour fires once", "Pacific/Apia", "0 12 * * *", "2011-12-29T00:00:00Z",
			[]string{"2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z"},
		},
		{
			"Apia skipped day: step hour skips it", "Pacific/Apia", "0 */12 * * *", "2011-12-29T12:00:00Z",
			[]string{"2011-12-29T22:00:00Z", "2011-12-30T10:00:00Z", "2011-12-30T22:00:00Z", "2011-12-31T10:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCron(t, tt.expr, tt.zone) // vixie is the default
			require.Equal(t, DSTVixie, s.Spec().DSTPolicy)
			got := s.Preview(ts(t, tt.after), len(tt.want))
			require.Equal(t, tt.want, formatTimes(got))
		})
	}
}

func TestScheduleInterval(t *testing.T) {
	t.Parallel()
	anchor := "2026-01-01T10:00:00.7504Z"
	tests := []struct {
		name     string
		interval int64
		start    string
		after    string
		want     []string
	}{
		{
			"anchor is slot 0, to the millisecond", 60, "", "2026-01-01T09:00:00Z",
			[]string{"2026-01-01T10:00:00.75Z", "2026-01-01T10:01:00.75Z"},
		},
		{
			"strictly after a slot", 60, "", "2026-01-01T10:01:00.75Z",
			[]string{"2026-01-01T10:02:00.75Z", "2026-01-01T10:03:00.75Z"},
		},
		{
			"between slots", 90, "", "2026-01-01T10:02:59.999Z",
			[]string{"2026-01-01T10:03:00.75Z", "2026-01-01T10:04:30.75Z"},
		},
		{
			"far after the anchor", 7, "", "2027-01-01T00:00:00Z",
			[]string{"2027-01-01T00:00:00.75Z", "2027-01-01T00:00:07.75Z"},
		},
		{
			"start_at is slot 0", 3600, "2026-02-01T00:00:30Z", "2026-01-01T00:00:00Z",
			[]string{"2026-02-01T00:00:30Z", "2026-02-01T01:00:30Z"},
		},
		{
			"start_at keeps its fraction", 1, "2026-02-01T00:00:00.5Z", "2026-02-01T00:00:01Z",
			[]string{"2026-02-01T00:00:01.5Z", "2026-02-01T00:00:02.5Z"},
		},
		{
			"real seconds across DST", 3600, "2026-03-08T05:00:00Z", "2026-03-08T05:00:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"},
		},
		{
			"maximum interval", IntervalSecondsMax, "2028-01-01T00:00:00Z", "2028-01-01T00:00:00Z",
			[]string{"2029-01-01T00:00:00Z", "2030-01-02T00:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := Spec{Type: Interval, IntervalSeconds: tt.interval, Timezone: "America/New_York"}
			if tt.start != "" {
				spec.StartAt = tsp(t, tt.start)
			}
			s, err := Parse(spec, ts(t, anchor))
			require.NoError(t, err)
			got := s.Preview(ts(t, tt.after), len(tt.want))
			want := make([]time.Time, len(tt.want))
			for i, w := range tt.want {
				want[i] = ts(t, w)
			}
			require.Equal(t, want, got)
		})
	}
}

func TestScheduleOnce(t *testing.T) {
	t.Parallel()
	s, err := Parse(Spec{Type: Once, RunAt: tsp(t, "2026-05-01T12:00:00+02:00")}, time.Now())
	require.NoError(t, err)
	tests := []struct {
		name  string
		after string
		want  string // "" means no fire
	}{
		{"before run_at", "2026-05-01T09:59:59.999Z", "2026-05-01T10:00:00Z"},
		{"long before run_at", "2000-01-01T00:00:00Z", "2026-05-01T10:00:00Z"},
		{"at run_at", "2026-05-01T10:00:00Z", ""},
		{"after run_at", "2026-05-02T00:00:00Z", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := s.Next(ts(t, tt.after))
			if tt.want == "" {
				require.False(t, ok)
				require.True(t, got.IsZero())
				return
			}
			require.True(t, ok)
			require.Equal(t, ts(t, tt.want), got)
			require.Equal(t, time.UTC, got.Location())
		})
	}
}

func TestScheduleBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		spec       Spec
		start, end string
		after      string
		want       []string
	}{
		{
			"cron start inclusive",
			Spec{Type: Cron, Cron: "0 * * * *"},
			"2026-01-01T05:00:00Z", "2026-01-01T06:30:00Z", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T05:00:00Z", "2026-01-01T06:00:00Z"},
		},
		{
			"cron start with fraction excludes earlier slot",
			Spec{Type: Cron, Cron: "* * * * * *"},
			"2026-01-01T05:00:00.5Z", "2026-01-01T05:00:02Z", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T05:00:01Z", "2026-01-01T05:00:02Z"},
		},
		{
			"cron end inclusive",
			Spec{Type: Cron, Cron: "0 * * * *"},
			"", "2026-01-01T02:00:00Z", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"},
		},
		{
			"cron both bounds",
			Spec{Type: Cron, Cron: "*/30 * * * *"},
			"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z", "2025-01-01T00:00:00Z",
			[]string{"2026-01-01T01:00:00Z", "2026-01-01T01:30:00Z", "2026-01-01T02:00:00Z"},
		},
		{
			"after end",
			Spec{Type: Cron, Cron: "*/30 * * * *"},
			"", "2026-01-01T02:00:00Z", "2026-01-01T02:00:00Z", nil,
		},
		{
			"interval end",
			Spec{Type: Interval, IntervalSeconds: 600},
			"2026-01-01T00:00:00Z", "2026-01-01T00:25:00Z", "2025-12-31T00:00:00Z",
			[]string{"2026-01-01T00:00:00Z", "2026-01-01T00:10:00Z", "2026-01-01T00:20:00Z"},
		},
		{
			"once at start",
			Spec{Type: Once, RunAt: tsp(t, "2026-01-01T00:00:00Z")},
			"2026-01-01T00:00:00Z", "2026-01-01T00:00:00.1Z", "2025-12-31T00:00:00Z",
			[]string{"2026-01-01T00:00:00Z"},
		},
		{
			"once at end",
			Spec{Type: Once, RunAt: tsp(t, "2026-01-01T00:00:00Z")},
			"", "2026-01-01T00:00:00Z", "2025-12-31T00:00:00Z",
			[]string{"2026-01-01T00:00:00Z"},
		},
		{
			"far future cap",
			Spec{Type: Cron, Cron: "@yearly"},
			"", "", "9997-06-01T00:00:00Z",
			[]string{"9998-01-01T00:00:00Z", "9999-01-01T00:00:00Z"},
		},
		{
			"far future cap interval",
			Spec{Type: Interval, IntervalSeconds: IntervalSecondsMax},
			"9999-06-01T00:00:00Z", "", "9999-01-01T00:00:00Z",
			[]string{"9999-06-01T00:00:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := tt.spec
			if tt.start != "" {
				spec.StartAt = tsp(t, tt.start)
			}
			if tt.end != "" {
				spec.EndAt = tsp(t, tt.end)
			}
			s, err := Parse(spec, ts(t, "2020-01-01T00:00:00Z"))
			require.NoError(t, err)
			got := s.Preview(ts(t, tt.after), max(len(tt.want), 1)+1)
			if tt.want == nil {
				require.Empty(t, got)
				return
			}
			want := make([]time.Time, len(tt.want))
			for i, w := range tt.want {
				want[i] = ts(t, w)
			}
			require.Equal(t, want, got)
		})
	}
}

func TestSchedulePreviewClamp(t *testing.T) {
	t.Parallel()
	s := mustCron(t, "* * * * * *", "Europe/London")
	after := ts(t, "2026-10-25T00:59:00Z")
	tests := []struct {
		name string
		n    int
		want int
	}{
		{"zero means one", 0, 1},
		{"negative means one", -5, 1},
		{"within range", 7, 7},
		{"capped", 5000, PreviewMax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := s.Preview(after, tt.n)
			require.Len(t, got, tt.want)
			for i := 1; i < len(got); i++ {
				require.True(t, got[i].After(got[i-1]))
			}
		})
	}
}

func TestScheduleSpecAndLocation(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.FixedZone("CET", 3600))
	in := Spec{Type: Cron, Cron: "  0 9 * * MON-FRI \n", StartAt: &start}
	s, err := Parse(in, time.Now())
	require.NoError(t, err)
	got := s.Spec()
	require.Equal(t, "UTC", got.Timezone)
	require.Equal(t, "0 9 * * MON-FRI", got.Cron)
	require.Equal(t, time.UTC, s.Location())
	require.NotNil(t, got.StartAt)
	require.True(t, start.Equal(*got.StartAt))
	require.Equal(t, time.UTC, got.StartAt.Location())

	// The schedule shares no memory with its input or its callers.
	*got.StartAt = got.StartAt.Add(time.Hour)
	start = start.Add(time.Hour)
	require.Equal(t, time.Date(2026, 1, 1, 8, 0, 0, 0, time.UTC), *s.Spec().StartAt)

	ny, err := Parse(Spec{Type: Interval, IntervalSeconds: 5, Timezone: "America/New_York"}, time.Now())
	require.NoError(t, err)
	require.Equal(t, "America/New_York", ny.Location().String())
	require.Equal(t, "America/New_York", ny.Spec().Timezone)
}

func TestScheduleValidation(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("1,", 130) + " * * * *"
	tests := []struct {
		name string
		spec Spec
		// want lists the expected errors in order; Message is a substring.
		want []FieldError
	}{
		{"missing type", Spec{}, []FieldError{{"schedule.type", `is required; must be one of "cron", "interval", "once", "union"`}}},
		{"unknown type", Spec{Type: "weekly"}, []FieldError{{"schedule.type", `"weekly" is not a schedule type; must be one of "cron", "interval", "once", "union"`}}},
		{"cron missing", Spec{Type: Cron, Cron: " "}, []FieldError{{"schedule.cron", "is required for a cron schedule"}}},
		{"cron too long", Spec{Type: Cron, Cron: long}, []FieldError{{"schedule.cron", "at most 256 characters"}}},
		{"TZ prefix", Spec{Type: Cron, Cron: "TZ=UTC 0 * * * *"}, []FieldError{{"schedule.cron", "set schedule.timezone instead"}}},
		{"CRON_TZ prefix", Spec{Type: Cron, Cron: "cron_tz=Europe/London 0 * * * *"}, []FieldError{{"schedule.cron", "TZ= or CRON_TZ="}}},
		{"@every", Spec{Type: Cron, Cron: "@every 5m"}, []FieldError{{"schedule.cron", `use schedule.type "interval"`}}},
		{"@every alone", Spec{Type: Cron, Cron: "@EVERY"}, []FieldError{{"schedule.cron", `use schedule.type "interval"`}}},
		{"unknown descriptor", Spec{Type: Cron, Cron: "@fortnightly"}, []FieldError{{"schedule.cron", `unknown descriptor "@fortnightly"; use one of @yearly`}}},
		{"descriptor with fields", Spec{Type: Cron, Cron: "@daily 5"}, []FieldError{{"schedule.cron", "must be the whole expression"}}},
		{"too few fields", Spec{Type: Cron, Cron: "* * * *"}, []FieldError{{"schedule.cron", "must have 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or 7 with seconds first and a year last; got 4"}}},
		{"too many fields", Spec{Type: Cron, Cron: "0 0 0 * * * 2026 1"}, []FieldError{{"schedule.cron", "got 8"}}},
		{"second out of range", Spec{Type: Cron, Cron: "60 * * * * *"}, []FieldError{{"schedule.cron", "second field: value 60 is out of range 0-59"}}},
		{"minute out of range", Spec{Type: Cron, Cron: "60 * * * *"}, []FieldError{{"schedule.cron", "minute field: value 60 is out of range 0-59"}}},
		{"hour out of range", Spec{Type: Cron, Cron: "0 24 * * *"}, []FieldError{{"schedule.cron", "hour field: value 24 is out of range 0-23"}}},
		{"day-of-month zero", Spec{Type: Cron, Cron: "0 0 0 * *"}, []FieldError{{"schedule.cron", "day-of-month field: value 0 is out of range 1-31"}}},
		{"month out of range", Spec{Type: Cron, Cron: "0 0 1 13 *"}, []FieldError{{"schedule.cron", "month field: value 13 is out of range 1-12"}}},
		{"day-of-week out of range", Spec{Type: Cron, Cron: "0 0 * * 8"}, []FieldError{{"schedule.cron", "day-of-week field: value 8 is out of range 0-7"}}},
		{"huge number", Spec{Type: Cron, Cron: "99999999999999999999 * * * *"}, []FieldError{{"schedule.cron", "value 99999999999999999999 is out of range 0-59"}}},
		{"backwards year range", Spec{Type: Cron, Cron: "0 0 0 1 1 * 2005-2002"}, []FieldError{{"schedule.cron", "year field: range 2005-2002 is backwards (2005 > 2002); the year field does not wrap around"}}},
		{"step zero", Spec{Type: Cron, Cron: "*/0 * * * *"}, []FieldError{{"schedule.cron", "minute field: step 0 is out of range 1-59"}}},
		{"step zero after value", Spec{Type: Cron, Cron: "15/0 * * * *"}, []FieldError{{"schedule.cron", "step 0 is out of range 1-59"}}},
		{"step too large", Spec{Type: Cron, Cron: "0 */24 * * *"}, []FieldError{{"schedule.cron", "hour field: step 24 is out of range 1-23"}}},
		{"step not a number", Spec{Type: Cron, Cron: "*/x * * * *"}, []FieldError{{"schedule.cron", `step "x" is not a number`}}},
		{"empty step", Spec{Type: Cron, Cron: "*/ * * * *"}, []FieldError{{"schedule.cron", `step "" is not a number`}}},
		{"two slashes", Spec{Type: Cron, Cron: "1/2/3 * * * *"}, []FieldError{{"schedule.cron", `"1/2/3" has more than one /`}}},
		{"no value before slash", Spec{Type: Cron, Cron: "/5 * * * *"}, []FieldError{{"schedule.cron", `"/5" has no value before /`}}},
		{"half range", Spec{Type: Cron, Cron: "-5 * * * *"}, []FieldError{{"schedule.cron", "missing value in range"}}},
		{"leading comma", Spec{Type: Cron, Cron: ", * * * *"}, []FieldError{{"schedule.cron", "minute field: empty list item"}}},
		{"double comma", Spec{Type: Cron, Cron: "0 1,,2 * * *"}, []FieldError{{"schedule.cron", "hour field: empty list item"}}},
		{"not a number", Spec{Type: Cron, Cron: "a * * * *"}, []FieldError{{"schedule.cron", `minute field: "a" is not a number`}}},
		{"bad month name", Spec{Type: Cron, Cron: "0 0 1 FOO *"}, []FieldError{{"schedule.cron", `"FOO" is not a number or a month name (JAN-DEC)`}}},
		{"weekday name in month", Spec{Type: Cron, Cron: "0 0 1 MON *"}, []FieldError{{"schedule.cron", "month name"}}},
		{"month name in weekday", Spec{Type: Cron, Cron: "0 0 * * JAN"}, []FieldError{{"schedule.cron", `"JAN" is not a number or a weekday name (SUN-SAT)`}}},
		{"long weekday name", Spec{Type: Cron, Cron: "0 0 * * MONDAY"}, []FieldError{{"schedule.cron", "weekday name"}}},
		{"question mark in minute", Spec{Type: Cron, Cron: "? * * * *"}, []FieldError{{"schedule.cron", "minute field: ? is only allowed in the day-of-month and day-of-week fields"}}},
		{"question mark in list", Spec{Type: Cron, Cron: "0 0 ?,1 * *"}, []FieldError{{"schedule.cron", "? must be the whole field"}}},
		{"L offset too large", Spec{Type: Cron, Cron: "0 0 L-31 * *"}, []FieldError{{"schedule.cron", `day-of-month field: "L-31": L is the month's last day; use "L", "L-n" (n days before it, n from 1 to 30) or "LW"`}}},
		{"L in hour", Spec{Type: Cron, Cron: "0 L * * *"}, []FieldError{{"schedule.cron", `hour field: "L" is not a number`}}},
		{"every bad field reported", Spec{Type: Cron, Cron: "60 24 * * *"}, []FieldError{
			{"schedule.cron", "minute field"}, {"schedule.cron", "hour field"},
		}},
		{"never fires: 30 February", Spec{Type: Cron, Cron: "0 0 30 2 *"}, []FieldError{{"schedule.cron", "never fires"}}},
		{"never fires: 31st of 30-day months", Spec{Type: Cron, Cron: "0 0 31 4,6,9,11 *"}, []FieldError{{"schedule.cron", "never fires"}}},
		{"never fires: L-30 in February", Spec{Type: Cron, Cron: "0 0 L-30 2 *"}, []FieldError{{"schedule.cron", "never fires"}}},
		{"never fires with seconds and ?", Spec{Type: Cron, Cron: "0 0 0 31 2 ?"}, []FieldError{{"schedule.cron", "never fires"}}},
		{
			"cron with interval_seconds and run_at",
			Spec{Type: Cron, Cron: "@daily", IntervalSeconds: 5, RunAt: tsp(t, "2026-01-01T00:00:00Z")},
			[]FieldError{{"schedule.interval_seconds", "must not be set when schedule.type is cron"}, {"schedule.run_at", "must not be set when schedule.type is cron"}},
		},
		{"interval missing", Spec{Type: Interval}, []FieldError{{"schedule.interval_seconds", "is required for an interval schedule"}}},
		{"interval negative", Spec{Type: Interval, IntervalSeconds: -1}, []FieldError{{"schedule.interval_seconds", "must be between 1 and 31622400 (366 days)"}}},
		{"interval too long", Spec{Type: Interval, IntervalSeconds: IntervalSecondsMax + 1}, []FieldError{{"schedule.interval_seconds", "must be between 1 and 31622400"}}},
		{
			"interval with cron and run_at",
			Spec{Type: Interval, IntervalSeconds: 60, Cron: "@daily", RunAt: tsp(t, "2026-01-01T00:00:00Z")},
			[]FieldError{{"schedule.cron", "must not be set when schedule.type is interval"}, {"schedule.run_at", "must not be set when schedule.type is interval"}},
		},
		{"once missing run_at", Spec{Type: Once}, []FieldError{{"schedule.run_at", "is required when schedule.type is once"}}},
		{
			"once with cron and interval",
			Spec{Type: Once, RunAt: tsp(t, "2026-01-01T00:00:00Z"), Cron: "x", IntervalSeconds: 1},
			[]FieldError{{"schedule.cron", "must not be set when schedule.type is once"}, {"schedule.interval_seconds", "must not be set when schedule.type is once"}},
		},
		{
			"once before start",
			Spec{Type: Once, RunAt: tsp(t, "2026-01-01T00:00:00Z"), StartAt: tsp(t, "2026-01-01T00:00:01Z")},
			[]FieldError{{"schedule.run_at", "must be within schedule.start_at and schedule.end_at"}},
		},
		{
			"once after end",
			Spec{Type: Once, RunAt: tsp(t, "2026-01-02T00:00:00Z"), EndAt: tsp(t, "2026-01-01T00:00:00Z")},
			[]FieldError{{"schedule.run_at", "must be within"}},
		},
		{
			"end before start",
			Spec{Type: Interval, IntervalSeconds: 1, StartAt: tsp(t, "2026-01-02T00:00:00Z"), EndAt: tsp(t, "2026-01-01T00:00:00Z")},
			[]FieldError{{"schedule.end_at", "must be after schedule.start_at"}},
		},
		{
			"end equals start",
			Spec{Type: Interval, IntervalSeconds: 1, StartAt: tsp(t, "2026-01-01T00:00:00Z"), EndAt: tsp(t, "2026-01-01T00:00:00Z")},
			[]FieldError{{"schedule.end_at", "must be after schedule.start_at"}},
		},
		{"year out of range", Spec{Type: Once, RunAt: tsp(t, "2026-01-01T00:00:00Z"), EndAt: func() *time.Time {
			v := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			return &v
		}()}, []FieldError{{"schedule.end_at", "must be between years 0001 and 9999"}}},
		{"zone Local", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "Local"}, []FieldError{{"schedule.timezone", `"Local" is not allowed`}}},
		{"zone local lower case", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "local"}, []FieldError{{"schedule.timezone", `"Local" is not allowed`}}},
		{"zone traversal", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "../../etc/passwd"}, []FieldError{{"schedule.timezone", "is not an IANA time zone name"}}},
		{"zone dot segment", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "Europe/./London"}, []FieldError{{"schedule.timezone", "is not an IANA time zone name"}}},
		{"zone absolute path", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "/usr/share/zoneinfo/UTC"}, []FieldError{{"schedule.timezone", "is not an IANA time zone name"}}},
		{"zone empty segment", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "America//New_York"}, []FieldError{{"schedule.timezone", "is not an IANA time zone name"}}},
		{"zone trailing slash", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "Europe/"}, []FieldError{{"schedule.timezone", "is not an IANA time zone name"}}},
		{"zone backslash", Spec{Type: Interval, IntervalSeconds: 1, Timezone: `Europe\London`}, []FieldError{{"schedule.timezone", "allowed: letters, digits"}}},
		{"zone space", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "America/New York"}, []FieldError{{"schedule.timezone", "allowed: letters, digits"}}},
		{"zone too long", Spec{Type: Interval, IntervalSeconds: 1, Timezone: strings.Repeat("A", 65)}, []FieldError{{"schedule.timezone", "at most 64 characters"}}},
		{"zone unknown", Spec{Type: Interval, IntervalSeconds: 1, Timezone: "Mars/Olympus_Mons"}, []FieldError{{"schedule.timezone", `unknown time zone "Mars/Olympus_Mons"`}}},
		{
			"every problem at once",
			Spec{
				Type: Cron, Cron: "60 * * * *", Timezone: "Local",
				StartAt: tsp(t, "2026-01-02T00:00:00Z"), EndAt: tsp(t, "2026-01-01T00:00:00Z"),
			},
			[]FieldError{{"schedule.timezone", "Local"}, {"schedule.cron", "out of range"}, {"schedule.end_at", "must be after"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tt.spec, time.Now())
			require.Nil(t, s)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Len(t, verr.Fields, len(tt.want), "%v", verr)
			for i, w := range tt.want {
				require.Equal(t, w.Field, verr.Fields[i].Field, "%v", verr)
				require.Contains(t, verr.Fields[i].Message, w.Message)
			}
		})
	}
}

func TestScheduleValidZones(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"", "UTC", "Etc/GMT+5", "America/Argentina/Buenos_Aires", "EST5EDT", "Asia/Kathmandu", "America/Port-au-Prince"} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(Spec{Type: Cron, Cron: "@hourly", Timezone: zone}, time.Now())
			require.NoError(t, err)
		})
	}
}

// matchWall is a naive reference matcher over a cronExpr's value sets,
// independent of nextWall's field-wise search and of dayMask: the day
// rules (L, W, LW, dL, d#n) are evaluated from their definitions with the
// time package.
func matchWall(c *cronExpr, w int64) bool {
	u := time.Unix(w, 0).UTC()
	has := func(set uint64, v int) bool { return v >= 0 && v < 64 && set&(1<<v) != 0 }
	if !has(c.second, u.Second()) || !has(c.minute, u.Minute()) || !has(c.hour, u.Hour()) || !has(c.month, int(u.Month())) {
		return false
	}
	if c.hasYears {
		i := u.Year() - cronYearMin
		if i < 0 || i >= 192 || c.years[i/64]&(1<<(i%64)) == 0 {
			return false
		}
	}
	y, m, d := u.Date()
	inMonth := func(day int) bool { return time.Date(y, m, day, 0, 0, 0, 0, time.UTC).Month() == m }
	isWeekday := func(day int) bool {
		wd := time.Date(y, m, day, 0, 0, 0, 0, time.UTC).Weekday()
		return wd != time.Saturday && wd != time.Sunday
	}
	lastDay := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
	dom := has(c.dom, d) || has(c.last, lastDay-d)
	for t := 1; t <= 31 && !dom; t++ {
		if !has(c.nearest, t) || !inMonth(t) {
			continue
		}
		// The weekday of the month closest to t (never a tie).
		best := 0
		for day := 1; day <= lastDay; day++ {
			if isWeekday(day) && (best == 0 || abs(day-t) < abs(best-t)) {
				best = day
			}
		}
		dom = best == d
	}
	if c.lastWeekday && !dom {
		lw := lastDay
		for !isWeekday(lw) {
			lw--
		}
		dom = lw == d
	}
	wd := int(u.Weekday())
	nth := 0 // how many days wd of the month up to d
	for day := d; day >= 1; day -= 7 {
		nth++
	}
	dow := has(c.dow, wd) || has(c.dowLast, wd) && !inMonth(d+7) || has(c.dowNth, wd*5+nth-1)
	if c.both {
		return dom && dow
	}
	return dom || dow
}

func abs(v int) int { return max(v, -v) }

// fixedHourText reports whether the hour field of a (standard or quartz)
// expression has neither * nor a step, read from the text independently of
// the parser: the vixie policy's class of the expression's slots.
func fixedHourText(expr string) bool {
	f := strings.Fields(expr)
	if strings.HasPrefix(expr, "@") {
		return !strings.EqualFold(f[0], "@hourly")
	}
	hour := f[1]
	if len(f) >= 6 {
		hour = f[2]
	}
	return !strings.ContainsAny(hour, "*/")
}

// oracleFires lists the fire times in (from, to] by walking every second and
// applying the documented rules literally. Once per local time (and vixie
// with a fixed hour): a wall clock fires the first time the clock shows it,
// and wall clocks the clock jumps over fire when it lands; from must not lie
// in a repeated stretch. Vixie with an hour of * or a step (elapsed): a
// second fires when its own wall clock matches.
func oracleFires(c *cronExpr, loc *time.Location, from, to int64, elapsed bool) []time.Time {
	var out []time.Time
	if elapsed {
		for x := from + 1; x <= to; x++ {
			if matchWall(c, wallOf(time.Unix(x, 0), loc)) {
				out = append(out, time.Unix(x, 0).UTC())
			}
		}
		return out
	}
	maxWall := wallOf(time.Unix(from, 0), loc)
	for x := from + 1; x <= to; x++ {
		w := wallOf(time.Unix(x, 0), loc)
		if w <= maxWall {
			continue // a repeat: already fired at the first occurrence
		}
		fire := matchWall(c, w)
		for g := maxWall + 1; g < w && !fire; g++ {
			fire = matchWall(c, g)
		}
		if fire {
			out = append(out, time.Unix(x, 0).UTC())
		}
		maxWall = w
	}
	return out
}

// randomCron builds a cron expression from random parts, in the standard
// or the quartz dialect, with the special items (L, W, LW, dL, d#n,
// wrapped ranges, a year field) now and then. Some are invalid or never
// fire; callers skip those.
func randomCron(r *rand.Rand, busy, quartz bool) string {
	field := func(lo, hi int, names []string) string {
		n := 1 + r.IntN(3)
		items := make([]string, 0, n)
		for range n {
			a, b := lo+r.IntN(hi-lo+1), lo+r.IntN(hi-lo+1)
			if r.IntN(3) > 0 {
				a, b = min(a, b), max(a, b) // otherwise maybe a wrapped range
			}
			val := func(v int) string {
				if names != nil && r.IntN(3) == 0 {
					return names[v%len(names)]
				}
				return strconv.Itoa(v)
			}
			switch r.IntN(7) {
			case 0:
				items = append(items, "*")
			case 1:
				items = append(items, fmt.Sprintf("*/%d", 1+r.IntN(max(1, (hi-lo)/2))))
			case 2:
				items = append(items, val(a))
			case 3:
				items = append(items, val(a)+"-"+val(b))
			case 4:
				items = append(items, fmt.Sprintf("%s-%s/%d", val(a), val(b), 1+r.IntN(max(1, (hi-lo)/3))))
			case 5:
				items = append(items, fmt.Sprintf("%d/%d", a, 1+r.IntN(max(1, (hi-lo)/3))))
			default:
				items = append(items, val(b))
			}
		}
		return strings.Join(items, ",")
	}
	months := []string{"DEC", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV"}
	days := []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT", "sun"}
	dowLo, dowHi := 0, 7
	if quartz {
		days = []string{"SAT", "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
		dowLo = 1
	}
	if busy {
		// Fires often around 01:00-03:00, where the DST transitions are.
		secs := []string{"0", "0", "*/15", "*/7", "30", "10-40/10", "*"}
		mins := []string{"*", "*/15", "0", "30", "0-59/13", "45", "59", "0,30", "50-10"}
		hours := []string{"*", "1", "2", "1-3", "0,2", "*/2", "3", "0-4", "23-3", "1/2", "*/3"}
		dom, dow := "*", "*"
		if quartz {
			dom, dow = "?", "*"
			if r.IntN(2) == 0 {
				dom, dow = "*", "?"
			}
		}
		return fmt.Sprintf("%s %s %s %s * %s", secs[r.IntN(len(secs))], mins[r.IntN(len(mins))], hours[r.IntN(len(hours))], dom, dow)
	}
	dom := field(1, 31, nil)
	switch r.IntN(9) {
	case 0:
		dom = "?"
	case 1:
		dom = "L"
	case 2:
		dom = fmt.Sprintf("L-%d", 1+r.IntN(5))
	case 3:
		dom = fmt.Sprintf("%dW", 1+r.IntN(31))
	case 4:
		dom = "LW"
	case 5:
		dom = fmt.Sprintf("%dW,L", 1+r.IntN(31))
	}
	dow := field(dowLo, dowHi, days)
	switch r.IntN(8) {
	case 0, 1:
		dow = "*"
	case 2:
		dow = fmt.Sprintf("%dL", dowLo+r.IntN(7))
	case 3:
		dow = fmt.Sprintf("%s#%d", days[dowLo+r.IntN(7)], 1+r.IntN(5))
	case 4:
		dow = "L"
	}
	if quartz {
		if r.IntN(2) == 0 {
			dom = "?"
		} else {
			dow = "?"
		}
	}
	expr := fmt.Sprintf("%s %s %s %s %s", field(0, 59, nil), field(0, 23, nil), dom, field(1, 12, months), dow)
	if quartz || r.IntN(2) == 0 {
		expr = field(0, 59, nil) + " " + expr
		switch r.IntN(6) {
		case 0:
			expr += " *"
		case 1:
			expr += fmt.Sprintf(" %d-2099", 1990+r.IntN(60))
		case 2:
			expr += fmt.Sprintf(" %d/%d", 2000+r.IntN(30), 1+r.IntN(5))
		}
	}
	return expr
}

// checkFire asserts that fire time t of s is correct on its own under the
// schedule's rule: for elapsed time, its wall clock matches; otherwise its
// wall clock matches at its first occurrence, or it is the end of a gap
// the clock jumped over a matching wall clock in.
func checkFire(t testing.TB, s *Schedule, expr string, fire time.Time) {
	t.Helper()
	c, loc := s.cron, s.loc
	w := wallOf(fire, loc)
	if s.elapsed {
		require.True(t, matchWall(c, w), "%s in %s: %s does not match", expr, loc, fire)
		return
	}
	if matchWall(c, w) {
		require.Equal(t, fire.Unix(), resolveWall(loc, w), "%s in %s: %s is not the first occurrence", expr, loc, fire)
		return
	}
	// Otherwise the fire must be a gap-shifted one: fire is the instant a
	// zone transition moved the clock forward over a matching wall clock.
	lt := fire.In(loc)
	start, _ := lt.ZoneBounds()
	require.True(t, start.Equal(fire), "%s in %s: %s does not match and is not a transition", expr, loc, fire)
	_, before := fire.Add(-time.Second).In(loc).Zone()
	_, after := lt.Zone()
	require.Greater(t, after, before, "%s in %s: %s is not a spring-forward transition", expr, loc, fire)
	matched := false
	for g := fire.Unix() - 1 + int64(before) + 1; g < w && !matched; g++ {
		matched = matchWall(c, g)
	}
	require.True(t, matched, "%s in %s: nothing in the gap before %s matches", expr, loc, fire)
}

// installedZones lists the distinct zones under /usr/share/zoneinfo (one
// name per zone file content), or a fixed list where none are installed.
func installedZones(t *testing.T) []string {
	t.Helper()
	const root = "/usr/share/zoneinfo"
	seen := map[string]bool{}
	var zones []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // an unreadable entry is skipped
		}
		name := strings.TrimPrefix(path, root+"/")
		if d.IsDir() {
			if name == "posix" || name == "right" {
				return filepath.SkipDir
			}
			return nil
		}
		if name == "" || name[0] < 'A' || name[0] > 'Z' || strings.Contains(name, ".") || name == "Factory" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(data, []byte("TZif")) || seen[string(data)] {
			return nil //nolint:nilerr // not a zone file, or a link seen already
		}
		if _, err := time.LoadLocation(name); err != nil {
			return nil //nolint:nilerr // unknown to the embedded database
		}
		seen[string(data)] = true
		zones = append(zones, name)
		return nil
	})
	if len(zones) == 0 {
		zones = []string{
			"UTC", "America/New_York", "Europe/London", "Asia/Shanghai", "Australia/Lord_Howe",
			"Pacific/Apia", "America/Santiago", "Asia/Kathmandu", "Africa/Casablanca", "Antarctica/Troll", "Pacific/Chatham",
		}
	}
	return zones
}

// transitionsNear returns the zone's transitions in year, or when it has
// none then, its last transition before that year (or, for a zone without
// any, the middle of the year).
func transitionsNear(loc *time.Location, year int) []time.Time {
	var out []time.Time
	for at := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() == year; {
		_, end := at.In(loc).ZoneBounds()
		if end.IsZero() || end.Year() != year {
			break
		}
		out = append(out, end)
		at = end
	}
	if len(out) == 0 {
		start, _ := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).In(loc).ZoneBounds()
		if start.IsZero() {
			start = time.Date(year, 7, 1, 0, 0, 0, 0, time.UTC)
		}
		out = append(out, start)
	}
	return out
}

// compareOracle checks Next against oracleFires over (from, to].
func compareOracle(t *testing.T, s *Schedule, expr string, from, to int64) int {
	t.Helper()
	want := oracleFires(s.cron, s.loc, from, to, s.spec.DSTPolicy == DSTVixie && !fixedHourText(expr))
	var got []time.Time
	for next, ok := s.Next(time.Unix(from, 0)); ok && next.Unix() <= to; next, ok = s.Next(next) {
		got = append(got, next)
	}
	require.Equal(t, formatTimes(want), formatTimes(got), "%s (%s, %s) in %s from %s", expr, s.spec.Dialect, s.spec.DSTPolicy, s.loc, time.Unix(from, 0).UTC())
	return len(got)
}

// TestScheduleCronProperties checks random expressions in zones with DST,
// odd offsets and history: results strictly increase, are correct one by
// one, and match a second-by-second oracle around DST transitions, under
// both DST policies and both dialects.
func TestScheduleCronProperties(t *testing.T) {
	t.Parallel()
	zones := []string{
		"UTC", "America/New_York", "Europe/London", "Asia/Shanghai", "Australia/Lord_Howe",
		"Pacific/Apia", "America/Santiago", "Asia/Kathmandu", "Africa/Casablanca", "Antarctica/Troll",
	}
	policies := []string{DSTVixie, DSTOncePerLocalTime}
	dialects := []string{DialectStandard, DialectQuartz}

	t.Run("sequences", func(t *testing.T) {
		t.Parallel()
		r := rand.New(rand.NewPCG(1, 2))
		valid, ended := 0, 0
		for valid < 600 {
			dialect := dialects[r.IntN(2)]
			expr := randomCron(r, r.IntN(4) == 0, dialect == DialectQuartz)
			zone := zones[r.IntN(len(zones))]
			s, err := Parse(Spec{
				Type: Cron, Cron: expr, Timezone: zone, Dialect: dialect,
				DSTPolicy: policies[r.IntN(2)],
			}, time.Time{})
			if err != nil {
				var verr *ValidationError
				require.ErrorAs(t, err, &verr)
				continue
			}
			valid++
			after := time.Unix(946684800+r.Int64N(40*365*secondsPerDay), int64(r.IntN(1e9)))
			prev := after
			for range 40 {
				next, ok := s.Next(prev)
				ref, refOK := refNextUTC(s.cron, prev.In(s.loc))
				if zone == "UTC" {
					require.Equal(t, refOK, ok, "%s after %s", expr, prev)
				}
				if !ok {
					require.True(t, s.cron.hasYears, "%s in %s after %s", expr, zone, prev)
					ended++
					break
				}
				require.True(t, next.After(prev), "%s in %s: %s not after %s", expr, zone, next, prev)
				checkFire(t, s, expr, next)
				if zone == "UTC" {
					require.Equal(t, ref, next, "%s after %s", expr, prev)
				}
				prev = next
			}
		}
		require.Less(t, ended, valid/4)
	})

	t.Run("oracle around transitions", func(t *testing.T) {
		t.Parallel()
		r := rand.New(rand.NewPCG(3, 4))
		checked := 0
		defer func() { require.Greater(t, checked, 20000) }()
		for _, zone := range []string{"America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Shanghai"} {
			loc := mustZone(t, zone)
			// The 2011 transitions include Apia skipping 30 December.
			for _, year := range []int{2011, 2026} {
				for _, at := range transitionsNear(loc, year) {
					from, to := at.Unix()-90*60, at.Unix()+150*60
					for i := range 8 {
						dialect := dialects[i%2]
						expr := randomCron(r, true, dialect == DialectQuartz)
						s := mustCronWith(t, expr, zone, dialect, policies[i/2%2])
						checked += compareOracle(t, s, expr, from, to)
					}
				}
			}
		}
	})

	// Every installed zone, both policies, around its 2026 transitions (or
	// its last one before): the zones' odd offsets and history (half-hour
	// shifts, skipped days, double summer time) against the oracle.
	t.Run("oracle in every installed zone", func(t *testing.T) {
		t.Parallel()
		r := rand.New(rand.NewPCG(5, 6))
		checked := 0
		defer func() { require.Greater(t, checked, 10000) }()
		for _, zone := range installedZones(t) {
			loc := mustZone(t, zone)
			for _, at := range transitionsNear(loc, 2026) {
				from, to := at.Unix()-40*60, at.Unix()+80*60
				for _, policy := range policies {
					dialect := dialects[r.IntN(2)]
					expr := randomCron(r, true, dialect == DialectQuartz)
					s := mustCronWith(t, expr, zone, dialect, policy)
					checked += compareOracle(t, s, expr, from, to)
				}
			}
		}
	})
}

// anyTime returns c matching every second of its days.
func anyTime(c *cronExpr) *cronExpr {
	d := *c
	d.second, d.minute, d.hour = ^uint64(0), ^uint64(0), ^uint64(0)
	return &d
}

// refNextUTC is a slow reference for wall-clock search: it walks day by day
// and then through the day's hours, minutes and seconds.
func refNextUTC(c *cronExpr, after time.Time) (time.Time, bool) {
	if after.Location() != time.UTC {
		return time.Time{}, false
	}
	start := after.Unix() + 1
	day := time.Unix(floorDiv(start, secondsPerDay)*secondsPerDay, 0).UTC()
	for range 450 * 366 {
		base := day.Unix()
		if matchWall(anyTime(c), base) {
			for h := range 24 {
				if c.hour&(1<<h) == 0 || base+int64(h*3600+3599) < start {
					continue
				}
				for m := range 60 {
					if c.minute&(1<<m) == 0 || base+int64(h*3600+m*60+59) < start {
						continue
					}
					for s := range 60 {
						w := base + int64(h*3600+m*60+s)
						if w >= start && c.second&(1<<s) != 0 {
							return time.Unix(w, 0).UTC(), true
						}
					}
				}
			}
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}, false
}

func TestScheduleNextNeverGoesBack(t *testing.T) {
	t.Parallel()
	// Next from every second of the New York fall-back window lands after
	// `after` and on the fire list of the window.
	s := mustCronWith(t, "*/20 * * * * *", "America/New_York", "", DSTOncePerLocalTime)
	from := ts(t, "2026-11-01T05:58:00Z")
	fires := map[time.Time]bool{}
	for next, ok := s.Next(from); ok && next.Before(from.Add(3*time.Hour)); next, ok = s.Next(next) {
		fires[next] = true
	}
	// 05:58:20-05:59:40Z (EDT), then from 07:00Z (02:00 EST); the repeated
	// 01:xx EST hour fires nothing.
	require.Len(t, fires, 5+117*3+3) // up to 08:57:40Z
	for f := range fires {
		require.NotEqual(t, 6, f.Hour(), "fire in the repeated hour: %s", f)
	}
	for x := from; x.Before(from.Add(2 * time.Hour)); x = x.Add(time.Second) {
		next, ok := s.Next(x)
		require.True(t, ok)
		if !next.After(x) || !fires[next] {
			require.Failf(t, "bad fire", "Next(%s) = %s", x, next)
		}
	}
}

func TestScheduleNextNeverGoesBackVixie(t *testing.T) {
	t.Parallel()
	// Under vixie an hour of * follows elapsed time: every 20 s through both
	// passes of the repeated hour, and Next from any second of the window
	// is the next multiple of 20 s.
	s := mustCron(t, "*/20 * * * * *", "America/New_York")
	from := ts(t, "2026-11-01T05:58:00Z")
	for x := from; x.Before(from.Add(2 * time.Hour)); x = x.Add(time.Second) {
		next, ok := s.Next(x)
		require.True(t, ok)
		require.Equal(t, x.Truncate(20*time.Second).Add(20*time.Second), next, "Next(%s)", x)
	}
}

func TestCronDescriptorsMatchTheirExpansion(t *testing.T) {
	t.Parallel()
	for _, d := range []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			std, ok := cronDescriptor(d)
			require.True(t, ok)
			a, b := mustCron(t, d, "Europe/London"), mustCron(t, std, "Europe/London")
			after := ts(t, "2026-03-01T00:00:00Z")
			require.Equal(t, b.Preview(after, 20), a.Preview(after, 20))
		})
	}
}

func TestScheduleErrorsAreValidationErrors(t *testing.T) {
	t.Parallel()
	_, err := Parse(Spec{Type: Cron, Cron: "0 0 30 2 *"}, time.Now())
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "invalid input: schedule.cron: never fires: no date matches the day-of-month, month and day-of-week fields (e.g. 30 February)", err.Error())
}

func BenchmarkScheduleNext(b *testing.B) {
	for _, bc := range []struct{ expr, zone string }{
		{"*/15 * * * * *", "America/New_York"},
		{"30 2 * * *", "America/New_York"},
		{"0 0 29 2 *", "UTC"},
		{"0 0 29 2 */6", "Europe/London"},
		{"0 0 L * FRI", "Asia/Shanghai"},
	} {
		b.Run(bc.expr+" "+bc.zone, func(b *testing.B) {
			s := mustCron(b, bc.expr, bc.zone)
			after := time.Date(2026, 11, 1, 5, 59, 0, 0, time.UTC)
			for b.Loop() {
				next, ok := s.Next(after)
				if !ok {
					b.Fatal("no fire")
				}
				after = next
				if after.Year() > 9000 {
					after = time.Date(2026, 11, 1, 5, 59, 0, 0, time.UTC)
				}
			}
		})
	}
}

func BenchmarkParseSchedule(b *testing.B) {
	for _, expr := range []string{"0 9 * * MON-FRI", "0 0 30 2 *"} {
		b.Run(expr, func(b *testing.B) {
			for b.Loop() {
				_, _ = Parse(Spec{Type: Cron, Cron: expr, Timezone: "Europe/Berlin"}, time.Time{})
			}
		})
	}
}
