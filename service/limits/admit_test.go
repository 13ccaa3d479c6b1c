package limits

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// heldExecution inserts a pending execution of tenant whose River job
// sleeps (as a held delivery's does) and its hold on the tenant's gate.
func heldExecution(t *testing.T, pool *pgxpool.Pool, tenant string) (string, int64) {
	t.Helper()
	ctx := t.Context()
	var job int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, scheduled_at, max_attempts, priority)
		VALUES ('deliver', '{}', 'deliver', 'scheduled', now() + interval '1 hour', 25, 1) RETURNING id`).Scan(&job))
	id := uuid.NewString()
	_, err := pool.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, river_job_id)
		VALUES ($1, $2, gen_random_uuid(), now(), 'manual', $3)`, tenant, id, job)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO unfinished_executions SELECT tenant_id, task_id, scheduled_for, id
		FROM executions WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO flow_holds (tenant_id, execution_id, job_id, gates, limit_name, priority, scheduled_for)
		VALUES ($1, $2, $3, ARRAY['tenant'], 'max_inflight_deliveries', 2, now())`, tenant, id, job)
	require.NoError(t, err)
	return id, job
}

func gateInflight(t *testing.T, pool *pgxpool.Pool, tenant string) int {
	t.Helper()
	n, err := db.GateInflight(t.Context(), pool, tenant, TenantGate)
	require.NoError(t, err)
	return n
}

// TestAdmissionRacingAGrant: the dispatcher grants a held delivery a
// permit while that delivery's own job, woken at the same time, asks to
// be admitted. The admission waits for the dispatcher's gate lock, then
// starts under the granted permit: the gate counts the attempt once, and
// is back at zero once the permit is given back.
func TestAdmissionRacingAGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	tenant := "race-" + uuid.NewString()[:8]
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
	require.NoError(t, err)
	gate := Gate{Name: TenantGate, MaxInflight: 2}
	id, job := heldExecution(t, pool, tenant)

	dispatcher, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = dispatcher.Rollback(ctx) }()
	d, err := DispatchTenant(ctx, dispatcher, tenant, gate, 100, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, d.Granted)

	type result struct {
		adm Admission
		err error
	}
	done := make(chan result, 1)
	go func() {
		adm, err := func() (Admission, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return Admission{}, err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			adm, err := Admit(ctx, tx, Request{
				TenantID: tenant, ExecutionID: id, JobID: job,
				ScheduledFor: time.Now(), Gates: []Gate{gate}, PermitTTL: time.Minute,
			})
			if err != nil {
				return adm, err
			}
			return adm, tx.Commit(ctx)
		}()
		done <- result{adm, err}
	}()
	// The admission found no permit yet and waits for the gate's lock.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting bool
		assert.NoError(c, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%flow_gates%' AND pid <> pg_backend_pid())`).Scan(&waiting))
		assert.True(c, waiting, "waiting for the lock")
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, dispatcher.Commit(ctx))
	res := <-done
	require.NoError(t, res.err)
	require.True(t, res.adm.Admitted, "admitted under the granted permit")
	require.Equal(t, 1, gateInflight(t, pool, tenant), "the attempt is counted once")

	released, err := Release(ctx, pool, tenant, id)
	require.NoError(t, err)
	require.True(t, released)
	require.Zero(t, gateInflight(t, pool, tenant), "every permit was given back")
}

// TestDispatchDropsAHoldThatHasAPermit: a hold left behind by an
// execution that holds a permit already is dropped, not granted again.
func TestDispatchDropsAHoldThatHasAPermit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	tenant := "stale-" + uuid.NewString()[:8]
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
	require.NoError(t, err)
	gate := Gate{Name: TenantGate, MaxInflight: 2}
	id, job := heldExecution(t, pool, tenant)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	d, err := DispatchTenant(ctx, tx, tenant, gate, 100, time.Minute)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 1, d.Granted)
	require.Equal(t, 1, gateInflight(t, pool, tenant))

	// The same execution held again while it has its permit.
	_, err = pool.Exec(ctx, `INSERT INTO flow_holds (tenant_id, execution_id, job_id, gates, limit_name, priority, scheduled_for)
		VALUES ($1, $2, $3, ARRAY['tenant'], 'max_inflight_deliveries', 2, now())`, tenant, id, job)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE river_job SET state = 'scheduled' WHERE id = $1`, job)
	require.NoError(t, err)
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	d, err = DispatchTenant(ctx, tx, tenant, gate, 100, time.Minute)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, Dispatched{Dropped: 1}, d)
	require.Equal(t, 1, gateInflight(t, pool, tenant), "still one permit, counted once")
}

// TestAdmissionBehindHoldsRacingItsGrant: as TestAdmissionRacingAGrant,
// with another delivery held behind this one, so that the admission
// takes the way that holds it without the gates' locks. Its hold's insert
// waits for the grant's commit, and it then starts under the permit.
func TestAdmissionBehindHoldsRacingItsGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	tenant := "race2-" + uuid.NewString()[:8]
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
	require.NoError(t, err)
	gate := Gate{Name: TenantGate, MaxInflight: 1}
	id, job := heldExecution(t, pool, tenant)
	other, _ := heldExecution(t, pool, tenant)

	dispatcher, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = dispatcher.Rollback(ctx) }()
	d, err := DispatchTenant(ctx, dispatcher, tenant, gate, 100, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, d.Granted, "the first in order fills the gate")

	type result struct {
		adm Admission
		err error
	}
	done := make(chan result, 1)
	go func() {
		adm, err := func() (Admission, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return Admission{}, err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			adm, err := Admit(ctx, tx, Request{
				TenantID: tenant, ExecutionID: id, TaskID: uuid.NewString(), JobID: job,
				ScheduledFor: time.Now(), Gates: []Gate{gate}, PermitTTL: time.Minute,
			})
			if err != nil {
				return adm, err
			}
			return adm, tx.Commit(ctx)
		}()
		done <- result{adm, err}
	}()
	// The admission saw the other hold and waits on its own hold's row.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting bool
		assert.NoError(c, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%flow_holds%' AND pid <> pg_backend_pid())`).Scan(&waiting))
		assert.True(c, waiting, "waiting for the lock")
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, dispatcher.Commit(ctx))
	res := <-done
	require.NoError(t, res.err)
	require.True(t, res.adm.Admitted, "admitted under the granted permit")
	require.Equal(t, 1, gateInflight(t, pool, tenant), "the attempt is counted once")
	var holds []string
	rows, err := pool.Query(ctx, `SELECT execution_id::text FROM flow_holds WHERE tenant_id = $1`, tenant)
	require.NoError(t, err)
	holds, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{other}, holds, "only the other delivery is still held")
}

// TestAdmissionBehindHoldsTakesNoGateLock: while deliveries are held on
// a gate, a new delivery through it is held without waiting for the
// gate's lock (which the dispatcher needs to grant the held ones), and
// the hold names the limit it waits for.
func TestAdmissionBehindHoldsTakesNoGateLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	tenant := "nolock-" + uuid.NewString()[:8]
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
	require.NoError(t, err)
	gate := Gate{Name: TenantGate, MaxInflight: 1}
	heldExecution(t, pool, tenant)
	_, err = pool.Exec(ctx, `INSERT INTO flow_gates (tenant_id, gate, tokens) VALUES ($1, 'tenant', 1)`, tenant)
	require.NoError(t, err)

	locker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = locker.Rollback(ctx) }()
	_, err = locker.Exec(ctx, `SELECT 1 FROM flow_gates WHERE tenant_id = $1 FOR UPDATE`, tenant)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '2s'`)
	require.NoError(t, err)
	adm, err := Admit(ctx, tx, Request{
		TenantID: tenant, ExecutionID: uuid.NewString(), TaskID: uuid.NewString(), JobID: 1,
		ScheduledFor: time.Now(), Gates: []Gate{gate}, PermitTTL: time.Minute,
	})
	require.NoError(t, err, "held without the gate's lock")
	require.False(t, adm.Admitted)
	require.True(t, adm.NewHold)
	require.Equal(t, "max_inflight_deliveries", adm.Limit)
}

// TestDispatchSeesPastABacklogOnAnotherGate: a tenant's first held
// deliveries, as many as a pass lists, wait on one endpoint's exhausted
// rate; deliveries held behind them on another endpoint whose gate has
// room are granted in the same pass, not after the backlog drains.
func TestDispatchSeesPastABacklogOnAnotherGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	tenant := "hol-" + uuid.NewString()[:8]
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
	require.NoError(t, err)
	slow, fast := uuid.NewString(), uuid.NewString()
	_, err = pool.Exec(ctx, `INSERT INTO endpoints (tenant_id, id, name, url, secret, rate_limit_per_second, max_concurrency)
		VALUES ($1, $2, 'slow', 'https://example.com', 'whsec_x', 1, NULL), ($1, $3, 'fast', 'https://example.com', 'whsec_x', NULL, 5)`,
		tenant, slow, fast)
	require.NoError(t, err)
	// The slow endpoint's bucket is empty: its gate blocks.
	_, err = pool.Exec(ctx, `INSERT INTO flow_gates (tenant_id, gate, tokens, refilled_at) VALUES ($1, $2, 0, now() + interval '1 hour'),
		($1, $3, 0, now())`, tenant, EndpointGate(slow), EndpointGate(fast))
	require.NoError(t, err)
	hold := func(endpoint string) string {
		id, _ := heldExecution(t, pool, tenant)
		_, err := pool.Exec(ctx, `UPDATE flow_holds SET gates = ARRAY[$3], limit_name = 'rate_limit_per_second'
			WHERE tenant_id = $1 AND execution_id = $2`, tenant, id, EndpointGate(endpoint))
		require.NoError(t, err)
		return id
	}
	for range 4 {
		hold(slow)
	}
	behind := []string{hold(fast), hold(fast)}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	d, err := DispatchTenant(ctx, tx, tenant, Gate{}, 3, time.Minute)
	require.NoError(t, err)
	require.Equal(t, 2, d.Granted, "the fast endpoint's deliveries are granted past the slow one's backlog")
	require.NoError(t, tx.Commit(ctx))
	rows, err := pool.Query(ctx, `SELECT execution_id::text FROM flow_permits WHERE tenant_id = $1 ORDER BY execution_id`, tenant)
	require.NoError(t, err)
	permits, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.ElementsMatch(t, behind, permits)
	n, err := db.GateInflight(ctx, pool, tenant, EndpointGate(fast))
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// TestPermitsLastThePermitTTL: the permits the dispatcher grants and
// those Admit takes expire the configured lifetime after they are
// granted or taken (no lifetime of their own in the SQL).
func TestPermitsLastThePermitTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	tenant := "ttl-" + uuid.NewString()[:8]
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
	require.NoError(t, err)
	gate := Gate{Name: TenantGate, MaxInflight: 5}
	granted, _ := heldExecution(t, pool, tenant)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	d, err := DispatchTenant(ctx, tx, tenant, gate, 100, 7*time.Hour)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 1, d.Granted)

	admitted := uuid.NewString()
	adm, err := Admit(ctx, pool, Request{
		TenantID: tenant, ExecutionID: admitted, TaskID: uuid.NewString(), JobID: 1,
		ScheduledFor: time.Now(), Gates: []Gate{gate}, PermitTTL: 3 * time.Hour,
	})
	require.NoError(t, err)
	require.True(t, adm.Admitted)

	lifetime := func(id string) time.Duration {
		var secs float64
		require.NoError(t, pool.QueryRow(ctx, `SELECT extract(epoch FROM expires_at - now()) FROM flow_permits
			WHERE tenant_id = $1 AND execution_id = $2`, tenant, id).Scan(&secs))
		return time.Duration(secs * float64(time.Second)).Round(time.Hour)
	}
	require.Equal(t, 7*time.Hour, lifetime(granted), "a granted permit")
	require.Equal(t, 3*time.Hour, lifetime(admitted), "a permit taken by an admission")
}

// TestSweepReleasesExpiredPermits: a permit whose attempt's outcome was
// never recorded (its process died between the send and the outcome's
// transaction) outlives its lifetime, and the sweep gives its place back;
// a live permit stays.
func TestSweepReleasesExpiredPermits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	tenant := "sweep-" + uuid.NewString()[:8]
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1)`, tenant)
	require.NoError(t, err)
	gate := Gate{Name: TenantGate, MaxInflight: 5}
	crashed, live := uuid.NewString(), uuid.NewString()
	for _, id := range []string{crashed, live} {
		adm, err := Admit(ctx, pool, Request{
			TenantID: tenant, ExecutionID: id, TaskID: uuid.NewString(), JobID: 1,
			ScheduledFor: time.Now(), Gates: []Gate{gate}, PermitTTL: time.Hour,
		})
		require.NoError(t, err)
		require.True(t, adm.Admitted)
	}
	require.Equal(t, 2, gateInflight(t, pool, tenant))
	_, err = pool.Exec(ctx, `UPDATE flow_permits SET expires_at = now() - interval '1 second'
		WHERE tenant_id = $1 AND execution_id = $2`, tenant, crashed)
	require.NoError(t, err)

	l := New(pool, Config{})
	n, err := l.SweepPermits(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1, "the expired permit is swept (other tests' may be too)")
	require.Equal(t, 1, gateInflight(t, pool, tenant), "its place is given back; the live one stays")
	released, err := Release(ctx, pool, tenant, crashed)
	require.NoError(t, err)
	require.False(t, released, "nothing left to release")
}
