package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzCronParse parses arbitrary expressions in assorted zones, in both
// dialects. Invalid input must yield a *ValidationError; valid input must
// produce strictly increasing, rule-abiding fire times under both DST
// policies.
func FuzzCronParse(f *testing.F) {
	zones := []string{
		"UTC", "America/New_York", "Europe/London", "Asia/Shanghai", "Australia/Lord_Howe",
		"Pacific/Apia", "Pacific/Chatham", "Asia/Kathmandu", "America/Santiago", "Africa/Casablanca",
		"Antarctica/Troll", "Asia/Tehran", "Pacific/Kiritimati", "America/St_Johns", "Europe/Dublin",
	}
	for _, seed := range []string{
		"TZ=TZ=TZ=", "TZ=0", "CRON_TZ=", "15/0 * * * *", "5-2 * * * *", ", * * * *", "0 0 30 2 *",
		"@every 0s", strings.Repeat("1,2 ", 2560),
		"* * * * *", "*/15 * * * * *", "30 2 * * *", "30 1 * * *", "0 * * * *", "0 0 L * *", "0 0 L-3 2 *",
		"0 0 29 2 *", "0 0 29 2 */6", "0 0 13 * FRI", "0 0 */2 * MON", "0 9-17/4 * * MON-FRI", "0 0 1 jan,Jul ?",
		"@yearly", "@hourly", "59 59 23 31 12 *", "0 0 * * 7", "0 0 ? * 0-7", "10-40/15 5/10 * * * *",
		"@", "*/", "-", "1-", "L-", "0 0 L-30 2 *", "? ? ? ? ?", "0 0 l * sun",
		// Wrapped ranges, L, W, LW, #, ? and the year field, in both dialects.
		"0 0 * * FRI-MON", "0 0 1 NOV-FEB *", "0 22-2 * * *", "0 22-2/2 * * *", "50-10/5 * * * *", "0 0 25-5 * *",
		"0 0 * * 1#1", "0 0 * * 5L", "0 0 * * L", "0 0 15W * *", "0 0 LW * *", "0 0 1W,L * *", "0 0 31W * *",
		"0 15 10 ? * 6L", "0 15 10 ? * 6#3", "0 0 12 1/5 * ?", "0 11 11 11 11 ?", "0 15 10 L * ?", "0 15 10 ? * MON-FRI",
		"0 0/5 14,18 * * ?", "0 15 10 ? * 6L 2002-2005", "0 0 0 30 2 ? *", "0 0 0 ? * 2#1 2030/5", "0 0 12 LW * ? 2099",
		"0 0 12 ? * L", "0 0 12 ? * FRI#5", "0 0 12 1W * ?", "0 0 12 ? * 1#6", "0 0 12 ? * 0", "0 0 12 * * *",
		"0 0 12 ? * ?", "0 0 0 1 1 ? 2005-2002", "0 */5 * * * ? 1970,2099", "0 0 2/23 ? 3 1#2", "0 30 */1 * * ?",
	} {
		f.Add(seed, uint8(len(seed)), int64(1772931600)) // 2026-03-08T01:00:00Z
	}
	f.Add("*/7 * * * * *", uint8(1), int64(1793502000)) // New York, 2026-11-01T05:40:00Z
	f.Add("* * * * *", uint8(5), int64(1325239200))     // Apia, 2011-12-30T10:00:00Z

	f.Fuzz(func(t *testing.T, expr string, zi uint8, start int64) {
		zone := zones[int(zi)%len(zones)]
		for _, dialect := range []string{DialectStandard, DialectQuartz} {
			for _, policy := range []string{DSTVixie, DSTOncePerLocalTime} {
				fuzzCronOne(t, Spec{Type: Cron, Cron: expr, Timezone: zone, Dialect: dialect, DSTPolicy: policy}, start)
			}
		}
		fuzzUnionOne(t, expr, zone, start)
	})
}

// fuzzUnionOne checks a union of the expression in zone and in UTC with
// an interval: its fires strictly increase, and each is the earliest of
// its members' next fires, named after one of them.
func fuzzUnionOne(t *testing.T, expr, zone string, start int64) {
	t.Helper()
	const from, span = -2208988800, 400 * 365 * secondsPerDay
	after := time.Unix(from+floorMod(start, span), floorMod(start, 1e9))
	s, err := Parse(Spec{Type: Union, Schedules: []Spec{
		{Type: Cron, Cron: expr, Timezone: zone},
		{Type: Cron, Cron: expr},
		{Type: Interval, IntervalSeconds: 3599},
	}}, after)
	if err != nil {
		var verr *ValidationError
		require.ErrorAs(t, err, &verr)
		return
	}
	prev := after
	for range 5 {
		next, ok := s.Next(prev)
		require.True(t, ok, "the interval member always fires")
		require.True(t, next.After(prev))
		i := s.MemberAt(next)
		require.GreaterOrEqual(t, i, 0, "%q in %s: %s is no member's", expr, zone, next)
		for j, m := range s.Members() {
			if mn, ok := m.Next(prev); ok {
				require.False(t, mn.Before(next), "%q in %s: member %d fires at %s, before %s", expr, zone, j, mn, next)
				if mn.Equal(next) {
					require.GreaterOrEqual(t, j, i, "%q in %s: member %d fires at %s, named after member %d", expr, zone, j, next, i)
				}
			}
		}
		prev = next
	}
}

func fuzzCronOne(t *testing.T, spec Spec, start int64) {
	t.Helper()
	s, err := Parse(spec, time.Time{})
	if err != nil {
		var verr *ValidationError
		require.ErrorAs(t, err, &verr)
		require.NotEmpty(t, verr.Fields)
		return
	}
	for _, extreme := range []time.Time{{}, time.Unix(-1<<62, 0), time.Unix(1<<62, 0), maxFire().Add(-time.Hour)} {
		if next, ok := s.Next(extreme); ok {
			require.True(t, next.After(extreme))
		}
	}
	// Start somewhere in 1900-2300, where zone data is rich.
	const from, span = -2208988800, 400 * 365 * secondsPerDay
	after := time.Unix(from+floorMod(start, span), floorMod(start, 1e9))
	prev := after
	for range 5 {
		next, ok := s.Next(prev)
		if !ok {
			// Only a year field ends a schedule (at 2099 at the latest),
			// or, under vixie, an elapsed-time expression whose every
			// match is a wall clock that never exists.
			require.True(t, s.cron.hasYears || s.elapsed, "%q in %s after %s", spec.Cron, spec.Timezone, prev)
			return
		}
		require.True(t, next.After(prev), "%q in %s: %s not after %s", spec.Cron, spec.Timezone, next, prev)
		checkFire(t, s, spec.Cron, next)
		prev = next
	}
}
