package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/db/pglocal"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const testSecret = "test-secret-0123456789abcdef-0123456789"

// syncBuffer is an io.Writer safe to read while run writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// startServer runs `serve` in-process and returns its base URL and its
// stdout. The server stops when the test ends.
func startServer(t *testing.T, env map[string]string) (string, *syncBuffer) {
	t.Helper()
	base, out, _ := startStoppableServer(t, env)
	return base, out
}

// startStoppableServer is startServer that also returns a function that
// stops the server (as SIGTERM does) and waits until serve returned.
func startStoppableServer(t *testing.T, env map[string]string) (string, *syncBuffer, func()) {
	t.Helper()
	full := map[string]string{"AX_HTTP_ADDR": "127.0.0.1:0", "AX_LOG_LEVEL": "error", "AX_SHUTDOWN_TIMEOUT": "5s", "PATH": os.Getenv("PATH")}
	for k, v := range env {
		full[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := new(syncBuffer)
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve"}, envOf(full), out) }()
	stop := sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop within 30s")
		}
	})
	t.Cleanup(stop)
	var (
		base   string
		exited bool
		exit   error
	)
	require.Eventually(t, func() bool {
		select {
		case exit = <-done:
			done <- exit // for stop
			exited = true
			return true
		default:
		}
		if m := listenRE.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			return true
		}
		return false
	}, 60*time.Second, 20*time.Millisecond)
	require.False(t, exited, "serve exited early: %v", exit)
	return base, out, stop
}

// get sends a GET and returns the status and the body as JSON (nil when
// it is not).
func get(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	code, body, err := fetch(t.Context(), url, token)
	require.NoError(t, err)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	return code, m
}

// fetch sends a GET and returns the status and the body. It does not fail
// the test, so that the condition of Eventually may call it.
func fetch(ctx context.Context, url, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func TestServeWithDatabaseURL(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": testSecret, "AX_TENANT_API_RPS": "1000"}
	base, out := startServer(t, env)
	require.NotContains(t, out.String(), "Development token", "no token is printed outside the embedded mode")

	code, _ := get(t, base+"/healthz", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = get(t, base+"/readyz", "")
	require.Equal(t, http.StatusOK, code)

	// A token printed by `ax token` with the same configuration is accepted.
	tokOut := new(syncBuffer)
	require.NoError(t, run(t.Context(), []string{"token", "--tenant", "acme", "--scope", "tasks:read"}, envOf(env), tokOut))
	tok := strings.TrimSpace(tokOut.String())
	require.NotContains(t, tok, "\n", "ax token prints only the token")
	code, me := get(t, base+"/v1/me", tok)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "acme", me["tenant"])
	require.Equal(t, []any{"tasks:read"}, me["scopes"])

	code, p := get(t, base+"/v1/me", "")
	require.Equal(t, http.StatusUnauthorized, code)
	require.EqualValues(t, 401, p["status"])

	// The console is mounted with the tenant limits: its pages spend the
	// tenant's API rate (the RateLimit-* headers of the REST API).
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/console/tasks", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "ax_console_token", Value: tok})
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "1000", res.Header.Get("RateLimit-Limit"))
}

// TestReadinessFollowsTheDatabase stops Postgres under a running server:
// /readyz fails while it is down and recovers when it is back.
func TestReadinessFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pg")
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o711))
	require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o711))
	cluster, err := pglocal.Start(ctx, pglocal.Config{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, cluster.CreateDatabase(ctx, "ax"))
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })

	base, _ := startServer(t, map[string]string{"AX_DATABASE_URL": cluster.URL("ax"), "AX_JWT_SECRET": testSecret})
	code, _ := get(t, base+"/readyz", "")
	require.Equal(t, http.StatusOK, code)

	require.NoError(t, cluster.Stop(ctx))
	code, p := get(t, base+"/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "Not ready", p["title"])
	code, _ = get(t, base+"/healthz", "")
	require.Equal(t, http.StatusOK, code, "liveness does not depend on the database")

	cluster2, err := pglocal.Start(ctx, pglocal.Config{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster2.Stop(context.Background()) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, _, err := fetch(t.Context(), base+"/readyz", "")
		assert.NoError(c, err)
		assert.Equal(c, http.StatusOK, code)
	}, 30*time.Second, 100*time.Millisecond)
}

// TestServeWaitsForMigrations: with AX_AUTO_MIGRATE=false on an empty
// database the server stays up, unready, and becomes ready once a separate
// `ax migrate` (a deploy job) has run.
func TestServeWaitsForMigrations(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	base, _ := startServer(t, map[string]string{"AX_DATABASE_URL": url, "AX_JWT_SECRET": testSecret, "AX_AUTO_MIGRATE": "false"})
	code, _ := get(t, base+"/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = get(t, base+"/healthz", "")
	require.Equal(t, http.StatusOK, code)

	env := envOf(map[string]string{"AX_DATABASE_URL": url, "AX_LOG_LEVEL": "error"})
	require.NoError(t, run(t.Context(), []string{"migrate"}, env, new(syncBuffer)))
	code, _ = get(t, base+"/readyz", "")
	require.Equal(t, http.StatusOK, code)
}

// TestServeRunsItsLoopsAndLeaves: the server's background loops run under
// its runner (each reports its passes on /metrics, by name), and a server
// that stops deregisters its replica last: gone, not dead, so that no
// other replica waits AX_REPLICA_DEAD_AFTER for it.
func TestServeRunsItsLoopsAndLeaves(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	base, _, stop := startStoppableServer(t, map[string]string{"AX_DATABASE_URL": url, "AX_JWT_SECRET": testSecret})
	// task_listener's pass lasts as long as its connection.
	loops := []string{
		"heartbeat", "limits_refresh", "limits_dispatch", "permit_sweep", "fairness", "scheduler", "reconcile", "unfinished_sweep", "idempotency_expiry", "analyze", "retention", "callbacks", "sla",
		"backfills", "workflow_sweep",
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, body, err := fetch(t.Context(), base+"/metrics", "")
		if !assert.NoError(c, err) {
			return
		}
		var waiting []string
		for _, l := range loops {
			if !regexp.MustCompile(`(?m)^ax_loop_last_success_timestamp_seconds\{loop="` + l + `"\} [1-9]`).Match(body) {
				waiting = append(waiting, l)
			}
		}
		if !strings.Contains(string(body), `ax_loop_passes_total{loop="task_listener"} 0`) {
			waiting = append(waiting, "task_listener")
		}
		assert.Empty(c, waiting, "the loops not seen yet")
	}, 30*time.Second, 100*time.Millisecond, "every loop passed once")

	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	defer pool.Close()
	states := func() map[string]int {
		rows, err := pool.Query(t.Context(), `SELECT state, count(*) FROM replicas GROUP BY state`)
		require.NoError(t, err)
		m := map[string]int{}
		for rows.Next() {
			var state string
			var n int
			require.NoError(t, rows.Scan(&state, &n))
			m[state] = n
		}
		require.NoError(t, rows.Err())
		return m
	}
	require.Equal(t, map[string]int{"alive": 1}, states())
	stop()
	require.Equal(t, map[string]int{"gone": 1}, states())
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t)
	env := envOf(map[string]string{"AX_DATABASE_URL": url, "AX_JWT_SECRET": testSecret, "AX_LOG_LEVEL": "error"})
	require.NoError(t, run(t.Context(), []string{"migrate"}, env, new(syncBuffer)))
	require.NoError(t, run(t.Context(), []string{"migrate"}, env, new(syncBuffer)))
	base, _ := startServer(t, map[string]string{"AX_DATABASE_URL": url, "AX_JWT_SECRET": testSecret, "AX_AUTO_MIGRATE": "false"})
	code, _ := get(t, base+"/readyz", "")
	require.Equal(t, http.StatusOK, code)
}

func TestTokenCommand(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"AX_JWT_SECRET": testSecret})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"token"}, "--tenant is required"},
		{[]string{"token", "--tenant", "a", "--scope", "root"}, `unknown scope "root"`},
		{[]string{"token", "--tenant", "a", "--ttl", "-1h"}, "--ttl must be positive"},
		{[]string{"token", "--tenant", "bad tenant!"}, "tenant"},
		{[]string{"token", "--bogus"}, "flag provided but not defined"},
		{[]string{"token", "--tenant", "a", "--scope", "operator"}, "use --operator"},
		{[]string{"token", "--tenant", "a", "--scope", "admin operator"}, "use --operator"},
		{[]string{"token", "--operator", "--tenant", "a"}, "--operator takes no --tenant and no --scope"},
		{[]string{"token", "--operator", "--scope", "operator"}, "--operator takes no --tenant and no --scope"},
	} {
		err := run(t.Context(), tc.args, env, new(syncBuffer))
		require.ErrorContains(t, err, tc.want, tc.args)
	}
	// --operator: tenant claim "*", the operator scope alone, the subject
	// given.
	out := new(syncBuffer)
	require.NoError(t, run(t.Context(), []string{"token", "--operator", "--subject", "alice@ops"}, env, out))
	auth, err := api.NewAuthenticator(api.AuthConfig{HMACSecret: []byte(testSecret)})
	require.NoError(t, err)
	p, err := auth.Verify(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	require.True(t, p.Operator())
	require.Equal(t, api.Principal{Subject: "alice@ops", Scopes: []string{api.ScopeOperator}}, p)
	// A tenant's admin token is no operator's.
	out = new(syncBuffer)
	require.NoError(t, run(t.Context(), []string{"token", "--tenant", "a", "--scope", "admin"}, env, out))
	p, err = auth.Verify(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	require.False(t, p.Operator())
	require.True(t, p.Allows(api.ScopeWorkflowsWrite))

	// Outside the embedded mode there is no development secret to fall back on.
	err = run(t.Context(), []string{"token", "--tenant", "a"},
		envOf(map[string]string{"AX_DATABASE_URL": "postgres://x@y/z", "AX_JWT_PUBLIC_KEYS": ""}), new(syncBuffer))
	require.ErrorContains(t, err, "AX_JWT_SECRET")
}
