package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/idempotency"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const testSecret = "api-test-secret-0123456789abcdef0123456789"

// testAPI is the real API on a fresh database, served over HTTP.
type testAPI struct {
	t    *testing.T
	pool *pgxpool.Pool
	srv  *httptest.Server
	e    *echo.Echo
	// limits: this replica's cache of the tenants' limits.
	limits *service.Limits
}

// limitsRefresh re-reads the tenants' limits now, as every replica does
// each second.
func (a *testAPI) limitsRefresh() error { return a.limits.Refresh(a.t.Context()) }

// apiOpts adjusts newAPI.
type apiOpts struct {
	Auth      *api.AuthConfig // default: HS256 with testSecret
	BodyLimit int64
	// LimitDefaults: the server's default tenant limits.
	LimitDefaults service.EffectiveLimits
	// Pool: another replica's database (default: a database of its own).
	Pool *pgxpool.Pool
	// AdminIsOperator: the deprecated rule (api.Config.AdminIsOperator).
	AdminIsOperator bool
	// ClockDrift: api.Config.ClockDrift.
	ClockDrift func() (time.Duration, bool)
	// BlockPrivateTargets: endpoint tests obey the SSRF guard's default
	// (by default the tests' sender reaches loopback receivers).
	BlockPrivateTargets bool
}

func newAPI(t *testing.T, opts *apiOpts) *testAPI {
	t.Helper()
	if opts == nil {
		opts = &apiOpts{}
	}
	pool := opts.Pool
	if pool == nil {
		pool = dbtest.Pool(t)
	}
	authCfg := api.AuthConfig{HMACSecret: []byte(testSecret)}
	if opts.Auth != nil {
		authCfg = *opts.Auth
	}
	auth, err := api.NewAuthenticator(authCfg)
	require.NoError(t, err)
	enq, err := service.NewEnqueuer(pool, nil)
	require.NoError(t, err)
	limits := service.NewLimits(pool, service.LimitsConfig{Defaults: opts.LimitDefaults})
	require.NoError(t, limits.Refresh(t.Context()))
	tasks := service.NewTasks(pool, service.TasksConfig{Limits: limits})
	workflows := service.NewWorkflows(pool, enq, service.WorkflowsConfig{Limits: limits})
	sender := jobs.NewSender(jobs.SenderConfig{AllowPrivateTargets: !opts.BlockPrivateTargets, UserAgent: "ax/test"})
	t.Cleanup(sender.Close)
	e := api.New(api.Config{
		Logger:      slog.New(slog.DiscardHandler),
		Auth:        auth,
		Tenants:     service.NewTenants(pool),
		Endpoints:   service.NewEndpoints(pool),
		Tasks:       tasks,
		Executions:  service.NewExecutions(pool, enq, service.ExecutionsConfig{}),
		Deliveries:  service.NewDeliveries(pool, enq, service.DeliveriesConfig{}),
		Calendars:   service.NewCalendars(pool, tasks),
		Backfills:   service.NewBackfills(pool, enq, tasks),
		Workflows:   workflows,
		Events:      service.NewEvents(pool, enq, workflows, nil),
		Idempotency: idempotency.New(pool),
		Audit:       audit.NewLog(pool),
		Replicas:    service.NewReplicas(pool),
		Ready:       func(ctx context.Context) error { return db.CheckMigrated(ctx, pool) },
		BodyLimit:   opts.BodyLimit,
		Version:     "test",
		Limits:      limits,
		Stats:       service.NewStats(pool),

		AdminIsOperator: opts.AdminIsOperator,
		ClockDrift:      opts.ClockDrift,
		EndpointProbe:   sender.Probe,
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &testAPI{t: t, pool: pool, srv: srv, e: e, limits: limits}
}

// token returns an HS256 token for tenant with scopes (all tenant scopes
// when none are given).
func token(t *testing.T, tenant string, scopes ...string) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = api.TenantScopes()
	}
	tok, err := api.IssueToken([]byte(testSecret), tenant, "test", scopes, time.Hour, "", "")
	require.NoError(t, err)
	return tok
}

// operatorSubject is the sub of operatorToken's tokens.
const operatorSubject = "ops-oncall"

// operatorToken returns an HS256 operator token (ax token --operator).
func operatorToken(t *testing.T) string {
	t.Helper()
	tok, err := api.IssueOperatorToken([]byte(testSecret), operatorSubject, time.Hour, "", "")
	require.NoError(t, err)
	return tok
}

// resp is a decoded response.
type resp struct {
	Status int
	Header http.Header
	Raw    []byte
	JSON   map[string]any
}

// req is one request; Body is JSON-encoded unless it is a string or []byte.
type req struct {
	Method, Path, Token string
	Body                any
	Header              map[string]string
}

// do sends r and returns the answer. It may run off the test's goroutine
// (concurrent requests): a failure to send is reported with t.Errorf and
// returns a zero resp (status 0), which the caller's checks then refuse.
func (a *testAPI) do(r req) resp {
	a.t.Helper()
	var sent []byte
	switch b := r.Body.(type) {
	case nil:
	case string:
		sent = []byte(b)
	case []byte:
		sent = b
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			a.t.Errorf("encode the body of %s %s: %v", r.Method, r.Path, err)
			return resp{}
		}
		sent = enc
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(sent)
	}
	hr, err := http.NewRequestWithContext(a.t.Context(), r.Method, a.srv.URL+r.Path, body)
	if err != nil {
		a.t.Errorf("%s %s: %v", r.Method, r.Path, err)
		return resp{}
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Header {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		a.t.Errorf("%s %s: %v", r.Method, r.Path, err)
		return resp{}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Errorf("%s %s: read the answer: %v", r.Method, r.Path, err)
		return resp{}
	}
	// Every exchange is held to the OpenAPI document (spec_test.go).
	checkAgainstSpec(a.t, specExchange{
		Method: r.Method, Path: r.Path, Header: hr.Header, Body: sent,
		Status: res.StatusCode, RespHeader: res.Header, RespBody: raw,
	})
	out := resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	_ = json.Unmarshal(raw, &out.JSON)
	return out
}

// must sends r and requires status.
func (a *testAPI) must(status int, r req) resp {
	a.t.Helper()
	out := a.do(r)
	require.Equal(a.t, status, out.Status, "%s %s: %s", r.Method, r.Path, out.Raw)
	if status >= 400 {
		requireProblem(a.t, out, status)
	}
	return out
}

// requireProblem checks an RFC 9457 body.
func requireProblem(t *testing.T, r resp, status int) {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), string(r.Raw))
	require.EqualValues(t, status, r.JSON["status"])
	require.NotEmpty(t, r.JSON["type"])
	require.NotEmpty(t, r.JSON["title"])
}

// fieldErrors returns the field names of a validation problem.
func fieldErrors(r resp) []string {
	var out []string
	errs, _ := r.JSON["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m["field"].(string))
		}
	}
	return out
}

// createEndpoint makes an endpoint for tok's tenant and returns its id.
func (a *testAPI) createEndpoint(tok, name string) string {
	a.t.Helper()
	r := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: map[string]any{"name": name, "url": "https://hooks.example.com/" + name},
	})
	return r.JSON["id"].(string)
}

// createWorkflow makes a two-node workflow (a → b) and returns its id.
func (a *testAPI) createWorkflow(tok, name string) string {
	a.t.Helper()
	ep := a.createEndpoint(tok, "for-"+name)
	r := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
		Body: map[string]any{"name": name, "max_active_runs": 5, "nodes": []any{
			map[string]any{"key": "a", "endpoint_id": ep},
			map[string]any{"key": "b", "endpoint_id": ep, "depends_on": []string{"a"}},
		}},
	})
	return r.JSON["id"].(string)
}

// triggerWorkflow starts a run of a workflow and returns its id.
func (a *testAPI) triggerWorkflow(tok, id string) string {
	a.t.Helper()
	r := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok})
	return r.JSON["id"].(string)
}

// createTask makes a cron task with extra fields merged in.
func (a *testAPI) createTask(tok, endpointID, name string, extra map[string]any) resp {
	a.t.Helper()
	body := map[string]any{
		"name": name, "endpoint_id": endpointID,
		"schedule": map[string]any{"type": "cron", "cron": "0 2 * * *", "timezone": "Asia/Shanghai"},
	}
	for k, v := range extra {
		body[k] = v
	}
	return a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: body})
}
