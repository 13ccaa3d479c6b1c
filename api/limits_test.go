package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestTenantLimitsAPI: an operator reads and sets any tenant's limits; a
// tenant token with admin reads only its own and sets none (403 naming
// the operator scope); the limits are validated, and GET /v1/limits then
// shows them with the usage.
func TestTenantLimitsAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, &apiOpts{LimitDefaults: service.EffectiveLimits{MaxInflightDeliveries: 400}})
	admin, op := token(t, "acme", "admin"), operatorToken(t)
	path := "/v1/admin/tenants/acme/limits"

	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: path, Token: token(t, "acme")})
	a.must(http.StatusForbidden, req{Method: http.MethodPut, Path: path, Token: token(t, "acme"), Body: map[string]any{}})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: token(t, "other")})
	for _, r := range []req{
		{Method: http.MethodPut, Path: path, Token: admin, Body: map[string]any{"max_tasks": 1000}},
		{Method: http.MethodPut, Path: "/v1/admin/tenants/other/limits", Token: admin, Body: map[string]any{"max_tasks": 1}},
		{Method: http.MethodGet, Path: "/v1/admin/tenants/other/limits", Token: admin},
	} {
		out := a.must(http.StatusForbidden, r)
		requireProblem(t, out, http.StatusForbidden)
		require.Contains(t, out.JSON["detail"], `needs an operator token (tenant claim "*", scope "operator"`, "%s %s", r.Method, r.Path)
	}
	r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: admin})
	require.Nil(t, r.JSON["limits"].(map[string]any)["max_tasks"], "null: the server default")
	require.InDelta(t, 400, r.JSON["effective"].(map[string]any)["max_inflight_deliveries"], 0, "the server default applies")
	require.Equal(t, r.JSON, a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: op}).JSON, "the operator reads it too")
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/admin/tenants/never-seen/limits", Token: op})
	a.must(http.StatusNotFound, req{Method: http.MethodPut, Path: "/v1/admin/tenants/never-seen/limits", Token: op, Body: map[string]any{}})

	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPut, Path: path, Token: op,
		Body: map[string]any{"max_tasks": -1, "api_requests_per_second": 0, "max_inflight_deliveries": 0},
	})
	require.Len(t, r.JSON["errors"], 3, "%s", r.Raw)
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPut, Path: path, Token: op, Body: map[string]any{"max_taskz": 1}})

	r = a.must(http.StatusOK, req{
		Method: http.MethodPut, Path: path, Token: op,
		Body: map[string]any{"max_tasks": 5, "max_inflight_deliveries": 10, "max_deliveries_per_second": 2.5},
	})
	require.InDelta(t, 5, r.JSON["limits"].(map[string]any)["max_tasks"], 0)
	require.InDelta(t, 10, r.JSON["effective"].(map[string]any)["max_inflight_deliveries"], 0, "its own beats the default")
	require.InDelta(t, 2.5, r.JSON["effective"].(map[string]any)["max_deliveries_per_second"], 0)
	require.Nil(t, r.JSON["effective"].(map[string]any)["api_requests_per_second"], "no limit")
	// The same operator token sets another tenant's.
	a.must(http.StatusOK, req{Method: http.MethodPut, Path: "/v1/admin/tenants/other/limits", Token: op, Body: map[string]any{"max_tasks": 7}})

	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	a.createTask(tok, ep, "one", nil)
	r = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/limits", Token: tok})
	require.Equal(t, "acme", r.JSON["tenant"])
	require.InDelta(t, 5, r.JSON["limits"].(map[string]any)["max_tasks"], 0)
	require.InDelta(t, 1, r.JSON["usage"].(map[string]any)["tasks"], 0)
	require.InDelta(t, 0, r.JSON["usage"].(map[string]any)["inflight_deliveries"], 0)

	// Another tenant has its own.
	r = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/limits", Token: token(t, "other")})
	require.InDelta(t, 7, r.JSON["limits"].(map[string]any)["max_tasks"], 0)
	require.InDelta(t, 400, r.JSON["limits"].(map[string]any)["max_inflight_deliveries"], 0)
}

// TestTaskQuota: a create past max_tasks is a 409 whose problem type ends
// in /quota-exceeded and names the limit; a delete makes room again.
func TestTaskQuota(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	a.must(http.StatusOK, req{
		Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: operatorToken(t),
		Body: map[string]any{"max_tasks": 2},
	})
	a.createTask(tok, ep, "one", nil)
	second := a.createTask(tok, ep, "two", nil).JSON["id"].(string)
	r := a.do(req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: map[string]any{
		"name": "three", "endpoint_id": ep,
		"schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
	}})
	require.Equal(t, http.StatusConflict, r.Status, "%s", r.Raw)
	require.True(t, strings.HasSuffix(r.JSON["type"].(string), "/quota-exceeded"), r.JSON["type"])
	require.Contains(t, r.JSON["detail"], "max_tasks")
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))

	// Another tenant is not counted against it.
	other := token(t, "other")
	a.createTask(other, a.createEndpoint(other, "x"), "one", nil)

	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/tasks/" + second, Token: tok})
	a.createTask(tok, ep, "three", nil)
}

// TestWorkflowQuota: a workflow create past max_workflows is a 409 whose
// problem type ends in /quota-exceeded and names the limit, also when
// creates race for the last places (exactly the quota is created); the
// usage shows the count, another tenant is not counted, and a delete
// makes room again.
func TestWorkflowQuota(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	a.must(http.StatusOK, req{
		Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: operatorToken(t),
		Body: map[string]any{"max_workflows": 3},
	})
	create := func(tok, ep, name string) resp {
		return a.do(req{
			Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
			Body: map[string]any{"name": name, "nodes": []any{map[string]any{"key": "a", "endpoint_id": ep}}},
		})
	}
	first := create(tok, ep, "wf-0")
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Raw)

	// Eight creates at once for the two places left.
	statuses := make([]resp, 8)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() { statuses[i] = create(tok, ep, fmt.Sprintf("wf-race-%d", i)) })
	}
	wg.Wait()
	created := 0
	for _, r := range statuses {
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			require.True(t, strings.HasSuffix(r.JSON["type"].(string), "/quota-exceeded"), r.JSON["type"])
			require.Contains(t, r.JSON["detail"], "max_workflows")
			require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
		default:
			t.Fatalf("create: %d %s", r.Status, r.Raw)
		}
	}
	require.Equal(t, 2, created, "exactly the places left")
	r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/limits", Token: tok})
	require.InDelta(t, 3, r.JSON["usage"].(map[string]any)["workflows"], 0)
	require.InDelta(t, 0, r.JSON["usage"].(map[string]any)["tasks"], 0, "a workflow's steps are not tasks of the API")
	require.InDelta(t, 3, r.JSON["limits"].(map[string]any)["max_workflows"], 0)
	over := create(tok, ep, "wf-over")
	require.Equal(t, http.StatusConflict, over.Status, "%s", over.Raw)

	// Another tenant is not counted against it.
	other := token(t, "other")
	require.Equal(t, http.StatusCreated, create(other, a.createEndpoint(other, "x"), "wf-0").Status)

	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/workflows/" + first.JSON["id"].(string), Token: tok})
	require.Equal(t, http.StatusCreated, create(tok, ep, "wf-after-delete").Status)
}

// TestAPIRateLimit: past api_requests_per_second a request is a 429 with
// Retry-After and the RateLimit-* headers; a tenant without a rate gets
// none of them.
func TestAPIRateLimit(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok}) // creates the tenant
	a.must(http.StatusOK, req{
		Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: operatorToken(t),
		Body: map[string]any{"api_requests_per_second": 2},
	})
	var limited resp
	ok := 0
	for range 20 {
		r := a.do(req{Method: http.MethodGet, Path: "/v1/me", Token: tok})
		require.Equal(t, "2", r.Header.Get("RateLimit-Limit"))
		require.NotEmpty(t, r.Header.Get("RateLimit-Remaining"))
		require.NotEmpty(t, r.Header.Get("RateLimit-Reset"))
		if r.Status == http.StatusTooManyRequests {
			limited = r
			break
		}
		require.Equal(t, http.StatusOK, r.Status)
		ok++
	}
	require.NotZero(t, limited.Status, "20 requests at once exceed 2 per second")
	require.LessOrEqual(t, ok, 3, "at most the bucket (2) and what it refilled meanwhile")
	require.Equal(t, "application/problem+json", limited.Header.Get("Content-Type"))
	require.True(t, strings.HasSuffix(limited.JSON["type"].(string), "/rate-limited"))
	wait, err := strconv.Atoi(limited.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, wait, 1)
	require.Equal(t, "0", limited.Header.Get("RateLimit-Remaining"))

	// Another tenant has no rate: no headers, no 429.
	other := token(t, "other")
	for range 20 {
		r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: other})
		require.Empty(t, r.Header.Get("RateLimit-Limit"))
	}
}

// TestRateLimitRemaining: RateLimit-Remaining says what is left of the
// tenant's budget, not of the share this replica holds: the first request
// of a full bucket of 20 leaves 19 (this replica takes 2 at a time, and
// used to answer 1 or 0), and while it says more than 0 the next request
// is allowed; it counts down to 0 before the first 429.
func TestRateLimitRemaining(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok}) // creates the tenant
	a.must(http.StatusOK, req{
		Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: operatorToken(t),
		Body: map[string]any{"api_requests_per_second": 20},
	})
	prev := -1
	for i := range 100 {
		r := a.do(req{Method: http.MethodGet, Path: "/v1/me", Token: tok})
		left, err := strconv.Atoi(r.Header.Get("RateLimit-Remaining"))
		require.NoError(t, err)
		if i == 0 {
			require.Equal(t, http.StatusOK, r.Status)
			require.Equal(t, 19, left, "a full bucket of 20 less this request")
		}
		if prev > 0 {
			require.Equal(t, http.StatusOK, r.Status, "request %d: the one before said %d remained", i, prev)
		}
		if r.Status == http.StatusTooManyRequests {
			require.Zero(t, prev, "the budget was said to be spent before the first 429")
			require.Zero(t, left)
			return
		}
		require.Equal(t, http.StatusOK, r.Status)
		require.Less(t, left, 20)
		prev = left
	}
	t.Fatal("100 requests at once exceed 20 per second")
}

// TestAPIRateAcrossReplicas: two replicas on one database share a tenant's
// API rate; over 3 s of as many requests as they take, together they
// allow about the rate (never more than the rate over the time plus the
// one-second bucket), and the test logs the error against it.
func TestAPIRateAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	b := newAPI(t, &apiOpts{Pool: a.pool})
	const rate = 20
	tok := token(t, "acme")
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok}) // creates the tenant
	a.must(http.StatusOK, req{
		Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: operatorToken(t),
		Body: map[string]any{"api_requests_per_second": rate},
	})
	require.NoError(t, b.limitsRefresh())
	start := time.Now()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, r := range []*testAPI{a, b, a, b} {
		wg.Go(func() {
			for time.Since(start) < 3*time.Second {
				if r.do(req{Method: http.MethodGet, Path: "/v1/me", Token: tok}).Status == http.StatusOK {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	got := float64(allowed.Load())
	t.Logf("two replicas allowed %.0f requests in %.2f s: %.1f/s against a rate of %d/s (%+.0f%%)",
		got, elapsed, got/elapsed, rate, (got/elapsed/rate-1)*100)
	require.LessOrEqual(t, got, rate*elapsed+rate+1, "never more than the rate and the bucket")
	require.GreaterOrEqual(t, got, rate*elapsed*0.7, "not far below the rate")
}
