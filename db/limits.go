package db

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// TenantLimits is a tenant's row of limits; nil is the server's default.
type TenantLimits struct {
	TenantID             string
	MaxTasks             *int32
	MaxWorkflows         *int32
	MaxInflight          *int32
	MaxPerSecond         *float64
	APIRequestsPerSecond *float64
	LimitsUpdatedAt      *time.Time
}

func (l *TenantLimits) fields() []any {
	return []any{
		&l.TenantID, &l.MaxTasks, &l.MaxWorkflows, &l.MaxInflight, &l.MaxPerSecond, &l.APIRequestsPerSecond,
		&l.LimitsUpdatedAt,
	}
}

const tenantLimitColumns = `id, max_tasks, max_workflows, max_inflight, max_per_second, api_requests_per_second, limits_updated_at`

// GetTenantLimits reads tenant's limits; lock takes the row's lock (for a
// change, or for a count quota checked in the caller's transaction).
func GetTenantLimits(ctx context.Context, q Querier, tenant string, lock bool) (TenantLimits, error) {
	sql := `SELECT ` + tenantLimitColumns + ` FROM tenants WHERE id = $1`
	if lock {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, tenant)
	return collectOneRow[TenantLimits](rows, err)
}

// SetTenantLimits stores l as its tenant's limits.
func SetTenantLimits(ctx context.Context, q Querier, l TenantLimits) error {
	tag, err := q.Exec(ctx, `UPDATE tenants SET max_tasks = $2, max_workflows = $3, max_inflight = $4, max_per_second = $5,
			api_requests_per_second = $6, limits_updated_at = now()
		WHERE id = $1`, l.TenantID, l.MaxTasks, l.MaxWorkflows, l.MaxInflight, l.MaxPerSecond, l.APIRequestsPerSecond)
	if err != nil {
		return wrap("set tenant limits", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// ListTenantLimits returns the limits of every tenant that ever had one
// set (the rest follow the server's defaults): each replica's cache.
func ListTenantLimits(ctx context.Context, q Querier) ([]TenantLimits, error) {
	rows, err := q.Query(ctx, `SELECT `+tenantLimitColumns+` FROM tenants WHERE limits_updated_at IS NOT NULL`)
	if err != nil {
		return nil, wrap("list tenant limits", err)
	}
	return collectRows[TenantLimits](rows, 0)
}

// TenantUsage is what a tenant's count quotas and delivery limits count
// now.
type TenantUsage struct {
	Tasks     int
	Workflows int
	Inflight  int
}

// GetTenantUsage counts tenant's tasks (every task that is not deleted;
// not a workflow's hidden node tasks),
// its workflows and its deliveries in flight (running executions).
func GetTenantUsage(ctx context.Context, q Querier, tenant string) (TenantUsage, error) {
	var u TenantUsage
	err := q.QueryRow(ctx, `SELECT (SELECT count(*) FROM tasks WHERE tenant_id = $1 AND workflow_id IS NULL)::int,
			(SELECT count(*) FROM workflows WHERE tenant_id = $1)::int,
			(SELECT count(*) FROM unfinished_executions u JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
			 WHERE u.tenant_id = $1 AND e.state = `+execRunning+`)::int`, tenant).Scan(&u.Tasks, &u.Workflows, &u.Inflight)
	if err != nil {
		return TenantUsage{}, wrap("tenant usage", err)
	}
	return u, nil
}

// CountTasks counts tenant's tasks (its max_tasks quota): those of the
// tasks API, not a workflow's hidden node tasks (max_workflows counts
// those).
func CountTasks(ctx context.Context, q Querier, tenant string) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE tenant_id = $1 AND workflow_id IS NULL`, tenant).Scan(&n); err != nil {
		return 0, wrap("count tasks", err)
	}
	return n, nil
}

// CountWorkflows counts tenant's workflows (its max_workflows quota).
func CountWorkflows(ctx context.Context, q Querier, tenant string) (int, error) {
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM workflows WHERE tenant_id = $1`, tenant).Scan(&n); err != nil {
		return 0, wrap("count workflows", err)
	}
	return n, nil
}

// The statements of the delivery limits (service/limits decides; these
// read and write its state and decide nothing): gates (flow_gates), the
// permits granted under them (flow_permits), and the deliveries held back
// (flow_holds).

// GateCount is what a gate counts: the permits outstanding under it and
// the tokens in its bucket.
type GateCount struct {
	Name     string
	Inflight int
	Tokens   float64
}

// GateRow is a gate's row: its count as of RefilledAt.
type GateRow struct {
	GateCount
	RefilledAt time.Time
}

// LockGates locks tenant's gates named in names, creating those that do
// not exist yet (with one token), in the order of their names, and returns
// their rows and the transaction's now(). wait > 0 bounds the wait for a
// gate another transaction holds: busy reports that it ran out, and
// leaves the transaction aborted; the bound stays for the rest of the
// transaction (lock_timeout). wait 0 waits as long as it takes.
func LockGates(ctx context.Context, q Querier, tenant string, names []string, wait time.Duration) (
	gates []GateRow, now time.Time, busy bool, err error,
) {
	if wait > 0 {
		if _, err := q.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, strconv.FormatInt(wait.Milliseconds(), 10)); err != nil {
			return nil, time.Time{}, false, wrap("lock gates", err)
		}
	}
	if _, err := q.Exec(ctx, `INSERT INTO flow_gates (tenant_id, gate, tokens)
			SELECT $1, g, 1 FROM unnest($2::text[]) g ORDER BY g
			ON CONFLICT (tenant_id, gate) DO NOTHING`, tenant, names); err != nil {
		return nil, time.Time{}, lockBusy(err), wrap("create gates", err)
	}
	rows, err := q.Query(ctx, `SELECT gate, inflight, tokens, refilled_at, now() FROM flow_gates
		WHERE tenant_id = $1 AND gate = ANY ($2::text[])
		ORDER BY gate
		FOR UPDATE`, tenant, names)
	if err != nil {
		return nil, time.Time{}, lockBusy(err), wrap("lock gates", err)
	}
	var g GateRow
	_, err = pgx.ForEachRow(rows, []any{&g.Name, &g.Inflight, &g.Tokens, &g.RefilledAt, &now}, func() error {
		gates = append(gates, g)
		return nil
	})
	if err != nil {
		return nil, time.Time{}, lockBusy(err), wrap("lock gates", err)
	}
	return gates, now, false, nil
}

// lockBusy reports whether err is a wait for a lock cut short.
func lockBusy(err error) bool {
	err = translate(err)
	return errors.Is(err, ErrLockTimeout) || errors.Is(err, ErrQueryCanceled)
}

// SaveGates writes tenant's gates' counts, refilled at now().
func SaveGates(ctx context.Context, q Querier, tenant string, gates []GateCount) error {
	names := make([]string, len(gates))
	inflight := make([]int32, len(gates))
	tokens := make([]float64, len(gates))
	for i, g := range gates {
		names[i], inflight[i], tokens[i] = g.Name, int32(min(g.Inflight, math.MaxInt32)), g.Tokens // capped
	}
	_, err := q.Exec(ctx, `UPDATE flow_gates f SET inflight = i.inflight, tokens = i.tokens, refilled_at = now()
		FROM unnest($2::text[], $3::int[], $4::float8[]) AS i(gate, inflight, tokens)
		WHERE f.tenant_id = $1 AND f.gate = i.gate`, tenant, names, inflight, tokens)
	return wrap("save gates", err)
}

// UsePermit marks the permit the dispatcher granted an execution as in
// use, expiring ttl from now, and reports whether there was one.
func UsePermit(ctx context.Context, q Querier, tenant, executionID string, ttl time.Duration) (bool, error) {
	var granted bool
	err := q.QueryRow(ctx, `UPDATE flow_permits SET started = true, expires_at = now() + make_interval(secs => $3)
		WHERE tenant_id = $1 AND execution_id = $2 RETURNING true`, tenant, executionID, ttl.Seconds()).Scan(&granted)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return granted, wrap("use permit", err)
}

// TakePermit records an execution's permit through gates, in use,
// expiring ttl from now.
func TakePermit(ctx context.Context, q Querier, tenant, executionID string, gates []string, ttl time.Duration) error {
	_, err := q.Exec(ctx, `INSERT INTO flow_permits (tenant_id, execution_id, gates, started, expires_at)
		VALUES ($1, $2, $3, true, now() + make_interval(secs => $4))
		ON CONFLICT (tenant_id, execution_id) DO UPDATE SET started = true, expires_at = excluded.expires_at`,
		tenant, executionID, gates, ttl.Seconds())
	return wrap("take permit", err)
}

// ReleasePermit gives back the permit of an execution's attempt (none:
// nothing happens) and reports whether there was one.
func ReleasePermit(ctx context.Context, q Querier, tenant, executionID string) (bool, error) {
	tag, err := q.Exec(ctx, `WITH p AS (
			DELETE FROM flow_permits WHERE tenant_id = $1 AND execution_id = $2 RETURNING gates
		)
		UPDATE flow_gates f SET inflight = greatest(f.inflight - 1, 0)
		FROM p WHERE f.tenant_id = $1 AND f.gate = ANY (p.gates)`, tenant, executionID)
	if err != nil {
		return false, wrap("release permit", err)
	}
	return tag.RowsAffected() > 0, nil
}

// SweepPermits releases the permits that outlived their expiry (the
// attempt's process died, or a granted delivery never started) and
// returns how many.
func SweepPermits(ctx context.Context, q Querier) (int, error) {
	var n int
	err := q.QueryRow(ctx, `WITH p AS (
			DELETE FROM flow_permits WHERE expires_at < now() RETURNING tenant_id, gates
		), g AS (
			SELECT tenant_id, gate, count(*)::int AS n FROM p, unnest(p.gates) gate GROUP BY tenant_id, gate
		), upd AS (
			UPDATE flow_gates f SET inflight = greatest(f.inflight - g.n, 0)
			FROM g WHERE f.tenant_id = g.tenant_id AND f.gate = g.gate
		)
		SELECT count(*)::int FROM p`).Scan(&n)
	if err != nil {
		return 0, wrap("sweep permits", err)
	}
	return n, nil
}

// GrantPermits turns the holds of executionIDs that are still there into
// permits expiring ttl from now (not yet in use), and returns the
// executions granted.
func GrantPermits(ctx context.Context, q Querier, tenant string, executionIDs []string, ttl time.Duration) ([]string, error) {
	rows, err := q.Query(ctx, `WITH h AS (
			DELETE FROM flow_holds WHERE tenant_id = $1 AND execution_id = ANY ($2::uuid[]) RETURNING execution_id, gates
		)
		INSERT INTO flow_permits (tenant_id, execution_id, gates, expires_at)
		SELECT $1, execution_id, gates, now() + make_interval(secs => $3) FROM h
		ON CONFLICT (tenant_id, execution_id) DO NOTHING
		RETURNING execution_id::text`, tenant, executionIDs, ttl.Seconds())
	if err != nil {
		return nil, wrap("grant permits", err)
	}
	granted, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return granted, wrap("grant permits", err)
}

// GateInflight returns the permits a gate counts now.
func GateInflight(ctx context.Context, q Querier, tenant, gate string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT inflight FROM flow_gates WHERE tenant_id = $1 AND gate = $2), 0)`,
		tenant, gate).Scan(&n)
	return n, wrap("gate inflight", err)
}

// Hold is a held delivery: an execution waiting for its gates, and the
// River job that sleeps meanwhile.
type Hold struct {
	ExecutionID string
	Gates       []string
	JobID       int64
	// Limit names the limit it waits for.
	Limit string
	// Its place in the order: priority, slot, arrival.
	Priority     int
	ScheduledFor time.Time
	Seq          int64
}

// HoldDelivery holds an execution back by h.Limit (or keeps it held, with
// h.JobID as its job), in order with the other held deliveries of its
// tenant: its task's priority (2 without a task), its slot, its arrival.
// inserted reports a new hold.
func HoldDelivery(ctx context.Context, q Querier, tenant, taskID string, h Hold) (inserted bool, err error) {
	err = q.QueryRow(ctx, `INSERT INTO flow_holds (tenant_id, execution_id, job_id, gates, limit_name, priority, scheduled_for)
		VALUES ($1, $2, $3, $4, $5, coalesce((SELECT priority FROM tasks WHERE tenant_id = $1 AND id = $6), 2), $7)
		ON CONFLICT (tenant_id, execution_id) DO UPDATE SET job_id = excluded.job_id
		RETURNING xmax = 0`, tenant, h.ExecutionID, h.JobID, h.Gates, h.Limit, taskID, h.ScheduledFor).Scan(&inserted)
	return inserted, wrap("hold delivery", err)
}

// FirstHoldOn returns a delivery of tenant held on any of gates, other
// than executionID's (found false: none).
func FirstHoldOn(ctx context.Context, q Querier, tenant string, gates []string, executionID string) (h Hold, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT execution_id::text, gates, limit_name FROM flow_holds
			WHERE tenant_id = $1 AND gates && $2::text[] AND execution_id <> $3 LIMIT 1`,
		tenant, gates, executionID).Scan(&h.ExecutionID, &h.Gates, &h.Limit)
	if errors.Is(err, pgx.ErrNoRows) {
		return Hold{}, false, nil
	}
	if err != nil {
		return Hold{}, false, wrap("look for held deliveries", err)
	}
	return h, true, nil
}

// DeleteHolds ends the holds of tenant's executionIDs (those there are).
func DeleteHolds(ctx context.Context, q Querier, tenant string, executionIDs ...string) error {
	if len(executionIDs) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `DELETE FROM flow_holds WHERE tenant_id = $1 AND execution_id = ANY ($2::uuid[])`, tenant, executionIDs)
	return wrap("end holds", err)
}

// TenantsWithHolds lists the tenants that have held deliveries.
func TenantsWithHolds(ctx context.Context, q Querier) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT tenant_id FROM flow_holds`)
	if err != nil {
		return nil, wrap("tenants with holds", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap("tenants with holds", err)
}

// dispatchLockClass is the first key of the advisory lock that lets one
// replica at a time dispatch a tenant (the second is the tenant's hash).
const dispatchLockClass int32 = 0x61786470 // "axdp"

// TryDispatchLock takes the transaction-level lock of dispatching
// tenant's held deliveries, without waiting, and reports whether it got
// it.
func TryDispatchLock(ctx context.Context, q Querier, tenant string) (bool, error) {
	var mine bool
	err := q.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, dispatchLockClass, tenant).Scan(&mine)
	return mine, wrap("take the dispatch lock", err)
}

// ListHolds lists tenant's first n held deliveries, in order (priority,
// slot, arrival), from the order index alone.
func ListHolds(ctx context.Context, q Querier, tenant string, n int) ([]Hold, error) {
	rows, err := q.Query(ctx, `SELECT execution_id::text, gates, job_id, limit_name, priority, scheduled_for, seq FROM flow_holds
		WHERE tenant_id = $1
		ORDER BY priority, scheduled_for, seq
		LIMIT $2`, tenant, n)
	return scanHolds(rows, err)
}

// ListHoldsOnOtherGates lists, for each gate of tenant not in gates, its
// first n held deliveries in order (a delivery through two such gates may
// come twice).
func ListHoldsOnOtherGates(ctx context.Context, q Querier, tenant string, gates []string, n int) ([]Hold, error) {
	rows, err := q.Query(ctx, `SELECT h.execution_id::text, h.gates, h.job_id, h.limit_name, h.priority, h.scheduled_for, h.seq
		FROM flow_gates g
		CROSS JOIN LATERAL (
			SELECT * FROM flow_holds h
			WHERE h.tenant_id = $1 AND h.gates @> ARRAY[g.gate]
			ORDER BY h.priority, h.scheduled_for, h.seq
			LIMIT $3
		) h
		WHERE g.tenant_id = $1 AND g.gate <> ALL ($2::text[])`, tenant, gates, n)
	return scanHolds(rows, err)
}

func scanHolds(rows pgx.Rows, err error) ([]Hold, error) {
	if err != nil {
		return nil, wrap("list holds", err)
	}
	var (
		out []Hold
		h   Hold
	)
	_, err = pgx.ForEachRow(rows, []any{&h.ExecutionID, &h.Gates, &h.JobID, &h.Limit, &h.Priority, &h.ScheduledFor, &h.Seq}, func() error {
		out = append(out, h)
		return nil
	})
	return out, wrap("list holds", err)
}

// HeldState is what a held delivery's execution and job are now.
type HeldState struct {
	ExecutionID string
	// JobID is the execution's River job (a batch member handed off to a
	// job of its own has its river_job_id), else the hold's.
	JobID int64
	// JobState and ExecState are nil when the job or the execution is
	// gone.
	JobState  *string
	ExecState *string
	// Permitted: the execution holds a permit already.
	Permitted bool
}

// ReadHeldStates reads the states of tenant's held deliveries of
// executionIDs; a hold gone meanwhile is absent.
func ReadHeldStates(ctx context.Context, q Querier, tenant string, executionIDs []string) ([]HeldState, error) {
	rows, err := q.Query(ctx, `SELECT h.execution_id::text, coalesce(e.river_job_id, h.job_id), j.state::text, e.state,
			EXISTS (SELECT 1 FROM flow_permits p WHERE p.tenant_id = h.tenant_id AND p.execution_id = h.execution_id)
		FROM flow_holds h
		LEFT JOIN executions e ON e.tenant_id = h.tenant_id AND e.id = h.execution_id
		LEFT JOIN river_job j ON j.id = coalesce(e.river_job_id, h.job_id)
		WHERE h.tenant_id = $1 AND h.execution_id = ANY ($2::uuid[])`, tenant, executionIDs)
	if err != nil {
		return nil, wrap("read held deliveries", err)
	}
	var (
		out []HeldState
		s   HeldState
	)
	_, err = pgx.ForEachRow(rows, []any{&s.ExecutionID, &s.JobID, &s.JobState, &s.ExecState, &s.Permitted}, func() error {
		out = append(out, s)
		s = HeldState{}
		return nil
	})
	return out, wrap("read held deliveries", err)
}

// EndpointLimit is an endpoint's delivery limits now (0: none).
type EndpointLimit struct {
	ID             string
	MaxConcurrency int
	RatePerSecond  float64
}

// GetEndpointLimits reads the limits of tenant's endpoints ids (a deleted
// one is absent).
func GetEndpointLimits(ctx context.Context, q Querier, tenant string, ids []string) ([]EndpointLimit, error) {
	rows, err := q.Query(ctx, `SELECT id::text, coalesce(max_concurrency, 0), coalesce(rate_limit_per_second, 0)
		FROM endpoints WHERE tenant_id = $1 AND id = ANY ($2::uuid[])`, tenant, ids)
	if err != nil {
		return nil, wrap("endpoint limits", err)
	}
	var (
		out []EndpointLimit
		e   EndpointLimit
	)
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.MaxConcurrency, &e.RatePerSecond}, func() error {
		out = append(out, e)
		return nil
	})
	return out, wrap("endpoint limits", err)
}

// WakeJobs makes sleeping (snoozed) River jobs available now, and tells
// the River clients listening on their queues, as River's own insert does
// (a NOTIFY on <schema>.river_insert with {"queue": …}, sent at commit):
// otherwise a woken job waits for its queue's next poll, and every
// hand-off under an endpoint's max_concurrency would cost that wait.
func WakeJobs(ctx context.Context, q Querier, ids []int64) error {
	_, err := q.Exec(ctx, `WITH woken AS (
			UPDATE river_job SET state = `+jobAvailable+`, scheduled_at = now()
			WHERE id = ANY ($1::bigint[]) AND state = `+jobScheduled+`
			RETURNING queue
		)
		SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', queue)::text)
		FROM (SELECT DISTINCT queue FROM woken) w`, ids)
	return wrap("wake jobs", err)
}

// APIBudget is a tenant's API request budget: a token bucket, as of
// RefilledAt.
type APIBudget struct {
	Tokens     float64
	RefilledAt time.Time
	// Now is the transaction's now().
	Now time.Time
}

// LockAPIBudget locks tenant's API budget (creating it with initial
// tokens) until the transaction ends and returns it.
func LockAPIBudget(ctx context.Context, q Querier, tenant string, initial float64) (APIBudget, error) {
	var b APIBudget
	err := q.QueryRow(ctx, `INSERT INTO api_budgets (tenant_id, tokens, refilled_at) VALUES ($1, $2, now())
		ON CONFLICT (tenant_id) DO UPDATE SET tenant_id = excluded.tenant_id
		RETURNING tokens, refilled_at, now()`, tenant, initial).Scan(&b.Tokens, &b.RefilledAt, &b.Now)
	return b, wrap("lock API budget", err)
}

// SaveAPIBudget writes tenant's API budget, refilled at now().
func SaveAPIBudget(ctx context.Context, q Querier, tenant string, tokens float64) error {
	_, err := q.Exec(ctx, `UPDATE api_budgets SET tokens = $2, refilled_at = now() WHERE tenant_id = $1`, tenant, tokens)
	return wrap("save API budget", err)
}
