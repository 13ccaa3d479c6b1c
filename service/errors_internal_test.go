package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/schedule"
)

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
