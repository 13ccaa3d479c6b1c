package db_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// TestWaitQueriesProbeTheWaitingNodes: among 10,000 idle waiting nodes
// and 50,000 ended ones, an event finds the nodes waiting for it with one
// probe of workflow_run_nodes_wait_idx (the awaiting nodes only), and the
// expiry reads the deadlines through workflow_run_nodes_deadline_idx:
// neither scans the nodes, so idle waits cost nothing per event or per
// sweep.
func TestWaitQueriesProbeTheWaitingNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pools(t).Main
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('big');
		INSERT INTO workflows (tenant_id, id, name) VALUES ('big', '01900000-0000-7000-8000-000000000001', 'w');
		INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state)
			SELECT 'big', gen_random_uuid(), '01900000-0000-7000-8000-000000000001', 1, now(), 'manual', 'running'
			FROM generate_series(1, 60000);
		INSERT INTO workflow_run_nodes (tenant_id, run_id, key, state, wait_event, wait_key, wait_since, wait_deadline)
			SELECT 'big', id, 'gate', CASE WHEN row_number() OVER () <= 10000 THEN 'awaiting' ELSE 'succeeded' END,
				'files.' || (row_number() OVER () % 1000), 'k', now() - interval '1 minute', now() + interval '1 hour'
			FROM workflow_runs`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	e := &explainer{Pool: pool, t: t}
	key := "k"
	_, err = db.WaitingRuns(ctx, e, "big", "files.7", &key, time.Now())
	require.NoError(t, err)
	_, err = db.OverdueWaitRuns(ctx, e, 100)
	require.NoError(t, err)
	require.Len(t, e.plans, 2)
	for _, plan := range e.plans {
		require.NotContains(t, plan, `"Node Type":"Seq Scan"`, plan)
	}
	require.Contains(t, e.plans[0], `"Index Name":"workflow_run_nodes_wait_idx"`, e.plans[0])
	require.Contains(t, e.plans[1], `"Index Name":"workflow_run_nodes_deadline_idx"`, e.plans[1])
}

// TestArrivedEventsLookupReadsTheRecentEvents: with 200,000 events of
// the name a node waits for, received over the past days, the lookup a
// wait makes when it starts (ConsumeArrivedEvents) reads the events
// received since the node became ready through posted_events_received_idx
// instead of every event of the name (the nodes' table, one row here, is
// read as the planner likes).
func TestArrivedEventsLookupReadsTheRecentEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pools(t).Main
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('big');
		INSERT INTO posted_events (tenant_id, id, name, key, received_at)
			SELECT 'big', gen_random_uuid(), 'files.ready', 'k' || (g % 500), now() - g * interval '1 second'
			FROM generate_series(1, 200000) g;
		INSERT INTO workflows (tenant_id, id, name) VALUES ('big', '01900000-0000-7000-8000-000000000001', 'w');
		INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state)
			VALUES ('big', '01900000-0000-7000-8000-000000000002', '01900000-0000-7000-8000-000000000001', 1, now(),
				'manual', 'running');
		INSERT INTO workflow_run_nodes (tenant_id, run_id, key, state, wait_event, wait_key, wait_since, wait_deadline)
			VALUES ('big', '01900000-0000-7000-8000-000000000002', 'gate', 'awaiting', 'files.ready', 'k7', now(),
				now() + interval '1 hour')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	e := &explainer{Pool: pool, t: t}
	_, err = db.ConsumeArrivedEvents(ctx, e, "big", "01900000-0000-7000-8000-000000000002", []string{"gate"})
	require.NoError(t, err)
	require.Len(t, e.plans, 1)
	require.NotRegexp(t, `"Node Type":"Seq Scan"[^{}]*"Relation Name":"posted_events"`, e.plans[0])
	require.Contains(t, e.plans[0], `"Index Name":"posted_events_received_idx"`, e.plans[0])
}

// analyzer is a db.Querier that runs a query under EXPLAIN (ANALYZE,
// BUFFERS) and records its plan (the real statement, with its arguments).
type analyzer struct {
	*explainer
}

func (a *analyzer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var plan []map[string]any
	require.NoError(a.t, a.Pool.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&plan))
	b, err := json.Marshal(plan)
	require.NoError(a.t, err)
	a.plans = append(a.plans, string(b))
	return a.Pool.Query(ctx, "SELECT 1 WHERE false")
}

// Exec records the plan of a statement run for its effect, as Query.
func (a *analyzer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	rows, err := a.Query(ctx, sql, args...)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	rows.Close()
	return pgconn.NewCommandTag("SELECT 0"), rows.Err()
}

// visitPlan walks an EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) plan's nodes.
func visitPlan(t *testing.T, plan string, visit func(node map[string]any)) {
	t.Helper()
	var doc []map[string]any
	require.NoError(t, json.Unmarshal([]byte(plan), &doc))
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		visit(n)
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(doc[0]["Plan"].(map[string]any))
}

// TestStalledRunsReadNoWaitingRun: among 10,000 running runs waiting for
// an event (counted: awaiting_nodes) and 5 stalled ones, the backstop's
// statement reads the stalled runs only (workflow_runs_stalled_idx): no
// plan node yields more than 5 rows, and it touches a handful of buffers
// (the 10,000 runs and their nodes fill ~300). The count it relies on
// reads no counted wait either: CountRunWaits walks
// workflow_run_nodes_uncounted_idx, empty once every wait is counted. The
// sweep's search for workflows with a queued run reads no run when none
// is pending (workflow_runs_pending_idx).
func TestStalledRunsReadNoWaitingRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pools(t).Main
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('big');
		INSERT INTO workflows (tenant_id, id, name) VALUES ('big', '01900000-0000-7000-8000-000000000001', 'w');
		INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state, advanced_at, awaiting_nodes)
			SELECT 'big', gen_random_uuid(), '01900000-0000-7000-8000-000000000001', 1, now(), 'manual', 'running',
				now() - interval '1 hour', CASE WHEN g <= 10000 THEN 1 ELSE 0 END
			FROM generate_series(1, 10005) g;
		INSERT INTO workflow_run_nodes (tenant_id, run_id, key, state, wait_event, wait_key, wait_since, wait_deadline, wait_counted)
			SELECT 'big', id, 'gate', 'awaiting', 'files.ready', id::text, now() - interval '1 hour', now() + interval '1 day', true
			FROM workflow_runs WHERE awaiting_nodes = 1;
		INSERT INTO workflow_run_nodes (tenant_id, run_id, key) SELECT 'big', id, 'next' FROM workflow_runs`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	stalled, err := db.StalledRuns(ctx, pool, 2*time.Second, 100)
	require.NoError(t, err)
	require.Len(t, stalled, 5, "the stalled runs are found")
	n, err := db.CountRunWaits(ctx, pool, 1000)
	require.NoError(t, err)
	require.Zero(t, n, "every wait is counted")

	a := &analyzer{&explainer{Pool: pool, t: t}}
	_, err = db.StalledRuns(ctx, a, 2*time.Second, 100)
	require.NoError(t, err)
	_, err = db.CountRunWaits(ctx, a, 1000)
	require.NoError(t, err)
	// The sweep's search for queued runs reads no running run either.
	queued, err := db.WorkflowsWithQueuedRuns(ctx, pool, 100)
	require.NoError(t, err)
	require.Empty(t, queued)
	_, err = db.WorkflowsWithQueuedRuns(ctx, a, 100)
	require.NoError(t, err)
	require.Len(t, a.plans, 3)
	require.Contains(t, a.plans[0], `"Index Name":"workflow_runs_stalled_idx"`, a.plans[0])
	require.Contains(t, a.plans[1], `"Index Name":"workflow_run_nodes_uncounted_idx"`, a.plans[1])
	for i, plan := range a.plans {
		if i < 2 { // the third counts a queued workflow's started runs, none here
			require.NotRegexp(t, `"Node Type":"Seq Scan"[^{}]*"Relation Name":"workflow_run`, plan) // executions is empty here
		}
		visitPlan(t, plan, func(node map[string]any) {
			require.LessOrEqual(t, node["Actual Rows"].(float64), 5.0, "%s: %v", node["Node Type"], plan)
			// Shared Hit Blocks: a node's own and its children's.
			require.LessOrEqual(t, node["Shared Hit Blocks"].(float64)+node["Shared Read Blocks"].(float64), 30.0,
				"statement %d reads a few pages: %v", i, plan)
		})
	}
}
