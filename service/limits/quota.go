package limits

import (
	"context"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// CheckTaskQuota refuses a task create past the tenant's max_tasks
// (*errs.QuotaError), in the create's transaction q: the tenant's row lock
// orders concurrent creates, so two cannot both take the last place.
// Without a limit it costs nothing.
func (l *Limits) CheckTaskQuota(ctx context.Context, q db.Querier, tenant string) error {
	return l.checkQuota(ctx, q, tenant, MaxTasks, func(e Effective) int { return e.MaxTasks }, db.CountTasks)
}

// CheckWorkflowQuota refuses a workflow create past the tenant's
// max_workflows, in the create's transaction, as CheckTaskQuota does for
// tasks.
func (l *Limits) CheckWorkflowQuota(ctx context.Context, q db.Querier, tenant string) error {
	return l.checkQuota(ctx, q, tenant, MaxWorkflows, func(e Effective) int { return e.MaxWorkflows }, db.CountWorkflows)
}

// checkQuota refuses a create past quota name, whose maximum max reads
// from the tenant's limits and whose count count takes. The cache tells
// whether the tenant has the quota at all; the limit counted against is
// read again under the tenant's row lock.
func (l *Limits) checkQuota(ctx context.Context, q db.Querier, tenant, name string, max func(Effective) int,
	count func(context.Context, db.Querier, string) (int, error),
) error {
	if l == nil || max(l.For(tenant)) == 0 {
		return nil
	}
	row, err := db.GetTenantLimits(ctx, q, tenant, true)
	if err != nil {
		return errs.Store(err, "read tenant limits")
	}
	limit := max(Apply(row, l.cfg.Defaults))
	if limit == 0 {
		return nil
	}
	n, err := count(ctx, q, tenant)
	if err != nil {
		return errs.Store(err, "count "+name)
	}
	if n >= limit {
		return &errs.QuotaError{Limit: name, Max: limit}
	}
	return nil
}
