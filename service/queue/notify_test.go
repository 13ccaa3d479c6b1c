package queue_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service/queue"
	"github.com/axhq/ax/service/resource"
)

// TestInsertsNotifyTheirQueue: two deliver jobs inserted in transactions
// InsertNotifyCooldown apart each notify the deliver queue (River's
// insert notification, which wakes its fetch): a job due at once, an
// event's fire, is not left for the queue's poll because another insert
// notified shortly before it. River's own default cooldown (100 ms)
// notified only the first.
func TestInsertsNotifyTheirQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.URL(t)
	pools, err := db.OpenPools(ctx, dbURL, 4)
	require.NoError(t, err)
	defer pools.Close()
	enq, err := queue.NewEnqueuer(pools.Main, nil)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	_, err = conn.Exec(ctx, `LISTEN `+pgx.Identifier{schema + ".river_insert"}.Sanitize())
	require.NoError(t, err)

	insert := func() {
		t.Helper()
		p := queue.DeliverInsert("acme", resource.NewID(), resource.NewID(), time.Now(), 2, 3, time.Now(), 0, queue.Deliver)
		require.NoError(t, db.InTx(ctx, pools.Main, func(tx db.Tx) error {
			_, err := enq.Enqueue(ctx, tx, []river.InsertManyParams{p})
			return err
		}))
	}
	insert()
	time.Sleep(2 * queue.InsertNotifyCooldown) // past the cooldown, within River's default
	insert()

	for i := range 2 {
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.WaitForNotification(wait)
		cancel()
		require.NoError(t, err, "notification %d of 2", i+1)
		var payload struct {
			Queue string `json:"queue"`
		}
		require.NoError(t, json.Unmarshal([]byte(n.Payload), &payload))
		require.Equal(t, queue.Deliver, payload.Queue)
	}
}
