package service

import (
	"errors"
	"strings"
)

// Sentinel errors that callers (the API layer, workers) map to outcomes.
// Service methods wrap them with context; inspect them with errors.Is.
var (
	// ErrNotFound means the resource does not exist for the caller's tenant.
	// Another tenant's resource is indistinguishable from a missing one.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the request collides with the current state: a
	// duplicate name, an illegal state transition, a resource still in use.
	ErrConflict = errors.New("conflict")
)

// FieldError names one invalid input field and says what is expected.
type FieldError struct {
	Field   string
	Message string
}

// ValidationError lists every invalid field of one request. The API renders
// it as a 422 problem with an errors list.
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

// Err returns e when it holds at least one field error, nil otherwise, so a
// validator can collect every problem and return once.
func (e *ValidationError) Err() error {
	if e == nil || len(e.Fields) == 0 {
		return nil
	}
	return e
}
