package idempotency

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
)

// idemEnv is a database with a tenant, its endpoints service and its
// Idempotency-Keys.
type idemEnv struct {
	t    *testing.T
	pool *db.Pool
	eps  *service.Endpoints
	keys *Keys
}

func newIdemEnv(t *testing.T) *idemEnv {
	t.Helper()
	pool := dbtest.Pool(t)
	require.NoError(t, db.EnsureTenant(t.Context(), pool, "acme"))
	keys := New(pool)
	keys.wait = 200 * time.Millisecond
	return &idemEnv{t: t, pool: pool, eps: service.NewEndpoints(pool), keys: keys}
}

// create is a request handler that creates an endpoint named name and
// answers status.
func (e *idemEnv) create(name string, status int) func(context.Context) Response {
	return func(ctx context.Context) Response {
		ep, err := e.eps.Create(ctx, "acme", service.EndpointInput{Name: name, URL: "https://example.com/" + name})
		require.NoError(e.t, err)
		return Response{Status: status, Body: []byte(ep.ID)}
	}
}

func (e *idemEnv) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(e.t.Context(), sql, args...).Scan(&n))
	return n
}

func (e *idemEnv) endpoints(name string) int {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM endpoints WHERE tenant_id = 'acme' AND name = $1`, name)
}

func (e *idemEnv) keyRows(key string) int {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM idempotency_keys WHERE tenant_id = 'acme' AND key = $1`, key)
}

func TestIdempotencyHandleCommitsWithResponse(t *testing.T) {
	t.Parallel()
	e := newIdemEnv(t)
	ctx := t.Context()
	body := []byte(`{"n":1}`)

	// A server error rolls back the change and the key.
	resp, replayed, err := e.keys.Handle(ctx, "acme", "endpoints", "k", body, e.create("a", http.StatusInternalServerError))
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, http.StatusInternalServerError, resp.Status)
	require.Zero(t, e.endpoints("a"))
	require.Zero(t, e.keyRows("k"))

	// A panic after the change too.
	require.Panics(t, func() {
		_, _, _ = e.keys.Handle(ctx, "acme", "endpoints", "k", body, func(ctx context.Context) Response {
			e.create("a", http.StatusCreated)(ctx)
			panic("injected")
		})
	})
	require.Zero(t, e.endpoints("a"))
	require.Zero(t, e.keyRows("k"))

	// A refusal keeps the key and its response, not the change.
	resp, _, err = e.keys.Handle(ctx, "acme", "endpoints", "refused", body, e.create("b", http.StatusConflict))
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, resp.Status)
	require.Zero(t, e.endpoints("b"))
	again, replayed, err := e.keys.Handle(ctx, "acme", "endpoints", "refused", body, e.create("b", http.StatusCreated))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, resp, again)
	require.Zero(t, e.endpoints("b"))

	// Success: the change and its response, replayed without a second
	// change; another body is refused.
	resp, replayed, err = e.keys.Handle(ctx, "acme", "endpoints", "k", body, e.create("a", http.StatusCreated))
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err = e.keys.Handle(ctx, "acme", "endpoints", "k", body, e.create("a2", http.StatusCreated))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, resp, again)
	require.Equal(t, 1, e.endpoints("a"))
	require.Zero(t, e.endpoints("a2"))
	_, _, err = e.keys.Handle(ctx, "acme", "endpoints", "k", []byte(`{"n":2}`), e.create("a3", http.StatusCreated))
	require.ErrorIs(t, err, ErrMismatch)

	// An expired key is claimed anew.
	_, err = e.pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'k'`)
	require.NoError(t, err)
	resp2, replayed, err := e.keys.Handle(ctx, "acme", "endpoints", "k", []byte(`{"n":2}`), e.create("a4", http.StatusCreated))
	require.NoError(t, err)
	require.False(t, replayed)
	require.NotEqual(t, resp, resp2)
	require.Equal(t, 1, e.endpoints("a4"))
}

// TestIdempotencyHandleInFlight: a duplicate of a request still running
// waits for it (IdempotencyKeys.wait), then is told it is in progress;
// after the first commits, it replays.
func TestIdempotencyHandleInFlight(t *testing.T) {
	t.Parallel()
	e := newIdemEnv(t)
	ctx := t.Context()
	body := []byte(`{}`)
	inside, release := make(chan struct{}), make(chan struct{})
	type outcome struct {
		resp Response
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		resp, _, err := e.keys.Handle(ctx, "acme", "endpoints", "k", body, func(ctx context.Context) Response {
			ep, err := e.eps.Create(ctx, "acme", service.EndpointInput{Name: "first", URL: "https://example.com/first"})
			close(inside)
			<-release
			if err != nil {
				return Response{Status: http.StatusInternalServerError}
			}
			return Response{Status: http.StatusCreated, Body: []byte(ep.ID)}
		})
		done <- outcome{resp, err}
	}()
	<-inside
	_, _, err := e.keys.Handle(ctx, "acme", "endpoints", "k", body, e.create("second", http.StatusCreated))
	close(release)
	require.ErrorIs(t, err, ErrInFlight)
	first := <-done
	require.NoError(t, first.err)
	require.Equal(t, http.StatusCreated, first.resp.Status)
	again, replayed, err := e.keys.Handle(ctx, "acme", "endpoints", "k", body, e.create("second", http.StatusCreated))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.resp, again)
	require.Zero(t, e.endpoints("second"))
}

// TestIdempotencyHandleAbandoned: a key without a response committed by an
// earlier version is taken over once older than StaleAfter, by
// the same body only; a younger one is in progress.
func TestIdempotencyHandleAbandoned(t *testing.T) {
	t.Parallel()
	e := newIdemEnv(t)
	ctx := t.Context()
	body := []byte(`{}`)
	hash := sha256.Sum256(body)
	abandon := func(key string, hash []byte, age time.Duration) {
		_, err := e.pool.Exec(ctx, `INSERT INTO idempotency_keys (tenant_id, route, key, request_hash, created_at)
			VALUES ('acme', 'endpoints', $1, $2, now() - make_interval(secs => $3))`, key, hash, age.Seconds())
		require.NoError(t, err)
	}
	abandon("old", hash[:], StaleAfter+time.Second)
	abandon("young", hash[:], StaleAfter-10*time.Second)
	abandon("other", []byte("another body's hash"), StaleAfter+time.Second)

	resp, replayed, err := e.keys.Handle(ctx, "acme", "endpoints", "old", body, e.create("old", http.StatusCreated))
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, http.StatusCreated, resp.Status)
	require.Equal(t, 1, e.endpoints("old"))

	_, _, err = e.keys.Handle(ctx, "acme", "endpoints", "young", body, e.create("young", http.StatusCreated))
	require.ErrorIs(t, err, ErrInFlight)
	_, _, err = e.keys.Handle(ctx, "acme", "endpoints", "other", body, e.create("other", http.StatusCreated))
	require.ErrorIs(t, err, ErrMismatch)
	require.Zero(t, e.endpoints("young")+e.endpoints("other"))

	// Taking over and failing leaves the abandoned key as it was.
	abandon("old-2", hash[:], StaleAfter+time.Second)
	_, _, err = e.keys.Handle(ctx, "acme", "endpoints", "old-2", body, e.create("old-2", http.StatusServiceUnavailable))
	require.NoError(t, err)
	require.Zero(t, e.endpoints("old-2"))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM idempotency_keys WHERE key = 'old-2' AND status IS NULL
		AND created_at < now() - make_interval(secs => $1)`, StaleAfter.Seconds()))
}

// TestIdempotencyKeysExpire: keys older than TTL go, in
// batches of expiredKeysBatch, and younger ones stay.
func TestIdempotencyKeysExpire(t *testing.T) {
	t.Parallel()
	e := newIdemEnv(t)
	ctx := t.Context()
	_, err := e.pool.Exec(ctx, `INSERT INTO idempotency_keys (tenant_id, route, key, request_hash, status, response, created_at)
		SELECT 'acme', 'endpoints', 'old-' || g, '\x00', 201, '{}', now() - interval '25 hours' - make_interval(secs => g)
		FROM generate_series(1, $1) g`, expiredKeysBatch+7)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO idempotency_keys (tenant_id, route, key, request_hash, status, response, created_at)
		VALUES ('acme', 'endpoints', 'young', '\x00', 201, '{}', now() - interval '23 hours')`)
	require.NoError(t, err)
	n, err := e.keys.ExpireKeys(ctx)
	require.NoError(t, err)
	require.EqualValues(t, expiredKeysBatch+7, n)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM idempotency_keys`))
	require.Equal(t, 1, e.keyRows("young"))
	n, err = e.keys.ExpireKeys(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}
