package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// TestCommonDeliveryUpdatesAreHOT: the two updates of a common delivery
// (the batched start, then the batched success) change no column any index
// of executions holds, so PostgreSQL writes them as heap-only tuples and
// touches no index (migration 0005). An index on state, or on any column
// those statements set, makes this fail. Both run in one transaction here,
// whose own counters PostgreSQL reports at once.
func TestCommonDeliveryUpdatesAreHOT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pools := dbtest.Pools(t)
	ep, task := uuid.NewString(), uuid.NewString()
	_, err := pools.Main.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('t');
		INSERT INTO endpoints (tenant_id, id, name, url, secret) VALUES ('t', '`+ep+`', 'e', 'https://example.com', 'whsec_x');
		INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds)
			VALUES ('t', '`+task+`', 'task', '`+ep+`', 'interval', 1)`)
	require.NoError(t, err)
	const n = 5
	var fires []db.NewExecution
	slot := time.Now().UTC().Truncate(time.Second)
	for i := range n {
		fires = append(fires, db.NewExecution{
			TenantID: "t", ID: uuid.Must(uuid.NewV7()).String(), TaskID: task,
			ScheduledFor: slot.Add(time.Duration(i) * time.Second),
		})
	}
	err = pgx.BeginFunc(ctx, pools.Main, func(tx pgx.Tx) error {
		_, err := db.InsertScheduledExecutions(ctx, tx, fires)
		return err
	})
	require.NoError(t, err)

	tx, err := pools.Delivery.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	keys := make([]db.DeliveryKey, n)
	oks := make([]db.DeliverySuccess, n)
	for i, f := range fires {
		keys[i] = db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: "t", ID: f.ID}, Lease: 1}
		oks[i] = db.DeliverySuccess{DeliveryKey: keys[i], StatusCode: 200, LatencyMS: 3}
	}
	started, err := db.StartPendingDeliveries(ctx, tx, keys, db.Misfire{Threshold: 5 * time.Second, CountMax: 100})
	require.NoError(t, err)
	require.Len(t, started, n)
	done, _, err := db.SucceedDeliveries(ctx, tx, oks)
	require.NoError(t, err)
	require.Len(t, done, n)

	var updated, hot int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('executions'::regclass),
		pg_stat_get_xact_tuples_hot_updated('executions'::regclass)`).Scan(&updated, &hot))
	require.Equal(t, 2*n, updated)
	require.Equal(t, updated, hot, "every update of the common delivery is HOT")
	var unfinished int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM unfinished_executions`).Scan(&unfinished))
	require.Zero(t, unfinished, "succeeded executions leave unfinished_executions")
	require.NoError(t, tx.Commit(ctx))
}

// TestBurstDeliveryUpdatesAreHOT: executions fired together fill pages
// together, and their batches start them in one statement and record
// their successes in another; every page keeps room for all its rows'
// started versions, and, once those commit, for their succeeded ones
// (migration 0030's fillfactor). At fillfactor 60 about a quarter of the
// starts moved to another page (a new entry in every index).
// Room for the succeeded versions comes from pruning the first ones,
// which a snapshot older than the starts' commits defers: autovacuum's
// ANALYZE of a freshly filled table of the database is one, so it is off
// for this test's tables, and the successes wait until no older snapshot
// or transaction lives (the layout is what it checks, not other
// sessions' timing).
func TestBurstDeliveryUpdatesAreHOT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pools := dbtest.Pools(t)
	const n, batch = 200, 50
	_, err := pools.Main.Exec(ctx, `DO $$
		DECLARE r record;
		BEGIN
			FOR r IN SELECT c.oid::regclass AS t FROM pg_class c
				WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace LOOP
				EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', r.t);
			END LOOP;
		END $$`)
	require.NoError(t, err)
	rows, err := pools.Main.Query(ctx, `WITH tn AS (INSERT INTO tenants (id) VALUES ('t')),
		ep AS (INSERT INTO endpoints (tenant_id, id, name, url, secret)
			VALUES ('t', gen_random_uuid(), 'e', 'https://example.com', 'whsec_x') RETURNING id)
		INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, run_at)
		SELECT 't', gen_random_uuid(), 'task-' || i, ep.id, 'once', now() FROM ep, generate_series(1, $1) i
		RETURNING id::text`, n)
	require.NoError(t, err)
	tasks, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	slot := time.Now().UTC().Truncate(time.Second)
	fires := make([]db.NewExecution, n)
	for i, task := range tasks {
		fires[i] = db.NewExecution{TenantID: "t", ID: uuid.Must(uuid.NewV7()).String(), TaskID: task, ScheduledFor: slot}
	}
	err = pgx.BeginFunc(ctx, pools.Main, func(tx pgx.Tx) error { // one claim
		_, err := db.InsertScheduledExecutions(ctx, tx, fires)
		return err
	})
	require.NoError(t, err)

	keys := make([]db.DeliveryKey, n)
	oks := make([]db.DeliverySuccess, n)
	for i, f := range fires {
		keys[i] = db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: "t", ID: f.ID}, Lease: 1}
		oks[i] = db.DeliverySuccess{DeliveryKey: keys[i], StatusCode: 204, LatencyMS: 1}
	}
	// Each batch's statement in a transaction of its own, as the batched
	// start and success commit. The session's counters may still hold its
	// earlier transactions' (they are flushed now and then), so a batch's
	// are the difference across its statement.
	counts := func(tx pgx.Tx) (updated, hot int) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('executions'::regclass),
			pg_stat_get_xact_tuples_hot_updated('executions'::regclass)`).Scan(&updated, &hot))
		return updated, hot
	}
	inBatches := func(what string, update func(tx pgx.Tx, from, to int) (int, error)) {
		for from := 0; from < n; from += batch {
			err := pgx.BeginFunc(ctx, pools.Delivery, func(tx pgx.Tx) error {
				updated0, hot0 := counts(tx)
				got, err := update(tx, from, from+batch)
				require.NoError(t, err)
				require.Equal(t, batch, got)
				updated, hot := counts(tx)
				require.Equal(t, batch, updated-updated0)
				require.Equal(t, batch, hot-hot0, "every %s of executions %d–%d is HOT", what, from, from+batch-1)
				return nil
			})
			require.NoError(t, err)
		}
	}
	inBatches("start", func(tx pgx.Tx, from, to int) (int, error) {
		started, err := db.StartPendingDeliveries(ctx, tx, keys[from:to], db.Misfire{Threshold: 5 * time.Second, CountMax: 100})
		return len(started), err
	})
	// The successes find room once the first versions are pruned, which
	// waits for every snapshot of the database older than the starts'
	// commits — and a snapshot's xmin is at most the oldest transaction
	// running in any database of the cluster: in a full, parallel run of
	// the suite another test's CREATE DATABASE or insert still ran at
	// times, and the successes' own snapshot held the pruning back (21 of
	// 50 HOT). Wait for them to end — the layout is what this checks, not
	// how soon other sessions finish.
	var marker string
	require.NoError(t, pools.Main.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&marker))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var older int
		require.NoError(t, pools.Main.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND (
				(backend_xid IS NOT NULL AND age(backend_xid) >= age($1::text::xid))
				OR ((datname = current_database() OR datname IS NULL)
					AND backend_xmin IS NOT NULL AND age(backend_xmin) >= age($1::text::xid)))`,
			marker).Scan(&older))
		if older == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "a transaction older than the starts still runs")
	}
	inBatches("success", func(tx pgx.Tx, from, to int) (int, error) {
		done, _, err := db.SucceedDeliveries(ctx, tx, oks[from:to])
		return len(done), err
	})
}
