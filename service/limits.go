package service

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/limits"
)

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
	// APIDecision is the answer to one API request under its tenant's
	// rate.
	APIDecision = limits.APIDecision
	// TenantLimitsView is a tenant's own limits and those that apply.
	TenantLimitsView = limits.View
)

// Limits is the tenants' limits and quotas (service/limits, which holds
// the algorithms: the cache, the count quotas, the API's request rate,
// the delivery limits' admission and dispatcher, the fair sharing of the
// deliver queues) and their admin API (Get, Set and Usage), all
// limits.Limits' own, as are the passes a background runner calls:
// Refresh, Dispatch, SweepPermits, Share (and Run, which loops over them).
// Limits adds what service's files ask of them. A nil *Limits has no
// limits.
type Limits struct {
	*limits.Limits
}

// fairQueues are the queues whose due jobs Limits.Share orders across
// tenants: both lanes' single deliveries and batches.
var fairQueues = []string{QueueDeliver, QueueDeliverBatch, QueueDeliverBulk, QueueDeliverBulkBatch}

// NewLimits returns Limits on pool.
func NewLimits(pool *db.Pool, cfg LimitsConfig) *Limits {
	if cfg.FairQueues == nil {
		cfg.FairQueues = fairQueues
	}
	return &Limits{Limits: limits.New(pool, cfg)}
}

// inner returns the limits (nil: none).
func (l *Limits) inner() *limits.Limits {
	if l == nil {
		return nil
	}
	return l.Limits
}

// Effective returns the limits that apply to tenant, from the cache.
func (l *Limits) Effective(tenant string) EffectiveLimits { return l.inner().For(tenant) }

// Wake makes the dispatcher look at held deliveries now.
func (l *Limits) Wake() { l.inner().Wake() }

// checkTaskQuota refuses a task create past the tenant's max_tasks, in
// the create's transaction (limits.Limits.CheckTaskQuota).
func (l *Limits) checkTaskQuota(ctx context.Context, tx db.Tx, tenant string) error {
	return storeError(l.inner().CheckTaskQuota(ctx, tx, tenant), "check the task quota")
}

// checkWorkflowQuota refuses a workflow create past the tenant's
// max_workflows, in the create's transaction.
func (l *Limits) checkWorkflowQuota(ctx context.Context, tx db.Tx, tenant string) error {
	return storeError(l.inner().CheckWorkflowQuota(ctx, tx, tenant), "check the workflow quota")
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
