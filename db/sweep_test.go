package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// TestSweepUnfinished: rows of unfinished_executions whose execution is
// final or gone go; those of unfinished executions stay; a final execution
// another transaction holds is left for the next sweep.
func TestSweepUnfinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	ids := map[string]string{}
	for _, state := range []string{"pending", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"} {
		ids[state] = uuid.NewString()
		_, err := pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error)
			VALUES ('t', $1, gen_random_uuid(), now(), 'manual', $2, CASE WHEN $2 IN ('failed', 'cancelled', 'skipped') THEN 'x' END)`,
			ids[state], state)
		require.NoError(t, err)
	}
	// Every execution listed, as a writer that does not keep the table
	// would leave it, plus a row whose execution does not exist.
	_, err := pool.Exec(ctx, `INSERT INTO unfinished_executions SELECT tenant_id, task_id, scheduled_for, id FROM executions;
		INSERT INTO unfinished_executions VALUES ('t', gen_random_uuid(), now(), gen_random_uuid())`)
	require.NoError(t, err)

	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = holder.Exec(ctx, `SELECT 1 FROM executions WHERE id = $1 FOR UPDATE`, ids["failed"])
	require.NoError(t, err)
	n, err := db.SweepUnfinished(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "succeeded, cancelled, skipped and the orphan; failed is held")
	require.NoError(t, holder.Rollback(ctx))

	n, err = db.SweepUnfinished(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "failed, once free")
	n, err = db.SweepUnfinished(ctx, pool)
	require.NoError(t, err)
	require.Zero(t, n)
	var left []string
	rows, err := pool.Query(ctx, `SELECT e.state FROM unfinished_executions u JOIN executions e ON e.id = u.id ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"pending", "retrying", "running"}, left)
}
