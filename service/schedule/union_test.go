package schedule

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func utc(y int, m time.Month, d, h, mi int) time.Time {
	return time.Date(y, m, d, h, mi, 0, 0, time.UTC)
}

func mustUnion(t *testing.T, anchor time.Time, members ...Spec) *Schedule {
	t.Helper()
	s, err := Parse(Spec{Type: Union, Schedules: members}, anchor)
	require.NoError(t, err)
	return s
}

// An instant two members produce is one slot, named after the lower
// member; each member's own slots fire too.
func TestUnionCoincidingMembersAreOneSlot(t *testing.T) {
	t.Parallel()
	anchor := utc(2027, 1, 4, 0, 0)
	s := mustUnion(t, anchor,
		Spec{Type: Cron, Cron: "0 * * * *"},
		Spec{Type: Interval, IntervalSeconds: 1800},
		Spec{Type: Cron, Cron: "0 0/2 * * *"},
	)
	got := s.Preview(anchor, 5)
	require.Equal(t, []time.Time{
		utc(2027, 1, 4, 0, 30), utc(2027, 1, 4, 1, 0), utc(2027, 1, 4, 1, 30), utc(2027, 1, 4, 2, 0), utc(2027, 1, 4, 2, 30),
	}, got, "every instant once, in order")
	members := make([]int, len(got))
	for i, at := range got {
		members[i] = s.MemberAt(at)
	}
	require.Equal(t, []int{1, 0, 1, 0, 1}, members, "an hour is the cron's (index 0, the lowest of the three that have 02:00)")
	require.Equal(t, -1, s.MemberAt(utc(2027, 1, 4, 0, 10)), "no member has 00:10")
	one, err := Parse(Spec{Type: Cron, Cron: "0 * * * *"}, anchor)
	require.NoError(t, err)
	require.Equal(t, -1, one.MemberAt(utc(2027, 1, 4, 1, 0)), "not a union")
}

// Each member is read on its own zone's wall clock: 09:00 in Paris and
// 09:00 in New York are two slots a day, each local to its member.
func TestUnionMembersInDifferentZones(t *testing.T) {
	t.Parallel()
	s := mustUnion(t, time.Time{},
		Spec{Type: Cron, Cron: "0 9 * * *", Timezone: "Europe/Paris"},
		Spec{Type: Cron, Cron: "0 9 * * *", Timezone: "America/New_York"},
	)
	got := s.Preview(utc(2027, 1, 4, 0, 0), 4)
	require.Equal(t, []time.Time{utc(2027, 1, 4, 8, 0), utc(2027, 1, 4, 14, 0), utc(2027, 1, 5, 8, 0), utc(2027, 1, 5, 14, 0)}, got)
	for i, at := range got {
		loc := s.LocationAt(at)
		require.Equal(t, []string{"Europe/Paris", "America/New_York"}[i%2], loc.String())
		require.Equal(t, 9, at.In(loc).Hour(), "09:00 local to its member")
	}
	require.Equal(t, "Europe/Paris", s.LocationAt(utc(2027, 1, 4, 3, 17)).String(), "an instant no member has: the first member's zone")
	require.Equal(t, time.UTC, s.Location())
}

// A Paris member across the March and October changes beside a UTC
// member: the shifted and repeated fires follow the Paris member's
// policy, and an instant both produce is one slot named after the lower
// index, whose DST note it carries.
func TestUnionAcrossDST(t *testing.T) {
	t.Parallel()
	// 28 March 2027: 02:00 CET jumps to 03:00 CEST (01:00Z); 02:30 does
	// not exist and fires at 01:00Z, which the UTC member also has.
	spring := mustUnion(t, time.Time{},
		Spec{Type: Cron, Cron: "30 2 * * *", Timezone: "Europe/Paris"},
		Spec{Type: Cron, Cron: "0 1 * * *"},
	)
	got := spring.Preview(utc(2027, 3, 27, 2, 0), 3)
	require.Equal(t, []time.Time{utc(2027, 3, 28, 1, 0), utc(2027, 3, 29, 0, 30), utc(2027, 3, 29, 1, 0)}, got)
	require.Equal(t, 0, spring.MemberAt(got[0]))
	require.Equal(t, DSTShifted, spring.DSTNote(got[0]))
	require.Equal(t, 0, spring.MemberAt(got[1]))
	require.Empty(t, spring.DSTNote(got[1]))
	require.Equal(t, 1, spring.MemberAt(got[2]))

	// 31 October 2027: 03:00 CEST falls back to 02:00 CET (01:00Z), so
	// 02:30 is 00:30Z and again 01:30Z. An hour step follows elapsed
	// time under vixie (both passes fire; the second coincides with the
	// UTC member's 01:30Z); once_per_local_time fires the first only.
	for _, tc := range []struct {
		policy  string
		fires   []time.Time
		members []int
		notes   []string
	}{
		{DSTVixie, []time.Time{utc(2027, 10, 31, 0, 30), utc(2027, 10, 31, 1, 30)}, []int{0, 0}, []string{"", DSTRepeated}},
		{DSTOncePerLocalTime, []time.Time{utc(2027, 10, 31, 0, 30), utc(2027, 10, 31, 1, 30)}, []int{0, 1}, []string{"", ""}},
	} {
		fall := mustUnion(t, time.Time{},
			Spec{Type: Cron, Cron: "30 2-3/1 * * *", Timezone: "Europe/Paris", DSTPolicy: tc.policy},
			Spec{Type: Cron, Cron: "30 1 * * *"},
		)
		// From 00:00Z: 02:30 CEST (00:30Z), the repeated 02:30 CET or
		// the UTC member (01:30Z, one slot either way), then 03:30 CET.
		got := fall.Preview(utc(2027, 10, 31, 0, 0), 3)
		require.Equal(t, append(tc.fires, utc(2027, 10, 31, 2, 30)), got, tc.policy)
		for i, at := range tc.fires {
			require.Equal(t, tc.members[i], fall.MemberAt(at), "%s %s", tc.policy, at)
			require.Equal(t, tc.notes[i], fall.DSTNote(at), "%s %s", tc.policy, at)
		}
	}
}

// Calendars: a member's apply to that member alone (a slot another member
// fires is not excluded); the union's own apply to every member.
func TestUnionCalendars(t *testing.T) {
	t.Parallel()
	const newYear, other, all = "0190a8a8-0000-7000-8000-000000000001", "0190a8a8-0000-7000-8000-000000000002", "0190a8a8-0000-7000-8000-000000000003"
	cals := []Calendar{
		{ID: newYear, Timezone: "UTC", Dates: []string{"2027-01-01"}},
		{ID: other, Timezone: "UTC", Dates: []string{"2027-01-02"}},
		{ID: all, Timezone: "UTC", Dates: []string{"2027-01-03"}},
	}
	spec := Spec{Type: Union, ExcludeCalendars: []string{all}, Schedules: []Spec{
		{Type: Cron, Cron: "0 9 * * *", ExcludeCalendars: []string{newYear}},
		{Type: Cron, Cron: "0 18 * * *"},
		{Type: Cron, Cron: "0 18 * * *", ExcludeCalendars: []string{newYear, other}},
	}}
	parsed, err := Parse(spec, time.Time{})
	require.NoError(t, err)
	require.Equal(t, []string{all, newYear, other}, parsed.CalendarIDs())
	s := parsed.Excluding(cals)
	fires, excluded, err := s.PreviewExcluded(t.Context(), utc(2026, 12, 31, 0, 0), 6)
	require.NoError(t, err)
	require.Equal(t, []time.Time{
		utc(2026, 12, 31, 9, 0), utc(2026, 12, 31, 18, 0),
		utc(2027, 1, 1, 18, 0),                        // 09:00 is the first member's, excluded on 1 January; 18:00 the second's fires
		utc(2027, 1, 2, 9, 0), utc(2027, 1, 2, 18, 0), // the third member's calendar is not the others'
		utc(2027, 1, 4, 9, 0), // the union's calendar removes 3 January from every member
	}, fires)
	require.Equal(t, []time.Time{utc(2027, 1, 1, 9, 0), utc(2027, 1, 3, 9, 0), utc(2027, 1, 3, 18, 0)}, excluded)
	require.Equal(t, 1, s.MemberAt(utc(2027, 1, 1, 18, 0)), "the lowest member that fires it")
	require.Equal(t, 0, s.MemberAt(utc(2027, 1, 1, 9, 0)), "an excluded slot names the member that has it")
	require.True(t, s.Excludes(utc(2027, 1, 1, 9, 0)))
	require.False(t, s.Excludes(utc(2027, 1, 1, 18, 0)))
	require.True(t, s.Excludes(utc(2027, 1, 3, 18, 0)))
	next, ok := s.Next(utc(2027, 1, 2, 18, 0))
	require.True(t, ok)
	require.Equal(t, utc(2027, 1, 4, 9, 0), next)
	_, ok = parsed.Next(utc(2027, 1, 2, 18, 0))
	require.True(t, ok, "Excluding leaves the schedule it was called on as it was")
	require.Equal(t, utc(2027, 1, 3, 9, 0), parsed.Preview(utc(2027, 1, 2, 18, 0), 1)[0])
}

// The union's bounds apply to every member; a member's own bounds to it.
func TestUnionBounds(t *testing.T) {
	t.Parallel()
	start, end, memberEnd := utc(2027, 1, 4, 10, 0), utc(2027, 1, 4, 14, 0), utc(2027, 1, 4, 11, 0)
	s, err := Parse(Spec{Type: Union, StartAt: &start, EndAt: &end, Schedules: []Spec{
		{Type: Cron, Cron: "0 * * * *"},
		{Type: Cron, Cron: "30 * * * *", EndAt: &memberEnd},
	}}, time.Time{})
	require.NoError(t, err)
	require.Equal(t, []time.Time{
		utc(2027, 1, 4, 10, 0), utc(2027, 1, 4, 10, 30), utc(2027, 1, 4, 11, 0), utc(2027, 1, 4, 12, 0),
		utc(2027, 1, 4, 13, 0), utc(2027, 1, 4, 14, 0),
	}, s.Preview(utc(2027, 1, 1, 0, 0), 100))
}

// Validation names the field: the members' count, a member's type
// (nested unions, once and event schedules are refused), a member's own
// problems under schedule.schedules[i], and the union's fields that are
// its members'.
func TestUnionValidation(t *testing.T) {
	t.Parallel()
	hourly := Spec{Type: Cron, Cron: "0 * * * *"}
	members := func(n int) []Spec {
		out := make([]Spec, n)
		for i := range out {
			out[i] = Spec{Type: Interval, IntervalSeconds: int64(60 * (i + 1))}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		spec Spec
		want []FieldError
	}{
		{"one member", Spec{Type: Union, Schedules: members(1)}, []FieldError{{"schedule.schedules", "must hold 2 to 10 schedules, not 1"}}},
		{"no member", Spec{Type: Union}, []FieldError{{"schedule.schedules", "must hold 2 to 10 schedules, not 0"}}},
		{"eleven members", Spec{Type: Union, Schedules: members(11)}, []FieldError{{"schedule.schedules", "must hold 2 to 10 schedules, not 11"}}},
		{"nested union", Spec{Type: Union, Schedules: []Spec{hourly, hourly, {Type: Union, Schedules: members(2)}}}, []FieldError{
			{"schedule.schedules[2].type", `a union cannot hold a union: list its members here instead; a member is "cron" or "interval"`},
		}},
		{"once and event members", Spec{Type: Union, Schedules: []Spec{{Type: Once, RunAt: new(utc(2027, 1, 1, 0, 0))}, {Type: "event"}, {}}}, []FieldError{
			{"schedule.schedules[0].type", `"once" is not allowed in a union; a member is "cron" or "interval"`},
			{"schedule.schedules[1].type", `"event" is not allowed in a union; a member is "cron" or "interval"`},
			{"schedule.schedules[2].type", `is required; a union's member is "cron" or "interval"`},
		}},
		{"members' own problems", Spec{Type: Union, Schedules: []Spec{
			{Type: Cron, Cron: "0 25 * * *", Timezone: "Mars/Base"},
			{Type: Interval, IntervalSeconds: 60, Dialect: DialectQuartz, ExcludeCalendars: []string{"nope"}},
		}}, []FieldError{
			{"schedule.schedules[0].timezone", `unknown time zone "Mars/Base"`},
			{"schedule.schedules[0].cron", "hour field: value 25 is out of range 0-23"},
			{"schedule.schedules[1].dialect", `must not be "quartz": it applies to cron schedules only, not to interval schedules`},
			{"schedule.schedules[1].exclude_calendars[0]", "must be the id of one of your calendars"},
		}},
		{"the members' fields on the union", Spec{
			Type: Union, Cron: "0 * * * *", IntervalSeconds: 60, Timezone: "Europe/Paris", DSTPolicy: DSTOncePerLocalTime,
			Schedules: members(2),
		}, []FieldError{
			{"schedule.cron", "must not be set when schedule.type is union: each of schedule.schedules has its own"},
			{"schedule.interval_seconds", "must not be set when schedule.type is union: each of schedule.schedules has its own"},
			{"schedule.timezone", "must not be set when schedule.type is union: each of schedule.schedules has its own"},
			{"schedule.dst_policy", `must not be "once_per_local_time": it applies to cron schedules only, not to union schedules`},
		}},
		{"members on a cron schedule", Spec{Type: Cron, Cron: "0 * * * *", Schedules: members(2)}, []FieldError{
			{"schedule.schedules", "must not be set when schedule.type is not union"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.spec, time.Time{})
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tc.want, verr.Fields)
		})
	}

	// The union's defaults, as they are read back, are accepted.
	_, err := Parse(Spec{Type: Union, Timezone: "UTC", Dialect: DialectStandard, DSTPolicy: DSTVixie, Schedules: members(10)}, time.Time{})
	require.NoError(t, err)
}

// Spec gives the union back normalised, members included, and parses to
// the same schedule.
func TestUnionSpecRoundTrip(t *testing.T) {
	t.Parallel()
	anchor := utc(2027, 1, 4, 0, 0)
	s := mustUnion(t, anchor,
		Spec{Type: Cron, Cron: " 0 9 * * MON ", Timezone: "Europe/Paris"},
		Spec{Type: Interval, IntervalSeconds: 5400},
	)
	spec := s.Spec()
	require.Equal(t, Spec{Type: Union, Timezone: "UTC", Schedules: []Spec{
		{Type: Cron, Cron: "0 9 * * MON", Timezone: "Europe/Paris", Dialect: DialectStandard, DSTPolicy: DSTVixie},
		{Type: Interval, IntervalSeconds: 5400, Timezone: "UTC"},
	}}, spec)
	spec.Schedules[0].Cron = "changed"
	require.Equal(t, "0 9 * * MON", s.Spec().Schedules[0].Cron, "Spec is a copy")
	again, err := Parse(s.Spec(), anchor)
	require.NoError(t, err)
	from := utc(2027, 1, 3, 0, 0)
	require.Equal(t, s.Preview(from, 50), again.Preview(from, 50))
	require.Len(t, s.Members(), 2)
	require.Equal(t, fmt.Sprint([]string{"Europe/Paris", "UTC"}), fmt.Sprint([]string{s.Members()[0].Location().String(), s.Members()[1].Location().String()}))
}
