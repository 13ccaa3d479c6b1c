package errs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/schedule"
)

// Schedule hands the client what package schedule found, field for
// field and in order, as the service's own errors: a *ValidationError for
// an invalid schedule, a 422 on schedule.cron for a computation cut short.
func TestScheduleErrorTranslation(t *testing.T) {
	t.Parallel()
	start, end := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := ParseSchedule(schedule.Spec{
		Type: schedule.Cron, Cron: "60 * * * *", Timezone: "Local", StartAt: &start, EndAt: &end,
		ExcludeCalendars: []string{"nope"},
	}, time.Time{})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []FieldError{
		{Field: "schedule.timezone", Message: `"Local" is not allowed; use an IANA name such as "Europe/Berlin" or "UTC"`},
		{Field: "schedule.cron", Message: "minute field: value 60 is out of range 0-59"},
		{Field: "schedule.end_at", Message: "must be after schedule.start_at"},
		{Field: "schedule.exclude_calendars[0]", Message: "must be the id of one of your calendars"},
	}, ve.Fields)
	require.Equal(t, "invalid input: schedule.timezone: \"Local\" is not allowed; use an IANA name such as \"Europe/Berlin\" or \"UTC\"; "+
		"schedule.cron: minute field: value 60 is out of range 0-59; schedule.end_at: must be after schedule.start_at; "+
		"schedule.exclude_calendars[0]: must be the id of one of your calendars", err.Error())

	for _, cut := range []error{schedule.ErrTooManySteps, schedule.ErrNoProgress} {
		require.ErrorAs(t, Schedule(fmt.Errorf("next: %w", cut)), &ve)
		require.Len(t, ve.Fields, 1)
		require.Equal(t, "schedule.cron", ve.Fields[0].Field)
		require.Contains(t, ve.Fields[0].Message, "cannot be computed within ax's bound on the work")
	}
	require.ErrorIs(t, Schedule(context.Canceled), context.Canceled)
	require.NoError(t, Schedule(nil))
}
