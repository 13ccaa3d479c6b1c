package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestMigrateHotExecutions upgrades a database at version 4 that holds
// executions in every state: unfinished_executions gets exactly the
// unfinished ones, a cancelled execution without a last_error gets one, and
// the indexes on state are gone.
func TestMigrateHotExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openEmpty(t)
	ms, err := db.Migrations()
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE ax_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range ms[:4] {
		_, err := pool.Exec(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = pool.Exec(ctx, `INSERT INTO ax_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('t');
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error)
		SELECT 't', gen_random_uuid(), gen_random_uuid(), now(), 'manual', s,
			CASE WHEN s IN ('failed', 'skipped') THEN 'why' END
		FROM unnest(ARRAY['pending', 'running', 'retrying', 'succeeded', 'failed', 'cancelled', 'skipped']) s`)
	require.NoError(t, err)

	require.NoError(t, db.Migrate(ctx, pool, nil))
	require.NoError(t, db.CheckMigrated(ctx, pool))
	var unfinished []string
	rows, err := pool.Query(ctx, `SELECT e.state FROM unfinished_executions u JOIN executions e ON e.id = u.id ORDER BY 1`)
	require.NoError(t, err)
	unfinished, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"pending", "retrying", "running"}, unfinished)
	var reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT last_error FROM executions WHERE state = 'cancelled'`).Scan(&reason))
	require.Equal(t, "cancelled through the API", reason)
	var indexes []string
	rows, err = pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'executions' ORDER BY 1`)
	require.NoError(t, err)
	indexes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{
		"executions_backfill_idx", "executions_dedup_idx", "executions_event_idx", "executions_last_error_idx",
		"executions_node_idx", "executions_pkey", "executions_retrying_idx", "executions_slot_idx", "executions_task_idx",
	}, indexes)
	_, err = pool.Exec(ctx, `UPDATE executions SET last_error = NULL WHERE state = 'failed'`)
	require.ErrorContains(t, err, "executions_final_reason", "a failed execution says why")
}

// TestMigrateScheduleDialectDST upgrades a database at version 8 that holds
// a cron task: it keeps the DST rule it was created under
// (once_per_local_time) and the standard dialect, while a task inserted
// afterwards without them gets the new default, vixie.
func TestMigrateScheduleDialectDST(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openEmpty(t)
	ms, err := db.Migrations()
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE ax_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range ms[:8] {
		_, err := pool.Exec(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = pool.Exec(ctx, `INSERT INTO ax_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
		require.NoError(t, err)
	}
	const old, fresh = "00000000-0000-7000-8000-000000000002", "00000000-0000-7000-8000-000000000003"
	_, err = pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('t');
		INSERT INTO endpoints (tenant_id, id, name, url, secret)
		VALUES ('t', '00000000-0000-7000-8000-000000000001', 'e', 'https://example.com', 'whsec_x');
		INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, cron, timezone)
		VALUES ('t', '`+old+`', 'old', '00000000-0000-7000-8000-000000000001', 'cron', '*/5 * * * *', 'America/New_York')`)
	require.NoError(t, err)

	require.NoError(t, db.Migrate(ctx, pool, nil))
	require.NoError(t, db.CheckMigrated(ctx, pool))
	_, err = pool.Exec(ctx, `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, cron)
		VALUES ('t', '`+fresh+`', 'fresh', '00000000-0000-7000-8000-000000000001', 'cron', '*/5 * * * *')`)
	require.NoError(t, err)
	for id, want := range map[string]string{old: "once_per_local_time", fresh: "vixie"} {
		task, err := db.GetTask(ctx, pool, "t", id, false)
		require.NoError(t, err)
		require.Equal(t, "standard", task.ScheduleDialect)
		require.Equal(t, want, task.DSTPolicy)
	}
	_, err = pool.Exec(ctx, `UPDATE tasks SET dst_policy = 'sometimes'`)
	require.ErrorContains(t, err, "tasks_dst_policy_check")
	_, err = pool.Exec(ctx, `UPDATE tasks SET schedule_dialect = 'spring'`)
	require.ErrorContains(t, err, "tasks_schedule_dialect_check")
}

// TestMigrateRunWaits upgrades a database at version 27 that holds runs
// waiting for events: migration 0028 counts their awaiting nodes into
// workflow_runs.awaiting_nodes (and marks those nodes counted), so that
// the stalled-run backstop leaves the waiting runs out and finds the
// stalled one at once, with nothing left for the sweep to count.
func TestMigrateRunWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := openEmpty(t)
	ms, err := db.Migrations()
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE ax_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range ms {
		if m.Version > 27 {
			break
		}
		_, err := pool.Exec(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = pool.Exec(ctx, `INSERT INTO ax_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
		require.NoError(t, err)
	}
	// Run …01 waits on two nodes, …02 on one (another succeeded), …03 on
	// none: it is stalled.
	_, err = pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('t');
		INSERT INTO workflows (tenant_id, id, name) VALUES ('t', '01900000-0000-7000-8000-000000000000', 'w');
		INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state, updated_at)
			SELECT 't', ('01900000-0000-7000-8000-00000000000' || g)::uuid, '01900000-0000-7000-8000-000000000000', 1, now(),
				'manual', 'running', now() - interval '1 hour'
			FROM generate_series(1, 3) g;
		INSERT INTO workflow_run_nodes (tenant_id, run_id, key, state, wait_event, wait_since, wait_deadline)
			VALUES ('t', '01900000-0000-7000-8000-000000000001', 'a', 'awaiting', 'go', now(), now() + interval '1 day'),
				('t', '01900000-0000-7000-8000-000000000001', 'b', 'awaiting', 'go', now(), now() + interval '1 day'),
				('t', '01900000-0000-7000-8000-000000000002', 'a', 'awaiting', 'go', now(), now() + interval '1 day'),
				('t', '01900000-0000-7000-8000-000000000002', 'b', 'succeeded', 'go', now(), now() + interval '1 day'),
				('t', '01900000-0000-7000-8000-000000000003', 'a', 'succeeded', 'go', now(), now() + interval '1 day')`)
	require.NoError(t, err)

	require.NoError(t, db.Migrate(ctx, pool, nil))
	rows, err := pool.Query(ctx, `SELECT awaiting_nodes FROM workflow_runs ORDER BY id`)
	require.NoError(t, err)
	counts, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{2, 1, 0}, counts)
	stalled, err := db.StalledRuns(ctx, pool, time.Second, 100)
	require.NoError(t, err)
	require.Equal(t, []db.RunRef{{TenantID: "t", ID: "01900000-0000-7000-8000-000000000003"}}, stalled)
	n, err := db.CountRunWaits(ctx, pool, 100)
	require.NoError(t, err)
	require.Zero(t, n, "every wait of upgrade time is counted")
}
