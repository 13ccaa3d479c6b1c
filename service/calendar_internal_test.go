package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
)

// A calendar removes the slots of its local dates, in its own zone: a
// weekday 02:00 Shanghai schedule with a Shanghai holiday calendar skips
// the holidays; an every-second schedule crosses a run of excluded days in
// one jump per day; the preview lists what was removed.
func TestScheduleExcludesCalendarDates(t *testing.T) {
	t.Parallel()
	sched, err := ParseSchedule(ScheduleSpec{Type: ScheduleCron, Cron: "0 2 * * MON-FRI", Timezone: "Asia/Shanghai"}, time.Time{})
	require.NoError(t, err)
	holidays := db.Calendar{ID: "c", Timezone: "Asia/Shanghai", Dates: []string{"2027-01-01", "2027-01-04"}}
	ex := sched.excluding([]db.Calendar{holidays})
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
	every, err := ParseSchedule(ScheduleSpec{Type: ScheduleCron, Cron: "* * * * * *", Timezone: "Asia/Shanghai"}, time.Time{})
	require.NoError(t, err)
	ny := every.excluding([]db.Calendar{{ID: "n", Timezone: "America/New_York", Dates: []string{"2027-01-01", "2027-01-02", "2027-01-03"}}})
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
	once, err := ParseSchedule(ScheduleSpec{Type: ScheduleOnce, RunAt: &at}, time.Time{})
	require.NoError(t, err)
	_, ok = once.excluding([]db.Calendar{{ID: "u", Timezone: "UTC", Dates: []string{"2027-01-01"}}}).Next(at.Add(-time.Hour))
	require.False(t, ok)
}

func TestCalendarValidation(t *testing.T) {
	t.Parallel()
	in, err := CalendarInput{Name: " holidays ", Dates: []string{"2027-01-02", "2027-01-01", "2027-01-02"}}.validate()
	require.NoError(t, err)
	require.Equal(t, "holidays", in.Name)
	require.Equal(t, "UTC", in.Timezone)
	require.Equal(t, []string{"2027-01-01", "2027-01-02"}, in.Dates)

	_, err = CalendarInput{Name: "", Timezone: "Mars/Base", Dates: []string{"2027-02-30", "2027-1-1", "tomorrow"}}.validate()
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	fields := map[string]string{}
	for _, f := range ve.Fields {
		fields[f.Field] = f.Message
	}
	require.Contains(t, fields, "name")
	require.Contains(t, fields, "timezone")
	require.Contains(t, fields["dates[0]"], "YYYY-MM-DD")
	require.Contains(t, fields, "dates[1]")
	require.Contains(t, fields, "dates[2]")

	var refs ValidationError
	validateCalendarRefs(&refs, []string{"01900000-0000-7000-8000-000000000001", "nope", "01900000-0000-7000-8000-000000000001"})
	require.Len(t, refs.Fields, 2)
	require.Equal(t, "schedule.exclude_calendars[1]", refs.Fields[0].Field)
	require.Equal(t, "schedule.exclude_calendars[2]", refs.Fields[1].Field)
}
