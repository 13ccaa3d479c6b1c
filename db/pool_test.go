package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// TestPoolSessionParameters checks what each pool's sessions run with; the
// batched delivery statements rely on the delivery pool's planner settings.
func TestPoolSessionParameters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pools, err := db.OpenPools(ctx, dbtest.URL(t)+"&random_page_cost=2", 6)
	require.NoError(t, err)
	defer pools.Close()
	show := func(q db.Querier, name string) string {
		var v string
		require.NoError(t, q.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v))
		return v
	}
	require.Equal(t, "force_custom_plan", show(pools.Main, "plan_cache_mode"))
	require.Equal(t, "2", show(pools.Main, "random_page_cost"), "a parameter of the URL wins")
	require.Equal(t, "on", show(pools.Main, "enable_seqscan"))
	for name, want := range map[string]string{
		"plan_cache_mode": "force_generic_plan", "synchronous_commit": "off",
		"enable_seqscan": "off", "enable_hashjoin": "off", "enable_mergejoin": "off", "lock_timeout": "10s",
	} {
		require.Equal(t, want, show(pools.Delivery, name), name)
	}
	require.Equal(t, db.ConnectTimeoutDefault, pools.Main.Config().ConnConfig.ConnectTimeout)
	require.Equal(t, db.ConnectTimeoutDefault, pools.Delivery.Config().ConnConfig.ConnectTimeout)
	require.EqualValues(t, 4, pools.Main.Config().MaxConns)
	require.EqualValues(t, 2, pools.Delivery.Config().MaxConns)
}
