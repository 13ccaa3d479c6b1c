package tests

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/pglocal"
)

// TestDatabaseOutage stops the database under a running ax: every API
// call that needs it answers 503 problem+json with a Retry-After, never
// a 500, /readyz says not ready; once the database is back the same calls
// succeed again.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	port, err := pglocal.FreePort()
	require.NoError(t, err)
	cfg := pglocal.Config{Dir: dataDir(t), TCPPort: port}
	cluster, err := pglocal.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(t.Context()) })
	require.NoError(t, cluster.CreateDatabase(ctx, "ax"))

	env := map[string]string{
		"AX_DATABASE_URL":          cluster.TCPURL("ax"),
		"AX_JWT_SECRET":            "outage-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{
		"name": "outage", "url": "http://127.0.0.1:9/hook",
	})
	newTask := func(name string) map[string]any {
		return map[string]any{
			"name": name, "endpoint_id": ep["id"],
			"schedule": map[string]any{"type": "cron", "cron": "0 0 1 1 *"},
		}
	}
	task := apiPost(t, p.base, tok, "/v1/tasks", newTask("before"))

	require.NoError(t, cluster.Stop(ctx))

	calls := []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/tasks", nil},
		{http.MethodPost, "/v1/tasks", newTask("during")},
		{http.MethodGet, "/v1/tasks/" + task["id"].(string), nil},
		{http.MethodGet, "/v1/executions", nil},
		{http.MethodGet, "/v1/endpoints", nil},
	}
	// Twice: the first calls find the pool's dead connections, the later
	// ones fail to connect.
	for range 2 {
		for _, c := range calls {
			status, header, body := rawDo(t, c.method, p.base+c.path, tok, c.body)
			require.Equal(t, http.StatusServiceUnavailable, status, "%s %s: %s", c.method, c.path, body)
			require.Equal(t, "application/problem+json", header.Get("Content-Type"))
			retry, err := strconv.Atoi(header.Get("Retry-After"))
			require.NoError(t, err, "Retry-After %q", header.Get("Retry-After"))
			require.Positive(t, retry)
			var prob map[string]any
			require.NoError(t, json.Unmarshal(body, &prob))
			require.InDelta(t, http.StatusServiceUnavailable, prob["status"], 0)
			require.Equal(t, "https://ax.dev/problems/unavailable", prob["type"])
			require.NotEmpty(t, prob["detail"])
		}
	}
	status, _, body := rawDo(t, http.MethodGet, p.base+"/readyz", "", nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", body)

	cluster, err = pglocal.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(t.Context()) })
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, _, _, err := send(ctx, http.MethodGet, p.base+"/readyz", "", nil)
		assert.NoError(c, err)
		assert.Equal(c, http.StatusOK, status)
	}, 30*time.Second, 100*time.Millisecond)
	require.NotEmpty(t, apiGet(t, p.base, tok, "/v1/tasks")["items"])
	apiPost(t, p.base, tok, "/v1/tasks", newTask("after"))
}

// rawDo sends one request and returns the status, headers and body.
func rawDo(t *testing.T, method, url, token string, body any) (int, http.Header, []byte) {
	t.Helper()
	code, header, b, err := send(ctxT(t), method, url, token, body)
	require.NoError(t, err)
	return code, header, b
}
