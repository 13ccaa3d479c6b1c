package schedule

import (
	"errors"
	"strings"
)

// FieldError names one invalid field of a schedule, as the API spells it
// (schedule.cron, schedule.timezone, ...), and says what is expected.
type FieldError struct {
	Field   string
	Message string
}

// ValidationError lists every problem Parse found, in the order it found
// them.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		parts = append(parts, f.Field+": "+f.Message)
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Add records a field error.
func (e *ValidationError) Add(field, message string) {
	e.Fields = append(e.Fields, FieldError{Field: field, Message: message})
}

// Err returns e when it holds at least one field error, nil otherwise.
func (e *ValidationError) Err() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return e
}

// The ways a fire-time computation is cut short (NextErr). Neither
// happens for a valid schedule; a caller refuses the schedule rather than
// spin.
var (
	ErrTooManySteps = errors.New("computing the next fire time takes too many steps")
	ErrNoProgress   = errors.New("computing the next fire time made no progress")
)
