package db_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func openEmpty(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbtest.EmptyURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openEmpty(t)

	require.ErrorIs(t, db.CheckMigrated(ctx, pool), db.ErrNotMigrated)
	require.NoError(t, db.Migrate(ctx, pool, nil))
	require.NoError(t, db.CheckMigrated(ctx, pool))
	require.NoError(t, db.Migrate(ctx, pool, nil))
	require.NoError(t, db.CheckMigrated(ctx, pool))

	migrations, err := db.Migrations()
	require.NoError(t, err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM ax_migrations").Scan(&n))
	require.Equal(t, len(migrations), n)
	for _, table := range []string{"tenants", "endpoints", "tasks", "executions", "execution_events", "river_job"} {
		var exists bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists))
		require.True(t, exists, table)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.EmptyURL(t)

	// Four "replicas", each with its own pool, start at once.
	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := pgxpool.New(ctx, url)
			if err != nil {
				errs[i] = err
				return
			}
			defer pool.Close()
			errs[i] = db.Migrate(ctx, pool, nil)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	require.NoError(t, db.CheckMigrated(ctx, pool))
	var dupes int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM (SELECT version FROM ax_migrations GROUP BY version HAVING count(*) > 1) d").Scan(&dupes))
	require.Zero(t, dupes)
}

func TestMigrationsNumbered(t *testing.T) {
	t.Parallel()
	ms, err := db.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for i, m := range ms {
		require.Equal(t, i+1, m.Version)
		require.NotEmpty(t, m.Name)
	}
}
