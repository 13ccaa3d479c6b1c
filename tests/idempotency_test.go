package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestIdempotencyKeyAfterCrash kills ax with SIGKILL while a create with
// an Idempotency-Key is inside its transaction (its task insert waits for
// a row lock this test holds on the endpoint) and starts it again: the
// same request then creates the task, once, and a repeat replays it.
func TestIdempotencyKeyAfterCrash(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	env := map[string]string{
		"AX_DATABASE_URL": url,
		"AX_JWT_SECRET":   "idem-crash-secret-0123456789abcdef0123456789",
	}
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "idem", "url": "https://hooks.example.com/idem"})
	body := map[string]any{
		"name": "idem.crash", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
	}
	const key = "create-idem-crash-1"

	ctx := ctxT(t)
	holder, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer holder.Close(ctx)
	lock, err := holder.Begin(ctx)
	require.NoError(t, err)
	var locked string
	require.NoError(t, lock.QueryRow(ctx, `SELECT id FROM endpoints WHERE tenant_id = 'crash' AND id = $1 FOR UPDATE`,
		ep["id"]).Scan(&locked))

	killed := idempotentRequest(t, p.base, tok, "/v1/tasks", key, body)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		if res, err := http.DefaultClient.Do(killed); err == nil { // it fails: the process dies first
			_ = res.Body.Close()
		}
	}()
	watcher, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer watcher.Close(ctx)
	require.Eventually(t, func() bool {
		var n int
		err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO tasks%'`).Scan(&n)
		return err == nil && n == 1
	}, 30*time.Second, 20*time.Millisecond, "the create waits for the endpoint's lock")

	p.stop(t, syscall.SIGKILL)
	<-sent
	p2 := startAx(t, env)
	require.NoError(t, lock.Commit(ctx))

	first, firstBody := mustIdempotentPost(t, p2.base, tok, "/v1/tasks", key, body)
	require.Equal(t, http.StatusCreated, first.StatusCode, "%s", firstBody)
	require.Empty(t, first.Header.Get("Idempotent-Replayed"))
	again, againBody := mustIdempotentPost(t, p2.base, tok, "/v1/tasks", key, body)
	require.Equal(t, http.StatusCreated, again.StatusCode, "%s", againBody)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(firstBody), string(againBody), "the original response")

	var n int
	require.NoError(t, watcher.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE tenant_id = 'crash'`).Scan(&n))
	require.Equal(t, 1, n, "the killed request created nothing")
	p2.stop(t, syscall.SIGTERM)
}

// idempotentRequest is a POST of body to path with an Idempotency-Key.
func idempotentRequest(t *testing.T, base, token, path, key string, body any) *http.Request {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, base+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	return req
}

func mustIdempotentPost(t *testing.T, base, token, path, key string, body any) (*http.Response, []byte) {
	t.Helper()
	res, err := http.DefaultClient.Do(idempotentRequest(t, base, token, path, key, body))
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, b
}
