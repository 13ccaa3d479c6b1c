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

// TestExecutionSeriesCounts: known executions land in their steps with
// their outcome and lateness; those outside the window and another
// tenant's are not counted.
func TestExecutionSeriesCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	since := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	const step = 10 * time.Minute
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ('a'), ('b')`)
	require.NoError(t, err)
	// add inserts an execution of tenant created at since + at, started
	// lateMS after its slot (-1: never started).
	add := func(tenant string, at time.Duration, trigger, state string, late bool, lateMS int) {
		t.Helper()
		created := since.Add(at)
		var started *time.Time
		if lateMS >= 0 {
			s := created.Add(time.Duration(lateMS) * time.Millisecond)
			started = &s
		}
		_, err := pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, late, created_at, started_at, first_started_at, last_error)
			VALUES ($1, $2, gen_random_uuid(), $3, $4, $5, $6, $3, $7, $7, CASE WHEN $5 = 'failed' THEN 'HTTP 500' END)`,
			tenant, uuid.Must(uuid.NewV7()).String(), created, trigger, state, late, started)
		require.NoError(t, err)
	}
	// Step 0: two on-time fires (10 and 30 ms late), one failed.
	add("a", time.Minute, "schedule", "succeeded", false, 10)
	add("a", 9*time.Minute, "schedule", "failed", false, 30)
	// Step 2: a catch-up (not in the lateness), a manual run, a pending fire.
	add("a", 25*time.Minute, "schedule", "succeeded", true, 60_000)
	add("a", 26*time.Minute, "manual", "succeeded", false, 5)
	add("a", 29*time.Minute, "schedule", "pending", false, -1)
	// Step 5, its last second.
	add("a", time.Hour-time.Second, "schedule", "succeeded", false, 100)
	// Outside the window: before it and at its end.
	add("a", -time.Second, "schedule", "succeeded", false, 1)
	add("a", time.Hour, "schedule", "succeeded", false, 1)
	// Another tenant, in step 0.
	add("b", 2*time.Minute, "schedule", "failed", false, 1)

	dbtest.SyncUnfinished(t, pool)

	got, err := db.ExecutionSeries(ctx, pool, "a", since, step, 6)
	require.NoError(t, err)
	require.Len(t, got, 3, "steps without executions are absent")

	assert.Equal(t, 0, got[0].Index)
	assert.EqualValues(t, 2, got[0].Executions)
	assert.EqualValues(t, 1, got[0].Succeeded)
	assert.EqualValues(t, 1, got[0].Failed)
	assert.EqualValues(t, 0, got[0].Late)
	assert.EqualValues(t, 2, got[0].Lateness.Count)
	require.NotNil(t, got[0].Lateness.P50)
	assert.InDelta(t, 20, *got[0].Lateness.P50, 0.001)
	assert.InDelta(t, 29.8, *got[0].Lateness.P99, 0.001)

	assert.Equal(t, 2, got[1].Index)
	assert.EqualValues(t, 3, got[1].Executions)
	assert.EqualValues(t, 2, got[1].Succeeded)
	assert.EqualValues(t, 0, got[1].Failed)
	assert.EqualValues(t, 1, got[1].Late)
	assert.EqualValues(t, 0, got[1].Lateness.Count, "catch-ups, manual runs and unstarted fires have no lateness")
	assert.Nil(t, got[1].Lateness.P50)

	assert.Equal(t, 5, got[2].Index)
	assert.EqualValues(t, 1, got[2].Executions)
	assert.InDelta(t, 100, *got[2].Lateness.P50, 0.001)

	other, err := db.ExecutionSeries(ctx, pool, "b", since, step, 6)
	require.NoError(t, err)
	require.Len(t, other, 1)
	assert.EqualValues(t, 1, other[0].Failed)
}

// TestExecutionSeriesWalksAnIndex: the series reads the window's rows of
// the tenant through the primary key, ranged by the id floor, whatever the
// size of the tenant's history or of other tenants'.
func TestExecutionSeriesWalksAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	// 30 days of executions (one every 26 s) for two tenants, with
	// UUIDv7 ids minted at their created_at, as the service's are.
	_, err := pool.Exec(ctx, `
		INSERT INTO tenants (id) VALUES ('big'), ('other');
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, late, created_at, started_at, first_started_at, last_error)
			SELECT tn, (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(r, 16, 3) || substr(r, 19))::uuid,
				gen_random_uuid(), at, 'schedule', CASE WHEN g % 50 = 0 THEN 'failed' ELSE 'succeeded' END, false, at,
				at + interval '15 milliseconds', at + interval '15 milliseconds', CASE WHEN g % 50 = 0 THEN 'HTTP 500' END
			FROM generate_series(1, 100000) g, (VALUES ('big'), ('other')) v(tn),
				LATERAL (SELECT now() - g * interval '26 seconds' AS at, gen_random_uuid()::text AS r) x,
				LATERAL (SELECT lpad(to_hex((extract(epoch FROM x.at) * 1000)::bigint), 12, '0') AS h) y`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	since := time.Now().UTC().Truncate(15 * time.Minute).Add(-24*time.Hour + 15*time.Minute)
	e := &explainer{Pool: pool, t: t}
	_, err = db.ExecutionSeries(ctx, e, "big", since, time.Minute, 1440)
	require.NoError(t, err)
	require.Len(t, e.plans, 1)
	plan := e.plans[0]
	require.NotContains(t, plan, `"Node Type":"Seq Scan"`, plan)
	// An index scan or a bitmap of the primary key's range: either reads
	// only the window's rows of the tenant.
	var indexes []string
	for _, n := range planNodes(t, plan) {
		if n.Index != "" {
			indexes = append(indexes, n.Index)
		}
	}
	require.Equal(t, []string{"executions_pkey"}, indexes, plan)
	require.Contains(t, plan, `"Index Cond":"((tenant_id = 'big'::text) AND (id \u003e= `, "ranged by the id floor: %s", plan)

	// And it counts the day: 24 h at one execution every 26 s.
	got, err := db.ExecutionSeries(ctx, pool, "big", since, time.Minute, 1440)
	require.NoError(t, err)
	var n int64
	for _, b := range got {
		n += b.Executions
	}
	assert.InDelta(t, 24*3600/26, n, 40)
}
