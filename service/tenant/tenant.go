// Package tenant creates tenants on their first authenticated use.
package tenant

import (
	"context"
	"sync"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Tenants creates tenants on their first authenticated use.
type Tenants struct {
	pool  *db.Pool
	known sync.Map // tenant id → struct{}: already in the database
}

// New returns a Tenants backed by pool.
func New(pool *db.Pool) *Tenants {
	return &Tenants{pool: pool}
}

// Ensure makes sure tenant exists. A tenant seen once by this process is
// not written again, so the cost per request is a map lookup.
func (t *Tenants) Ensure(ctx context.Context, tenant string) error {
	if _, ok := t.known.Load(tenant); ok {
		return nil
	}
	if err := db.EnsureTenant(ctx, t.pool, tenant); err != nil {
		return errs.Store(err, "ensure tenant")
	}
	t.known.Store(tenant, struct{}{})
	return nil
}
