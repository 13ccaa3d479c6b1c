package service_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestTriggerDedupRace: two triggers of a sharded task with the same
// dedup_key at once, 200 times. The one whose insert meets the other's
// inserts nothing, then reads the other's execution in a new statement
// (READ COMMITTED: it waited for that insert to commit): both answer with
// the same execution, and the key fired once, every shard of it.
func TestTriggerDedupRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	task := f.fireOnceTask(t)
	_, err := f.pool.Exec(ctx, `UPDATE tasks SET shards = 2 WHERE id = $1`, task)
	require.NoError(t, err)
	ex := service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{})
	for round := range 200 {
		key := fmt.Sprintf("k-%d", round)
		var got [2]service.ExecutionDetail
		var errs [2]error
		var wg sync.WaitGroup
		for i := range got {
			wg.Go(func() { got[i], errs[i] = ex.Trigger(ctx, f.tenant, task, service.TriggerInput{DedupKey: key}) })
		}
		wg.Wait()
		require.NoError(t, errs[0], "round %d", round)
		require.NoError(t, errs[1], "round %d", round)
		require.Equal(t, got[0].ID, got[1].ID, "round %d: the same execution", round)
		var n int
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM executions WHERE task_id = $1 AND dedup_key = $2`,
			task, key).Scan(&n))
		require.Equal(t, 2, n, "round %d: one execution per shard", round)
	}
}
