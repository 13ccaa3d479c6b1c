package db_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/db/pglocal"
)

// TestErrorsAreTranslated: each driver error a caller tells apart leaves
// db as its sentinel, with the driver's error (and the constraint's name)
// still in the chain.
func TestErrorsAreTranslated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	require.NoError(t, db.EnsureTenant(ctx, pool, "acme"))
	ep, err := db.InsertEndpoint(ctx, pool, db.Endpoint{
		TenantID: "acme", ID: "00000000-0000-7000-8000-000000000001",
		Name: "e", URL: "https://example.com", Method: "POST", Headers: map[string]string{}, Secret: "whsec_x", TimeoutMS: 1000,
	})
	require.NoError(t, err)
	task := db.Task{
		TenantID: "acme", ID: "00000000-0000-7000-8000-000000000002", Name: "t", EndpointID: ep.ID,
		ScheduleType: "interval", Timezone: "UTC", Payload: []byte("{}"), Priority: 2, MaxAttempts: 5,
		InitialBackoffMS: 1000, MaxBackoffMS: 60_000, OverlapPolicy: "allow", MisfirePolicy: "fire_once", State: "active",
		Labels: map[string]string{}, CreatedAt: time.Now(), ScheduleDialect: "standard", DSTPolicy: "vixie",
	}
	interval := int64(60)
	task.IntervalSeconds = &interval
	_, err = db.InsertTask(ctx, pool, task, false)
	require.NoError(t, err)

	_, err = db.GetTask(ctx, pool, "acme", "00000000-0000-7000-8000-0000000000ff", false)
	require.ErrorIs(t, err, db.ErrNotFound, "a missing row")

	dup := task
	dup.ID = "00000000-0000-7000-8000-000000000003"
	_, err = db.InsertTask(ctx, pool, dup, false)
	require.ErrorIs(t, err, db.ErrUniqueViolation)
	require.Equal(t, db.ConstraintTaskName, db.ConstraintName(err))

	orphan := task
	orphan.ID, orphan.Name, orphan.EndpointID = "00000000-0000-7000-8000-000000000004", "t2", "00000000-0000-7000-8000-0000000000ee"
	_, err = db.InsertTask(ctx, pool, orphan, false)
	require.ErrorIs(t, err, db.ErrForeignKeyViolation)
	require.Equal(t, db.ConstraintTaskEndpoint, db.ConstraintName(err))

	alerting := task
	alerting.ID, alerting.Name = "00000000-0000-7000-8000-000000000005", "t3"
	missing := "00000000-0000-7000-8000-0000000000ee"
	alerting.AlertEndpointID = &missing
	_, err = db.InsertTask(ctx, pool, alerting, false)
	require.ErrorIs(t, err, db.ErrForeignKeyViolation)
	require.Equal(t, db.ConstraintTaskAlertEndpoint, db.ConstraintName(err))

	_, err = db.DeleteEndpoint(ctx, pool, "acme", ep.ID)
	require.ErrorIs(t, err, db.ErrForeignKeyViolation, "an endpoint a task uses")
	require.Equal(t, db.ConstraintTaskEndpoint, db.ConstraintName(err))

	// U+0000: in a jsonb document (22P05) and in text (22021), the
	// caller's data; Unstorable also reads an untranslated driver error.
	nul := db.Endpoint{
		TenantID: "acme", ID: "00000000-0000-7000-8000-000000000007", Name: "nul", URL: "https://example.com",
		Method: "POST", Headers: map[string]string{"X-A": "a\x00b"}, Secret: "whsec_x", TimeoutMS: 1000,
	}
	_, err = db.InsertEndpoint(ctx, pool, nul)
	require.ErrorIs(t, err, db.ErrUnstorable, "U+0000 in jsonb")
	nul.Headers, nul.Name = map[string]string{}, "n\x00l"
	_, err = db.InsertEndpoint(ctx, pool, nul)
	require.ErrorIs(t, err, db.ErrUnstorable, "U+0000 in text")
	_, err = pool.Exec(ctx, `SELECT $1::text::jsonb`, `{"a":"\u0000"}`)
	require.True(t, db.Unstorable(err), "a driver error: %v", err)
	require.False(t, db.Unstorable(db.ErrUniqueViolation))

	err = db.InReadSnapshot(ctx, pool, 10*time.Millisecond, func(tx db.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_sleep(1)`)
		return err
	})
	require.ErrorIs(t, err, db.ErrQueryCanceled, "a statement past its timeout")

	// Two transactions that lock two rows in opposite orders: Postgres
	// aborts one of them as a deadlock.
	other := task
	other.ID, other.Name = "00000000-0000-7000-8000-000000000006", "t4"
	_, err = db.InsertTask(ctx, pool, other, false)
	require.NoError(t, err)
	first, second := make(chan struct{}), make(chan struct{})
	lockBoth := func(a, b string, locked, proceed chan struct{}) error {
		return db.InTx(ctx, pool, func(tx db.Tx) error {
			if _, err := db.GetTask(ctx, tx, "acme", a, true); err != nil {
				return err
			}
			close(locked)
			<-proceed
			_, err := db.GetTask(ctx, tx, "acme", b, true)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- lockBoth(task.ID, other.ID, first, second) }()
	go func() { errs <- lockBoth(other.ID, task.ID, second, first) }()
	e1, e2 := <-errs, <-errs
	deadlocked := e1
	if deadlocked == nil {
		deadlocked = e2
	}
	require.True(t, e1 == nil || e2 == nil, "one of them commits: %v, %v", e1, e2)
	require.ErrorIs(t, deadlocked, db.ErrSerialization, "the other is told it lost a race")
	require.NotErrorIs(t, deadlocked, db.ErrNotFound)
}

// TestUnavailableErrors: an unreachable database, a session the server
// ends and a connection that breaks are ErrUnavailable; a caller's
// cancelled context, a statement timeout, a missing row and a database
// that does not exist are not.
func TestUnavailableErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const missing = "00000000-0000-7000-8000-0000000000ff"

	port, err := pglocal.FreePort()
	require.NoError(t, err)
	refused, err := pgxpool.New(ctx, fmt.Sprintf("postgres://ax@127.0.0.1:%d/ax?sslmode=disable&connect_timeout=5", port))
	require.NoError(t, err)
	defer refused.Close()
	_, err = db.GetTask(ctx, refused, "acme", missing, false)
	require.ErrorIs(t, err, db.ErrUnavailable, "connection refused: %v", err)
	require.True(t, db.Unavailable(err))

	// A listener that never answers (the kernel completes the handshake,
	// nothing reads): the connection attempt times out.
	var lc net.ListenConfig
	silent, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	hung, err := pgxpool.New(ctx, fmt.Sprintf("postgres://ax@%s/ax?sslmode=disable&connect_timeout=1", silent.Addr()))
	require.NoError(t, err)
	defer hung.Close()
	_, err = db.GetTask(ctx, hung, "acme", missing, false)
	require.ErrorIs(t, err, db.ErrUnavailable, "a connection attempt that timed out: %v", err)

	pool := dbtest.Pool(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	var pid int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	_, err = db.GetTask(ctx, conn, "acme", missing, false)
	require.ErrorIs(t, err, db.ErrUnavailable, "a terminated session (57P01): %v", err)
	_, err = db.GetTask(ctx, conn, "acme", missing, false)
	require.ErrorIs(t, err, db.ErrUnavailable, "its connection, closed since: %v", err)
	// The driver's error, untranslated, as River returns it.
	_, err = conn.Exec(ctx, `SELECT 1`)
	require.True(t, db.Unavailable(err), "%v", err)

	_, err = db.GetTask(ctx, pool, "acme", missing, false)
	require.ErrorIs(t, err, db.ErrNotFound)
	require.False(t, db.Unavailable(err))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = db.GetTask(cancelled, pool, "acme", missing, false)
	require.Error(t, err)
	require.False(t, db.Unavailable(err), "the caller's context: %v", err)

	err = db.InReadSnapshot(ctx, pool, 10*time.Millisecond, func(tx db.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_sleep(1)`)
		return err
	})
	require.ErrorIs(t, err, db.ErrQueryCanceled)
	require.False(t, db.Unavailable(err), "a statement timeout: %v", err)

	noDB := pool.Config()
	noDB.ConnConfig.Database = "no_such_database"
	wrong, err := pgxpool.NewWithConfig(ctx, noDB)
	require.NoError(t, err)
	defer wrong.Close()
	_, err = db.GetTask(ctx, wrong, "acme", missing, false)
	require.Error(t, err)
	require.False(t, db.Unavailable(err), "a database that does not exist is a configuration error: %v", err)
}
