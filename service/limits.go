package service

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/limits"
)

// ResourceLimits is the audited resource type of a tenant's limits.
const ResourceLimits = "limits"

// EventThrottled is the timeline event of a delivery held back by a limit
// (once per attempt; its data names the limit, limits.Table).
const EventThrottled = "throttled"

// The limits' types, as service's callers use them (service/limits).
type (
	// TenantLimits are a tenant's own limits; nil is the server's default.
	TenantLimits = limits.Own
	// EffectiveLimits are the limits that apply to a tenant; zero is no
	// limit.
	EffectiveLimits = limits.Effective
	// LimitsConfig configures Limits (FairQueues is set by NewLimits).
	LimitsConfig = limits.Config
	// QuotaError is a create refused by a count quota.
	QuotaError = limits.QuotaError
	// APIDecision is the answer to one API request under its tenant's
	// rate.
	APIDecision = limits.APIDecision
)

// Limits is the tenants' limits and quotas (service/limits, which holds
// the algorithms: the cache, the count quotas, the API's request rate,
// the delivery limits' admission and dispatcher, the fair sharing of the
// deliver queues) with their admin API: Get, Set and Usage. The passes a
// background runner calls are limits.Limits' own: Refresh, Dispatch,
// SweepPermits, Share (and Run, which loops over them). A nil *Limits has
// no limits.
type Limits struct {
	*limits.Limits

	pool *db.Pool
}

// fairQueues are the queues whose due jobs Limits.Share orders across
// tenants: both lanes' single deliveries and batches.
var fairQueues = []string{QueueDeliver, QueueDeliverBatch, QueueDeliverBulk, QueueDeliverBulkBatch}

// NewLimits returns Limits on pool.
func NewLimits(pool *db.Pool, cfg LimitsConfig) *Limits {
	if cfg.FairQueues == nil {
		cfg.FairQueues = fairQueues
	}
	return &Limits{Limits: limits.New(pool, cfg), pool: pool}
}

// inner returns the limits (nil: none).
func (l *Limits) inner() *limits.Limits {
	if l == nil {
		return nil
	}
	return l.Limits
}

// Refresh re-reads every tenant's limits.
func (l *Limits) Refresh(ctx context.Context) error {
	return storeError(l.Limits.Refresh(ctx), "read tenant limits")
}

// Effective returns the limits that apply to tenant, from the cache.
func (l *Limits) Effective(tenant string) EffectiveLimits { return l.inner().For(tenant) }

// Wake makes the dispatcher look at held deliveries now.
func (l *Limits) Wake() { l.inner().Wake() }

// AllowAPI counts one API request of tenant against its rate.
func (l *Limits) AllowAPI(ctx context.Context, tenant string) (APIDecision, error) {
	d, err := l.Limits.AllowAPI(ctx, tenant)
	return d, storeError(err, "take API budget")
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
	return TenantLimitsView{Tenant: tenant, Limits: limits.OwnOf(row), Effective: limits.Apply(row, l.Defaults())}, nil
}

// Set replaces tenant's limits (nil: the server's default) and records the
// change (set_limits). It applies on this replica at once and on the
// others within a second.
func (l *Limits) Set(ctx context.Context, tenant string, in TenantLimits) (TenantLimitsView, error) {
	var ve ValidationError
	for _, f := range []struct {
		name string
		v    *int
	}{{limits.MaxTasks, in.MaxTasks}, {limits.MaxWorkflows, in.MaxWorkflows}, {limits.MaxInflightDeliveries, in.MaxInflightDeliveries}} {
		if f.v != nil && (*f.v < 0 || *f.v > math.MaxInt32) {
			ve.Add(f.name, "must be a whole number from 0 to 2147483647, or null for the server default")
		}
	}
	if in.MaxInflightDeliveries != nil && *in.MaxInflightDeliveries == 0 {
		ve.Add(limits.MaxInflightDeliveries, "must be at least 1 (null: the server default)")
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{limits.MaxDeliveriesPerSecond, in.MaxDeliveriesPerSecond}, {limits.APIRequestsPerSecond, in.APIRequestsPerSecond}} {
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
		v := int32(*p) // validated above
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
		return recordAudit(ctx, tx, tenant, AuditSetLimits, ResourceLimits, tenant, auditDiff(limits.OwnOf(old), in))
	})
	if err != nil {
		return TenantLimitsView{}, err
	}
	l.Changed(row)
	return TenantLimitsView{Tenant: tenant, Limits: in, Effective: limits.Apply(row, l.Defaults())}, nil
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
	return Usage{Limits: limits.Apply(row, l.Defaults()), Tasks: u.Tasks, Workflows: u.Workflows,
		InflightDeliveries: u.Inflight}, nil
}

// checkTaskQuota refuses a task create past the tenant's max_tasks, in
// the create's transaction (limits.Limits.CheckTaskQuota).
func (l *Limits) checkTaskQuota(ctx context.Context, tx db.Tx, tenant string) error {
	return quotaError(l.inner().CheckTaskQuota(ctx, tx, tenant), "check the task quota")
}

// checkWorkflowQuota refuses a workflow create past the tenant's
// max_workflows, in the create's transaction.
func (l *Limits) checkWorkflowQuota(ctx context.Context, tx db.Tx, tenant string) error {
	return quotaError(l.inner().CheckWorkflowQuota(ctx, tx, tenant), "check the workflow quota")
}

// quotaError passes a quota's refusal on and translates db's errors.
func quotaError(err error, op string) error {
	var qe *QuotaError
	if errors.As(err, &qe) {
		return qe
	}
	return storeError(err, op)
}

// deliveryGates returns the gates a delivery of row passes (none: no
// limit applies).
func (l *Limits) deliveryGates(row db.DeliveryRow) []limits.Gate {
	var ep *limits.Endpoint
	if row.EndpointID != nil {
		ep = &limits.Endpoint{ID: *row.EndpointID, MaxConcurrency: row.EndpointMaxConcurrency, RatePerSecond: row.EndpointRateLimit}
	}
	return l.inner().Gates(row.TenantID, ep)
}

// permitTTL is a permit's lifetime (LimitsConfig.PermitTTL).
func (l *Limits) permitTTL() time.Duration { return l.inner().PermitTTL() }
