package db

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The errors of this package's functions, for errors.Is. Driver errors are
// translated to them once, by translate, on their way out; the driver's
// error stays in the chain (ConstraintName reads it).
var (
	// ErrNotFound: a read of one row found none.
	ErrNotFound = errors.New("no rows")
	// ErrUniqueViolation: a write collided with a unique constraint.
	ErrUniqueViolation = errors.New("unique violation")
	// ErrForeignKeyViolation: a write referenced a missing row, or a
	// delete removed a row still referenced.
	ErrForeignKeyViolation = errors.New("foreign key violation")
	// ErrSerialization: the transaction lost a race (a serialization
	// failure or a deadlock); running it again may succeed.
	ErrSerialization = errors.New("serialization failure")
	// ErrQueryCanceled: a statement was cancelled (statement_timeout or a
	// cancel request).
	ErrQueryCanceled = errors.New("query canceled")
	// ErrLockTimeout: a statement waited for a lock longer than its
	// lock_timeout.
	ErrLockTimeout = errors.New("lock timeout")
)

// Constraints whose violation a caller tells apart (ConstraintName).
const (
	// ConstraintTaskName: tasks' names are unique per tenant.
	ConstraintTaskName = "tasks_tenant_id_name_key"
	// ConstraintTaskEndpoint: a task's endpoint exists (and is not deleted
	// while the task uses it).
	ConstraintTaskEndpoint = "tasks_tenant_id_endpoint_id_fkey"
	// ConstraintTaskAlertEndpoint: a task's alert endpoint exists (and is
	// not deleted while the task uses it).
	ConstraintTaskAlertEndpoint = "tasks_tenant_id_alert_endpoint_id_fkey"
)

// SQLSTATE codes ax reacts to.
const (
	codeUniqueViolation      = "23505"
	codeForeignKeyViolation  = "23503"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeQueryCanceled        = "57014"
	codeLockNotAvailable     = "55P03"
	codeUndefinedTable       = "42P01"
)

// translate maps a driver error to this package's errors, keeping the
// driver's error in the chain; other errors (and nil) pass unchanged. It
// is the only place that reads SQLSTATE codes for callers.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var kind error
	switch sqlState(err) {
	case codeUniqueViolation:
		kind = ErrUniqueViolation
	case codeForeignKeyViolation:
		kind = ErrForeignKeyViolation
	case codeSerializationFailure, codeDeadlockDetected:
		kind = ErrSerialization
	case codeQueryCanceled:
		kind = ErrQueryCanceled
	case codeLockNotAvailable:
		kind = ErrLockTimeout
	default:
		return err
	}
	if errors.Is(err, kind) {
		return err // translated already
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// wrap translates err and prefixes it with what failed; nil stays nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, translate(err))
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// ConstraintName returns the name of the constraint err violated, if any.
func ConstraintName(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.ConstraintName
	}
	return ""
}

func isUndefinedTable(err error) bool { return sqlState(err) == codeUndefinedTable }
