package db_test

import (
	"context"
	"testing"
	"time"

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
