package db_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// ranNode is a node of an EXPLAIN (ANALYZE, FORMAT JSON) plan.
type ranNode struct {
	Type     string    `json:"Node Type"`
	Join     string    `json:"Join Type"`
	Relation string    `json:"Relation Name"`
	Index    string    `json:"Index Name"`
	Loops    float64   `json:"Actual Loops"`
	Plans    []ranNode `json:"Plans"`
}

func ranNodes(t *testing.T, plan string) []ranNode {
	t.Helper()
	var top []struct {
		Plan ranNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(plan), &top))
	var out []ranNode
	var walk func(n ranNode)
	walk = func(n ranNode) {
		out = append(out, n)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	for _, p := range top {
		walk(p.Plan)
	}
	return out
}

// TestOrphanSearchReadsEachTableOnce: the reconciler's search costs what
// the overdue executions cost, whatever the planner believes. The tables
// are analysed empty and then filled, as a burst fills them between two
// autovacuum runs: 10,000 unfinished executions not yet due and 10,000
// overdue ones, nearly all in live deliver_batch jobs. Planned freely on
// those statistics the search walked executions and probed
// unfinished_executions by tenant for each of them (34 s for 10,000 rows
// none of which was due), and matched overdue executions against the live
// jobs with a nested-loop anti-join, every live job for every execution.
// Now each table is read once (primary-key probes aside), and the answer
// is exactly the executions no live job carries.
func TestOrphanSearchReadsEachTableOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	_, err := pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('t'), ('u');
		INSERT INTO endpoints (tenant_id, id, name, url, secret) VALUES ('t', gen_random_uuid(), 'e', 'https://example.com', 'whsec_x');
		INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds)
			SELECT 't', gen_random_uuid(), 't' || g, (SELECT id FROM endpoints LIMIT 1), 'interval', 60
			FROM generate_series(1, 20000) g;
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger)
			SELECT 't', gen_random_uuid(), t.id,
				CASE WHEN row_number() OVER () <= 10000 THEN now() ELSE now() - interval '1 minute' END, 'schedule'
			FROM tasks t;
		CREATE TABLE overdue AS
			SELECT id, row_number() OVER (ORDER BY id) AS n FROM executions WHERE scheduled_for < now() - interval '30 seconds';
		-- Recorded jobs: n = 1's is completed (orphaned), n = 2's is live.
		INSERT INTO river_job (id, args, kind, max_attempts, queue, state, scheduled_at, finalized_at, priority)
			VALUES (900001, '{}', 'deliver', 5, 'deliver', 'completed', now(), now(), 1),
			       (900002, '{}', 'deliver', 5, 'deliver', 'running', now(), NULL, 1);
		UPDATE executions e SET river_job_id = 900000 + o.n FROM overdue o WHERE o.id = e.id AND o.n <= 2;
		-- n = 3 and 4: unrecorded and in no live job (orphaned); n = 5 in
		-- a live deliver job, n = 6 in a finished one (orphaned); the rest
		-- in live batches, but n = 7 in a discarded batch (orphaned).
		INSERT INTO river_job (args, kind, max_attempts, queue, state, scheduled_at, finalized_at, priority)
			SELECT jsonb_build_object('tenant_id', 't', 'execution_id', o.id::text), 'deliver', 5, 'deliver',
				CASE WHEN o.n = 5 THEN 'available' ELSE 'completed' END::river_job_state, now(),
				CASE WHEN o.n = 5 THEN NULL ELSE now() END, 1
			FROM overdue o WHERE o.n IN (5, 6);
		INSERT INTO river_job (args, kind, max_attempts, queue, state, scheduled_at, finalized_at, priority)
			SELECT jsonb_build_object('tenants', jsonb_build_array('t'), 'executions', string_agg('0.' || o.id::text, ' ')),
				'deliver_batch', 5, 'deliver', CASE WHEN b = 0 THEN 'discarded' ELSE 'available' END::river_job_state, now(),
				CASE WHEN b = 0 THEN now() END, 1
			FROM (SELECT id, n, CASE WHEN n = 7 THEN 0 ELSE n / 50 + 1 END AS b FROM overdue WHERE n >= 7) o GROUP BY b;
		-- Not yet due: all in live batches.
		INSERT INTO river_job (args, kind, max_attempts, queue, state, scheduled_at, priority)
			SELECT jsonb_build_object('tenants', jsonb_build_array('t'), 'executions', string_agg('0.' || e.id::text, ' ')),
				'deliver_batch', 5, 'deliver', 'available', now(), 1
			FROM (SELECT id, row_number() OVER () / 50 AS b FROM executions WHERE scheduled_for >= now() - interval '30 seconds') e
			GROUP BY b`)
	require.NoError(t, err)
	dbtest.SyncUnfinished(t, pool)
	rows, err := pool.Query(ctx, `SELECT e.id::text FROM executions e JOIN overdue o ON o.id = e.id WHERE o.n IN (1, 3, 4, 6, 7) ORDER BY e.id`)
	require.NoError(t, err)
	want, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Len(t, want, 5)

	got, err := db.FindOrphanedExecutions(ctx, pool, 30*time.Second, 100, 30)
	require.NoError(t, err)
	a := &analyzer{explainer: &explainer{Pool: pool, t: t}}
	_, err = db.FindOrphanedExecutions(ctx, a, 30*time.Second, 100, 30)
	require.NoError(t, err)
	var ids []string
	for _, o := range got {
		ids = append(ids, o.ID)
	}
	assert.ElementsMatch(t, want, ids, "exactly the overdue executions no live job carries")

	require.Len(t, a.plans, 1)
	for _, n := range ranNodes(t, a.plans[0]) {
		assert.NotEqual(t, "Anti", n.Join, "live jobs are matched by a set operation, not an anti-join: %s", a.plans[0])
		switch n.Index {
		case "executions_pkey", "river_job_pkey", "tasks_pkey", "callback_attempts_pkey":
			continue // a probe by key per row is the cost of that row
		}
		if n.Relation != "" {
			assert.LessOrEqual(t, n.Loops, 1.0, "%s read %v times (%s %s)", n.Relation, n.Loops, n.Type, n.Index)
		}
	}
}
