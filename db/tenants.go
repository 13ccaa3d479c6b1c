package db

import (
	"context"
	"fmt"
)

// EnsureTenant creates tenant id unless it exists.
func EnsureTenant(ctx context.Context, q Querier, id string) error {
	if _, err := q.Exec(ctx, `INSERT INTO tenants (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, id); err != nil {
		return fmt.Errorf("ensure tenant: %w", err)
	}
	return nil
}
