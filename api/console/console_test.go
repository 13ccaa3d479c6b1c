package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/api/console"
	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/idempotency"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const testSecret = "console-test-secret-0123456789abcdef0123456789"

// env is the API with the console mounted, on a fresh database, over HTTP.
type env struct {
	t    *testing.T
	srv  *httptest.Server
	pool *pgxpool.Pool // the database, for states a test cannot reach over HTTP in time
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, envOpts{})
}

// envOpts are the server's settings a test changes.
type envOpts struct {
	// adminIsOperator: the deprecated AX_ADMIN_IS_OPERATOR (a tenant's
	// admin token sets its own limits).
	adminIsOperator bool
}

func newEnvWith(t *testing.T, o envOpts) *env {
	t.Helper()
	pool := dbtest.Pool(t)
	auth, err := api.NewAuthenticator(api.AuthConfig{HMACSecret: []byte(testSecret)})
	require.NoError(t, err)
	enq, err := service.NewEnqueuer(pool, nil)
	require.NoError(t, err)
	limits := service.NewLimits(pool, service.LimitsConfig{})
	tasks := service.NewTasks(pool, service.TasksConfig{Limits: limits})
	workflows := service.NewWorkflows(pool, enq, service.WorkflowsConfig{})
	events := service.NewEvents(pool, enq, workflows, nil)
	cfg := api.Config{
		Logger:          slog.New(slog.DiscardHandler),
		Auth:            auth,
		Tenants:         service.NewTenants(pool),
		Endpoints:       service.NewEndpoints(pool),
		Tasks:           tasks,
		Executions:      service.NewExecutions(pool, enq, service.ExecutionsConfig{}),
		Deliveries:      service.NewDeliveries(pool, enq, service.DeliveriesConfig{}),
		Stats:           service.NewStats(pool),
		Calendars:       service.NewCalendars(pool, tasks),
		Backfills:       service.NewBackfills(pool, enq, tasks),
		Workflows:       workflows,
		Idempotency:     idempotency.New(pool),
		Audit:           audit.NewLog(pool),
		Replicas:        service.NewReplicas(pool),
		AdminIsOperator: o.adminIsOperator,
		Ready:           func(ctx context.Context) error { return db.CheckMigrated(ctx, pool) },
		Version:         "test",
		Limits:          limits,
		Events:          events,
	}
	sender := jobs.NewSender(jobs.SenderConfig{AllowPrivateTargets: true, UserAgent: "ax/test"})
	t.Cleanup(sender.Close)
	cfg.EndpointProbe = sender.Probe
	e := api.New(cfg)
	console.Mount(e, console.Config{
		Logger: cfg.Logger, Auth: auth, Tenants: cfg.Tenants, Endpoints: cfg.Endpoints,
		Tasks: tasks, Executions: cfg.Executions, Stats: cfg.Stats, Backfills: cfg.Backfills, Workflows: cfg.Workflows,
		Limits: limits, EndpointProbe: sender.Probe, Calendars: cfg.Calendars, Audit: cfg.Audit, AdminIsOperator: o.adminIsOperator,
		Events: events,
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, pool: pool}
}

func token(t *testing.T, tenant string, scopes ...string) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = api.TenantScopes()
	}
	tok, err := api.IssueToken([]byte(testSecret), tenant, "alice", scopes, time.Hour, "", "")
	require.NoError(t, err)
	return tok
}

// operatorToken returns an operator token (ax token --operator).
func operatorToken(t *testing.T) string {
	t.Helper()
	tok, err := api.IssueOperatorToken([]byte(testSecret), "ops-oncall", time.Hour, "", "")
	require.NoError(t, err)
	return tok
}

// page is one response, redirects not followed.
type page struct {
	Status   int
	Header   http.Header
	Body     string
	Location string
}

// browserish: how the request looks to the server.
type opts struct {
	Cookie string            // the session cookie's token ("" none)
	Site   string            // Sec-Fetch-Site ("" none)
	Header map[string]string // more headers
}

func (e *env) do(method, path string, form url.Values, o opts) page {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, body)
	require.NoError(e.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if o.Cookie != "" {
		req.AddCookie(&http.Cookie{Name: "ax_console_token", Value: o.Cookie})
	}
	if o.Site != "" {
		req.Header.Set("Sec-Fetch-Site", o.Site)
	}
	for k, v := range o.Header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return page{Status: res.StatusCode, Header: res.Header, Body: string(b), Location: res.Header.Get("Location")}
}

func (e *env) get(path, tok string) page {
	e.t.Helper()
	return e.do(http.MethodGet, path, nil, opts{Cookie: tok})
}

// post submits a console form as the console's own page would: same
// origin, with the session's CSRF token.
func (e *env) post(path, tok string, form url.Values) page {
	e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if form.Get("csrf") == "" {
		form.Set("csrf", e.csrf(tok))
	}
	return e.do(http.MethodPost, path, form, opts{Cookie: tok, Site: "same-origin"})
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's CSRF token from a page, as a form would carry it.
func (e *env) csrf(tok string) string {
	e.t.Helper()
	p := e.get("/console/dashboard", tok)
	m := csrfRE.FindStringSubmatch(p.Body)
	require.NotNil(e.t, m, "the page carries a CSRF token: %s", p.Body)
	return m[1]
}

var idRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// createEndpoint creates an endpoint through the console and returns its id.
func (e *env) createEndpoint(tok, name string) string {
	e.t.Helper()
	p := e.post("/console/endpoints", tok, url.Values{"name": {name}, "url": {"https://example.com/hook"}})
	require.Equal(e.t, http.StatusCreated, p.Status, p.Body)
	require.Contains(e.t, p.Body, "whsec_")
	require.Contains(e.t, p.Body, "shown only once")
	l := e.get("/console/endpoints", tok)
	i := strings.Index(l.Body, ">"+name+"<")
	require.Positive(e.t, i, l.Body)
	m := regexp.MustCompile(`id="ep-(`+idRE.String()+`)"`).FindAllStringSubmatch(l.Body[:i], -1)
	require.NotEmpty(e.t, m)
	return m[len(m)-1][1]
}

// createTask creates a cron task through the console and returns its id.
func (e *env) createTask(tok, name, endpointID, cron, zone string) string {
	e.t.Helper()
	p := e.post("/console/tasks", tok, url.Values{
		"name": {name}, "endpoint_id": {endpointID}, "type": {"cron"},
		"cron": {cron}, "timezone": {zone}, "payload": {`{"n":1}`},
	})
	require.Equal(e.t, http.StatusSeeOther, p.Status, p.Body)
	require.True(e.t, strings.HasPrefix(p.Location, "/console/tasks/"), p.Location)
	return strings.TrimPrefix(p.Location, "/console/tasks/")
}

func assertSecurityHeaders(t *testing.T, p page) {
	t.Helper()
	csp := p.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "script-src 'self'")
	assert.NotContains(t, csp, "unsafe-inline")
	assert.Contains(t, csp, "frame-ancestors 'none'")
	assert.Contains(t, csp, "form-action 'self'")
	assert.Equal(t, "DENY", p.Header.Get("X-Frame-Options"))
	assert.Equal(t, "nosniff", p.Header.Get("X-Content-Type-Options"))
	assert.Equal(t, "no-referrer", p.Header.Get("Referrer-Policy"))
	assert.NotEmpty(t, p.Header.Get("X-Request-Id"))
}

// TestConsoleSecurityHeaders: every console response (pages, errors, the
// sign-in page, static files) carries the security headers; pages are not
// cached and have no inline script.
func TestConsoleSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	for _, path := range []string{
		"/console/", "/console/tasks", "/console/dashboard", "/console/nope",
		"/console/tasks/00000000-0000-0000-0000-000000000000", "/console/static/console.css",
	} {
		p := e.get(path, tok)
		assertSecurityHeaders(t, p)
		if !strings.HasPrefix(path, "/console/static/") && p.Status != http.StatusSeeOther {
			assert.Equal(t, "no-store", p.Header.Get("Cache-Control"), path)
			assert.Contains(t, p.Header.Get("Content-Type"), "text/html", path)
			assert.NotRegexp(t, `<script>|<script [^>]*>[^<]|\son[a-z]+="|style="`, p.Body, "%s: no inline script or style", path)
		}
	}
	css := e.get("/console/static/console.css", "")
	require.Equal(t, http.StatusOK, css.Status)
	assert.Contains(t, css.Header.Get("Content-Type"), "text/css")
	assert.Contains(t, css.Body, "prefers-color-scheme: dark")
	js := e.get("/console/static/console.js", "")
	require.Equal(t, http.StatusOK, js.Status)
	assert.Contains(t, js.Body, "Intl.DateTimeFormat")
	// /console redirects to /console/, keeping the query.
	r := e.get("/console?x=1", "")
	assert.Equal(t, http.StatusMovedPermanently, r.Status)
	assert.Equal(t, "/console/?x=1", r.Location)
}

// TestConsoleSignIn: ?token= and the pasted form set an HttpOnly,
// SameSite=Strict cookie for /console/ that lives as long as the token;
// a bad token is refused; sign-out forgets the cookie.
func TestConsoleSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")

	p := e.get("/console/", "")
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `name="token"`)
	assert.Contains(t, p.Body, "Sign in")

	p = e.get("/console/?token="+url.QueryEscape(tok)+"&x=1", "")
	require.Equal(t, http.StatusSeeOther, p.Status)
	assert.Equal(t, "/console/?x=1", p.Location, "the token leaves the address")
	ck := p.Header.Get("Set-Cookie")
	assert.Contains(t, ck, "ax_console_token="+tok)
	assert.Contains(t, ck, "Path=/console/")
	assert.Contains(t, ck, "HttpOnly")
	assert.Contains(t, ck, "SameSite=Strict")
	maxAge := regexp.MustCompile(`Max-Age=(\d+)`).FindStringSubmatch(ck)
	require.NotNil(t, maxAge, ck)
	assert.Contains(t, []string{"3598", "3599", "3600"}, maxAge[1], "the cookie lives as long as the token")

	p = e.get("/console/?token=not-a-token", "")
	assert.Equal(t, http.StatusUnauthorized, p.Status)
	assert.Contains(t, p.Body, "invalid or expired")
	assert.Empty(t, p.Header.Get("Set-Cookie"))

	form := url.Values{"token": {tok}}
	p = e.do(http.MethodPost, "/console/sign-in", form, opts{Site: "same-origin"})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	assert.Equal(t, "/console/tasks", p.Location)
	assert.Contains(t, p.Header.Get("Set-Cookie"), "HttpOnly")
	p = e.do(http.MethodPost, "/console/sign-in", form, opts{Site: "cross-site"})
	assert.Equal(t, http.StatusForbidden, p.Status, "another site cannot sign a browser in")
	p = e.do(http.MethodPost, "/console/sign-in", form, opts{Header: map[string]string{"Origin": "https://evil.example"}})
	assert.Equal(t, http.StatusForbidden, p.Status)

	// Signed in: /console/ goes to the tasks; the expiry and the tenant show.
	p = e.get("/console/", tok)
	assert.Equal(t, http.StatusSeeOther, p.Status)
	p = e.get("/console/tasks", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "token expires")
	assert.Contains(t, p.Body, "acme")

	// A stale cookie is a sign-in page and is forgotten.
	p = e.get("/console/tasks", "expired-or-garbage")
	assert.Equal(t, http.StatusUnauthorized, p.Status)
	assert.Contains(t, p.Body, `name="token"`)
	assert.Contains(t, p.Header.Get("Set-Cookie"), "Max-Age=0")

	p = e.post("/console/sign-out", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	assert.Equal(t, "/console/", p.Location)
	assert.Contains(t, p.Header.Get("Set-Cookie"), "Max-Age=0")
}

// TestConsoleAdminAndOperator: a tenant token whose only scope is admin
// uses every page and button, as it reaches every tenant route of the
// REST API; an operator token, which acts for no tenant, cannot sign in
// (403, no cookie), and a cookie holding one is forgotten.
func TestConsoleAdminAndOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := token(t, "acme", api.ScopeAdmin)
	ep := e.createEndpoint(admin, "ep")
	id := e.createTask(admin, "t", ep, "*/5 * * * *", "UTC")
	for _, path := range []string{
		"/console/tasks", "/console/tasks/new", "/console/tasks/" + id, "/console/endpoints",
		"/console/dashboard", "/console/backfills", "/console/alerts", "/console/workflows",
	} {
		require.Equal(t, http.StatusOK, e.get(path, admin).Status, path)
	}
	assert.Contains(t, e.get("/console/tasks/"+id, admin).Body, `id="pause"`, "the admin's buttons show")
	p := e.post("/console/tasks/"+id+"/pause", admin, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)

	op := operatorToken(t)
	p = e.get("/console/?token="+url.QueryEscape(op), "")
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Contains(t, p.Body, "operator token")
	assert.Empty(t, p.Header.Get("Set-Cookie"))
	p = e.do(http.MethodPost, "/console/sign-in", url.Values{"token": {op}}, opts{Site: "same-origin"})
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Empty(t, p.Header.Get("Set-Cookie"))
	p = e.get("/console/tasks", op)
	assert.Equal(t, http.StatusUnauthorized, p.Status, "signed out")
	assert.Contains(t, p.Header.Get("Set-Cookie"), "Max-Age=0")
}

// TestConsolePages: every page answers with its key content, and every
// button does what the REST route does.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")

	// Empty states teach the next step.
	p := e.get("/console/tasks", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "No tasks yet")
	assert.Contains(t, p.Body, "/v1/endpoints")
	p = e.get("/console/endpoints", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "No endpoints yet")
	p = e.get("/console/backfills", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "No backfills")
	p = e.get("/console/tasks/new", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "needs an endpoint")

	ep := e.createEndpoint(tok, "billing")
	p = e.get("/console/tasks/new", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `<option value="`+ep+`"`)
	p = e.get("/console/tasks", tok)
	assert.Contains(t, p.Body, "create a task that calls it")
	p = e.get("/console/endpoints", tok)
	assert.Contains(t, p.Body, "https://example.com/hook")
	assert.NotContains(t, p.Body, "whsec_", "the list never shows a secret")

	// Invalid input shows the form again with the reasons.
	p = e.post("/console/tasks", tok, url.Values{"name": {"Bad Name"}, "endpoint_id": {ep}, "type": {"cron"}, "cron": {"nope"}, "timezone": {"UTC"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	assert.Contains(t, p.Body, "The task was not created")
	assert.Contains(t, p.Body, "Bad Name", "the form keeps what was typed")
	p = e.post("/console/endpoints", tok, url.Values{"name": {"x"}, "url": {"ftp://nope"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status)
	assert.Contains(t, p.Body, "The endpoint was not created")

	id := e.createTask(tok, "nightly", ep, "30 2 * * *", "Europe/Paris")
	p = e.get("/console/tasks", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "nightly")
	assert.Contains(t, p.Body, "every day at 02:30 (Europe/Paris)")
	assert.Contains(t, p.Body, "never fired")
	assert.Contains(t, p.Body, `<time datetime="`, "the next fire")
	// Filters.
	assert.Contains(t, e.get("/console/tasks?state=paused", tok).Body, "No task matches")
	assert.Contains(t, e.get("/console/tasks?name=night", tok).Body, "nightly")
	assert.Contains(t, e.get("/console/tasks?label=team%3Dx", tok).Body, "No task matches")
	assert.Equal(t, http.StatusUnprocessableEntity, e.get("/console/tasks?label=nokey", tok).Status)
	// key:value, as the API writes it, is the same filter.
	e.rest(http.MethodPatch, "/v1/tasks/"+id, tok, `{"labels":{"team":"billing"}}`)
	assert.Contains(t, e.get("/console/tasks?label=team%3Dbilling", tok).Body, "nightly")
	assert.Contains(t, e.get("/console/tasks?label=team:billing", tok).Body, "nightly")
	assert.Contains(t, e.get("/console/tasks?label=team:x", tok).Body, "No task matches")
	assert.Equal(t, http.StatusUnprocessableEntity, e.get("/console/tasks?state=bogus", tok).Status)

	p = e.get("/console/tasks/"+id, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "every day at 02:30 (Europe/Paris)")
	assert.Contains(t, p.Body, `id="dst-policy">vixie<`)
	fires := regexp.MustCompile(`(?s)<ol id="fires".*?</ol>`).FindString(p.Body)
	assert.Equal(t, 10, strings.Count(fires, "<li>"), "the next ten fires")
	assert.Contains(t, p.Body, "No executions yet")

	// Trigger opens the new execution; with no worker here it stays pending.
	p = e.post("/console/tasks/"+id+"/trigger", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.True(t, strings.HasPrefix(p.Location, "/console/executions/"))
	x := strings.TrimPrefix(p.Location, "/console/executions/")
	p = e.get(p.Location, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "manual")
	assert.Contains(t, p.Body, "Timeline")
	assert.Contains(t, p.Body, "Webhook-Id")
	assert.Contains(t, p.Body, x)
	assert.Contains(t, p.Body, `data-refresh="2"`, "an unfinished execution reloads itself")
	assert.Contains(t, p.Body, `id="cancel"`)
	p = e.get("/console/tasks", tok)
	assert.Contains(t, p.Body, "pending", "the last outcome")

	p = e.post("/console/executions/"+x+"/cancel", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = e.get("/console/executions/"+x, tok)
	assert.Contains(t, p.Body, "cancelled")
	assert.Contains(t, p.Body, `id="retry"`)
	p = e.post("/console/executions/"+x+"/retry", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/console/executions/"+x, p.Location)
	assert.Contains(t, e.get(p.Location, tok).Body, "state-pending", "a retried execution is pending again")
	// A retry of an execution that is not final is a conflict page.
	p = e.post("/console/executions/"+x+"/retry", tok, nil)
	assert.Equal(t, http.StatusConflict, p.Status)
	assert.Contains(t, p.Body, "Conflict")

	p = e.post("/console/tasks/"+id+"/pause", tok, url.Values{"back": {"/console/tasks"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	assert.Equal(t, "/console/tasks", p.Location)
	p = e.get("/console/tasks/"+id, tok)
	assert.Contains(t, p.Body, "Paused: no fires")
	assert.Contains(t, p.Body, `id="resume"`)
	p = e.post("/console/tasks/"+id+"/resume", tok, url.Values{"back": {"https://evil.example/"}})
	require.Equal(t, http.StatusSeeOther, p.Status)
	assert.Equal(t, "/console/tasks/"+id, p.Location, "back never leaves the console")

	// Endpoints: rotate shows the new secret once; disable and enable.
	p = e.post("/console/endpoints/"+ep+"/rotate-secret", tok, nil)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, "was rotated")
	assert.Contains(t, p.Body, "whsec_")
	p = e.post("/console/endpoints/"+ep+"/disable", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = e.get("/console/endpoints", tok)
	assert.Contains(t, p.Body, "state-disabled")
	assert.Contains(t, p.Body, "previous secret signs until")
	require.Equal(t, http.StatusSeeOther, e.post("/console/endpoints/"+ep+"/enable", tok, nil).Status)
	assert.Contains(t, e.get("/console/endpoints", tok).Body, "state-enabled")

	p = e.get("/console/dashboard", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "success rate")
	assert.Contains(t, p.Body, "lateness p99")
	assert.Regexp(t, `tasks active</th><td>1<`, p.Body)
}

// TestConsoleCSRF: a change needs the console's origin and the session's
// CSRF token; without either nothing changes.
func TestConsoleCSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "t", ep, "@hourly", "UTC")
	csrf := e.csrf(tok)

	cases := []struct {
		name string
		form url.Values
		o    opts
	}{
		{"no token", url.Values{}, opts{Cookie: tok, Site: "same-origin"}},
		{"wrong token", url.Values{"csrf": {"x" + csrf}}, opts{Cookie: tok, Site: "same-origin"}},
		{"cross-site", url.Values{"csrf": {csrf}}, opts{Cookie: tok, Site: "cross-site"}},
		{"same-site", url.Values{"csrf": {csrf}}, opts{Cookie: tok, Site: "same-site"}},
		{"foreign origin", url.Values{"csrf": {csrf}}, opts{Cookie: tok, Header: map[string]string{"Origin": "https://evil.example"}}},
		{"no origin at all", url.Values{"csrf": {csrf}}, opts{Cookie: tok}},
	}
	for _, c := range cases {
		p := e.do(http.MethodPost, "/console/tasks/"+id+"/pause", c.form, c.o)
		assert.Equal(t, http.StatusForbidden, p.Status, c.name)
		assertSecurityHeaders(t, p)
	}
	assert.Contains(t, e.get("/console/tasks/"+id, tok).Body, `id="pause"`, "still active")
	// A matching Origin (a browser without Sec-Fetch-Site) with the token passes.
	p := e.do(http.MethodPost, "/console/tasks/"+id+"/pause", url.Values{"csrf": {csrf}},
		opts{Cookie: tok, Header: map[string]string{"Origin": e.srv.URL}})
	assert.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	// Without a session, a change is a sign-in page.
	p = e.do(http.MethodPost, "/console/tasks/"+id+"/resume", url.Values{"csrf": {csrf}}, opts{Site: "same-origin"})
	assert.Equal(t, http.StatusUnauthorized, p.Status)
}

// TestConsoleReadOnly: a read-only token sees the pages without a single
// button that would fail, and its changes are refused.
func TestConsoleReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rw := token(t, "acme")
	ep := e.createEndpoint(rw, "ep")
	id := e.createTask(rw, "t", ep, "*/5 * * * *", "UTC")
	x := strings.TrimPrefix(e.post("/console/tasks/"+id+"/trigger", rw, nil).Location, "/console/executions/")

	ro := token(t, "acme", api.ScopeTasksRead, api.ScopeEndpointsRead, api.ScopeExecutionsRead)
	for _, path := range []string{"/console/tasks", "/console/tasks/" + id, "/console/executions/" + x, "/console/endpoints", "/console/dashboard", "/console/backfills"} {
		p := e.get(path, ro)
		require.Equal(t, http.StatusOK, p.Status, path)
		forms := regexp.MustCompile(`<form method="post" action="([^"]+)"`).FindAllStringSubmatch(p.Body, -1)
		require.Len(t, forms, 1, "%s: only the sign-out form", path)
		assert.Equal(t, "/console/sign-out", forms[0][1])
		assert.NotContains(t, p.Body, "New task", path)
	}
	assert.Equal(t, http.StatusForbidden, e.get("/console/tasks/new", ro).Status)
	for _, path := range []string{
		"/console/tasks/" + id + "/pause", "/console/tasks/" + id + "/trigger", "/console/executions/" + x + "/cancel",
		"/console/endpoints/" + ep + "/disable", "/console/endpoints",
	} {
		p := e.post(path, ro, url.Values{"name": {"n"}, "url": {"https://example.com"}})
		assert.Equal(t, http.StatusForbidden, p.Status, path)
		assert.Contains(t, p.Body, "scope", path)
	}
	assert.Contains(t, e.get("/console/tasks/"+id, rw).Body, `id="pause"`, "nothing changed")

	// A token without executions:read sees tasks but no executions.
	tasksOnly := token(t, "acme", api.ScopeTasksRead)
	p := e.get("/console/tasks/"+id, tasksOnly)
	require.Equal(t, http.StatusOK, p.Status)
	assert.NotContains(t, p.Body, "Recent executions")
	assert.Equal(t, http.StatusForbidden, e.get("/console/executions/"+x, tasksOnly).Status)
	assert.Equal(t, http.StatusForbidden, e.get("/console/dashboard", tasksOnly).Status)
}

// TestConsoleOtherTenant: another tenant's ids are a 404 page, for pages
// and changes alike; so are ids that are not ids.
func TestConsoleOtherTenant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := token(t, "acme"), token(t, "globex")
	ep := e.createEndpoint(a, "ep")
	id := e.createTask(a, "t", ep, "@daily", "UTC")
	x := strings.TrimPrefix(e.post("/console/tasks/"+id+"/trigger", a, nil).Location, "/console/executions/")

	for _, path := range []string{"/console/tasks/" + id, "/console/executions/" + x, "/console/tasks/not-an-id", "/console/executions/42"} {
		p := e.get(path, b)
		assert.Equal(t, http.StatusNotFound, p.Status, path)
		assert.Contains(t, p.Body, "Not found", path)
		assert.NotContains(t, p.Body, id, path)
	}
	for _, path := range []string{
		"/console/tasks/" + id + "/pause", "/console/tasks/" + id + "/trigger", "/console/executions/" + x + "/cancel",
		"/console/endpoints/" + ep + "/disable", "/console/endpoints/" + ep + "/rotate-secret",
	} {
		p := e.post(path, b, nil)
		assert.Equal(t, http.StatusNotFound, p.Status, path)
	}
	assert.NotContains(t, e.get("/console/tasks", b).Body, ">t<")
	assert.Contains(t, e.get("/console/tasks/"+id, a).Body, `id="pause"`, "acme's task is untouched")
}

// TestConsoleChangesAreAudited: a console change is in the audit log like
// the REST API's, with the token's subject and the request id.
func TestConsoleChangesAreAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "t", ep, "@daily", "UTC")
	p := e.post("/console/tasks/"+id+"/pause", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status)
	rid := p.Header.Get("X-Request-Id")
	require.NotEmpty(t, rid)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/v1/audit?resource_type=task&resource_id="+id, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	var out struct {
		Items []map[string]any `json:"items"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
	var actions []string
	for _, it := range out.Items {
		actions = append(actions, it["action"].(string))
		assert.Equal(t, "alice", it["subject"])
		if it["action"] == "pause" {
			assert.Equal(t, rid, it["request_id"])
		}
	}
	assert.ElementsMatch(t, []string{"create", "pause"}, actions)
}

// rest calls the REST API with a bearer token and decodes the JSON answer.
func (e *env) rest(method, path, tok, body string) map[string]any {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	var out map[string]any
	require.NoError(e.t, json.NewDecoder(res.Body).Decode(&out))
	require.Less(e.t, res.StatusCode, 300, "%s %s: %v", method, path, out)
	return out
}

// TestConsoleWorkflows: the workflows page lists workflows with their
// recent runs; a run's page shows its nodes and their states.
func TestConsoleWorkflows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	p := e.get("/console/workflows", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "No workflows")
	assert.Contains(t, p.Body, "/v1/workflows")

	ep := e.createEndpoint(tok, "ep")
	w := e.rest(http.MethodPost, "/v1/workflows", tok, `{"name":"etl","nodes":[{"key":"extract","endpoint_id":"`+ep+`"},`+
		`{"key":"load","endpoint_id":"`+ep+`","depends_on":["extract"]}]}`)
	run := e.rest(http.MethodPost, "/v1/workflows/"+w["id"].(string)+"/trigger", tok, `{}`)
	runID := run["id"].(string)

	p = e.get("/console/workflows", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "etl")
	assert.Contains(t, p.Body, "by trigger only")
	assert.Contains(t, p.Body, "/console/workflow-runs/"+runID)

	p = e.get("/console/workflow-runs/"+runID, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "<code>extract</code>")
	assert.Contains(t, p.Body, "<code>load</code>")
	assert.Regexp(t, `<code>load</code></td><td>extract</td>`, p.Body, "dependencies are shown")
	assertSecurityHeaders(t, p)

	assert.Equal(t, http.StatusNotFound, e.get("/console/workflow-runs/"+runID, token(t, "globex")).Status)
	assert.Equal(t, http.StatusForbidden, e.get("/console/workflows", token(t, "acme", api.ScopeTasksRead)).Status)
}

// workflowDoc is a diamond whose join runs on one_success.
func workflowDoc(ep string) string {
	n := func(key, deps, rule string) string {
		s := `{"key":"` + key + `","endpoint_id":"` + ep + `"`
		if deps != "" {
			s += `,"depends_on":[` + deps + `]`
		}
		if rule != "" {
			s += `,"trigger_rule":"` + rule + `"`
		}
		return s + `}`
	}
	return `{"name":"etl","nodes":[` + n("extract", "", "") + `,` + n("clean", `"extract"`, "") + `,` +
		n("enrich", `"extract"`, "") + `,` + n("load", `"clean","enrich"`, "one_success") + `]}`
}

var (
	dagNodeRE = regexp.MustCompile(`<g class="dag-node[^"]*" data-key="([^"]+)"(?: data-state="([^"]+)")?>`)
	rectXRE   = regexp.MustCompile(`data-key="([^"]+)"[^<]*(?:<a [^>]*>)?<title>[^<]*</title><rect x="(\d+)"`)
)

// dagStatesOf returns each drawn node's state.
func dagStatesOf(body string) map[string]string {
	out := map[string]string{}
	for _, m := range dagNodeRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestConsoleWorkflowPage: a workflow's page draws its graph (layers by
// longest path, edges with arrowheads, the rule when not all_success),
// lists its nodes with their dependencies, and pauses, resumes and
// triggers it with a flash message.
func TestConsoleWorkflowPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, workflowDoc(ep))["id"].(string)

	p := e.get("/console/workflows", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `href="/console/workflows/`+wf+`"`)

	p = e.get("/console/workflows/"+wf, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assertSecurityHeaders(t, p)
	assert.Contains(t, p.Body, `<svg xmlns="http://www.w3.org/2000/svg" class="dag-svg"`)
	assert.Contains(t, p.Body, `<title id="dag-title">Graph of workflow etl`)
	assert.Equal(t, map[string]string{"extract": "", "clean": "", "enrich": "", "load": ""}, dagStatesOf(p.Body))
	assert.Equal(t, 4, strings.Count(p.Body, `class="dag-edge"`), "one edge per dependency")
	assert.Contains(t, p.Body, `marker-end="url(#dag-arrow)"`)
	assert.Contains(t, p.Body, `class="dag-sub">one_success</text>`, "the join's rule is drawn")
	assert.NotContains(t, p.Body, `>all_success<`)
	x := map[string]int{}
	for _, m := range rectXRE.FindAllStringSubmatch(p.Body, -1) {
		x[m[1]], _ = strconv.Atoi(m[2])
	}
	require.Len(t, x, 4, p.Body)
	assert.Less(t, x["extract"], x["clean"])
	assert.Equal(t, x["clean"], x["enrich"], "siblings share a layer")
	assert.Less(t, x["enrich"], x["load"])
	assert.Regexp(t, `<li><code>load</code> after <code>clean, enrich</code> · rule <span class="label">one_success</span></li>`, p.Body,
		"the plain list of nodes and their dependencies")
	assert.Contains(t, p.Body, `id="pause"`)
	assert.Contains(t, p.Body, `id="trigger"`)
	assert.Contains(t, p.Body, "No runs yet")

	p = e.post("/console/workflows/"+wf+"/pause", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/console/workflows/"+wf+"?done=paused", p.Location)
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, `id="flash">The workflow is paused`)
	assert.Contains(t, p.Body, `id="resume"`)
	assert.NotContains(t, p.Body, `id="pause"`)
	p = e.post("/console/workflows/"+wf+"/resume", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	assert.Contains(t, e.get(p.Location, tok).Body, `id="pause"`)
	// An unknown flash code shows nothing.
	assert.NotContains(t, e.get("/console/workflows/"+wf+"?done=<b>pwned</b>", tok).Body, `id="flash"`)

	p = e.post("/console/workflows/"+wf+"/trigger", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.True(t, strings.HasPrefix(p.Location, "/console/workflow-runs/"), p.Location)
	require.True(t, strings.HasSuffix(p.Location, "?done=triggered"), p.Location)
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, `id="flash">A run was triggered.`)
	assert.Contains(t, e.get("/console/workflows/"+wf, tok).Body, `<table id="runs">`)
}

// TestConsoleWorkflowRunResolve: a run's page colours its graph by node
// state and links fired nodes to their executions; a blocked run is
// resolved from it (skip, run now, cancel), a refused change is shown as a
// problem on the page (409).
func TestConsoleWorkflowRunResolve(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, workflowDoc(ep))["id"].(string)
	runID := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)["id"].(string)
	runPath := "/console/workflow-runs/" + runID

	p := e.get(runPath, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assertSecurityHeaders(t, p)
	assert.Equal(t, map[string]string{"extract": "pending", "clean": "waiting", "enrich": "waiting", "load": "waiting"}, dagStatesOf(p.Body))
	assert.Contains(t, p.Body, `class="dag-sub">pending</text>`, "the state is written in the node")
	assert.Contains(t, p.Body, `class="dag-sub">waiting · one_success</text>`)
	assert.Contains(t, p.Body, `<span class="dag-swatch state-pending">pending</span>`, "the legend")
	m := regexp.MustCompile(`data-key="extract" data-state="pending"><a href="/console/executions/(` + idRE.String() + `)">`).FindStringSubmatch(p.Body)
	require.NotNil(t, m, "a fired node links to its execution: %s", p.Body)
	x := m[1]
	assert.Contains(t, p.Body, `id="cancel-run"`)
	assert.Contains(t, p.Body, `action="/console/workflow-runs/`+runID+`/nodes/clean/skip"`, "a node not yet run can be skipped")
	assert.NotContains(t, p.Body, `/nodes/extract/`, "a fired node cannot")
	assert.Contains(t, p.Body, `data-refresh="3"`, "a running run reloads itself")

	// The first node's execution is cancelled: its downstream nodes are
	// blocked, and so is the run.
	p = e.post("/console/executions/"+x+"/cancel", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = e.get(runPath, tok)
	require.Contains(t, p.Body, `id="run-state"><span class="state state-blocked">blocked</span>`, p.Body)
	assert.Contains(t, p.Body, `id="blocked-hint"`)
	st := dagStatesOf(p.Body)
	assert.Equal(t, "cancelled", st["extract"])
	assert.Equal(t, "blocked", st["clean"])
	assert.Contains(t, p.Body, `<span class="dag-swatch state-blocked">blocked</span>`)
	assert.NotContains(t, p.Body, `data-refresh`)

	// Skip one branch: the join (one_success) may go on.
	p = e.post(runPath+"/nodes/clean/skip", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, runPath+"?done=skipped&node=clean", p.Location)
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, `id="flash">Node &#34;clean&#34; is skipped`)
	st = dagStatesOf(p.Body)
	assert.Equal(t, "skipped", st["clean"])
	assert.Equal(t, "pending", st["load"], "one_success met by the skipped branch")

	// Run the other blocked branch now.
	p = e.post(runPath+"/nodes/enrich/run", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, `id="flash">Node &#34;enrich&#34; was started now`)
	assert.Equal(t, "pending", dagStatesOf(p.Body)["enrich"])

	// A node already fired cannot be skipped: the page says why, with 409.
	p = e.post(runPath+"/nodes/enrich/skip", tok, nil)
	assert.Equal(t, http.StatusConflict, p.Status)
	assert.Contains(t, p.Body, `id="problem"`)
	assert.Contains(t, p.Body, "already fired")
	assert.Contains(t, p.Body, `<svg`, "the run's page, not an error page")
	assert.Equal(t, http.StatusNotFound, e.post(runPath+"/nodes/nope/skip", tok, nil).Status)

	// Cancel the run; cancelling again is refused.
	p = e.post(runPath+"/cancel", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, `id="flash">The run is cancelled.`)
	assert.NotContains(t, p.Body, `id="cancel-run"`)
	assert.NotContains(t, p.Body, `/skip"`)
	p = e.post(runPath+"/cancel", tok, nil)
	assert.Equal(t, http.StatusConflict, p.Status)
	assert.Contains(t, p.Body, "only a pending, running or blocked run can be cancelled")

	// The audit log has the console's changes, as the REST API's.
	audit := e.rest(http.MethodGet, "/v1/audit?resource_type=workflow_run&resource_id="+runID, tok, "")
	var actions []string
	for _, it := range audit["items"].([]any) {
		actions = append(actions, it.(map[string]any)["action"].(string))
	}
	assert.ElementsMatch(t, []string{"skip", "trigger", "cancel"}, actions)
}

// TestConsoleWorkflowScopes: a token without workflows:write sees the
// graphs without a button, and its changes are refused; the changes need
// the CSRF token; another tenant's ids are a 404 page.
func TestConsoleWorkflowScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rw := token(t, "acme")
	ep := e.createEndpoint(rw, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", rw, workflowDoc(ep))["id"].(string)
	runID := e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", rw, `{}`)["id"].(string)
	changes := []string{
		"/console/workflows/" + wf + "/pause", "/console/workflows/" + wf + "/resume", "/console/workflows/" + wf + "/trigger",
		"/console/workflow-runs/" + runID + "/cancel", "/console/workflow-runs/" + runID + "/nodes/clean/run",
		"/console/workflow-runs/" + runID + "/nodes/clean/skip",
	}

	ro := token(t, "acme", api.ScopeWorkflowsRead, api.ScopeExecutionsRead)
	for _, path := range []string{"/console/workflows", "/console/workflows/" + wf, "/console/workflow-runs/" + runID} {
		p := e.get(path, ro)
		require.Equal(t, http.StatusOK, p.Status, path)
		forms := regexp.MustCompile(`<form method="post" action="([^"]+)"`).FindAllStringSubmatch(p.Body, -1)
		require.Len(t, forms, 1, "%s: only the sign-out form", path)
		assert.NotContains(t, p.Body, "<button type=\"submit\" id=", path)
	}
	assert.Contains(t, e.get("/console/workflow-runs/"+runID, ro).Body, `<svg`)
	for _, path := range changes {
		p := e.post(path, ro, nil)
		assert.Equal(t, http.StatusForbidden, p.Status, path)
		assert.Contains(t, p.Body, "workflows:write", path)
	}
	// Without executions:read the nodes do not link to executions.
	wfOnly := token(t, "acme", api.ScopeWorkflowsRead)
	assert.NotContains(t, e.get("/console/workflow-runs/"+runID, wfOnly).Body, "/console/executions/")

	// Without the CSRF token, or from another site, nothing changes.
	for _, path := range changes {
		p := e.do(http.MethodPost, path, url.Values{}, opts{Cookie: rw, Site: "same-origin"})
		assert.Equal(t, http.StatusForbidden, p.Status, path)
		assert.Contains(t, p.Body, "CSRF", path)
		p = e.do(http.MethodPost, path, url.Values{"csrf": {e.csrf(rw)}}, opts{Cookie: rw, Site: "cross-site"})
		assert.Equal(t, http.StatusForbidden, p.Status, path)
	}
	p := e.get("/console/workflow-runs/"+runID, rw)
	assert.Contains(t, p.Body, `id="cancel-run"`, "the run is not cancelled")
	assert.Equal(t, "waiting", dagStatesOf(p.Body)["clean"])
	assert.Contains(t, e.get("/console/workflows/"+wf, rw).Body, `id="pause"`, "the workflow is not paused")

	// Another tenant's ids, and ids that are not ids, are a 404 page.
	other := token(t, "globex")
	for _, path := range []string{"/console/workflows/" + wf, "/console/workflow-runs/" + runID, "/console/workflows/not-an-id"} {
		p := e.get(path, other)
		assert.Equal(t, http.StatusNotFound, p.Status, path)
		assert.Contains(t, p.Body, "Not found", path)
		assert.NotContains(t, p.Body, "extract", path)
	}
	for _, path := range changes {
		assert.Equal(t, http.StatusNotFound, e.post(path, other, nil).Status, path)
	}
	assert.Equal(t, "waiting", dagStatesOf(e.get("/console/workflow-runs/"+runID, rw).Body)["clean"], "acme's run is untouched")
}
