package api_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIdempotencyKeyAbandoned: a key without a response, committed by an
// earlier version that died between the create and the response's store,
// is taken over once it is older than idempotency.StaleAfter (by a
// request with the same body); a younger one is still in progress.
func TestIdempotencyKeyAbandoned(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	a.createEndpoint(tok, "first") // the tenant exists
	body := []byte(`{"name":"billing","url":"https://example.com/hook"}`)
	hash := sha256.Sum256(body)
	other := sha256.Sum256([]byte(`{"name":"other","url":"https://example.com/hook"}`))
	abandon := func(key string, hash []byte, age string) {
		a.exec(`INSERT INTO idempotency_keys (tenant_id, route, key, request_hash, created_at)
			VALUES ('acme', 'endpoints', $1, $2, now() - $3::interval)`, key, hash, age)
	}
	post := func(status int, key string) resp {
		return a.must(status, req{
			Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: body,
			Header: map[string]string{"Idempotency-Key": key},
		})
	}

	abandon("old", hash[:], "10 minutes")
	first := post(http.StatusCreated, "old")
	require.Empty(t, first.Header.Get("Idempotent-Replayed"))
	again := post(http.StatusCreated, "old")
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Raw), string(again.Raw))

	abandon("young", hash[:], "5 seconds")
	r := post(http.StatusConflict, "young")
	require.Contains(t, r.JSON["detail"], "still in progress")

	abandon("old-other-body", other[:], "10 minutes")
	r = post(http.StatusUnprocessableEntity, "old-other-body")
	require.Contains(t, r.JSON["detail"], "different request body")

	var n int
	require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT count(*) FROM endpoints WHERE tenant_id = 'acme' AND name = 'billing'`).Scan(&n))
	require.Equal(t, 1, n)
}

// TestIdempotencyResponseCommitsWithChange: when the response cannot be
// stored (a fault injected with a trigger), the create is not kept either:
// the client gets a 500 and the retry creates once, then replays.
func TestIdempotencyResponseCommitsWithChange(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "first")
	task := a.createTask(tok, ep, "t", nil).JSON["id"].(string)
	a.exec(`CREATE FUNCTION fail_store() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected: the response is not stored'; END $$`)
	a.exec(`CREATE TRIGGER fail_store BEFORE UPDATE ON idempotency_keys FOR EACH ROW
		WHEN (NEW.status IS NOT NULL) EXECUTE FUNCTION fail_store()`)

	key := map[string]string{"Idempotency-Key": "k-1"}
	create := req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Header: key,
		Body: map[string]any{"name": "billing", "url": "https://example.com/hook"},
	}
	fire := req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: tok, Header: key}
	a.must(http.StatusInternalServerError, create)
	a.must(http.StatusInternalServerError, fire)
	count := func(sql string) int {
		var n int
		require.NoError(t, a.pool.QueryRow(t.Context(), sql).Scan(&n))
		return n
	}
	require.Zero(t, count(`SELECT count(*) FROM endpoints WHERE name = 'billing'`), "the create rolled back")
	require.Zero(t, count(`SELECT count(*) FROM executions`), "the trigger rolled back")
	require.Zero(t, count(`SELECT count(*) FROM river_job WHERE kind = 'deliver'`), "its job too")
	require.Zero(t, count(`SELECT count(*) FROM idempotency_keys`), "the keys are free")

	a.exec(`DROP TRIGGER fail_store ON idempotency_keys`)
	for _, r := range []req{create, fire} {
		first := a.do(r)
		require.Less(t, first.Status, 300, string(first.Raw))
		again := a.must(first.Status, r)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Raw), string(again.Raw))
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM endpoints WHERE name = 'billing'`))
	require.Equal(t, 1, count(`SELECT count(*) FROM executions`))
	require.Equal(t, 1, count(`SELECT count(*) FROM river_job WHERE kind = 'deliver'`))
}

// TestIdempotencyKeyConcurrentDuplicate: a duplicate of a request still in
// its transaction waits for it, then replays its response.
func TestIdempotencyKeyConcurrentDuplicate(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "first")
	ctx := t.Context()

	// The task's insert waits for this lock on its endpoint.
	lock, err := a.pool.Begin(ctx)
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer func() { _ = lock.Rollback(ctx); wg.Wait() }() // a failed test lets its requests finish
	_, err = lock.Exec(ctx, `SELECT 1 FROM endpoints WHERE tenant_id = 'acme' AND id = $1 FOR UPDATE`, ep)
	require.NoError(t, err)

	create := req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Header: map[string]string{"Idempotency-Key": "k-1"},
		Body: map[string]any{"name": "t", "endpoint_id": ep, "schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"}},
	}
	waiting := func(table string) func() bool {
		return func() bool {
			var n int
			err := a.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO '||$1::text||'%'`, table).Scan(&n)
			return err == nil && n == 1
		}
	}
	var first, second resp
	wg.Go(func() { first = a.do(create) })
	require.Eventually(t, waiting("tasks"), 10*time.Second, 10*time.Millisecond, "the first request waits for the lock")
	wg.Go(func() { second = a.do(create) })
	require.Eventually(t, waiting("idempotency_keys"), 10*time.Second, 10*time.Millisecond, "the duplicate waits for the first")
	require.NoError(t, lock.Commit(ctx))
	wg.Wait()

	require.Equal(t, http.StatusCreated, first.Status, string(first.Raw))
	require.Empty(t, first.Header.Get("Idempotent-Replayed"))
	require.Equal(t, http.StatusCreated, second.Status, string(second.Raw))
	require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Raw), string(second.Raw))
}

// TestIdempotencyKeyFormat: the document says 1 to 255 printable ASCII
// characters. An empty key is a 422 like a long one (it used to be taken
// for no key), and so is a tab, the one control character Go's HTTP
// server lets through; any other control byte in a header is refused by
// that server itself, before ax sees the request, with its own plain-text
// 400 (docs/api.md says so): this test holds that to be so.
func TestIdempotencyKeyFormat(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	send := func(key string) resp {
		t.Helper()
		hr, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.srv.URL+"/v1/endpoints",
			strings.NewReader(`{"name":"e","url":"https://hooks.example.com/x"}`))
		require.NoError(t, err)
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Authorization", "Bearer "+tok)
		hr.Header["Idempotency-Key"] = []string{key}
		res, err := http.DefaultClient.Do(hr)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		out := resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
		_ = json.Unmarshal(raw, &out.JSON)
		return out
	}
	for _, key := range []string{"", strings.Repeat("k", 256), "a\tb", "ключ"} {
		r := send(key)
		requireProblem(t, r, http.StatusUnprocessableEntity)
		require.Equal(t, []string{"Idempotency-Key"}, fieldErrors(r), "%q", key)
	}
	require.Equal(t, http.StatusCreated, send(strings.Repeat("k", 255)).Status)
	require.Equal(t, http.StatusCreated, send(" ~").Status)

	// A control byte: Go's client will not send it, so write the request.
	conn, err := net.Dial("tcp", a.srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	body := `{"name":"e2","url":"https://hooks.example.com/x"}`
	_, err = fmt.Fprintf(conn, "POST /v1/endpoints HTTP/1.1\r\nHost: ax\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nIdempotency-Key: a\x01b\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		tok, len(body), body)
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Type"), "text/plain", "net/http's own answer")
}
