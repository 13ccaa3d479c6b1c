package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/schedule"
)

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
	require.Equal(t, `unknown time zone "Mars/Base"`, fields["timezone"])
	require.Contains(t, fields["dates[0]"], "YYYY-MM-DD")
	require.Contains(t, fields, "dates[1]")
	require.Contains(t, fields, "dates[2]")
}

// A schedule's exclude_calendars accepts exactly the ids validID accepts
// (package schedule imports nothing of ax, so it states the rule again),
// and its errors reach the client as the service's *ValidationError,
// field for field.
func TestScheduleCalendarRefsAreIDs(t *testing.T) {
	t.Parallel()
	for _, id := range []string{
		"01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-00000000ABCD", NewID(),
		"", "nope", "01900000000070008000000000000001", "{01900000-0000-7000-8000-000000000001}",
		"urn:uuid:01900000-0000-7000-8000-000000000001", "01900000-0000-7000-8000-00000000000g",
		"0190000-00000-7000-8000-000000000001", " 1900000-0000-7000-8000-000000000001",
	} {
		_, err := parseSchedule(schedule.Spec{Type: schedule.Interval, IntervalSeconds: 60, ExcludeCalendars: []string{id}}, time.Time{})
		if validID(id) {
			require.NoError(t, err, id)
			continue
		}
		var ve *ValidationError
		require.ErrorAs(t, err, &ve, id)
		require.Equal(t, []FieldError{{Field: "schedule.exclude_calendars[0]", Message: "must be the id of one of your calendars"}}, ve.Fields)
	}
}
