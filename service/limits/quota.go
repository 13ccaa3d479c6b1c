package limits

import (
	"context"
	"fmt"

	"github.com/axhq/ax/db"
)

// QuotaError is a create refused by a count quota: the API answers 409
// with a problem type ending in /quota-exceeded.
type QuotaError struct {
	Limit string
	Max   int
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("the tenant's %s quota (%d) is reached; delete some or ask an operator to raise it", e.Limit, e.Max)
}

// CheckTaskQuota refuses a task create past the tenant's max_tasks
// (*QuotaError), in the create's transaction q: the tenant's row lock
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
		return err
	}
	limit := max(Apply(row, l.cfg.Defaults))
	if limit == 0 {
		return nil
	}
	n, err := count(ctx, q, tenant)
	if err != nil {
		return err
	}
	if n >= limit {
		return &QuotaError{Limit: name, Max: limit}
	}
	return nil
}
