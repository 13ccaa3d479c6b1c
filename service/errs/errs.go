// Package errs holds the errors that package service and its subpackages
// end their operations with, the outcomes callers (the API, the console,
// the workers) map to a status, and Store, the one translation of db's
// errors into them (Schedule is package schedule's). Package service re-exports them under the same names
// (service.ErrNotFound, *service.ValidationError, …).
package errs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/axhq/ax/db"
)

// Sentinel errors that callers (the API layer, workers) map to outcomes.
// Service methods wrap them with context; inspect them with errors.Is.
var (
	// ErrNotFound means the resource does not exist for the caller's tenant.
	// Another tenant's resource is indistinguishable from a missing one.
	ErrNotFound = New("not found")
	// ErrConflict means the request collides with the current state: a
	// duplicate name, an illegal state transition, a resource still in use.
	// Conflicts are *ConflictError values, which match it.
	ErrConflict = New("conflict")
	// ErrTryAgain means the request lost a race with a concurrent change
	// (the database saw a serialization failure or a deadlock): nothing
	// it did was kept, and the same request may succeed if made again.
	// Such errors are conflicts too (ErrConflict): the API answers 409
	// with this text; a worker retries rather than giving up.
	ErrTryAgain = New("a concurrent change got in the way; try again")
	// ErrUnavailable means the database could not be reached (down,
	// restarting, refusing connections, or the connection broke): nothing
	// was wrong with the request, which may succeed in a few seconds.
	ErrUnavailable = New("the database is unavailable")
)

// domainError is an error the service defines (ErrNotFound, …), made by
// New: Store passes it on unchanged.
type domainError struct{ text string }

func (e *domainError) Error() string { return e.text }

// New returns a sentinel error of the service's with text: Store passes it
// (and any error wrapping it) on unchanged.
func New(text string) error { return &domainError{text: text} }

// IsUnavailable reports whether err means the database was unreachable:
// ErrUnavailable, or a database error that reached the caller without
// Store (one River returned for a job insert, say).
func IsUnavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || db.Unavailable(err)
}

// ConflictError is a conflict with the current state, with a detail
// written for the client. errors.Is(err, ErrConflict) matches it.
type ConflictError struct {
	Detail string
	// cause is what the conflict is, when more than a state: ErrTryAgain.
	cause error
}

func (e *ConflictError) Error() string { return e.Detail }

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns what the conflict is, if more than a state (ErrTryAgain).
func (e *ConflictError) Unwrap() error { return e.cause }

// Conflictf returns a *ConflictError whose detail is the formatted text.
func Conflictf(format string, args ...any) error {
	return &ConflictError{Detail: fmt.Sprintf(format, args...)}
}

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

// Field returns a ValidationError of one field.
func Field(field, message string) error {
	return &ValidationError{Fields: []FieldError{{Field: field, Message: message}}}
}

// unavailableError is a database error that means ErrUnavailable; its text
// is the database error's.
type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// Meaning says what one kind of database failure means to the client of
// one call (Store).
type Meaning struct {
	match func(error) bool
	err   error
}

// OnConstraint: a violation of the named constraint (db.Constraint…)
// means err.
func OnConstraint(name string, err error) Meaning {
	return Meaning{match: func(e error) bool { return db.ConstraintName(e) == name }, err: err}
}

// OnQueryCanceled: a statement cancelled by its timeout means err.
func OnQueryCanceled(err error) Meaning {
	return Meaning{match: func(e error) bool { return errors.Is(e, db.ErrQueryCanceled) }, err: err}
}

// OnLockTimeout: a statement that waited for a lock longer than its
// lock_timeout means err.
func OnLockTimeout(err error) Meaning {
	return Meaning{match: func(e error) bool { return errors.Is(e, db.ErrLockTimeout) }, err: err}
}

// Store is the one translation of db's errors into the service's: an
// unreachable database is ErrUnavailable (whatever the call), then what
// meanings give for this call (a constraint's name, a timeout), then a
// missing row is ErrNotFound, a serialization failure or a deadlock a
// conflict to try again (ErrTryAgain), any other constraint violation a
// conflict, and anything else is wrapped with op (an internal error). No
// other code of service's looks at db's error sentinels.
//
// Every error of a db function, of a River insert or of db.InTx leaves
// the function that got it through here (service/rawstore_test.go checks
// it, over service and its subpackages). The translation is idempotent:
// an error that is the service's already (a sentinel, a conflict, a
// validation error, a quota refusal: translated below, or returned by a
// transaction's function) passes unchanged. River's inserts return the
// driver's errors, which db.Translate classifies first.
func Store(err error, op string, meanings ...Meaning) error {
	if err == nil || translated(err) {
		return err
	}
	err = db.Translate(err)
	if db.Unavailable(err) {
		return fmt.Errorf("%s: %w", op, unavailableError{err})
	}
	if ve, ok := InputError(err); ok {
		return ve
	}
	for _, m := range meanings {
		if m.match(err) {
			return m.err
		}
	}
	switch {
	case errors.Is(err, db.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, db.ErrSerialization):
		return &ConflictError{Detail: ErrTryAgain.Error(), cause: ErrTryAgain}
	case errors.Is(err, db.ErrUniqueViolation), errors.Is(err, db.ErrForeignKeyViolation):
		return Conflictf("the request conflicts with the current state of the resource")
	}
	return fmt.Errorf("%s: %w", op, err)
}

// translated reports whether err is the service's already: one of its
// sentinels (ErrNotFound, ErrUnavailable, …), a conflict, a validation
// error or a quota refusal.
func translated(err error) bool {
	var (
		de *domainError
		ce *ConflictError
		ve *ValidationError
		qe *QuotaError
	)
	return errors.As(err, &de) || errors.As(err, &ce) || errors.As(err, &ve) || errors.As(err, &qe)
}

// InputError is the validation error that a database error means when the
// database refused the request's own data: U+0000 in a value (text, or a
// jsonb document) that no check caught before it reached the database.
// Store translates such errors so; the API's error handler asks here
// too, for the errors that reach it by other paths (River's inserts).
// Request JSON bound for jsonb is checked first (service's
// checkJSONDocument), so this is the backstop, and it cannot name the
// field.
func InputError(err error) (*ValidationError, bool) {
	if !db.Unstorable(err) {
		return nil, false
	}
	return &ValidationError{Fields: []FieldError{{
		Field:   "body",
		Message: "holds U+0000 (\\u0000) where ax cannot store it; remove the character",
	}}}, true
}

// QuotaError is a create refused by a count quota (service/limits): the
// API answers 409 with a problem type ending in /quota-exceeded.
type QuotaError struct {
	Limit string
	Max   int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("the tenant's %s quota (%d) is reached; delete some or ask an operator to raise it", e.Limit, e.Max)
}
