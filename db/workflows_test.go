package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// TestStalledRunsReadNoAdvancingRun: among 10,000 running runs that
// started an hour ago but advanced since (advanced_at, set ahead of the
// clock here so that a slow machine does not age them) and 5 that have
// not advanced for an hour, the backstop's statement reads the 5 only
// (workflow_runs_stalled_idx on advanced_at): no plan node yields more
// than 5 rows, and it touches a handful of buffers (the 10,000 runs fill
// ~200). Before advanced_at it read every running run older than its age
// and probed its executions, every second on every replica.
func TestStalledRunsReadNoAdvancingRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pools(t).Main
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('busy');
		INSERT INTO workflows (tenant_id, id, name) VALUES ('busy', '01900000-0000-7000-8000-000000000002', 'w');
		INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state, created_at,
				updated_at, advanced_at)
			SELECT 'busy', gen_random_uuid(), '01900000-0000-7000-8000-000000000002', 1, now(), 'manual', 'running',
				now() - interval '1 hour', now() - interval '1 hour',
				CASE WHEN g <= 10000 THEN now() + interval '1 hour' ELSE now() - interval '1 hour' END
			FROM generate_series(1, 10005) g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	stalled, err := db.StalledRuns(ctx, pool, 2*time.Second, 100)
	require.NoError(t, err)
	require.Len(t, stalled, 5, "the runs not advanced for the age are found, and only they")

	a := &analyzer{&explainer{Pool: pool, t: t}}
	_, err = db.StalledRuns(ctx, a, 2*time.Second, 100)
	require.NoError(t, err)
	require.Len(t, a.plans, 1)
	require.Contains(t, a.plans[0], `"Index Name":"workflow_runs_stalled_idx"`, a.plans[0])
	visitPlan(t, a.plans[0], func(node map[string]any) {
		require.LessOrEqual(t, node["Actual Rows"].(float64), 5.0, "%s: %v", node["Node Type"], a.plans[0])
		require.LessOrEqual(t, node["Shared Hit Blocks"].(float64)+node["Shared Read Blocks"].(float64), 30.0,
			"the statement reads a few pages: %v", a.plans[0])
	})
}

// TestMarkRunsAdvanced: an advance marks its running runs advanced, but
// writes a run at most once per db.RunAdvancedEvery, and never a run that
// is not running (its state's write sets advanced_at).
func TestMarkRunsAdvanced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pools(t).Main
	const (
		old    = "01900000-0000-7000-8000-000000000011" // advanced a minute ago: marked
		recent = "01900000-0000-7000-8000-000000000012" // advanced within the second: not written
		ended  = "01900000-0000-7000-8000-000000000013" // succeeded: not written
	)
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('mark');
		INSERT INTO workflows (tenant_id, id, name) VALUES ('mark', '01900000-0000-7000-8000-000000000010', 'w')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state, advanced_at)
		VALUES ('mark', $1, '01900000-0000-7000-8000-000000000010', 1, now(), 'manual', 'running', now() - interval '1 minute'),
			('mark', $2, '01900000-0000-7000-8000-000000000010', 1, now(), 'manual', 'running', now() + interval '1 hour'),
			('mark', $3, '01900000-0000-7000-8000-000000000010', 1, now(), 'manual', 'succeeded', now() - interval '1 minute')`,
		old, recent, ended)
	require.NoError(t, err)
	xmin := func(id string) (x string, fresh bool) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT xmin::text, advanced_at > now() - interval '5 seconds'
			FROM workflow_runs WHERE tenant_id = 'mark' AND id = $1`, id).Scan(&x, &fresh))
		return x, fresh
	}
	before := map[string]string{}
	for _, id := range []string{old, recent, ended} {
		before[id], _ = xmin(id)
	}
	require.NoError(t, db.MarkRunsAdvanced(ctx, pool, "mark", []string{old, recent, ended}))
	x, fresh := xmin(old)
	require.True(t, fresh, "the run not marked for a minute is marked")
	require.NotEqual(t, before[old], x)
	x, _ = xmin(recent)
	require.Equal(t, before[recent], x, "a run marked within the last second is not written")
	x, fresh = xmin(ended)
	require.Equal(t, before[ended], x, "a run that is not running is not written")
	require.False(t, fresh)
}

// pipelines counts the round trips of a Querier: each statement sent
// alone, each batch sent at once.
type pipelines struct {
	*pgxpool.Pool
	queries, batches int
}

func (p *pipelines) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p.queries++
	return p.Pool.Query(ctx, sql, args...)
}

func (p *pipelines) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	p.batches++
	return p.Pool.SendBatch(ctx, b)
}

func ptr[T any](v T) *T { return &v }

// oneByOne is a Querier that does not pipeline.
type oneByOne struct{ db.Querier }

// TestReadRunViewIsOneRoundTrip: a run's view (the run, its nodes, its
// timeline, outputs, its workflow's SLA and the clock) is read in one
// round trip, and reads the same one statement after another on a
// Querier that does not pipeline.
func TestReadRunViewIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pools(t).Main
	const run = "01900000-0000-7000-8000-000000000021"
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('view');
		INSERT INTO workflows (tenant_id, id, name, sla_finish_within_ms)
			VALUES ('view', '01900000-0000-7000-8000-000000000020', 'w', 60000)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state)
		VALUES ('view', $1, '01900000-0000-7000-8000-000000000020', 1, now(), 'manual', 'running')`, run)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO workflow_run_nodes (tenant_id, run_id, key, state, output)
		VALUES ('view', $1, 'a', 'waiting', NULL), ('view', $1, 'b', 'succeeded', '{"ok": true}')`, run)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO workflow_run_events (tenant_id, run_id, type, message)
		VALUES ('view', $1, 'sla_missed', 'late')`, run)
	require.NoError(t, err)

	p := &pipelines{Pool: pool}
	v, err := db.ReadRunView(ctx, p, "view", run)
	require.NoError(t, err)
	require.Equal(t, 1, p.batches)
	require.Zero(t, p.queries, "one round trip")
	require.Equal(t, run, v.Run.ID)
	require.Len(t, v.Nodes, 2)
	require.Len(t, v.Events, 1)
	require.Equal(t, []db.NodeOutput{{Node: "b", Output: ptr(`{"ok": true}`)}}, v.Outputs)
	require.Equal(t, ptr(int64(60000)), v.SLAFinishWithinMS)
	require.WithinDuration(t, time.Now(), v.Now, time.Minute)

	alone, err := db.ReadRunView(ctx, oneByOne{pool}, "view", run)
	require.NoError(t, err)
	v.Now, alone.Now = time.Time{}, time.Time{}
	require.Equal(t, v, alone)

	_, err = db.ReadRunView(ctx, p, "view", "01900000-0000-7000-8000-000000000029")
	require.ErrorIs(t, err, db.ErrNotFound)
}
