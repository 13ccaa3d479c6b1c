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
