package service

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/schedule"
)

// scheduleError hands the client what package schedule found, field for
// field and in order, as the service's own errors: a *ValidationError for
// an invalid schedule, a 422 on schedule.cron for a computation cut short.
func TestScheduleErrorTranslation(t *testing.T) {
	t.Parallel()
	start, end := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := parseSchedule(schedule.Spec{Type: schedule.Cron, Cron: "60 * * * *", Timezone: "Local", StartAt: &start, EndAt: &end,
		ExcludeCalendars: []string{"nope"}}, time.Time{})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, []FieldError{
		{"schedule.timezone", `"Local" is not allowed; use an IANA name such as "Europe/Berlin" or "UTC"`},
		{"schedule.cron", "minute field: value 60 is out of range 0-59"},
		{"schedule.end_at", "must be after schedule.start_at"},
		{"schedule.exclude_calendars[0]", "must be the id of one of your calendars"},
	}, ve.Fields)
	require.Equal(t, "invalid input: schedule.timezone: \"Local\" is not allowed; use an IANA name such as \"Europe/Berlin\" or \"UTC\"; "+
		"schedule.cron: minute field: value 60 is out of range 0-59; schedule.end_at: must be after schedule.start_at; "+
		"schedule.exclude_calendars[0]: must be the id of one of your calendars", err.Error())

	for _, cut := range []error{schedule.ErrTooManySteps, schedule.ErrNoProgress} {
		require.ErrorAs(t, scheduleError(fmt.Errorf("next: %w", cut)), &ve)
		require.Len(t, ve.Fields, 1)
		require.Equal(t, "schedule.cron", ve.Fields[0].Field)
		require.Contains(t, ve.Fields[0].Message, "cannot be computed within ax's bound on the work")
	}
	require.ErrorIs(t, scheduleError(context.Canceled), context.Canceled)
	require.NoError(t, scheduleError(nil))
}

// jsonHasNUL finds U+0000 in a string or a key of JSON text, and only
// there: an escaped backslash before u0000 is the text \u0000.
func TestJSONHasNUL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		`{"a":"x\u0000"}`:            true,
		`{"\u0000":1}`:               true,
		`[1,{"b":["\u0000"]}]`:       true,
		`"\u0000"`:                   true,
		`{"a":"\\u0000"}`:            false,
		`{"a":"\\\u0000"}`:           true,
		`{"a":"u0000","b":"\u00a0"}`: false,
		`{}`:                         false,
		``:                           false,
		`{"a":"\u0000`:               false, // invalid JSON: refused as such elsewhere
		`not json \u0000`:            false,
	} {
		require.Equal(t, want, jsonHasNUL([]byte(raw)), raw)
	}
}

// storeError is idempotent: an error that is the service's already
// passes through it again unchanged (the same value, the same text, the
// same status through the API), so a layer may translate what a layer
// below translated. A driver error that did not come through db (River's
// inserts return them) is classified as db's are.
func TestStoreErrorIdempotent(t *testing.T) {
	t.Parallel()
	race := storeError(fmt.Errorf("commit: %w", db.Translate(&pgconn.PgError{Code: "40001"})), "first")
	own := []error{
		ErrNotFound, race, conflictf("a task named %q already exists", "x"), fieldError("name", "is required"),
		&QuotaError{Limit: "max_tasks", Max: 3}, ErrIdempotencyMismatch, fmt.Errorf("%w: must start with whsec_", ErrInvalidSecret),
		storeError(fmt.Errorf("read: %w", db.Translate(&pgconn.PgError{Code: "57P01"})), "first"),
	}
	for _, err := range own {
		again := storeError(err, "second")
		require.Same(t, err, again, "%v", err) //nolint:testifylint // the very value, not an equal one
		require.Equal(t, err.Error(), storeError(again, "third").Error())
	}
	require.ErrorIs(t, own[7], ErrUnavailable)

	for _, code := range []string{"40001", "40P01"} {
		raw := fmt.Errorf("insert jobs: %w", &pgconn.PgError{Code: code}) // not through db: River's
		err := storeError(raw, "enqueue")
		require.ErrorIs(t, err, ErrConflict, code)
		require.ErrorIs(t, err, ErrTryAgain, code)
		require.EqualError(t, err, "a concurrent change got in the way; try again", code)
	}
	stale := conflictf("execution %s is not running under attempt %d", "x", 2)
	require.NotErrorIs(t, stale, ErrTryAgain, "a conflict with the state is not a race to retry")
	require.EqualError(t, storeError(errors.New("scan: bad column"), "list tasks"), "list tasks: scan: bad column")
	require.NoError(t, storeError(nil, "nothing"))
}
