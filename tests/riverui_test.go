package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// uiResp is a River UI response.
type uiResp struct {
	status int
	header http.Header
	body   string
}

func (r uiResp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.body), &m), r.body)
	return m
}

// uiDo sends one request without following redirects.
func uiDo(t *testing.T, method, url string, header map[string]string, body string) uiResp {
	t.Helper()
	r, err := uiSend(ctxT(t), method, url, header, body)
	require.NoError(t, err)
	return r
}

// uiSend is uiDo returning its error, for a condition of Eventually.
func uiSend(ctx context.Context, method, url string, header map[string]string, body string) (uiResp, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return uiResp{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		return uiResp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return uiResp{status: res.StatusCode, header: res.Header, body: string(b)}, err
}

// cliToken mints a token with `ax token` and the server's configuration.
func cliToken(t *testing.T, env map[string]string, tenant, scope string) string {
	t.Helper()
	cmd := exec.Command(axBinary, "token", "--tenant", tenant, "--scope", scope)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// cliOperatorToken mints an operator token with `ax token --operator`.
func cliOperatorToken(t *testing.T, env map[string]string, subject string) string {
	t.Helper()
	cmd := exec.Command(axBinary, "token", "--operator", "--subject", subject)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestRiverUI: the real River UI at /riverui/, for operator tokens only
// (a tenant's admin token is refused), in a browser through the ?token= →
// cookie exchange, with changes refused from other sites. The operators'
// REST routes follow the same rule: an operator sets any tenant's limits
// (recorded in that tenant's audit log under the operator's subject) and
// lists the replicas, a tenant's admin does neither, until the deprecated
// AX_ADMIN_IS_OPERATOR=true restores the old rule, saying so in the log.
func TestRiverUI(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t),
		"AX_JWT_SECRET":   "riverui-test-secret-0123456789abcdef0123456789",
	}
	p := startAx(t, env)
	operator := cliOperatorToken(t, env, "ops-oncall")
	tenantAdmin := cliToken(t, env, "acme", "admin")
	tenant := cliToken(t, env, "acme", "tasks:read tasks:write endpoints:read endpoints:write executions:read executions:write")
	ui := p.base + "/riverui/"
	auth := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	isProblem := func(r uiResp, status int) {
		t.Helper()
		require.Equal(t, status, r.status, r.body)
		require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	}

	isProblem(uiDo(t, http.MethodGet, ui, nil, ""), http.StatusUnauthorized)
	isProblem(uiDo(t, http.MethodGet, ui+"api/jobs?state=available", nil, ""), http.StatusUnauthorized)
	isProblem(uiDo(t, http.MethodGet, ui, auth("not-a-token"), ""), http.StatusUnauthorized)
	isProblem(uiDo(t, http.MethodGet, ui, auth(tenant), ""), http.StatusForbidden)
	isProblem(uiDo(t, http.MethodGet, ui+"api/queues", auth(tenant), ""), http.StatusForbidden)
	isProblem(uiDo(t, http.MethodGet, ui+"?token="+tenant, nil, ""), http.StatusForbidden)
	isProblem(uiDo(t, http.MethodGet, ui, auth(tenantAdmin), ""), http.StatusForbidden)
	isProblem(uiDo(t, http.MethodGet, ui+"api/jobs?state=available", auth(tenantAdmin), ""), http.StatusForbidden)
	r := uiDo(t, http.MethodGet, ui+"?token="+tenantAdmin, nil, "")
	isProblem(r, http.StatusForbidden)
	require.Contains(t, r.json(t)["detail"], `needs an operator token`)
	require.Empty(t, r.header.Values("Set-Cookie"), "no session for a tenant's admin")

	// The operator gets River's own index page, configured for the prefix.
	r = uiDo(t, http.MethodGet, ui, auth(operator), "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.header.Get("Content-Type"), "text/html")
	require.Contains(t, r.body, "<title>River</title>")
	require.Contains(t, r.body, `"apiUrl":"/riverui/api"`)
	require.Equal(t, "/riverui/", uiDo(t, http.MethodGet, p.base+"/riverui", nil, "").header.Get("Location"))

	// A browser: ?token= once, then the cookie.
	r = uiDo(t, http.MethodGet, ui+"?token="+operator, nil, "")
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	require.Equal(t, "/riverui/", r.header.Get("Location"))
	cookies := (&http.Response{Header: r.header}).Cookies()
	require.Len(t, cookies, 1)
	ck := cookies[0]
	require.Equal(t, operator, ck.Value)
	require.Equal(t, "/riverui/", ck.Path)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	browser := func(h map[string]string) map[string]string {
		out := map[string]string{"Cookie": ck.Name + "=" + ck.Value, "Accept": "text/html,application/json"}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	r = uiDo(t, http.MethodGet, ui, browser(nil), "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.body, "<title>River</title>")
	r = uiDo(t, http.MethodGet, ui+"api/states", browser(nil), "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, r.json(t), "available")

	// The River client of the server registers the deliver queue.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		r, err := uiSend(t.Context(), http.MethodGet, ui+"api/queues/deliver", browser(nil), "")
		assert.NoError(c, err)
		assert.Equal(c, http.StatusOK, r.status, r.body)
	}, 30*time.Second, 100*time.Millisecond)

	// Changes from another site are refused and change nothing.
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
		{"Origin": "https://evil.example"},
		{},
	} {
		isProblem(uiDo(t, http.MethodPut, ui+"api/queues/deliver/pause", browser(h), ""), http.StatusForbidden)
		isProblem(uiDo(t, http.MethodPost, ui+"api/jobs/cancel", browser(h), `{"ids":["1"]}`), http.StatusForbidden)
	}
	q := uiDo(t, http.MethodGet, ui+"api/queues/deliver", browser(nil), "").json(t)
	require.Nil(t, q["paused_at"])

	// From the UI's own pages they work.
	r = uiDo(t, http.MethodPut, ui+"api/queues/deliver/pause", browser(map[string]string{"Sec-Fetch-Site": "same-origin"}), "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	q = uiDo(t, http.MethodGet, ui+"api/queues/deliver", browser(nil), "").json(t)
	require.NotNil(t, q["paused_at"])
	r = uiDo(t, http.MethodPut, ui+"api/queues/deliver/resume", browser(map[string]string{"Origin": p.base}), "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	q = uiDo(t, http.MethodGet, ui+"api/queues/deliver", browser(nil), "").json(t)
	require.Nil(t, q["paused_at"])

	// The operators' REST routes: a tenant's admin token reads its own
	// limits and reaches its tenant's routes, and sets no limits, its own
	// or another tenant's, and lists no replicas.
	apiGet(t, p.base, tenantAdmin, "/v1/tasks")
	apiGet(t, p.base, tenantAdmin, "/v1/audit")
	apiGet(t, p.base, tenantAdmin, "/v1/admin/tenants/acme/limits")
	apiGet(t, p.base, cliToken(t, env, "globex", "tasks:read"), "/v1/me")
	for _, c := range []struct{ method, path string }{
		{http.MethodPut, "/v1/admin/tenants/acme/limits"},
		{http.MethodPut, "/v1/admin/tenants/globex/limits"},
		{http.MethodGet, "/v1/admin/replicas"},
	} {
		var body any
		if c.method == http.MethodPut {
			body = map[string]any{"max_tasks": 1000000}
		}
		refused := apiDo(t, c.method, p.base+c.path, tenantAdmin, body, http.StatusForbidden)
		require.Contains(t, refused["detail"], `needs an operator token (tenant claim "*", scope "operator"`, c.path)
	}
	// The operator's: any tenant's limits, each change in that tenant's
	// log under the operator's subject; the replicas.
	for _, name := range []string{"acme", "globex"} {
		apiDo(t, http.MethodPut, p.base+"/v1/admin/tenants/"+name+"/limits", operator, map[string]any{"max_tasks": 50}, http.StatusOK)
	}
	entries := apiGet(t, p.base, tenantAdmin, "/v1/audit?resource_type=limits")["items"].([]any)
	require.Len(t, entries, 1)
	rec := entries[0].(map[string]any)
	require.Equal(t, "ops-oncall", rec["subject"])
	require.Equal(t, true, rec["operator"])
	require.Equal(t, "set_limits", rec["action"])
	require.NotEmpty(t, apiGet(t, p.base, operator, "/v1/admin/replicas")["items"])
	apiDo(t, http.MethodGet, p.base+"/v1/tasks", operator, nil, http.StatusForbidden)

	// AX_RIVERUI=false: no UI. AX_ADMIN_IS_OPERATOR=true (deprecated): a
	// tenant's admin lists the replicas and sets its own limits again,
	// and the log says the switch is deprecated.
	env["AX_RIVERUI"] = "false"
	env["AX_ADMIN_IS_OPERATOR"] = "true"
	log := &logCapture{t: t}
	off := startAxLogTo(t, log, env)
	require.Equal(t, http.StatusNotFound, uiDo(t, http.MethodGet, off.base+"/riverui/", auth(operator), "").status)
	// The log is copied from the process's stderr on its own: it may come
	// after the address on stdout.
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "AX_ADMIN_IS_OPERATOR=true is deprecated") },
		10*time.Second, 10*time.Millisecond, "the start log says the switch is deprecated")
	require.NotEmpty(t, apiGet(t, off.base, tenantAdmin, "/v1/admin/replicas")["items"])
	apiDo(t, http.MethodPut, off.base+"/v1/admin/tenants/acme/limits", tenantAdmin, map[string]any{"max_tasks": 60}, http.StatusOK)
	apiDo(t, http.MethodPut, off.base+"/v1/admin/tenants/globex/limits", tenantAdmin, map[string]any{}, http.StatusForbidden)
}
