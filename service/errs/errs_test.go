package errs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
)

// errMine is a sentinel of a service's own (New).
var errMine = New("a request with this key is still in progress")

// Store is idempotent: an error that is the service's already
// passes through it again unchanged (the same value, the same text, the
// same status through the API), so a layer may translate what a layer
// below translated. A driver error that did not come through db (River's
// inserts return them) is classified as db's are.
func TestStoreIdempotent(t *testing.T) {
	t.Parallel()
	race := Store(fmt.Errorf("commit: %w", db.Translate(&pgconn.PgError{Code: "40001"})), "first")
	own := []error{
		ErrNotFound, race, Conflictf("a task named %q already exists", "x"), Field("name", "is required"),
		&QuotaError{Limit: "max_tasks", Max: 3}, errMine, fmt.Errorf("%w: must start with whsec_", errMine),
		Store(fmt.Errorf("read: %w", db.Translate(&pgconn.PgError{Code: "57P01"})), "first"),
	}
	for _, err := range own {
		again := Store(err, "second")
		require.Same(t, err, again, "%v", err) // the very value, not an equal one
		require.Equal(t, err.Error(), Store(again, "third").Error())
	}
	require.ErrorIs(t, own[7], ErrUnavailable)

	for _, code := range []string{"40001", "40P01"} {
		raw := fmt.Errorf("insert jobs: %w", &pgconn.PgError{Code: code}) // not through db: River's
		err := Store(raw, "enqueue")
		require.ErrorIs(t, err, ErrConflict, code)
		require.ErrorIs(t, err, ErrTryAgain, code)
		require.EqualError(t, err, "a concurrent change got in the way; try again", code)
	}
	stale := Conflictf("execution %s is not running under attempt %d", "x", 2)
	require.NotErrorIs(t, stale, ErrTryAgain, "a conflict with the state is not a race to retry")
	require.EqualError(t, Store(errors.New("scan: bad column"), "list tasks"), "list tasks: scan: bad column")
	require.NoError(t, Store(nil, "nothing"))
}
