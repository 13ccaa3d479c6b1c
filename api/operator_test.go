package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// operatorDetail is what every 403 of a tenant token on an operator's
// route says.
const operatorDetail = `needs an operator token (tenant claim "*", scope "operator"`

// listRoutes are the router's GET routes under /v1/ without path
// parameters, but the operators' (/v1/admin/): every tenant list route,
// those added later included.
func listRoutes(a *testAPI) []string {
	var out []string
	for _, r := range a.e.Routes() {
		if r.Method == http.MethodGet && strings.HasPrefix(r.Path, "/v1/") && !strings.Contains(r.Path, ":") &&
			!strings.HasPrefix(r.Path, "/v1/admin/") {
			out = append(out, r.Path)
		}
	}
	return out
}

// TestTenantAdminIsEveryTenantScope: a tenant token whose only scope is
// admin reaches every tenant route, reads its own limits and writes to
// its own resources, and gets a 403 naming the operator scope on every
// operator's power: setting limits (its own or another tenant's), reading
// another tenant's, listing the replicas.
func TestTenantAdminIsEveryTenantScope(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	admin := token(t, "acme", api.ScopeAdmin)
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: token(t, "other")})

	routes := listRoutes(a)
	require.Contains(t, routes, "/v1/tasks", "the router lists the tenant routes")
	for _, path := range routes {
		a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: admin})
	}
	ep := a.createEndpoint(admin, "billing")
	task := a.createTask(admin, ep, "daily", nil).JSON["id"].(string)
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: admin})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/admin/tenants/acme/limits", Token: admin})

	for _, r := range []req{
		{Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: admin, Body: map[string]any{"max_tasks": 100000}},
		{Method: http.MethodPut, Path: "/v1/admin/tenants/other/limits", Token: admin, Body: map[string]any{"max_tasks": 0}},
		{Method: http.MethodGet, Path: "/v1/admin/tenants/other/limits", Token: admin},
		{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: admin},
		{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: token(t, "acme", api.AllScopes()...)},
	} {
		out := a.must(http.StatusForbidden, r)
		requireProblem(t, out, http.StatusForbidden)
		require.Contains(t, out.JSON["detail"], operatorDetail, "%s %s", r.Method, r.Path)
		require.Contains(t, out.JSON["detail"], `a tenant's "admin" scope covers its own tenant only`)
	}
	require.Empty(t, a.auditEntries(admin, url.Values{"resource_type": {"limits"}}), "no limits changed")
}

// TestOperatorToken: an operator token sets and reads the limits of any
// tenant, each change recorded in that tenant's audit log with the
// operator's subject and operator true; it lists the replicas; it is
// refused (403) by every tenant route, since it acts for no tenant, and
// creates no tenant.
func TestOperatorToken(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	op := operatorToken(t)
	acme, other := token(t, "acme"), token(t, "other")
	for _, tok := range []string{acme, other} {
		a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok})
	}

	me := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: op})
	require.Equal(t, map[string]any{"tenant": "*", "subject": operatorSubject, "scopes": []any{"operator"}}, me.JSON)

	for tenant, tok := range map[string]string{"acme": acme, "other": other} {
		path := "/v1/admin/tenants/" + tenant + "/limits"
		r := a.must(http.StatusOK, req{Method: http.MethodPut, Path: path, Token: op, Body: map[string]any{"max_tasks": 3}})
		requestID := r.Header.Get("X-Request-Id")
		require.InDelta(t, 3, a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: op}).JSON["limits"].(map[string]any)["max_tasks"], 0)
		require.InDelta(t, 3, a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/limits", Token: tok}).JSON["limits"].(map[string]any)["max_tasks"], 0)

		entries := a.auditEntries(tok, url.Values{"resource_type": {"limits"}})
		require.Len(t, entries, 1, "%s: the change is in the tenant's own log", tenant)
		e := entries[0]
		require.Equal(t, tenant, e["tenant"])
		require.Equal(t, "set_limits", e["action"])
		require.Equal(t, operatorSubject, e["subject"], "the operator's subject")
		require.Equal(t, true, e["operator"], "marked as an operator's change")
		require.Equal(t, requestID, e["request_id"])
		require.Equal(t, map[string]any{"max_tasks": map[string]any{"old": nil, "new": 3.0}}, e["changes"])
	}
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: op})

	// No tenant's routes: the operator acts for none.
	for _, path := range listRoutes(a) {
		if path == "/v1/me" {
			continue
		}
		out := a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: path, Token: op})
		requireProblem(t, out, http.StatusForbidden)
		require.Contains(t, out.JSON["detail"], "an operator token acts for no tenant", path)
	}
	ep := a.createEndpoint(acme, "billing")
	task := a.createTask(acme, ep, "daily", nil).JSON["id"].(string)
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/tasks/" + task, Token: op})
	a.must(http.StatusForbidden, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: op})
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: op,
		Body: map[string]any{"name": "x", "url": "https://hooks.example.com/x"},
	})
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/executions/" + task + "/complete", Token: op,
		Body: map[string]any{"status": "succeeded"},
	})
	var tenants []string
	rows, err := a.pool.Query(t.Context(), `SELECT id FROM tenants ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		tenants = append(tenants, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"acme", "other"}, tenants, "an operator's requests create no tenant")
}

// TestOperatorClaims: an operator token is the tenant claim "*" with the
// operator scope. "*" without it is no token at all (401); the operator
// scope on a tenant's token grants nothing (403, saying why); the token
// issuers keep the two apart.
func TestOperatorClaims(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	hs := func(tenant, scope string) string {
		return signToken(t, jwt.SigningMethodHS256, []byte(testSecret), claimsFor(tenant, map[string]any{"scope": scope}), nil)
	}
	requireUnauthorized(t, a.do(req{Method: http.MethodGet, Path: "/v1/me", Token: hs("*", "admin")}), true)
	requireUnauthorized(t, a.do(req{Method: http.MethodGet, Path: "/v1/me", Token: hs("*", "")}), true)

	// Its extra scopes grant nothing: it still acts for no tenant.
	extra := hs("*", "operator admin tasks:read")
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: extra})
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/tasks", Token: extra})

	pretender := hs("acme", "operator admin")
	for _, r := range []req{
		{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: pretender},
		{Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: pretender, Body: map[string]any{}},
	} {
		out := a.must(http.StatusForbidden, r)
		require.Contains(t, out.JSON["detail"], `lists the "operator" scope but acts for tenant "acme", so it is a tenant token`)
	}
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks", Token: pretender})

	_, err := api.IssueToken([]byte(testSecret), "acme", "x", []string{api.ScopeOperator}, time.Hour, "", "")
	require.ErrorContains(t, err, "operator")
	_, err = api.IssueToken([]byte(testSecret), api.OperatorTenant, "x", []string{api.ScopeOperator}, time.Hour, "", "")
	require.Error(t, err, `"*" is no tenant`)
	auth, err := api.NewAuthenticator(api.AuthConfig{HMACSecret: []byte(testSecret)})
	require.NoError(t, err)
	p, err := auth.Verify(operatorToken(t))
	require.NoError(t, err)
	require.Equal(t, api.Principal{Subject: operatorSubject, Scopes: []string{api.ScopeOperator}}, p)
	require.True(t, p.Operator())
	require.False(t, p.Allows(api.ScopeTasksRead))
	require.False(t, api.Principal{Tenant: "acme", Scopes: []string{api.ScopeAdmin, api.ScopeOperator}}.Operator())
	require.True(t, api.Principal{Tenant: "acme", Scopes: []string{api.ScopeAdmin}}.Allows("events:write"),
		"admin implies tenant scopes to come")
}

// TestAdminIsOperator: the deprecated switch restores the old rule for a
// tenant token with admin (its own limits, the replicas), and nothing
// more: another tenant's limits stay an operator's; tenant tokens without
// admin and operator tokens are unchanged. Its limits changes are the
// tenant's own (operator false).
func TestAdminIsOperator(t *testing.T) {
	t.Parallel()
	a := newAPI(t, &apiOpts{AdminIsOperator: true})
	admin := token(t, "acme", api.ScopeAdmin)
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: token(t, "other")})

	a.must(http.StatusOK, req{Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: admin, Body: map[string]any{"max_tasks": 9}})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: admin})
	a.must(http.StatusForbidden, req{Method: http.MethodPut, Path: "/v1/admin/tenants/other/limits", Token: admin, Body: map[string]any{}})
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/admin/tenants/other/limits", Token: admin})
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/admin/replicas", Token: token(t, "acme")})
	a.must(http.StatusForbidden, req{Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: token(t, "acme"), Body: map[string]any{}})
	a.must(http.StatusOK, req{Method: http.MethodPut, Path: "/v1/admin/tenants/other/limits", Token: operatorToken(t), Body: map[string]any{}})

	e := a.auditEntries(admin, url.Values{"resource_type": {"limits"}})
	require.Len(t, e, 1)
	require.Equal(t, "test", e[0]["subject"])
	require.Equal(t, false, e[0]["operator"])
}
