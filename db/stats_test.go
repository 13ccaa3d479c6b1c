package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// A success implied by its execution row (no attempt_succeeded row) still
// counts in the latency percentiles, beside stored attempt events.
func TestExecutionStatsCountImpliedSuccesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	// Time-ordered ids, like the service's: the stats scan ids from a floor.
	implied, stored := uuid.Must(uuid.NewV7()).String(), uuid.Must(uuid.NewV7()).String()
	exec := func(sql string, args ...any) {
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO tenants (id) VALUES ('s')`)
	exec(`INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, implicit_events, last_latency_ms, last_error)
		VALUES ('s', $1, gen_random_uuid(), now(), 'schedule', 'succeeded', 7, 10, NULL),
		       ('s', $2, gen_random_uuid(), now(), 'schedule', 'failed', 3, NULL, 'HTTP 500')`, implied, stored)
	exec(`INSERT INTO execution_events (tenant_id, execution_id, type, attempt, latency_ms)
		VALUES ('s', $1, 'attempt_failed', 1, 30)`, stored)
	st, err := db.GetExecutionStats(ctx, pool, "s", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Latency.Count)
	require.InDelta(t, 20, *st.Latency.P50, 0.001)
}
