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
// another transaction holds is left for the next sweep; and a stale row
// whose slot is younger than SweepUnfinishedAge (a fire ahead of its slot,
// or just delivered) is not looked at yet.
func TestSweepUnfinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	ids := map[string]string{}
	for _, state := range []string{"pending", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"} {
		ids[state] = uuid.NewString()
		_, err := pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error)
			VALUES ('t', $1, gen_random_uuid(), now() - interval '2 minutes', 'manual', $2,
				CASE WHEN $2 IN ('failed', 'cancelled', 'skipped') THEN 'x' END)`,
			ids[state], state)
		require.NoError(t, err)
	}
	// Stale rows of young slots: a final execution of a slot ahead, one of
	// a slot just past, and a row of a slot ahead whose execution is gone.
	young := []string{"now() + interval '10 seconds'", "now() - interval '10 seconds'"}
	for _, at := range young {
		_, err := pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state)
			VALUES ('t', gen_random_uuid(), gen_random_uuid(), `+at+`, 'schedule', 'succeeded')`)
		require.NoError(t, err)
	}
	// Every execution listed, as a writer that does not keep the table
	// would leave it, plus a row whose execution does not exist.
	_, err := pool.Exec(ctx, `INSERT INTO unfinished_executions SELECT tenant_id, task_id, scheduled_for, id FROM executions;
		INSERT INTO unfinished_executions VALUES ('t', gen_random_uuid(), now() - interval '2 minutes', gen_random_uuid());
		INSERT INTO unfinished_executions VALUES ('t', gen_random_uuid(), now() + interval '10 seconds', gen_random_uuid())`)
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
	var youngLeft int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM unfinished_executions
		WHERE scheduled_for > now() - interval '1 minute'`).Scan(&youngLeft))
	require.Equal(t, 3, youngLeft, "rows of young slots wait for a later sweep")
	rows, err := pool.Query(ctx, `SELECT e.state FROM unfinished_executions u JOIN executions e ON e.id = u.id
		WHERE u.scheduled_for < now() - interval '1 minute' ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"pending", "retrying", "running"}, left)

	// Once their slots are old, a sweep removes them.
	_, err = pool.Exec(ctx, `UPDATE executions SET scheduled_for = scheduled_for - interval '5 minutes'
			WHERE scheduled_for > now() - interval '1 minute';
		UPDATE unfinished_executions SET scheduled_for = scheduled_for - interval '5 minutes'
			WHERE scheduled_for > now() - interval '1 minute'`)
	require.NoError(t, err)
	n, err = db.SweepUnfinished(ctx, pool)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "the young slots' stale rows, now old")
}

// TestCancelPendingSkipsLockedExecutions: the cancel of a task's pending
// executions skips one another transaction holds instead of waiting for
// it (so that nothing waits while holding the locks it takes), and with
// dueOnly leaves the slots still ahead alone.
func TestCancelPendingSkipsLockedExecutions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	task := uuid.NewString()
	var due, held, ahead string
	for _, p := range []struct {
		id *string
		at string
	}{{&due, "now() - interval '1 second'"}, {&held, "now() - interval '2 seconds'"}, {&ahead, "now() + interval '1 hour'"}} {
		*p.id = uuid.NewString()
		_, err := pool.Exec(ctx, `WITH x AS (
				INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger)
				VALUES ('t', $1, $2, `+p.at+`, 'schedule') RETURNING tenant_id, task_id, scheduled_for, id)
			INSERT INTO unfinished_executions SELECT * FROM x`, *p.id, task)
		require.NoError(t, err)
	}
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM executions WHERE id = $1 FOR UPDATE`, held)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	// The held row stays held: any wait for it ends in an error.
	_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '100ms'`)
	require.NoError(t, err)
	n, err := db.CancelPendingExecutions(ctx, tx, "t", task, true, "the task was paused")
	require.NoError(t, err, "no wait for the held row")
	require.NoError(t, tx.Commit(ctx))
	require.EqualValues(t, 1, n)
	state := func(id string) string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT state FROM executions WHERE id = $1`, id).Scan(&s))
		return s
	}
	require.Equal(t, "cancelled", state(due))
	require.Equal(t, "pending", state(held), "held by another transaction: skipped")
	require.Equal(t, "pending", state(ahead), "its slot is still ahead")
	require.NoError(t, holder.Rollback(ctx))

	n, err = db.CancelPendingExecutions(ctx, pool, "t", task, false, "the task was deleted")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
}
