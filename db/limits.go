package db

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
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
	return []any{&l.TenantID, &l.MaxTasks, &l.MaxWorkflows, &l.MaxInflight, &l.MaxPerSecond, &l.APIRequestsPerSecond,
		&l.LimitsUpdatedAt}
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
			 WHERE u.tenant_id = $1 AND e.state = 'running')::int`, tenant).Scan(&u.Tasks, &u.Workflows, &u.Inflight)
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

// Gate is one limit a delivery passes: "tenant" (the tenant's deliveries
// in flight and per second) or "endpoint:<id>". MaxInflight and Rate are
// its limits now (0: none).
type Gate struct {
	Name        string
	MaxInflight int
	Rate        float64
}

// gateState is a gate's row, refilled to now.
type gateState struct {
	name     string
	inflight int
	tokens   float64
	max      int
	rate     float64
}

// fits reports whether one more delivery may start under the gate.
func (g gateState) fits() bool {
	return (g.max == 0 || g.inflight < g.max) && (g.rate == 0 || g.tokens >= 1)
}

// limitName names the limit of the gate that holds a delivery back, as
// the API names it.
func (g gateState) limitName() string {
	inflight := g.max > 0 && (g.inflight >= g.max || g.rate == 0 || g.tokens >= 1)
	switch {
	case g.name == TenantGate && inflight:
		return "max_inflight_deliveries"
	case g.name == TenantGate:
		return "max_deliveries_per_second"
	case inflight:
		return "max_concurrency"
	}
	return "rate_limit_per_second"
}

// TenantGate is the gate of a tenant's own delivery limits; an endpoint's
// is EndpointGate(id).
const TenantGate = "tenant"

// EndpointGate names an endpoint's gate.
func EndpointGate(id string) string { return "endpoint:" + id }

// take counts one more delivery under the gate.
func (g *gateState) take() {
	g.inflight++
	if g.rate > 0 {
		g.tokens--
	}
}

// giveBack undoes take.
func (g *gateState) giveBack() {
	g.inflight--
	if g.rate > 0 {
		g.tokens++
	}
}

// lockGates locks (creating them) tenant's gates named in gs, refilled to
// now at their rate, in the order of gs's names. A rate's bucket holds a
// tenth of a second's worth (at least one): a small bucket keeps the rate
// close over any window.
func lockGates(ctx context.Context, q Querier, tenant string, gs []Gate) (map[string]*gateState, time.Time, error) {
	names := make([]string, len(gs))
	maxes := make([]int32, len(gs))
	rates := make([]float64, len(gs))
	for i, g := range gs {
		names[i], maxes[i], rates[i] = g.Name, int32(min(g.MaxInflight, math.MaxInt32)), g.Rate //nolint:gosec // capped
	}
	if _, err := q.Exec(ctx, `INSERT INTO flow_gates (tenant_id, gate, tokens)
			SELECT $1, g, 1 FROM unnest($2::text[]) g ORDER BY g
			ON CONFLICT (tenant_id, gate) DO NOTHING`, tenant, names); err != nil {
		return nil, time.Time{}, wrap("create gates", err)
	}
	rows, err := q.Query(ctx, `SELECT f.gate, f.inflight,
			CASE WHEN i.rate > 0 THEN least(greatest(i.rate / 10, 1), f.tokens + extract(epoch FROM now() - f.refilled_at) * i.rate)
			ELSE 0 END, i.max, i.rate, now()
		FROM unnest($2::text[], $3::int[], $4::float8[]) AS i(gate, max, rate)
		JOIN flow_gates f ON f.tenant_id = $1 AND f.gate = i.gate
		ORDER BY f.gate
		FOR UPDATE OF f`, tenant, names, maxes, rates)
	if err != nil {
		return nil, time.Time{}, wrap("lock gates", err)
	}
	out := make(map[string]*gateState, len(gs))
	var (
		g   gateState
		now time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&g.name, &g.inflight, &g.tokens, &g.max, &g.rate, &now}, func() error {
		c := g
		out[g.name] = &c
		return nil
	})
	if err != nil {
		return nil, time.Time{}, wrap("lock gates", err)
	}
	return out, now, nil
}

// saveGates writes the gates' counts back, refilled at now.
func saveGates(ctx context.Context, q Querier, tenant string, gates map[string]*gateState) error {
	names := make([]string, 0, len(gates))
	inflight := make([]int32, 0, len(gates))
	tokens := make([]float64, 0, len(gates))
	for _, g := range gates {
		names = append(names, g.name)
		inflight = append(inflight, int32(min(g.inflight, math.MaxInt32))) //nolint:gosec // capped
		tokens = append(tokens, g.tokens)
	}
	_, err := q.Exec(ctx, `UPDATE flow_gates f SET inflight = i.inflight, tokens = i.tokens, refilled_at = now()
		FROM unnest($2::text[], $3::int[], $4::float8[]) AS i(gate, inflight, tokens)
		WHERE f.tenant_id = $1 AND f.gate = i.gate`, tenant, names, inflight, tokens)
	return wrap("save gates", err)
}

// Admission is what AdmitDelivery decided.
type Admission struct {
	// Admitted: the attempt may start; it holds a permit until
	// ReleasePermit.
	Admitted bool
	// Limit names the limit that holds the delivery back (when not
	// admitted), as gate:limit ("endpoint:<id>:max_concurrency").
	Limit string
	// NewHold: this call put the delivery on hold (the first time).
	NewHold bool
}

// AdmitRequest asks to start an attempt of an execution through gates.
type AdmitRequest struct {
	TenantID    string
	ExecutionID string
	TaskID      string
	// JobID is the River job that would wait; the dispatcher makes it
	// available when the delivery may start.
	JobID        int64
	ScheduledFor time.Time
	Gates        []Gate
	// PermitTTL bounds a permit: one that outlives it (its process
	// died) is released by SweepPermits.
	PermitTTL time.Duration
}

// AdmitDelivery decides, in the caller's transaction, whether an attempt
// may start under its gates: it may when the dispatcher granted it a
// permit, or when no earlier delivery waits on any of its gates and every
// gate has room (its in-flight count below its limit, a token in its
// bucket); it then takes a permit. Otherwise the delivery is held (a
// flow_holds row, kept in order with the others) until the dispatcher
// grants it one.
func AdmitDelivery(ctx context.Context, q Querier, r AdmitRequest) (Admission, error) {
	if granted, err := usePermit(ctx, q, r); err != nil || granted {
		return Admission{Admitted: granted}, err
	}
	names := make([]string, len(r.Gates))
	for i, g := range r.Gates {
		names[i] = g.Name
	}
	// A delivery behind held ones is held too, whatever the gates say:
	// queue it without their locks. While a limit binds, every new
	// delivery takes this way, so admissions do not queue on the gate
	// rows (which the dispatcher needs to grant the held ones: a gate
	// locked by a convoy of admissions loses its passes, and the
	// admissions hold connections that granted deliveries need to start).
	// A hold that ends meanwhile only leaves this one to the dispatcher.
	var (
		ahead      string
		aheadGates []string
	)
	err := q.QueryRow(ctx, `SELECT limit_name, gates FROM flow_holds
			WHERE tenant_id = $1 AND gates && $2::text[] AND execution_id <> $3 LIMIT 1`,
		r.TenantID, names, r.ExecutionID).Scan(&ahead, &aheadGates)
	switch {
	case err == nil:
		adm, err := holdDelivery(ctx, q, r, names, behind(r.Gates, aheadGates, ahead))
		if err != nil {
			return adm, err
		}
		// The dispatcher may have been granting this delivery's own hold
		// (a job woken by its snooze's end at the same moment): the hold's
		// insert waited for that grant's commit, which the permit now
		// shows. Start under it, as the path through the gates' locks does.
		granted, err := usePermit(ctx, q, r)
		if err != nil || !granted {
			return adm, err
		}
		_, err = q.Exec(ctx, `DELETE FROM flow_holds WHERE tenant_id = $1 AND execution_id = $2`, r.TenantID, r.ExecutionID)
		return Admission{Admitted: true}, wrap("end hold", err)
	case !errors.Is(err, pgx.ErrNoRows):
		return Admission{}, wrap("look for held deliveries", err)
	}
	gates, _, err := lockGates(ctx, q, r.TenantID, r.Gates)
	if err != nil {
		return Admission{}, err
	}
	// The dispatcher may have granted this delivery a permit after the
	// look above and before the gates' locks, which it held until its
	// commit: look again, or the gates would count this attempt twice.
	if granted, err := usePermit(ctx, q, r); err != nil || granted {
		return Admission{Admitted: granted}, err
	}
	var waiting bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flow_holds
			WHERE tenant_id = $1 AND gates && $2::text[] AND execution_id <> $3)`,
		r.TenantID, names, r.ExecutionID).Scan(&waiting); err != nil {
		return Admission{}, wrap("look for held deliveries", err)
	}
	limit := ""
	for _, g := range r.Gates {
		if st := gates[g.Name]; st != nil && !st.fits() {
			limit = st.limitName()
			break
		}
	}
	if limit == "" && waiting {
		// Earlier deliveries wait on a gate: this one queues behind them.
		limit = gates[r.Gates[0].Name].limitName()
	}
	if limit == "" {
		for _, st := range gates {
			st.take()
		}
		if err := saveGates(ctx, q, r.TenantID, gates); err != nil {
			return Admission{}, err
		}
		_, err := q.Exec(ctx, `INSERT INTO flow_permits (tenant_id, execution_id, gates, started, expires_at)
			VALUES ($1, $2, $3, true, now() + make_interval(secs => $4))
			ON CONFLICT (tenant_id, execution_id) DO UPDATE SET started = true, expires_at = excluded.expires_at`,
			r.TenantID, r.ExecutionID, names, r.PermitTTL.Seconds())
		if err != nil {
			return Admission{}, wrap("take permit", err)
		}
		_, err = q.Exec(ctx, `DELETE FROM flow_holds WHERE tenant_id = $1 AND execution_id = $2`, r.TenantID, r.ExecutionID)
		return Admission{Admitted: true}, wrap("end hold", err)
	}
	return holdDelivery(ctx, q, r, names, limit)
}

// holdDelivery holds a delivery back by limit (or keeps it held), in
// order with the other held deliveries of its tenant.
func holdDelivery(ctx context.Context, q Querier, r AdmitRequest, names []string, limit string) (Admission, error) {
	var inserted bool
	err := q.QueryRow(ctx, `INSERT INTO flow_holds (tenant_id, execution_id, job_id, gates, limit_name, priority, scheduled_for)
		VALUES ($1, $2, $3, $4, $5, coalesce((SELECT priority FROM tasks WHERE tenant_id = $1 AND id = $6), 2), $7)
		ON CONFLICT (tenant_id, execution_id) DO UPDATE SET job_id = excluded.job_id
		RETURNING xmax = 0`, r.TenantID, r.ExecutionID, r.JobID, names, limit, r.TaskID, r.ScheduledFor).Scan(&inserted)
	if err != nil {
		return Admission{}, wrap("hold delivery", err)
	}
	return Admission{Limit: limit, NewHold: inserted}, nil
}

// usePermit starts the attempt under the permit the dispatcher granted
// its execution, if there is one.
func usePermit(ctx context.Context, q Querier, r AdmitRequest) (bool, error) {
	var granted bool
	err := q.QueryRow(ctx, `UPDATE flow_permits SET started = true, expires_at = now() + make_interval(secs => $3)
		WHERE tenant_id = $1 AND execution_id = $2 RETURNING true`, r.TenantID, r.ExecutionID, r.PermitTTL.Seconds()).Scan(&granted)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return granted, wrap("use permit", err)
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

// TenantsWithHolds lists the tenants that have held deliveries.
func TenantsWithHolds(ctx context.Context, q Querier) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT tenant_id FROM flow_holds`)
	if err != nil {
		return nil, wrap("tenants with holds", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap("tenants with holds", err)
}

// Dispatched is what one DispatchHolds pass did.
type Dispatched struct {
	// Granted counts the held deliveries given a permit (their jobs made
	// available); Dropped those whose execution or job is gone or final.
	Granted, Dropped int
	// Busy: a gate of the tenant was locked by another transaction; try
	// again soon.
	Busy bool
	// NextToken is when a rate-limited gate that blocks a held delivery
	// gets its next token (zero: none is blocked by a rate).
	NextToken time.Time
}

// dispatchLockClass is the first key of the advisory lock that lets one
// replica at a time dispatch a tenant (the second is the tenant's hash).
const dispatchLockClass int32 = 0x61786470 // "axdp"

// heldRow is a held delivery, with its job's and execution's states once
// they are read (known).
type heldRow struct {
	executionID string
	gates       []string
	jobID       int64
	priority    int
	slot        time.Time
	seq         int64
	known       bool
	jobState    *string
	execState   *string
}

// final reports whether a held delivery is over: its execution or job is
// final or gone, or its execution already has a permit (a stale hold:
// granting it again would count the attempt twice).
func (h *heldRow) final() bool {
	over := func(s *string) bool {
		return s == nil || (*s != "pending" && *s != "running" && *s != "retrying" && *s != "available" && *s != "scheduled" &&
			*s != "retryable")
	}
	return over(h.execState) || over(h.jobState)
}

// readHeldStates reads the states of the held deliveries in rows (by
// execution id) that are not known yet.
func readHeldStates(ctx context.Context, q Querier, tenant string, rows map[string]*heldRow) error {
	ids := make([]string, 0, len(rows))
	for id, h := range rows {
		if !h.known {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	res, err := q.Query(ctx, `SELECT h.execution_id::text, coalesce(e.river_job_id, h.job_id), j.state::text,
			CASE WHEN EXISTS (SELECT 1 FROM flow_permits p WHERE p.tenant_id = h.tenant_id AND p.execution_id = h.execution_id)
			THEN 'permitted' ELSE e.state END
		FROM flow_holds h
		LEFT JOIN executions e ON e.tenant_id = h.tenant_id AND e.id = h.execution_id
		LEFT JOIN river_job j ON j.id = coalesce(e.river_job_id, h.job_id)
		WHERE h.tenant_id = $1 AND h.execution_id = ANY ($2::uuid[])`, tenant, ids)
	if err != nil {
		return wrap("read held deliveries", err)
	}
	var (
		id            string
		job           int64
		jobSt, execSt *string
	)
	_, err = pgx.ForEachRow(res, []any{&id, &job, &jobSt, &execSt}, func() error {
		if h := rows[id]; h != nil {
			h.jobID, h.jobState, h.execState = job, jobSt, execSt
		}
		return nil
	})
	for _, h := range rows {
		// A hold gone since the list (an admission ended it) reads as
		// nothing: final, so it is neither granted nor counted.
		h.known = true
	}
	return wrap("read held deliveries", err)
}

// DispatchHolds grants permits to tenant's held deliveries, in order
// (priority, slot, arrival), while their gates have room, and makes their
// River jobs available; tenantGate is the tenant's own delivery limits now
// (an endpoint's are read from its row; a gate without limits any more
// lets everything through). A delivery whose gate is blocked blocks that
// gate for every later one, so each gate starts its deliveries in order.
// Holds whose execution is final or gone, or whose job is final or gone,
// are dropped.
//
// The list of holds is read from flow_holds alone (its order index);
// the states of executions and jobs are read only for the deliveries the
// gates would let through, a few per pass while a limit binds, not for
// every hold listed.
func DispatchHolds(ctx context.Context, q Querier, tenant string, tenantGate Gate, batch int) (Dispatched, error) {
	var d Dispatched
	// One replica at a time dispatches a tenant: another replica's pass
	// would wait for the gates' locks only to find the room taken, and
	// both would pay for it while a limit binds. One that finds the
	// tenant taken leaves it to that pass and looks again at its next.
	var mine bool
	if err := q.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, hashtext($2))`, dispatchLockClass, tenant).Scan(&mine); err != nil {
		return d, wrap("dispatch", err)
	}
	if !mine {
		d.Busy = true
		return d, nil
	}
	held, err := listHolds(ctx, q, tenant, batch)
	if err != nil {
		return d, err
	}
	if len(held) == 0 {
		return d, nil
	}
	seen := map[string]bool{}
	var gs []Gate
	var endpointIDs []string
	for _, h := range held {
		for _, g := range h.gates {
			if seen[g] {
				continue
			}
			seen[g] = true
			if g == TenantGate {
				tenantGate.Name = g
				gs = append(gs, tenantGate)
			} else if id, ok := strings.CutPrefix(g, "endpoint:"); ok {
				endpointIDs = append(endpointIDs, id)
			}
		}
	}
	if len(endpointIDs) > 0 {
		rows, err := q.Query(ctx, `SELECT id::text, coalesce(max_concurrency, 0), coalesce(rate_limit_per_second, 0)
			FROM endpoints WHERE tenant_id = $1 AND id = ANY ($2::uuid[])`, tenant, endpointIDs)
		if err != nil {
			return d, wrap("endpoint limits", err)
		}
		var (
			id  string
			lim Gate
		)
		_, err = pgx.ForEachRow(rows, []any{&id, &lim.MaxInflight, &lim.Rate}, func() error {
			lim.Name = EndpointGate(id)
			gs = append(gs, lim)
			return nil
		})
		if err != nil {
			return d, wrap("endpoint limits", err)
		}
	}
	// Lock the gates without waiting: an admission in flight holds one
	// for a moment; the next pass comes soon.
	if _, err := q.Exec(ctx, `SET LOCAL lock_timeout = '100ms'`); err != nil {
		return d, wrap("dispatch", err)
	}
	locked, now, err := lockGates(ctx, q, tenant, sortedGates(gs))
	if err != nil {
		if errors.Is(err, ErrQueryCanceled) || sqlState(err) == "55P03" {
			d.Busy = true
			return d, nil
		}
		return d, err
	}

	// Walk the holds in order with the gates' room; the deliveries that
	// would be granted need their states: read those not known yet and
	// walk again (a dropped or still running one changes what follows).
	// Each round reads at least one unknown state, and a pass grants at
	// most a gate's room, so this ends after a round or two.
	var (
		gates       map[string]*gateState
		grant, drop []string
		next        time.Time
	)
	for {
		gates = make(map[string]*gateState, len(locked))
		for k, v := range locked {
			c := *v
			gates[k] = &c
		}
		grant, drop, next = grant[:0], drop[:0], time.Time{}
		blocked := map[string]bool{}
		unknown := map[string]*heldRow{}
		for _, h := range held {
			if h.known && h.final() {
				drop = append(drop, h.executionID)
				continue
			}
			ok := !h.known || *h.jobState == "scheduled"
			for _, g := range h.gates {
				if blocked[g] || (gates[g] != nil && !gates[g].fits()) {
					ok = false
				}
			}
			if !ok {
				for _, g := range h.gates {
					blocked[g] = true
					if st := gates[g]; st != nil && st.rate > 0 && st.tokens < 1 {
						at := now.Add(time.Duration((1 - st.tokens) / st.rate * float64(time.Second)))
						if next.IsZero() || at.Before(next) {
							next = at
						}
					}
				}
				continue
			}
			if !h.known {
				unknown[h.executionID] = h
			}
			for _, g := range h.gates {
				if st := gates[g]; st != nil {
					st.take()
				}
			}
			grant = append(grant, h.executionID)
		}
		if len(unknown) == 0 {
			break
		}
		if err := readHeldStates(ctx, q, tenant, unknown); err != nil {
			return d, err
		}
	}
	d.NextToken = next
	jobs := map[string]int64{}
	grantGates := map[string][]string{}
	for _, h := range held {
		jobs[h.executionID] = h.jobID
		grantGates[h.executionID] = h.gates
	}
	if len(grant) > 0 {
		// Only holds still there are granted: an admission may have ended
		// one since the list was read. The others give their place back
		// before the gates are saved, so that the gates count exactly the
		// permits.
		rows, err := q.Query(ctx, `WITH h AS (
				DELETE FROM flow_holds WHERE tenant_id = $1 AND execution_id = ANY ($2::uuid[]) RETURNING execution_id, gates
			)
			INSERT INTO flow_permits (tenant_id, execution_id, gates, expires_at)
			SELECT $1, execution_id, gates, now() + interval '2 minutes' FROM h
			ON CONFLICT (tenant_id, execution_id) DO NOTHING
			RETURNING execution_id::text`,
			tenant, grant)
		if err != nil {
			return d, wrap("grant permits", err)
		}
		granted, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return d, wrap("grant permits", err)
		}
		wake := make([]int64, 0, len(granted))
		given := make(map[string]bool, len(granted))
		for _, id := range granted {
			wake = append(wake, jobs[id])
			given[id] = true
		}
		for _, id := range grant {
			if given[id] {
				continue
			}
			for _, g := range grantGates[id] {
				if st := gates[g]; st != nil {
					st.giveBack()
				}
			}
		}
		if err := saveGates(ctx, q, tenant, gates); err != nil {
			return d, err
		}
		if err := WakeJobs(ctx, q, wake); err != nil {
			return d, err
		}
		grant = granted
	}
	if len(drop) > 0 {
		if _, err := q.Exec(ctx, `DELETE FROM flow_holds WHERE tenant_id = $1 AND execution_id = ANY ($2::uuid[])`,
			tenant, drop); err != nil {
			return d, wrap("drop holds", err)
		}
	}
	d.Granted, d.Dropped = len(grant), len(drop)
	return d, nil
}

// WakeJobs makes sleeping (snoozed) River jobs available now, and tells
// the River clients listening on their queues, as River's own insert does
// (a NOTIFY on <schema>.river_insert with {"queue": …}, sent at commit):
// otherwise a woken job waits for its queue's next poll, and every
// hand-off under an endpoint's max_concurrency would cost that wait.
func WakeJobs(ctx context.Context, q Querier, ids []int64) error {
	_, err := q.Exec(ctx, `WITH woken AS (
			UPDATE river_job SET state = 'available', scheduled_at = now()
			WHERE id = ANY ($1::bigint[]) AND state = 'scheduled'
			RETURNING queue
		)
		SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', queue)::text)
		FROM (SELECT DISTINCT queue FROM woken) w`, ids)
	return wrap("wake jobs", err)
}

func sortedGates(gs []Gate) []Gate {
	out := make([]Gate, len(gs))
	copy(out, gs)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Name < out[j-1].Name; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TakeAPIBudget takes up to want requests from tenant's API budget, a
// token bucket of rate per second holding at most burst, shared by every
// replica. It returns how many it took, what the bucket held after the
// take (left) and, when it took none, how long until the next one.
func TakeAPIBudget(ctx context.Context, q TxBeginner, tenant string, rate, burstSize float64, want int) (took int, left float64,
	wait time.Duration, err error,
) {
	err = pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		var avail float64
		err := tx.QueryRow(ctx, `INSERT INTO api_budgets (tenant_id, tokens, refilled_at) VALUES ($1, $3, now())
			ON CONFLICT (tenant_id) DO UPDATE
				SET tokens = least($3::float8, api_budgets.tokens + extract(epoch FROM now() - api_budgets.refilled_at) * $2::float8),
					refilled_at = now()
			RETURNING tokens`, tenant, rate, burstSize).Scan(&avail)
		if err != nil {
			return err
		}
		took = min(want, int(math.Floor(avail)))
		if took <= 0 {
			took, left = 0, avail
			wait = time.Duration((1 - avail) / rate * float64(time.Second))
			return nil
		}
		left = avail - float64(took)
		_, err = tx.Exec(ctx, `UPDATE api_budgets SET tokens = tokens - $2 WHERE tenant_id = $1`, tenant, took)
		return err
	})
	if err != nil {
		return 0, 0, 0, wrap("take API budget", err)
	}
	return took, left, wait, nil
}

// GateInflight returns the permits a gate counts now.
func GateInflight(ctx context.Context, q Querier, tenant, gate string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT inflight FROM flow_gates WHERE tenant_id = $1 AND gate = $2), 0)`,
		tenant, gate).Scan(&n)
	return n, wrap("gate inflight", err)
}

// behind names the limit a delivery through gs waits for when it queues
// behind a held delivery through aheadGates, held by aheadLimit: the limit
// of the first gate they share, as the held one names it when that is the
// same gate's kind, else the gate's own (its rate when that is all it
// has, else its in-flight limit).
func behind(gs []Gate, aheadGates []string, aheadLimit string) string {
	for _, g := range gs {
		if !slices.Contains(aheadGates, g.Name) {
			continue
		}
		tenantGate := g.Name == TenantGate
		switch aheadLimit {
		case "max_inflight_deliveries", "max_deliveries_per_second":
			if tenantGate {
				return aheadLimit
			}
		case "max_concurrency", "rate_limit_per_second":
			if !tenantGate {
				return aheadLimit
			}
		}
		byRate := g.Rate > 0 && g.MaxInflight == 0
		switch {
		case tenantGate && byRate:
			return "max_deliveries_per_second"
		case tenantGate:
			return "max_inflight_deliveries"
		case byRate:
			return "rate_limit_per_second"
		}
		return "max_concurrency"
	}
	return aheadLimit
}

// listHolds lists tenant's first batch held deliveries in order. When
// there are more, it adds the first batch of each gate of the tenant
// that none of those goes through: a gate whose backlog fills the batch
// (thousands held by one endpoint's rate) must not hide the deliveries
// held by another endpoint's gate behind it, which its room may let
// through. Every added one comes after the first batch; one may pass an
// unlisted delivery of the first batch's gates on a gate they share (the
// tenant's) only when that gate has room for more than the whole batch
// in one pass, and the next pass lists that one.
func listHolds(ctx context.Context, q Querier, tenant string, batch int) ([]*heldRow, error) {
	var held []*heldRow
	scan := func(rows pgx.Rows) error {
		var h heldRow
		_, err := pgx.ForEachRow(rows, []any{&h.executionID, &h.gates, &h.jobID, &h.priority, &h.slot, &h.seq}, func() error {
			c := h
			held = append(held, &c)
			return nil
		})
		return wrap("list holds", err)
	}
	rows, err := q.Query(ctx, `SELECT execution_id::text, gates, job_id, priority, scheduled_for, seq FROM flow_holds
		WHERE tenant_id = $1
		ORDER BY priority, scheduled_for, seq
		LIMIT $2`, tenant, batch)
	if err != nil {
		return nil, wrap("list holds", err)
	}
	if err := scan(rows); err != nil || len(held) < batch {
		return held, err
	}
	listed := map[string]bool{}
	var gates []string
	for _, h := range held {
		listed[h.executionID] = true
		for _, g := range h.gates {
			if !slices.Contains(gates, g) {
				gates = append(gates, g)
			}
		}
	}
	head := len(held)
	rows, err = q.Query(ctx, `SELECT h.execution_id::text, h.gates, h.job_id, h.priority, h.scheduled_for, h.seq
		FROM flow_gates g
		CROSS JOIN LATERAL (
			SELECT * FROM flow_holds h
			WHERE h.tenant_id = $1 AND h.gates @> ARRAY[g.gate]
			ORDER BY h.priority, h.scheduled_for, h.seq
			LIMIT $3
		) h
		WHERE g.tenant_id = $1 AND g.gate <> ALL ($2::text[])`, tenant, gates, batch)
	if err != nil {
		return nil, wrap("list holds", err)
	}
	if err := scan(rows); err != nil {
		return nil, err
	}
	// Keep one of each, in order.
	out := held[:head]
	for _, h := range held[head:] {
		if !listed[h.executionID] {
			listed[h.executionID] = true
			out = append(out, h)
		}
	}
	slices.SortStableFunc(out, func(a, b *heldRow) int {
		return cmp.Or(cmp.Compare(a.priority, b.priority), a.slot.Compare(b.slot), cmp.Compare(a.seq, b.seq))
	})
	return out, nil
}
