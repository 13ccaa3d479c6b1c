package errs

import (
	"errors"
	"time"

	"github.com/axhq/ax/service/schedule"
)

// ParseSchedule is schedule.Parse with its errors as the service's
// (Schedule).
func ParseSchedule(spec schedule.Spec, anchor time.Time) (*schedule.Schedule, error) {
	sched, err := schedule.Parse(spec, anchor)
	if err != nil {
		return nil, Schedule(err)
	}
	return sched, nil
}

// Schedule is the one translation of package schedule's errors into the
// service's: its *ValidationError becomes ours, field for field and in
// order (the API's 422 lists them as schedule found them), and a
// fire-time computation cut short (NextErr) is a 422 on schedule.cron.
// Anything else (a context's error) passes through.
func Schedule(err error) error {
	var se *schedule.ValidationError
	switch {
	case errors.As(err, &se):
		ve := &ValidationError{Fields: make([]FieldError, len(se.Fields))}
		for i, f := range se.Fields {
			ve.Fields[i] = FieldError{Field: f.Field, Message: f.Message}
		}
		return ve
	case errors.Is(err, schedule.ErrTooManySteps), errors.Is(err, schedule.ErrNoProgress):
		return Field("schedule.cron", "its fire times cannot be computed within ax's bound on the work; "+
			"simplify the expression (fewer restricted fields) or use another time zone or DST policy")
	}
	return err
}
