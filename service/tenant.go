package service

import (
	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/tenant"
)

// Tenants creates tenants on their first authenticated use
// (service/tenant).
type Tenants = tenant.Tenants

// NewTenants returns a Tenants backed by pool.
func NewTenants(pool *db.Pool) *Tenants { return tenant.New(pool) }
