package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// TestAlertLists: the recorded SLA misses come newest execution first with
// the execution's state now; failed-for-good executions only within the
// window; SLA-missed and blocked runs with their workflow's name and the
// recorded deadline; nothing of another tenant.
func TestAlertLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ('a'), ('b')`)
	require.NoError(t, err)
	now := time.Now()
	v7 := func() string { return uuid.Must(uuid.NewV7()).String() }
	exec := func(tenant, state string, finished *time.Time) string {
		id := v7()
		_, err := pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error, finished_at)
			VALUES ($1, $2, gen_random_uuid(), now() - interval '3 hours', 'manual', $3,
			        CASE WHEN $3 IN ('failed', 'cancelled', 'skipped') THEN 'x' END, $4)`, tenant, id, state, finished)
		require.NoError(t, err)
		if finished == nil {
			_, err = pool.Exec(ctx, `INSERT INTO unfinished_executions SELECT tenant_id, task_id, scheduled_for, id
				FROM executions WHERE tenant_id = $1 AND id = $2`, tenant, id)
			require.NoError(t, err)
		}
		return id
	}
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	recent := exec("a", "failed", at(time.Hour))
	old := exec("a", "failed", at(48*time.Hour))
	running := exec("a", "running", nil)
	exec("a", "cancelled", at(time.Minute))
	other := exec("b", "failed", at(time.Minute))
	for _, m := range []struct{ tenant, id string }{{"a", recent}, {"a", running}, {"b", other}} {
		_, err := pool.Exec(ctx, `INSERT INTO sla_misses (tenant_id, execution_id, due_at) VALUES ($1, $2, now() - interval '1 hour')`,
			m.tenant, m.id)
		require.NoError(t, err)
	}

	misses, err := db.ListSLAMisses(ctx, pool, "a", 10)
	require.NoError(t, err)
	require.Len(t, misses, 2)
	assert.Equal(t, running, misses[0].ExecutionID, "newest execution first")
	assert.Equal(t, "running", misses[0].State)
	assert.Equal(t, recent, misses[1].ExecutionID)
	assert.Equal(t, "failed", misses[1].State)
	assert.Nil(t, misses[0].TaskName, "a task that is gone leaves no name")
	misses, err = db.ListSLAMisses(ctx, pool, "a", 1)
	require.NoError(t, err)
	assert.Len(t, misses, 1, "limit")

	failed, err := db.ListFailedSince(ctx, pool, "a", now.Add(-24*time.Hour), 10)
	require.NoError(t, err)
	require.Len(t, failed, 1, "not the one failed 48h ago, not the cancelled one, not tenant b's")
	assert.Equal(t, recent, failed[0].ID)
	assert.NotEqual(t, old, failed[0].ID)

	// Workflow runs.
	wf := map[string]string{"a": v7(), "b": v7()}
	for tenant, id := range wf {
		_, err := pool.Exec(ctx, `INSERT INTO workflows (tenant_id, id, name) VALUES ($1, $2, 'etl-' || $1)`, tenant, id)
		require.NoError(t, err)
	}
	run := func(tenant, state string, missed bool) string {
		id := v7()
		ok, err := db.InsertWorkflowRun(ctx, pool, db.WorkflowRun{
			TenantID: tenant, ID: id, WorkflowID: wf[tenant], Version: 1,
			ScheduledFor: now.Add(-2 * time.Hour), Trigger: "manual",
		})
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, db.SetWorkflowRunState(ctx, pool, tenant, id, state))
		if missed {
			_, err := pool.Exec(ctx, `UPDATE workflow_runs SET sla_missed_at = now() WHERE tenant_id = $1 AND id = $2`, tenant, id)
			require.NoError(t, err)
			require.NoError(t, db.InsertRunEvent(ctx, pool, tenant, id, db.RunEvent{
				Type: "sla_missed",
				Data: map[string]any{"due_at": "2026-01-02T03:04:05Z"},
			}))
		}
		return id
	}
	blockedMissed := run("a", "blocked", true)
	succeededMissed := run("a", "succeeded", true)
	blocked := run("a", "blocked", false)
	run("a", "running", false)
	run("b", "blocked", true)

	runs, err := db.ListSLAMissedRuns(ctx, pool, "a", 10)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, succeededMissed, runs[0].ID)
	assert.Equal(t, blockedMissed, runs[1].ID)
	assert.Equal(t, "etl-a", runs[0].WorkflowName)
	require.NotNil(t, runs[0].SLADueAt)
	assert.True(t, runs[0].SLADueAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
	assert.NotNil(t, runs[0].SLAMissedAt)

	runs, err = db.ListBlockedRuns(ctx, pool, "a", 10)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, blocked, runs[0].ID)
	assert.Equal(t, blockedMissed, runs[1].ID)
	assert.Nil(t, runs[0].SLADueAt)
	assert.Equal(t, "blocked", runs[0].State)
}

// TestAlertListsWalkAnIndex: the alert lists read one page through an
// index, newest first, instead of sorting a tenant's rows.
func TestAlertListsWalkAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('big');
		INSERT INTO endpoints (tenant_id, id, name, url, secret) VALUES ('big', gen_random_uuid(), 'e', 'https://example.com', 'whsec_x');
		INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds)
			SELECT 'big', gen_random_uuid(), 't' || g, (SELECT id FROM endpoints LIMIT 1), 'interval', 60
			FROM generate_series(1, 5000) g;
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error, finished_at)
			SELECT 'big', gen_random_uuid(), t.id, now(), 'manual',
				CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'succeeded' END,
				CASE WHEN g % 100 = 0 THEN 'HTTP 500' END, now()
			FROM generate_series(1, 100000) g
			JOIN (SELECT id, row_number() OVER () - 1 AS n FROM tasks) t ON t.n = g % 5000;
		INSERT INTO sla_misses (tenant_id, execution_id, due_at)
			SELECT tenant_id, id, now() FROM executions WHERE id::text LIKE '0%';
		INSERT INTO workflows (tenant_id, id, name) SELECT 'big', gen_random_uuid(), 'etl' || g FROM generate_series(1, 500) g;
		INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state, sla_missed_at)
			SELECT 'big', gen_random_uuid(), w.id, 1, now(), 'manual',
				CASE WHEN g % 100 = 0 THEN 'blocked' ELSE 'succeeded' END,
				CASE WHEN g % 50 = 0 THEN now() END
			FROM generate_series(1, 50000) g
			JOIN (SELECT id, row_number() OVER () - 1 AS n FROM workflows) w ON w.n = g % 500;
		INSERT INTO workflow_run_events (tenant_id, run_id, type, data)
			SELECT tenant_id, id, 'sla_missed', jsonb_build_object('due_at', now()) FROM workflow_runs WHERE sla_missed_at IS NOT NULL`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	e := &explainer{Pool: pool, t: t}
	_, err = db.ListSLAMisses(ctx, e, "big", 50)
	require.NoError(t, err)
	_, err = db.ListFailedSince(ctx, e, "big", time.Now().Add(-24*time.Hour), 50)
	require.NoError(t, err)
	_, err = db.ListSLAMissedRuns(ctx, e, "big", 50)
	require.NoError(t, err)
	_, err = db.ListBlockedRuns(ctx, e, "big", 50)
	require.NoError(t, err)
	require.Len(t, e.plans, 4)
	for _, plan := range e.plans {
		require.NotContains(t, plan, `"Node Type":"Sort"`, plan)
		require.NotContains(t, plan, `"Node Type":"Seq Scan"`, plan)
	}
	require.Contains(t, e.plans[0], `"Index Name":"sla_misses_pkey"`, e.plans[0])
	require.Contains(t, e.plans[1], `"Index Name":"executions_last_error_idx"`, e.plans[1])
	require.Contains(t, e.plans[2], `"Index Name":"workflow_runs_pkey"`, e.plans[2])
	require.Contains(t, e.plans[3], `"Index Name":"workflow_runs_pkey"`, e.plans[3])
}
