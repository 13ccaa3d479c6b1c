package schedule

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Zones with DST rules past 2037 (where Go's bounds come from the rule
// string) in both hemispheres, one with a 45-minute offset.
var leapYearEndZones = []string{"America/New_York", "Europe/Berlin", "Australia/Sydney", "America/Santiago", "Pacific/Chatham"}

// TestZoneBoundsLeapYearEnd pins the standard-library behaviour zoneSpan
// works around: on 31 December (UTC) of a leap year past 2037, in a zone
// with DST, ZoneBounds reports a period end before the instant. If Go
// fixes it, this test says so and the workaround can be dropped.
func TestZoneBoundsLeapYearEnd(t *testing.T) {
	loc, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	at := time.Date(2040, 12, 31, 12, 0, 0, 0, time.UTC)
	_, end := at.In(loc).ZoneBounds()
	require.False(t, end.After(at), "ZoneBounds is right again (end %s after %s): zoneSpan's probe is no longer needed", end, at)
}

// TestZoneSpanAlwaysHoldsTheInstant checks zoneSpan's bounds against the
// offsets themselves from 2037 to 2100 in DST zones (every 10 minutes
// around each new year, every 7 hours otherwise): start <= x < end, one
// offset throughout, and at end another (or an artificial bound between
// two periods of one offset).
func TestZoneSpanAlwaysHoldsTheInstant(t *testing.T) {
	offsetAt := func(loc *time.Location, u int64) int64 {
		_, o := time.Unix(u, 0).In(loc).Zone()
		return int64(o)
	}
	for _, name := range leapYearEndZones {
		loc, err := time.LoadLocation(name)
		require.NoError(t, err)
		for year := 2037; year < 2100; year++ {
			yearEnd := time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
			for x := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).Unix(); x < yearEnd; {
				zp := zoneSpan(loc, x)
				at := time.Unix(x, 0).UTC()
				require.LessOrEqual(t, zp.start, x, "%s at %s", name, at)
				require.Greater(t, zp.end, x, "%s at %s", name, at)
				require.Equal(t, offsetAt(loc, x), zp.offset, "%s at %s", name, at)
				require.Equal(t, zp.offset, offsetAt(loc, zp.end-1), "%s at %s: the offset changes before the end", name, at)
				require.Equal(t, zp.offset, offsetAt(loc, zp.start), "%s at %s: the start has another offset", name, at)
				if yearEnd-x <= 3*secondsPerDay {
					x += 600
				} else {
					x += 7 * 3600
				}
			}
		}
	}
}

// TestNextAtLeapYearEnd: every DST-zone schedule with a wildcard or
// stepped hour (vixie's elapsed-time path) used to spin forever on
// 2040-12-31 and 2044-12-31; it must move on as on any other day, with the
// same answers as the once-per-local-time path (which takes another route)
// where no DST transition is near.
func TestNextAtLeapYearEnd(t *testing.T) {
	for _, name := range leapYearEndZones {
		loc, err := time.LoadLocation(name)
		require.NoError(t, err)
		for _, year := range []int{2040, 2044, 2096} {
			for _, expr := range []string{"0 * * * *", "*/5 * * * *", "0 0 */2 * * *", "*/20 * * * * *", "0 30 * * * *"} {
				t.Run(fmt.Sprintf("%s/%d/%s", name, year, expr), func(t *testing.T) {
					elapsed, err := Parse(Spec{Type: Cron, Cron: expr, Timezone: name}, time.Time{})
					require.NoError(t, err)
					require.True(t, elapsed.elapsed)
					fixed, err := Parse(Spec{Type: Cron, Cron: expr, Timezone: name, DSTPolicy: DSTOncePerLocalTime}, time.Time{})
					require.NoError(t, err)
					// Through the whole UTC day of 31 December and into 1 January.
					after := time.Date(year, 12, 30, 23, 0, 0, 0, time.UTC)
					for after.Before(time.Date(year+1, 1, 1, 2, 0, 0, 0, time.UTC)) {
						got, ok, err := elapsed.NextErr(after)
						require.NoError(t, err)
						require.True(t, ok)
						want, ok := fixed.Next(after)
						require.True(t, ok)
						require.Equal(t, want, got, "after %s", after)
						require.True(t, matchWall(elapsed.cron, wallOf(got, loc)))
						after = got
					}
				})
			}
		}
	}
}

// TestNextYearFieldAcrossLeapYearEnd is the request that pinned a core:
// a year field in 2041 reached through 2040-12-31 in New York.
func TestNextYearFieldAcrossLeapYearEnd(t *testing.T) {
	for _, tt := range []struct{ zone, want string }{
		{"America/New_York", "2041-01-01T05:00:00Z"},
		{"Europe/Berlin", "2040-12-31T23:00:00Z"},
		{"Australia/Sydney", "2040-12-31T13:00:00Z"},
	} {
		t.Run(tt.zone, func(t *testing.T) {
			s, err := Parse(Spec{Type: Cron, Cron: "0 0 * * * * 2041", Timezone: tt.zone}, time.Time{})
			require.NoError(t, err)
			got, ok, err := s.NextErr(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tt.want, got.Format(time.RFC3339))
			preview, _, err := s.PreviewExcluded(t.Context(), time.Date(2040, 12, 31, 12, 0, 0, 0, time.UTC), 3)
			require.NoError(t, err)
			require.Len(t, preview, 3)
			require.Equal(t, tt.want, preview[0].Format(time.RFC3339))
		})
	}
}

// TestPreviewStopsWithItsContext: a preview is computed under the
// request's context.
func TestPreviewStopsWithItsContext(t *testing.T) {
	s, err := Parse(Spec{Type: Cron, Cron: "* * * * * *"}, time.Time{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err = s.PreviewExcluded(ctx, time.Now(), PreviewMax)
	require.ErrorIs(t, err, context.Canceled)
}

// FuzzNextToYear2100 computes fire times from instants anywhere between
// 2026 and 2100, weighted towards year ends and DST zones: every call must
// come back, with no work cut short, and the sequence must increase and
// match the expression.
func FuzzNextToYear2100(f *testing.F) {
	zones := append([]string{"UTC", "Asia/Shanghai", "Europe/London", "Australia/Lord_Howe", "America/St_Johns"}, leapYearEndZones...)
	exprs := []string{
		"0 * * * *", "*/5 * * * *", "0 0 * * * * 2041", "0 0 * * * * 2045-2099/4", "30 2 * * *", "0 0 L * *",
		"*/7 * * * * *", "0 */3 * * 1-5", "0 0 29 2 *", "0 15 10 ? * 6L", "0 0 0 31 12 ?", "59 59 23 * * *",
	}
	f.Add(uint8(0), uint8(0), uint8(14), uint16(365), uint32(43200), false)
	f.Add(uint8(2), uint8(5), uint8(18), uint16(365), uint32(0), false)
	f.Add(uint8(1), uint8(7), uint8(70), uint16(364), uint32(86399), true)
	f.Fuzz(func(t *testing.T, ei, zi, yearOffset uint8, dayOfYear uint16, secondOfDay uint32, quartz bool) {
		spec := Spec{Type: Cron, Cron: exprs[int(ei)%len(exprs)], Timezone: zones[int(zi)%len(zones)]}
		if quartz {
			spec.Dialect = DialectQuartz
		}
		year := 2026 + int(yearOffset)%75
		// Half the inputs land in the last two days of a year.
		day := int(dayOfYear) % 366
		if dayOfYear&1 == 0 {
			day = 364 + int(dayOfYear>>1)%2
		}
		after := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, day).Add(time.Duration(secondOfDay%86400) * time.Second)
		for _, policy := range []string{DSTVixie, DSTOncePerLocalTime} {
			spec.DSTPolicy = policy
			s, err := Parse(spec, time.Time{})
			if err != nil {
				continue // a Quartz-only or standard-only form in the other dialect
			}
			prev := after
			for range 4 {
				next, ok, err := s.NextErr(prev)
				require.NoError(t, err, "%q in %s after %s", spec.Cron, spec.Timezone, prev)
				if !ok {
					require.True(t, s.cron.hasYears, "%q in %s after %s ends", spec.Cron, spec.Timezone, prev)
					break
				}
				require.True(t, next.After(prev))
				checkFire(t, s, spec.Cron, next)
				prev = next
			}
		}
	})
}
