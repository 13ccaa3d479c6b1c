package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/axhq/ax/db"
)

// ResourceLimits is the audited resource type of a tenant's limits.
const ResourceLimits = "limits"

// EventThrottled is the timeline event of a delivery held back by a limit
// (once per attempt; its data names the limit).
const EventThrottled = "throttled"

// Limit names, as the API spells them.
const (
	LimitMaxTasks               = "max_tasks"
	LimitMaxWorkflows           = "max_workflows"
	LimitMaxInflightDeliveries  = "max_inflight_deliveries"
	LimitMaxDeliveriesPerSecond = "max_deliveries_per_second"
	LimitAPIRequestsPerSecond   = "api_requests_per_second"
	LimitMaxConcurrency         = "max_concurrency"
	LimitRateLimitPerSecond     = "rate_limit_per_second"
)

// TenantLimits are a tenant's limits; nil is the server's default (a
// default of zero is no limit).
type TenantLimits struct {
	MaxTasks               *int
	MaxWorkflows           *int
	MaxInflightDeliveries  *int
	MaxDeliveriesPerSecond *float64
	APIRequestsPerSecond   *float64
}

// EffectiveLimits are the limits that apply to a tenant: its own, or the
// server's defaults; zero is no limit.
type EffectiveLimits struct {
	MaxTasks               int
	MaxWorkflows           int
	MaxInflightDeliveries  int
	MaxDeliveriesPerSecond float64
	APIRequestsPerSecond   float64
}

// deliveries reports whether a delivery limit applies.
func (e EffectiveLimits) deliveries() bool {
	return e.MaxInflightDeliveries > 0 || e.MaxDeliveriesPerSecond > 0
}

// LimitsConfig configures Limits.
type LimitsConfig struct {
	// Defaults apply to tenants whose own limit is not set
	// (AX_TENANT_MAX_TASKS, AX_TENANT_MAX_WORKFLOWS,
	// AX_TENANT_MAX_INFLIGHT, AX_TENANT_MAX_PER_SECOND, AX_TENANT_API_RPS).
	// Zero: no limit.
	Defaults EffectiveLimits
	// PermitTTL bounds how long a delivery admitted through a limit may
	// hold its place before its permit is released for it (a crashed
	// process): the job timeout plus a margin. Default 2 min.
	PermitTTL time.Duration
	// Refresh is how often each replica re-reads the tenants' limits
	// (changes made on this replica apply at once). Default 1 s.
	Refresh time.Duration
	// FairAfter: when the oldest due job of a deliver queue has waited
	// this long, a backlog has formed and its due jobs are started
	// round-robin across tenants (Share). Default FairAfterDefault;
	// negative: never.
	FairAfter time.Duration
	// FairEvery is how often each replica looks for such backlogs.
	// Default FairEveryDefault.
	FairEvery time.Duration
	// Logger receives the dispatcher's errors. Default: discard.
	Logger *slog.Logger
}

// Fairness defaults (LimitsConfig.FairAfter, FairEvery).
const (
	FairAfterDefault = 200 * time.Millisecond
	FairEveryDefault = 100 * time.Millisecond
)

// Limits holds the tenants' limits and quotas: their admin API, the
// count quotas of creates, the API's request rate, and the delivery
// limits (admission through gates, held deliveries and their dispatcher).
// Each replica keeps the tenants' limits in memory (refreshed every
// second, and at once on a change it made), so that a tenant without
// limits costs nothing per request or per delivery.
type Limits struct {
	pool *db.Pool
	cfg  LimitsConfig

	mu    sync.RWMutex
	rows  map[string]db.TenantLimits
	ready bool

	api  sync.Map // tenant → *apiShare
	wake chan struct{}
}

// NewLimits returns Limits on pool.
func NewLimits(pool *db.Pool, cfg LimitsConfig) *Limits {
	if cfg.PermitTTL <= 0 {
		cfg.PermitTTL = 2 * time.Minute
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	if cfg.FairAfter == 0 {
		cfg.FairAfter = FairAfterDefault
	}
	if cfg.FairEvery <= 0 {
		cfg.FairEvery = FairEveryDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Limits{pool: pool, cfg: cfg, rows: map[string]db.TenantLimits{}, wake: make(chan struct{}, 1)}
}

// Refresh re-reads every tenant's limits.
func (l *Limits) Refresh(ctx context.Context) error {
	rows, err := db.ListTenantLimits(ctx, l.pool)
	if err != nil {
		return storeError(err, "read tenant limits")
	}
	m := make(map[string]db.TenantLimits, len(rows))
	for _, r := range rows {
		m[r.TenantID] = r
	}
	l.mu.Lock()
	l.rows, l.ready = m, true
	l.mu.Unlock()
	return nil
}

// Effective returns the limits that apply to tenant, from the cache.
func (l *Limits) Effective(tenant string) EffectiveLimits {
	if l == nil {
		return EffectiveLimits{}
	}
	l.mu.RLock()
	row, ok := l.rows[tenant]
	l.mu.RUnlock()
	if !ok {
		return l.cfg.Defaults
	}
	return effective(row, l.cfg.Defaults)
}

func effective(r db.TenantLimits, d EffectiveLimits) EffectiveLimits {
	e := d
	if r.MaxTasks != nil {
		e.MaxTasks = int(*r.MaxTasks)
	}
	if r.MaxWorkflows != nil {
		e.MaxWorkflows = int(*r.MaxWorkflows)
	}
	if r.MaxInflight != nil {
		e.MaxInflightDeliveries = int(*r.MaxInflight)
	}
	if r.MaxPerSecond != nil {
		e.MaxDeliveriesPerSecond = *r.MaxPerSecond
	}
	if r.APIRequestsPerSecond != nil {
		e.APIRequestsPerSecond = *r.APIRequestsPerSecond
	}
	return e
}

func ownLimits(r db.TenantLimits) TenantLimits {
	i := func(p *int32) *int {
		if p == nil {
			return nil
		}
		v := int(*p)
		return &v
	}
	return TenantLimits{MaxTasks: i(r.MaxTasks), MaxWorkflows: i(r.MaxWorkflows), MaxInflightDeliveries: i(r.MaxInflight),
		MaxDeliveriesPerSecond: r.MaxPerSecond, APIRequestsPerSecond: r.APIRequestsPerSecond}
}

// TenantLimitsView is a tenant's own limits and those that apply.
type TenantLimitsView struct {
	Tenant    string
	Limits    TenantLimits
	Effective EffectiveLimits
}

// Get returns tenant's limits.
func (l *Limits) Get(ctx context.Context, tenant string) (TenantLimitsView, error) {
	row, err := db.GetTenantLimits(ctx, l.pool, tenant, false)
	if err != nil {
		return TenantLimitsView{}, storeError(err, "read tenant limits")
	}
	return TenantLimitsView{Tenant: tenant, Limits: ownLimits(row), Effective: effective(row, l.cfg.Defaults)}, nil
}

// Set replaces tenant's limits (nil: the server's default) and records the
// change (set_limits). It applies on this replica at once and on the
// others within a second.
func (l *Limits) Set(ctx context.Context, tenant string, in TenantLimits) (TenantLimitsView, error) {
	var ve ValidationError
	for _, f := range []struct {
		name string
		v    *int
	}{{LimitMaxTasks, in.MaxTasks}, {LimitMaxWorkflows, in.MaxWorkflows}, {LimitMaxInflightDeliveries, in.MaxInflightDeliveries}} {
		if f.v != nil && (*f.v < 0 || *f.v > math.MaxInt32) {
			ve.Add(f.name, "must be a whole number from 0 to 2147483647, or null for the server default")
		}
	}
	if in.MaxInflightDeliveries != nil && *in.MaxInflightDeliveries == 0 {
		ve.Add(LimitMaxInflightDeliveries, "must be at least 1 (null: the server default)")
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{LimitMaxDeliveriesPerSecond, in.MaxDeliveriesPerSecond}, {LimitAPIRequestsPerSecond, in.APIRequestsPerSecond}} {
		if f.v != nil && (!(*f.v > 0) || *f.v > 1e6 || math.IsInf(*f.v, 0)) {
			ve.Add(f.name, "must be a number above 0 and at most 1000000, or null for the server default")
		}
	}
	if err := ve.Err(); err != nil {
		return TenantLimitsView{}, err
	}
	i32 := func(p *int) *int32 {
		if p == nil {
			return nil
		}
		v := int32(*p) //nolint:gosec // validated above
		return &v
	}
	row := db.TenantLimits{TenantID: tenant, MaxTasks: i32(in.MaxTasks), MaxWorkflows: i32(in.MaxWorkflows),
		MaxInflight: i32(in.MaxInflightDeliveries), MaxPerSecond: in.MaxDeliveriesPerSecond,
		APIRequestsPerSecond: in.APIRequestsPerSecond}
	err := db.InTx(ctx, l.pool, func(tx db.Tx) error {
		old, err := db.GetTenantLimits(ctx, tx, tenant, true)
		if err != nil {
			return storeError(err, "read tenant limits")
		}
		if err := db.SetTenantLimits(ctx, tx, row); err != nil {
			return storeError(err, "set tenant limits")
		}
		return recordAudit(ctx, tx, tenant, AuditSetLimits, ResourceLimits, tenant, auditDiff(ownLimits(old), in))
	})
	if err != nil {
		return TenantLimitsView{}, err
	}
	l.mu.Lock()
	l.rows[tenant] = row
	l.mu.Unlock()
	l.api.Delete(tenant)
	return TenantLimitsView{Tenant: tenant, Limits: in, Effective: effective(row, l.cfg.Defaults)}, nil
}

// Usage is a tenant's limits with what they count now.
type Usage struct {
	Limits             EffectiveLimits
	Tasks              int
	Workflows          int
	InflightDeliveries int
}

// Usage returns tenant's limits and current usage (GET /v1/limits).
func (l *Limits) Usage(ctx context.Context, tenant string) (Usage, error) {
	row, err := db.GetTenantLimits(ctx, l.pool, tenant, false)
	if err != nil {
		return Usage{}, storeError(err, "read tenant limits")
	}
	u, err := db.GetTenantUsage(ctx, l.pool, tenant)
	if err != nil {
		return Usage{}, storeError(err, "read tenant usage")
	}
	return Usage{Limits: effective(row, l.cfg.Defaults), Tasks: u.Tasks, Workflows: u.Workflows,
		InflightDeliveries: u.Inflight}, nil
}

// QuotaError is a create refused by a count quota: the API answers 409
// with a problem type ending in /quota-exceeded.
type QuotaError struct {
	Limit string
	Max   int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("the tenant's %s quota (%d) is reached; delete some or ask an operator to raise it", e.Limit, e.Max)
}

// checkTaskQuota refuses a task create past the tenant's max_tasks, in
// the create's transaction: the tenant's row lock orders concurrent
// creates, so two cannot both take the last place. Without a limit it
// costs nothing.
func (l *Limits) checkTaskQuota(ctx context.Context, tx db.Tx, tenant string) error {
	if l == nil || l.Effective(tenant).MaxTasks == 0 {
		return nil
	}
	row, err := db.GetTenantLimits(ctx, tx, tenant, true)
	if err != nil {
		return storeError(err, "read tenant limits")
	}
	limit := effective(row, l.cfg.Defaults).MaxTasks
	if limit == 0 {
		return nil
	}
	n, err := db.CountTasks(ctx, tx, tenant)
	if err != nil {
		return storeError(err, "count tasks")
	}
	if n >= limit {
		return &QuotaError{Limit: LimitMaxTasks, Max: limit}
	}
	return nil
}

// checkWorkflowQuota refuses a workflow create past the tenant's
// max_workflows, in the create's transaction, exactly as checkTaskQuota
// does for tasks (the tenant's row lock orders concurrent creates).
// Without a limit it costs nothing.
func (l *Limits) checkWorkflowQuota(ctx context.Context, tx db.Tx, tenant string) error {
	if l == nil || l.Effective(tenant).MaxWorkflows == 0 {
		return nil
	}
	row, err := db.GetTenantLimits(ctx, tx, tenant, true)
	if err != nil {
		return storeError(err, "read tenant limits")
	}
	limit := effective(row, l.cfg.Defaults).MaxWorkflows
	if limit == 0 {
		return nil
	}
	n, err := db.CountWorkflows(ctx, tx, tenant)
	if err != nil {
		return storeError(err, "count workflows")
	}
	if n >= limit {
		return &QuotaError{Limit: LimitMaxWorkflows, Max: limit}
	}
	return nil
}

// APIDecision is the answer to one API request under its tenant's rate.
type APIDecision struct {
	// Limited: the tenant has a rate (the RateLimit-* headers apply).
	Limited bool
	Allowed bool
	// Limit is the rate per second. Remaining is what is left of the
	// tenant's budget after this request, as this replica knows it: the
	// share it holds (taken from the shared bucket, spent here) plus what
	// the shared bucket held when it last took from it. Other replicas
	// spend the same bucket and it refills at Limit per second, so it is
	// an estimate of what fits now, never a promise; 0 on a refusal.
	Limit     float64
	Remaining int
	// RetryAfter: when refused, how long until the next request fits.
	RetryAfter time.Duration
}

// apiShare is the part of a tenant's API budget this replica took from
// the shared bucket (api_budgets): requests are counted against it in
// memory, and only when it is spent does the replica go to the database
// for the next chunk. Tokens not used within a second are dropped, so no
// replica can hoard the budget.
type apiShare struct {
	mu      sync.Mutex
	tokens  int
	expires time.Time
	// shared is what the shared bucket held after this replica's last
	// take (whole requests).
	shared int
	// refusedUntil: the shared bucket was empty; refuse without asking
	// the database again before then.
	refusedUntil time.Time
}

// apiChunk is how many requests a replica takes from the shared bucket at
// once: a tenth of a second's worth (at least one, at most 100).
func apiChunk(rate float64) int { return min(max(int(rate/10), 1), 100) }

// AllowAPI counts one API request of tenant against its rate. A tenant
// without a rate costs a map lookup.
func (l *Limits) AllowAPI(ctx context.Context, tenant string) (APIDecision, error) {
	rate := l.Effective(tenant).APIRequestsPerSecond
	if rate <= 0 {
		return APIDecision{Allowed: true}, nil
	}
	v, _ := l.api.LoadOrStore(tenant, &apiShare{})
	s := v.(*apiShare) //nolint:forcetypeassert // only *apiShare is stored
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	d := APIDecision{Limited: true, Limit: rate}
	if s.tokens > 0 && now.Before(s.expires) {
		s.tokens--
		d.Allowed, d.Remaining = true, s.tokens+s.shared
		return d, nil
	}
	if now.Before(s.refusedUntil) {
		d.RetryAfter = s.refusedUntil.Sub(now)
		return d, nil
	}
	took, left, wait, err := db.TakeAPIBudget(ctx, l.pool, tenant, rate, max(rate, 1), apiChunk(rate))
	if err != nil {
		return APIDecision{}, storeError(err, "take API budget")
	}
	if took == 0 {
		s.tokens, s.shared, s.refusedUntil = 0, 0, now.Add(wait)
		d.RetryAfter = wait
		return d, nil
	}
	s.tokens, s.shared, s.expires = took-1, int(left), now.Add(time.Second)
	d.Allowed, d.Remaining = true, s.tokens+s.shared
	return d, nil
}

// deliveryLimited reports whether tenant's deliveries pass a tenant gate.
func (l *Limits) deliveryLimited(tenant string) bool {
	return l != nil && l.Effective(tenant).deliveries()
}

// gatesOf returns the gates a delivery of row passes (none: no limit).
func (l *Limits) gatesOf(row db.DeliveryRow) []db.Gate {
	var gs []db.Gate
	if row.EndpointID != nil && (row.EndpointMaxConcurrency != nil || row.EndpointRateLimit != nil) {
		g := db.Gate{Name: db.EndpointGate(*row.EndpointID)}
		if row.EndpointMaxConcurrency != nil {
			g.MaxInflight = int(*row.EndpointMaxConcurrency)
		}
		if row.EndpointRateLimit != nil {
			g.Rate = *row.EndpointRateLimit
		}
		gs = append(gs, g)
	}
	if e := l.Effective(row.TenantID); e.deliveries() {
		gs = append(gs, db.Gate{Name: db.TenantGate, MaxInflight: e.MaxInflightDeliveries, Rate: e.MaxDeliveriesPerSecond})
	}
	if len(gs) == 2 && gs[1].Name < gs[0].Name {
		gs[0], gs[1] = gs[1], gs[0]
	}
	return gs
}

// Wake makes the dispatcher look at held deliveries now (a permit was
// released on this replica).
func (l *Limits) Wake() {
	if l == nil {
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Woken receives when the dispatcher should look at held deliveries now
// (Wake): the dispatch loop (jobs.LimitsLoops) waits on it.
func (l *Limits) Woken() <-chan struct{} { return l.wake }

// Config returns the configuration, defaults applied: the loops that run
// Refresh, Share and Dispatch take their intervals from it.
func (l *Limits) Config() LimitsConfig { return l.cfg }

// SweepPermits frees the permits past their TTL (a crashed process's
// deliveries) and returns how many it freed.
func (l *Limits) SweepPermits(ctx context.Context) (int, error) {
	n, err := db.SweepPermits(ctx, l.pool)
	if err != nil {
		return n, storeError(err, "sweep expired permits")
	}
	return n, nil
}

// dispatchBatch bounds the held deliveries one pass looks at per tenant.
const dispatchBatch = 500

// Dispatch grants permits to held deliveries whose gates have room, in
// order, for every tenant, and returns when a rate-limited gate gets its
// next token (zero: none waits on one) and whether any delivery was held.
func (l *Limits) Dispatch(ctx context.Context) (next time.Time, held bool, err error) {
	tenants, err := db.TenantsWithHolds(ctx, l.pool)
	if err != nil {
		return time.Time{}, false, storeError(err, "list held deliveries")
	}
	var errs []error
	for _, t := range tenants {
		e := l.Effective(t)
		tg := db.Gate{MaxInflight: e.MaxInflightDeliveries, Rate: e.MaxDeliveriesPerSecond}
		var d db.Dispatched
		err := db.InTx(ctx, l.pool, func(tx db.Tx) error {
			var err error
			d, err = db.DispatchHolds(ctx, tx, t, tg, dispatchBatch)
			return err
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !d.NextToken.IsZero() && (next.IsZero() || d.NextToken.Before(next)) {
			next = d.NextToken
		}
	}
	return next, len(tenants) > 0, errors.Join(errs...)
}

// fairQueues are the queues whose due jobs Share orders across tenants:
// both lanes' single deliveries and batches.
var fairQueues = []string{QueueDeliver, QueueDeliverBatch, QueueDeliverBulk, QueueDeliverBulkBatch}

// Share makes the deliver queues start their due jobs round-robin across
// tenants where a backlog has formed (db.ShareQueues): no tenant's backlog
// delays another tenant's on-time fires by more than a turn. It returns
// how many jobs it reordered. When no queue has a backlog it costs one
// statement of index probes, and it changes nothing while one tenant
// alone has due jobs.
func (l *Limits) Share(ctx context.Context) (int64, error) {
	if l.cfg.FairAfter < 0 {
		return 0, nil
	}
	n, err := db.ShareQueues(ctx, l.pool, fairQueues, l.cfg.FairAfter)
	if err != nil {
		return n, storeError(err, "share the deliver queues")
	}
	return n, nil
}

// permitTTL is how long a permit holds before SweepPermits frees it.
func (l *Limits) permitTTL() time.Duration {
	if l == nil {
		return 2 * time.Minute
	}
	return l.cfg.PermitTTL
}
