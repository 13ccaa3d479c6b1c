package db

import (
	"context"
)

// EnsureTenant creates tenant id unless it exists.
func EnsureTenant(ctx context.Context, q Querier, id string) error {
	if _, err := q.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, id); err != nil {
		return wrap("ensure tenant", err)
	}
	return nil
}
