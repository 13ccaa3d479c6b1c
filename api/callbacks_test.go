package api_test

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// waitingExecution makes an execution of a callback-mode task (through
// the API) whose first attempt was sent and accepted, as the deliver
// worker does (Begin, PrepareCallback, Accept: no receiver is needed to
// accept it), and returns its id and callback token.
func (a *testAPI) waitingExecution(tok string) (string, string) {
	a.t.Helper()
	ctx := a.t.Context()
	tenant := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok}).JSON["tenant"].(string)
	task := a.createTask(tok, a.createEndpoint(tok, "cb-"+service.NewID()[24:]), "cb-"+service.NewID()[24:], map[string]any{
		"completion": map[string]any{"mode": "callback", "timeout_ms": 3600000, "heartbeat_timeout_ms": 120000},
	})
	require.Equal(a.t, "callback", task.JSON["completion"].(map[string]any)["mode"])
	x := a.trigger(tok, task.JSON["id"].(string), nil).JSON["id"].(string)
	enq, err := service.NewEnqueuer(a.pool, nil)
	require.NoError(a.t, err)
	d := service.NewDeliveries(a.pool, enq, service.DeliveriesConfig{})
	del, err := d.Begin(ctx, tenant, x, 1)
	require.NoError(a.t, err)
	require.Equal(a.t, service.ActionSend, del.Action)
	require.NotNil(a.t, del.Callback)
	cbToken, err := d.PrepareCallback(ctx, del)
	require.NoError(a.t, err)
	state, err := d.Accept(ctx, del, http.StatusAccepted, 5*time.Millisecond)
	require.NoError(a.t, err)
	require.Equal(a.t, service.ExecRunning, state)
	return x, cbToken
}

func TestCallbackRoutes(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	acme, other := token(t, "acme"), token(t, "other")
	x, cb := a.waitingExecution(acme)
	y, cbY := a.waitingExecution(acme)

	// The callback token is a bearer for its own execution only.
	a.must(http.StatusNoContent, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: cb,
		Body: map[string]any{"progress": map[string]any{"rows": 10}},
	})
	a.must(http.StatusNoContent, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: cb})
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/executions/" + y + "/complete", Token: cb,
		Body: map[string]any{"status": "succeeded"},
	})
	a.must(http.StatusUnauthorized, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete",
		Token: service.CallbackTokenPrefix + "forged", Body: map[string]any{"status": "succeeded"},
	})
	// Nowhere else.
	a.must(http.StatusUnauthorized, req{Method: http.MethodGet, Path: "/v1/executions/" + x, Token: cb})
	a.must(http.StatusUnauthorized, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/cancel", Token: cb})
	// Another tenant's token does not see it; a token without the scope is refused.
	a.must(http.StatusNotFound, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: other,
		Body: map[string]any{"status": "succeeded"},
	})
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat",
		Token: token(t, "acme", "executions:read"),
	})

	// Bad input: 400/422, nothing changes.
	a.must(http.StatusBadRequest, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb, Body: "{"})
	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: map[string]any{"status": "done"},
	})
	big := a.do(req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: map[string]any{"status": "succeeded", "output": strings.Repeat("x", service.OutputMax)},
	})
	require.Contains(t, []int{http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity}, big.Status, string(big.Raw))

	r := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: map[string]any{"status": "succeeded", "output": map[string]any{"rows": 1200}},
	})
	require.Equal(t, "succeeded", r.JSON["state"])
	require.Equal(t, map[string]any{"rows": float64(1200)}, r.JSON["output"])
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + x, Token: acme})
	require.Equal(t, map[string]any{"rows": float64(1200)}, got.JSON["output"])
	require.Equal(t, map[string]any{"rows": float64(10)}, got.JSON["progress"])
	// Finished: 409, with the token or a tenant token.
	a.must(http.StatusConflict, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: map[string]any{"status": "failed"},
	})
	a.must(http.StatusConflict, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: acme})

	// A tenant token with executions:write completes the current attempt.
	r = a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/executions/" + y + "/complete", Token: acme,
		Body: map[string]any{"status": "failed", "error": "operator gave up", "retryable": false},
	})
	require.Equal(t, "failed", r.JSON["state"])
	a.must(http.StatusConflict, req{
		Method: http.MethodPost, Path: "/v1/executions/" + y + "/complete", Token: cbY,
		Body: map[string]any{"status": "succeeded"},
	})
	// An execution of a plain task has nothing to complete.
	task := a.createTask(acme, a.createEndpoint(acme, "plain"), "plain", nil).JSON["id"].(string)
	z := a.trigger(acme, task, nil).JSON["id"].(string)
	a.must(http.StatusConflict, req{
		Method: http.MethodPost, Path: "/v1/executions/" + z + "/complete", Token: acme,
		Body: map[string]any{"status": "succeeded"},
	})
}

func TestCallbackAndSLAFields(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "ep")
	r := a.createTask(tok, ep, "t1", map[string]any{
		"completion": map[string]any{"mode": "callback", "timeout_ms": 60000},
		"sla":        map[string]any{"finish_within_ms": 7200000},
	})
	require.Equal(t, map[string]any{"mode": "callback", "timeout_ms": float64(60000)}, r.JSON["completion"])
	require.Equal(t, map[string]any{"finish_within_ms": float64(7200000)}, r.JSON["sla"])
	id := r.JSON["id"].(string)
	p := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"completion": nil, "sla": nil},
	})
	require.Equal(t, map[string]any{"mode": "response"}, p.JSON["completion"])
	require.Nil(t, p.JSON["sla"])
	plain := a.createTask(tok, ep, "t2", nil)
	require.Equal(t, map[string]any{"mode": "response"}, plain.JSON["completion"])

	for _, bad := range []map[string]any{
		{"completion": map[string]any{"mode": "callback"}},
		{"completion": map[string]any{"mode": "poll", "timeout_ms": 1000}},
		{"completion": map[string]any{"mode": "callback", "timeout_ms": 60000, "heartbeat_timeout_ms": 120000}},
		{"completion": map[string]any{"mode": "response", "timeout_ms": 60000}},
		{"sla": map[string]any{"finish_within_ms": 0}},
		{"sla": map[string]any{"finish_within_ms": -5}},
	} {
		body := map[string]any{"name": "bad", "endpoint_id": ep, "schedule": map[string]any{"type": "interval", "interval_seconds": 60}}
		for k, v := range bad {
			body[k] = v
		}
		a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: body})
	}

	e := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: map[string]any{"name": "chat", "url": "https://hooks.slack.example.com/x", "format": "slack"},
	})
	require.Equal(t, "slack", e.JSON["format"])
	require.Equal(t, "ax", a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/endpoints/" + ep, Token: tok}).JSON["format"])
	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: map[string]any{"name": "chat2", "url": "https://hooks.slack.example.com/y", "format": "teams"},
	})
}

// TestKeptGrantOfAReplacedToken: the server keeps the grant of a callback
// token it has seen; once the attempt is given a new token (sent again,
// by any replica), the old token answers 401 as a token no attempt has —
// whatever else is wrong with the request (a bad body, another execution)
// and for a heartbeat or a completion — and changes nothing, while the new
// token completes the attempt.
func TestKeptGrantOfAReplacedToken(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	acme := token(t, "acme")
	x, old := a.waitingExecution(acme)
	y, _ := a.waitingExecution(acme)
	// Seen: the server keeps its grant.
	a.must(http.StatusNoContent, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: old})

	fresh := service.CallbackTokenPrefix + "replacement-" + x
	sum := sha256.Sum256([]byte(fresh))
	_, err := a.pool.Exec(t.Context(), `UPDATE callback_attempts SET token_hash = $2 WHERE execution_id = $1`, x, sum[:])
	require.NoError(t, err)

	for _, r := range []req{
		{Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: old, Body: map[string]any{"status": "succeeded"}},
		{Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: old, Body: "{"},
		{Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: old, Body: map[string]any{"status": "done"}},
		{Method: http.MethodPost, Path: "/v1/executions/" + y + "/complete", Token: old, Body: map[string]any{"status": "succeeded"}},
		{Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: old},
	} {
		a.must(http.StatusUnauthorized, r)
	}
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + x, Token: acme})
	require.Equal(t, "running", got.JSON["state"])

	r := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: fresh,
		Body: map[string]any{"status": "succeeded"},
	})
	require.Equal(t, "succeeded", r.JSON["state"])
}
