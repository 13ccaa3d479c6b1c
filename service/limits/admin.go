package limits

import (
	"context"
	"math"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/errs"
)

// Resource is the audited resource type of a tenant's limits.
const Resource = "limits"

// View is a tenant's own limits and those that apply.
type View struct {
	Tenant    string
	Limits    Own
	Effective Effective
}

// Get returns tenant's limits.
func (l *Limits) Get(ctx context.Context, tenant string) (View, error) {
	row, err := db.GetTenantLimits(ctx, l.pool, tenant, false)
	if err != nil {
		return View{}, errs.Store(err, "read tenant limits")
	}
	return View{Tenant: tenant, Limits: OwnOf(row), Effective: Apply(row, l.Defaults())}, nil
}

// Set replaces tenant's limits (nil: the server's default) and records the
// change (set_limits). It applies on this replica at once and on the
// others within a second.
func (l *Limits) Set(ctx context.Context, tenant string, in Own) (View, error) {
	var ve errs.ValidationError
	for _, f := range []struct {
		name string
		v    *int
	}{{MaxTasks, in.MaxTasks}, {MaxWorkflows, in.MaxWorkflows}, {MaxInflightDeliveries, in.MaxInflightDeliveries}} {
		if f.v != nil && (*f.v < 0 || *f.v > math.MaxInt32) {
			ve.Add(f.name, "must be a whole number from 0 to 2147483647, or null for the server default")
		}
	}
	if in.MaxInflightDeliveries != nil && *in.MaxInflightDeliveries == 0 {
		ve.Add(MaxInflightDeliveries, "must be at least 1 (null: the server default)")
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{MaxDeliveriesPerSecond, in.MaxDeliveriesPerSecond}, {APIRequestsPerSecond, in.APIRequestsPerSecond}} {
		if f.v != nil && (!(*f.v > 0) || *f.v > 1e6 || math.IsInf(*f.v, 0)) {
			ve.Add(f.name, "must be a number above 0 and at most 1000000, or null for the server default")
		}
	}
	if err := ve.Err(); err != nil {
		return View{}, err
	}
	i32 := func(p *int) *int32 {
		if p == nil {
			return nil
		}
		v := int32(*p) // validated above
		return &v
	}
	row := db.TenantLimits{
		TenantID: tenant, MaxTasks: i32(in.MaxTasks), MaxWorkflows: i32(in.MaxWorkflows),
		MaxInflight: i32(in.MaxInflightDeliveries), MaxPerSecond: in.MaxDeliveriesPerSecond,
		APIRequestsPerSecond: in.APIRequestsPerSecond,
	}
	err := db.InTx(ctx, l.pool, func(tx db.Tx) error {
		old, err := db.GetTenantLimits(ctx, tx, tenant, true)
		if err != nil {
			return errs.Store(err, "read tenant limits")
		}
		if err := db.SetTenantLimits(ctx, tx, row); err != nil {
			return errs.Store(err, "set tenant limits")
		}
		return audit.Record(ctx, tx, tenant, audit.SetLimits, Resource, tenant, audit.Diff(OwnOf(old), in))
	})
	if err != nil {
		return View{}, errs.Store(err, "set tenant limits")
	}
	l.Changed(row)
	return View{Tenant: tenant, Limits: in, Effective: Apply(row, l.Defaults())}, nil
}

// Usage is a tenant's limits with what they count now.
type Usage struct {
	Limits             Effective
	Tasks              int
	Workflows          int
	InflightDeliveries int
}

// Usage returns tenant's limits and current usage (GET /v1/limits).
func (l *Limits) Usage(ctx context.Context, tenant string) (Usage, error) {
	row, err := db.GetTenantLimits(ctx, l.pool, tenant, false)
	if err != nil {
		return Usage{}, errs.Store(err, "read tenant limits")
	}
	u, err := db.GetTenantUsage(ctx, l.pool, tenant)
	if err != nil {
		return Usage{}, errs.Store(err, "read tenant usage")
	}
	return Usage{
		Limits: Apply(row, l.Defaults()), Tasks: u.Tasks, Workflows: u.Workflows,
		InflightDeliveries: u.Inflight,
	}, nil
}
