package db_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// explainer is a db.Querier that, instead of running a query, records
// PostgreSQL's plan for it (the real statement, with its arguments).
type explainer struct {
	*pgxpool.Pool
	t     *testing.T
	plans []string
}

func (e *explainer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var plan []map[string]any
	require.NoError(e.t, e.Pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan))
	b, err := json.Marshal(plan)
	require.NoError(e.t, err)
	e.plans = append(e.plans, string(b))
	return e.Pool.Query(ctx, "SELECT 1 WHERE false")
}

// TestListQueriesWalkAnIndex: the newest-first list queries read one page
// through an index, whatever the tenant's size, instead of sorting every
// row. (ORDER BY id once sorted by the selected id::text, not the indexed
// uuid: 68 ms for 50 of 100,000 executions.)
func TestListQueriesWalkAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pools := dbtest.Pools(t)
	pool := pools.Main
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('big');
		INSERT INTO endpoints (tenant_id, id, name, url, secret)
			SELECT 'big', gen_random_uuid(), 'e' || g, 'https://example.com', 'whsec_x' FROM generate_series(1, 2000) g;
		INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds)
			SELECT 'big', gen_random_uuid(), 't' || g, (SELECT id FROM endpoints LIMIT 1), 'interval', 60
			FROM generate_series(1, 20000) g;
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error)
			SELECT 'big', gen_random_uuid(), gen_random_uuid(), now(), 'manual',
				CASE WHEN g % 100 = 0 THEN 'failed' WHEN g % 10 = 0 THEN 'pending' ELSE 'succeeded' END,
				CASE WHEN g % 100 = 0 THEN 'HTTP 500' END
			FROM generate_series(1, 100000) g;
		UPDATE executions SET state = 'retrying', last_error = 'HTTP 503', next_attempt_at = now() + interval '1 minute'
			WHERE state = 'succeeded' AND id::text LIKE '0%'`)
	require.NoError(t, err)
	dbtest.SyncUnfinished(t, pool)
	_, err = pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	e := &explainer{Pool: pool, t: t}
	_, err = db.ListEndpoints(ctx, e, "big", "", 50)
	require.NoError(t, err)
	_, err = db.ListTasks(ctx, e, "big", db.TaskFilter{Limit: 50})
	require.NoError(t, err)
	_, err = db.ListExecutions(ctx, e, "big", db.ExecutionFilter{Limit: 50})
	require.NoError(t, err)
	_, err = db.ListExecutions(ctx, e, "big", db.ExecutionFilter{State: "failed", Limit: 50})
	require.NoError(t, err)
	_, err = db.ListExecutions(ctx, e, "big", db.ExecutionFilter{State: "retrying", Limit: 50})
	require.NoError(t, err)
	require.Len(t, e.plans, 5)
	for _, plan := range e.plans {
		require.NotContains(t, plan, `"Node Type":"Sort"`, plan)
		require.NotContains(t, plan, `"Node Type":"Seq Scan"`, plan)
		require.True(t, strings.Contains(plan, `"Node Type":"Index Scan"`) || strings.Contains(plan, `"Node Type":"Index Only Scan"`), plan)
	}
	require.Contains(t, e.plans[3], `"Index Name":"executions_last_error_idx"`, "the dead-letter list reads the rows with a last_error")
	require.Contains(t, e.plans[4], `"Index Name":"executions_retrying_idx"`, "the retrying list reads the rows with a next attempt")

	// The unfinished states: the tenant's unfinished executions (10,000
	// here; one tenant owns every row, so a sequential scan of
	// unfinished_executions is the planner's right choice) are sorted by
	// id there, and only as many executions are looked up as the page
	// needs.
	e.plans = nil
	_, err = db.ListExecutions(ctx, e, "big", db.ExecutionFilter{State: "pending", Limit: 50})
	require.NoError(t, err)
	plan := e.plans[0]
	for _, n := range planNodes(t, plan) {
		if n.Relation == "executions" {
			require.Equal(t, "executions_pkey", n.Index, "executions are looked up by key only: %s", plan)
		}
	}
	require.Contains(t, plan, `"Node Type":"Nested Loop"`, plan)
	require.Equal(t, 1, strings.Count(plan, `"Node Type":"Sort"`), plan)
	require.Contains(t, plan, `"Sort Key":["u.id DESC"]`, plan)

	// And it reads what it says: nine pages of 1,000 cover the pending ones
	// exactly, newest first.
	var before string
	seen := 0
	for {
		page, err := db.ListExecutions(ctx, pool, "big", db.ExecutionFilter{State: "pending", Before: before, Limit: 1000})
		require.NoError(t, err)
		for _, x := range page {
			require.Equal(t, "pending", x.State)
			if before != "" {
				require.Less(t, x.ID, before)
			}
			before = x.ID
		}
		seen += len(page)
		if len(page) < 1000 {
			break
		}
	}
	require.Equal(t, 9000, seen)
}

// planNode is a node of an EXPLAIN (FORMAT JSON) plan.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []planNode `json:"Plans"`
}

// planNodes returns every node of a plan, depth first.
func planNodes(t *testing.T, plan string) []planNode {
	t.Helper()
	var top []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(plan), &top))
	var out []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
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

// TestBatchedDeliveryStatementsUsePrimaryKeys: on the delivery pool, which
// keeps generic plans, the batched start and success statements reach
// executions, tasks and endpoints only through their primary keys once the
// tables have statistics — which AnalyzeYoungTables provides while they
// are young. (Planned on tables without statistics, a generic plan picked
// executions_state_idx and tasks_endpoint_idx on a cost tie.)
func TestBatchedDeliveryStatementsUsePrimaryKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pools := dbtest.Pools(t)
	_, err := pools.Main.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('t');
		INSERT INTO endpoints (tenant_id, id, name, url, secret)
			SELECT 't', gen_random_uuid(), 'e' || g, 'https://example.com', 'whsec_x' FROM generate_series(1, 3) g;
		INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds)
			SELECT 't', gen_random_uuid(), 't' || g, (SELECT id FROM endpoints LIMIT 1), 'interval', 60
			FROM generate_series(1, 300) g;
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger)
			SELECT 't', gen_random_uuid(), t.id, now() + g * interval '1 minute', 'schedule'
			FROM tasks t, generate_series(1, 10) g`)
	require.NoError(t, err)
	dbtest.SyncUnfinished(t, pools.Main)
	// The statistics counters reach pg_stat_user_tables within a second.
	var analyzed []string
	require.Eventually(t, func() bool {
		var names []string
		names, err = db.AnalyzeYoungTables(ctx, pools.Main)
		analyzed = append(analyzed, names...)
		return err != nil || len(analyzed) >= 2 // an error ends the wait, for the check below
	}, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"tasks", "executions"}, analyzed, "endpoints changed too little")
	time.Sleep(1500 * time.Millisecond) // let the counters settle
	analyzed, err = db.AnalyzeYoungTables(ctx, pools.Main)
	require.NoError(t, err)
	require.Empty(t, analyzed, "nothing changed since")

	e := &explainer{Pool: pools.Delivery, t: t}
	keys := []db.DeliveryKey{{ExecutionRef: db.ExecutionRef{TenantID: "t", ID: "01900000-0000-7000-8000-000000000001"}, Lease: 1}}
	_, err = db.StartPendingDeliveries(ctx, e, keys, db.Misfire{Threshold: 5 * time.Second, CountMax: 100})
	require.NoError(t, err)
	_, _, err = db.SucceedDeliveries(ctx, e, []db.DeliverySuccess{{DeliveryKey: keys[0], StatusCode: 200}})
	require.NoError(t, err)
	require.Len(t, e.plans, 2)
	// The start's one subplan is the probe of a misfire's later slots
	// (db.SendsLateWithoutDecision), run for a misfire only: an index scan
	// of one task's slots. Everything else reaches rows by primary key.
	probe, rest := subplans(t, e.plans[0])
	require.Len(t, probe, 1, e.plans[0])
	require.Equal(t, "executions_slot_idx", probe[0]["Index Name"], e.plans[0])
	require.Contains(t, probe[0]["Index Cond"], "task_id = e.task_id", e.plans[0])
	e.plans[0] = rest
	for _, plan := range e.plans {
		for _, bad := range []string{
			`"Node Type":"Seq Scan"`, `"Node Type":"Hash Join"`, `"Node Type":"Merge Join"`,
			`"executions_task_idx"`, `"executions_slot_idx"`, `"executions_last_error_idx"`, `"tasks_endpoint_idx"`,
		} {
			require.NotContains(t, plan, bad, plan)
		}
		require.Contains(t, plan, `"Index Name":"executions_pkey"`, plan)
	}
	require.Contains(t, e.plans[0], `"Node Type":"Tid Scan"`, "the start updates the row it locked by its ctid")
	require.Contains(t, e.plans[0], `"Index Name":"tasks_pkey"`)
	require.Contains(t, e.plans[0], `"Index Name":"endpoints_pkey"`)
	require.Contains(t, e.plans[1], `"Index Name":"unfinished_executions_pkey"`, "a success leaves unfinished_executions by its key")
}

// subplans takes the nodes run as a SubPlan (a correlated subquery) out
// of the JSON plan, and returns them and the plan without them.
func subplans(t *testing.T, plan string) ([]map[string]any, string) {
	t.Helper()
	var root []map[string]any
	require.NoError(t, json.Unmarshal([]byte(plan), &root))
	var out []map[string]any
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		children, _ := node["Plans"].([]any)
		kept := children[:0]
		for _, c := range children {
			child, _ := c.(map[string]any)
			if child["Parent Relationship"] == "SubPlan" {
				out = append(out, child)
				continue
			}
			walk(child)
			kept = append(kept, child)
		}
		if children != nil {
			node["Plans"] = kept
		}
	}
	for _, r := range root {
		p, _ := r["Plan"].(map[string]any)
		walk(p)
	}
	b, err := json.Marshal(root)
	require.NoError(t, err)
	return out, string(b)
}
