package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A calendar removes the slots of its local dates, in its own zone: a
// weekday 02:00 Shanghai schedule with a Shanghai holiday calendar skips
// the holidays; an every-second schedule crosses a run of excluded days in
// one jump per day; the preview lists what was removed.
func TestScheduleExcludesCalendarDates(t *testing.T) {
	t.Parallel()
	sched, err := Parse(Spec{Type: Cron, Cron: "0 2 * * MON-FRI", Timezone: "Asia/Shanghai"}, time.Time{})
	require.NoError(t, err)
	holidays := Calendar{Timezone: "Asia/Shanghai", Dates: []string{"2027-01-01", "2027-01-04"}}
	ex := sched.Excluding([]Calendar{holidays})
	sh, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	after := time.Date(2026, 12, 31, 3, 0, 0, 0, sh) // Thursday, after its slot
	next, ok := ex.Next(after)
	require.True(t, ok)
	require.Equal(t, time.Date(2027, 1, 5, 2, 0, 0, 0, sh).UTC(), next, "Fri 1 Jan (holiday), the weekend and Mon 4 Jan (holiday) are skipped")
	plain, _ := sched.Next(after)
	require.Equal(t, time.Date(2027, 1, 1, 2, 0, 0, 0, sh).UTC(), plain, "the schedule itself is unchanged")

	fires, excluded, err := ex.PreviewExcluded(t.Context(), after, 2)
	require.NoError(t, err)
	require.Equal(t, []time.Time{time.Date(2027, 1, 5, 2, 0, 0, 0, sh).UTC(), time.Date(2027, 1, 6, 2, 0, 0, 0, sh).UTC()}, fires)
	require.Equal(t, []time.Time{time.Date(2027, 1, 1, 2, 0, 0, 0, sh).UTC(), time.Date(2027, 1, 4, 2, 0, 0, 0, sh).UTC()}, excluded)
	require.True(t, ex.Excludes(time.Date(2027, 1, 1, 2, 0, 0, 0, sh)))

	// A calendar in another zone: its dates are its own local dates. 1 Jan
	// in New York runs from 13:00 on 1 Jan to 13:00 on 2 Jan in Shanghai.
	every, err := Parse(Spec{Type: Cron, Cron: "* * * * * *", Timezone: "Asia/Shanghai"}, time.Time{})
	require.NoError(t, err)
	ny := every.Excluding([]Calendar{{Timezone: "America/New_York", Dates: []string{"2027-01-01", "2027-01-02", "2027-01-03"}}})
	nyLoc, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	next, ok = ny.Next(time.Date(2026, 12, 31, 23, 59, 58, 0, nyLoc))
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 12, 31, 23, 59, 59, 0, nyLoc).UTC(), next)
	next, ok = ny.Next(next)
	require.True(t, ok)
	require.Equal(t, time.Date(2027, 1, 4, 0, 0, 0, 0, nyLoc).UTC(), next, "three excluded days of every second crossed")

	// A once schedule whose date is excluded never fires.
	at := time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC)
	once, err := Parse(Spec{Type: Once, RunAt: &at}, time.Time{})
	require.NoError(t, err)
	_, ok = once.Excluding([]Calendar{{Timezone: "UTC", Dates: []string{"2027-01-01"}}}).Next(at.Add(-time.Hour))
	require.False(t, ok)
}

// A calendar whose zone no longer loads is applied in UTC, and a date
// that is not one is ignored; no calendar leaves the schedule as it is.
func TestScheduleExcludingOddCalendars(t *testing.T) {
	t.Parallel()
	sched, err := Parse(Spec{Type: Cron, Cron: "0 12 * * *"}, time.Time{})
	require.NoError(t, err)
	require.Same(t, sched, sched.Excluding(nil))
	ex := sched.Excluding([]Calendar{{Timezone: "Mars/Base", Dates: []string{"2027-01-01", "2027-02-30", "soon"}}})
	next, ok := ex.Next(time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC))
	require.True(t, ok)
	require.Equal(t, time.Date(2027, 1, 2, 12, 0, 0, 0, time.UTC), next)
	require.False(t, ex.Excludes(time.Date(2027, 3, 2, 12, 0, 0, 0, time.UTC)))
}

// schedule.exclude_calendars names calendars by id: at most
// ExcludeCalendarsMax, each once, each an id.
func TestScheduleCalendarRefs(t *testing.T) {
	t.Parallel()
	const id = "01900000-0000-7000-8000-000000000001"
	spec := func(ids ...string) Spec { return Spec{Type: Interval, IntervalSeconds: 60, ExcludeCalendars: ids} }
	_, err := Parse(spec(id, "nope", id), time.Time{})
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, []FieldError{
		{"schedule.exclude_calendars[1]", "must be the id of one of your calendars"},
		{"schedule.exclude_calendars[2]", "is listed twice"},
	}, verr.Fields)

	many := make([]string, ExcludeCalendarsMax+1)
	for i := range many {
		many[i] = id
	}
	_, err = Parse(spec(many...), time.Time{})
	require.ErrorAs(t, err, &verr)
	require.Equal(t, []FieldError{{"schedule.exclude_calendars", "at most 20 calendars"}}, verr.Fields)

	s, err := Parse(spec(id, "01900000-0000-7000-8000-00000000000A"), time.Time{})
	require.NoError(t, err)
	require.Equal(t, []string{id, "01900000-0000-7000-8000-00000000000A"}, s.Spec().ExcludeCalendars)
}

func TestIsID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"01900000-0000-7000-8000-000000000001", true},
		{"01900000-0000-7000-8000-00000000ABCD", true},
		{"", false},
		{"nope", false},
		{"01900000000070008000000000000001", false},       // no hyphens
		{"{01900000-0000-7000-8000-000000000001}", false}, // braces
		{"urn:uuid:01900000-0000-7000-8000-000000000001", false},
		{"01900000-0000-7000-8000-00000000000g", false},
		{"0190000-00000-7000-8000-000000000001", false}, // a hyphen out of place
		{"01900000-0000-7000-8000-0000000000011", false},
	} {
		require.Equal(t, tt.ok, isID(tt.id), tt.id)
	}
}
