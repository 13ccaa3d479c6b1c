package service

import (
	"time"

	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/schedule"
)

// The service's errors, whose home is service/errs (shared with the
// subpackages): inspect them with errors.Is and errors.As. Service methods
// wrap them with context.
var (
	// ErrNotFound means the resource does not exist for the caller's tenant.
	ErrNotFound = errs.ErrNotFound
	// ErrConflict means the request collides with the current state.
	ErrConflict = errs.ErrConflict
	// ErrTryAgain means the request lost a race with a concurrent change;
	// it is a conflict too.
	ErrTryAgain = errs.ErrTryAgain
	// ErrUnavailable means the database could not be reached.
	ErrUnavailable = errs.ErrUnavailable
)

type (
	// ConflictError is a conflict with a detail written for the client.
	ConflictError = errs.ConflictError
	// FieldError names one invalid input field.
	FieldError = errs.FieldError
	// ValidationError lists every invalid field of one request.
	ValidationError = errs.ValidationError
	// QuotaError is a create refused by a count quota.
	QuotaError = errs.QuotaError
)

// IsUnavailable reports whether err means the database was unreachable
// (errs.IsUnavailable).
func IsUnavailable(err error) bool { return errs.IsUnavailable(err) }

// InputError is the validation error a database error means when the
// database refused the request's own data (errs.InputError).
func InputError(err error) (*ValidationError, bool) { return errs.InputError(err) }

// storeError is errs.Store: the one translation of db's errors.
func storeError(err error, op string, meanings ...errs.Meaning) error {
	return errs.Store(err, op, meanings...)
}

func onConstraint(name string, err error) errs.Meaning { return errs.OnConstraint(name, err) }
func conflictf(format string, args ...any) error       { return errs.Conflictf(format, args...) }
func fieldError(field, message string) error           { return errs.Field(field, message) }

// parseSchedule is schedule.Parse with its errors as the service's
// (errs.ParseSchedule).
func parseSchedule(spec schedule.Spec, anchor time.Time) (*schedule.Schedule, error) {
	return errs.ParseSchedule(spec, anchor)
}

// scheduleError translates package schedule's errors (errs.Schedule).
func scheduleError(err error) error { return errs.Schedule(err) }
