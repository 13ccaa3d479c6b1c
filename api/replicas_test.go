package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/service"
)

// TestListReplicas: operator tokens see the live replicas, with their
// heartbeat and deliveries in flight; a dead or gone replica is not listed;
// a tenant token, admin included, gets 403.
func TestListReplicas(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	ctx := t.Context()
	reps := service.NewReplicas(a.pool)
	live, gone := service.NewID(), service.NewID()
	_, err := reps.Register(ctx, live, live, "host-a", "v1.2.3")
	require.NoError(t, err)
	_, err = reps.Register(ctx, gone, gone, "host-b", "v1.2.3")
	require.NoError(t, err)
	alive, n, err := reps.Heartbeat(ctx, live, 7)
	require.NoError(t, err)
	require.True(t, alive)
	require.Equal(t, 2, n)
	_, err = reps.Leave(ctx, gone, gone)
	require.NoError(t, err)

	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: token(t, "acme")})
	r := a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: token(t, "ops", api.ScopeAdmin)})
	requireProblem(t, r, http.StatusForbidden)
	require.Contains(t, r.JSON["detail"], `scope "operator"`)
	a.must(http.StatusUnauthorized, req{Method: http.MethodGet, Path: "/v1/admin/replicas"})

	r = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: operatorToken(t)})
	items := r.JSON["items"].([]any)
	require.Len(t, items, 1, "%s", r.Raw)
	got := items[0].(map[string]any)
	require.Equal(t, live, got["id"])
	require.Equal(t, "host-a", got["hostname"])
	require.Equal(t, "v1.2.3", got["version"])
	require.EqualValues(t, 7, got["deliveries_in_flight"])
	for _, k := range []string{"started_at", "last_heartbeat_at"} {
		at, err := time.Parse(time.RFC3339Nano, got[k].(string))
		require.NoError(t, err, k)
		require.WithinDuration(t, time.Now(), at, time.Minute, k)
	}
	require.Len(t, got, 6, "exactly the documented fields: %v", got)
}
