package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

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
	// ErrUnstorable: the database cannot hold a value it was given: U+0000
	// in text (SQLSTATE 22021) or, as \u0000, in a jsonb document (22P05).
	// The value is the caller's input, not a fault of the database.
	ErrUnstorable = errors.New("value the database cannot store (U+0000)")
	// ErrUnavailable: the database could not be reached or dropped the
	// connection: a connection attempt failed (refused, reset, timed
	// out), a connection broke mid-statement, or the server is shutting
	// down, starting or recovering. Nothing about the statement was
	// wrong; it may succeed once the database is back.
	ErrUnavailable = errors.New("database unavailable")
)

// Constraints whose violation a caller tells apart (ConstraintName).
const (
	// ConstraintTaskName: tasks' names are unique per tenant.
	ConstraintTaskName = "tasks_tenant_id_name_key"
	// ConstraintCalendarName: calendars' names are unique per tenant.
	ConstraintCalendarName = "calendars_tenant_id_name_key"
	// ConstraintTaskEndpoint: a task's endpoint exists (and is not deleted
	// while the task uses it).
	ConstraintTaskEndpoint = "tasks_tenant_id_endpoint_id_fkey"
	// ConstraintTaskAlertEndpoint: a task's alert endpoint exists (and is
	// not deleted while the task uses it).
	ConstraintTaskAlertEndpoint = "tasks_tenant_id_alert_endpoint_id_fkey"
	// ConstraintExecutionSlot: one scheduled execution per slot of a task,
	// but for those a schedule change gave up (CancelRescheduledExecutions).
	ConstraintExecutionSlot = "executions_slot_idx"
)

// SQLSTATE codes ax reacts to.
const (
	codeUniqueViolation      = "23505"
	codeForeignKeyViolation  = "23503"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeQueryCanceled        = "57014"
	codeLockNotAvailable     = "55P03"
	codeUntranslatableChar   = "22P05"
	codeCharNotInRepertoire  = "22021"
	codeUndefinedTable       = "42P01"
	codeTooManyConnections   = "53300"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	// classConnectionException: SQLSTATE class 08, connection exceptions.
	classConnectionException = "08"
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
	kind := stateKind(sqlState(err))
	if unreachable(err) {
		kind = ErrUnavailable
	}
	if kind == nil {
		return err
	}
	if errors.Is(err, kind) {
		return err // translated already
	}
	return fmt.Errorf("%w: %w", kind, err)
}

// Translate is translate for an error that did not come through this
// package's functions (River's job inserts return the driver's): it gains
// this package's kind. Errors translated already, and others, pass
// unchanged.
func Translate(err error) error { return translate(err) }

// stateKind is the error of this package a SQLSTATE code maps to, nil
// for none.
func stateKind(code string) error {
	switch code {
	case codeUniqueViolation:
		return ErrUniqueViolation
	case codeForeignKeyViolation:
		return ErrForeignKeyViolation
	case codeSerializationFailure, codeDeadlockDetected:
		return ErrSerialization
	case codeQueryCanceled:
		return ErrQueryCanceled
	case codeLockNotAvailable:
		return ErrLockTimeout
	case codeUntranslatableChar, codeCharNotInRepertoire:
		return ErrUnstorable
	}
	return nil
}

// Unstorable reports whether err means the database could not hold a
// value it was given (ErrUnstorable), for errors that came through this
// package and for driver errors that did not (River's inserts).
func Unstorable(err error) bool {
	return err != nil && (errors.Is(err, ErrUnstorable) || errors.Is(stateKind(sqlState(err)), ErrUnstorable))
}

// Unavailable reports whether err means the database was unreachable
// (ErrUnavailable), for errors that came through this package
// (translated) and for driver errors that did not (River's).
func Unavailable(err error) bool {
	return err != nil && (errors.Is(err, ErrUnavailable) || unreachable(err))
}

// unreachable reports whether the driver's err means the database could
// not be reached or dropped the connection, as opposed to a statement the
// database refused (a bug, bad data) or a context the caller cancelled.
//
//   - A failed connection attempt (*pgconn.ConnectError): refused, reset,
//     no such socket, connect_timeout, or the server refusing sessions
//     (57P03 starting up or shutting down, 53300 too many connections).
//     A server that answered with another error (a wrong password, a
//     database that does not exist) is a configuration error, not an
//     outage.
//   - The server ending the session: 57P01 admin_shutdown, 57P02
//     crash_shutdown, 57P03, class 08 connection exceptions.
//   - The connection breaking under a statement: end of stream, a reset
//     or broken pipe, a network error, or a connection already closed by
//     an earlier such failure.
func unreachable(err error) bool {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			return serverGone(pgErr.Code)
		}
		return true
	}
	if code := sqlState(err); code != "" {
		return serverGone(code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller's context ended: not the database's doing
	}
	var netErr net.Error
	return errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &netErr)
}

// serverGone reports whether SQLSTATE code means the server ended or
// refused the session rather than the statement.
func serverGone(code string) bool {
	switch code {
	case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow, codeTooManyConnections:
		return true
	}
	return strings.HasPrefix(code, classConnectionException)
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

// Constraints of workflows.
const (
	// ConstraintWorkflowName: workflows' names are unique per tenant.
	ConstraintWorkflowName = "workflows_tenant_id_name_key"
	// ConstraintWorkflowAlertEndpoint: a workflow's alert endpoint exists.
	ConstraintWorkflowAlertEndpoint = "workflows_tenant_id_alert_endpoint_id_fkey"
)
