package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/openapi/receiver"
)

// TestEndpointTestRequest: POST /v1/endpoints/{id}/test sends one signed
// request now that the endpoint's own verification accepts, marked as a
// test and naming no task or execution, and answers with what came back;
// it creates no execution, is audited, and reaches only the caller's
// tenant's endpoints.
func TestEndpointTestRequest(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	var (
		mu   sync.Mutex
		got  []*http.Request
		body []byte
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, body = append(got, r), b
		mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("short and stout"))
	}))
	t.Cleanup(recv.Close)
	tok := token(t, "acme")
	ep := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: map[string]any{"name": "receiver", "url": recv.URL + "/hook", "headers": map[string]string{"X-Team": "data"}, "enabled": false},
	})
	id, secret := ep.JSON["id"].(string), ep.JSON["secret"].(string)

	r := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/test", Token: tok,
		Body: map[string]any{"payload": map[string]any{"hello": "world"}},
	})
	assert.EqualValues(t, http.StatusTeapot, r.JSON["status_code"])
	assert.Equal(t, "short and stout", r.JSON["response_excerpt"])
	assert.NotContains(t, r.JSON, "error")
	mu.Lock()
	require.Len(t, got, 1, "one request, even to a disabled endpoint")
	h, sent := got[0].Header, body
	mu.Unlock()
	assert.JSONEq(t, `{"hello":"world"}`, string(sent))
	v, err := receiver.NewVerifier([]string{secret})
	require.NoError(t, err)
	require.NoError(t, v.Verify(h, sent), "the endpoint's own secret verifies it")
	assert.Equal(t, "true", h.Get("X-Ax-Test"))
	assert.Equal(t, "data", h.Get("X-Team"))
	assert.Equal(t, h.Get("webhook-id"), h.Get("Idempotency-Key"))
	for _, name := range []string{"X-Ax-Task-Id", "X-Ax-Execution-Id", "X-Ax-Scheduled-For", "X-Ax-Round", "X-Ax-Attempt"} {
		assert.Empty(t, h.Get(name), name)
	}

	// Without a body: {}; a fresh webhook-id each time.
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/test", Token: tok})
	mu.Lock()
	require.Len(t, got, 2)
	assert.Equal(t, "{}", string(body))
	assert.NotEqual(t, got[0].Header.Get("webhook-id"), got[1].Header.Get("webhook-id"))
	mu.Unlock()

	execs := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions", Token: tok})
	assert.Empty(t, execs.JSON["items"], "a test creates no execution")
	audits := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit?resource_type=endpoint&resource_id=" + id, Token: tok})
	var actions []string
	for _, it := range audits.JSON["items"].([]any) {
		actions = append(actions, it.(map[string]any)["action"].(string))
	}
	assert.Equal(t, []string{"test", "test", "create"}, actions)

	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/test", Token: token(t, "other")})
	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/test", Token: tok,
		Body: map[string]any{"payload": strings.Repeat("x", 300<<10)},
	})
	mu.Lock()
	assert.Len(t, got, 2, "nothing sent for another tenant or a bad body")
	mu.Unlock()
}

// TestEndpointTestBlockedTarget: a target the SSRF guard refuses is
// answered 200 with the reason, which names the setting that lifts it.
func TestEndpointTestBlockedTarget(t *testing.T) {
	t.Parallel()
	a := newAPI(t, &apiOpts{BlockPrivateTargets: true})
	tok := token(t, "acme")
	id := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: map[string]any{"name": "local", "url": "http://127.0.0.1:9/hook"},
	}).JSON["id"].(string)
	r := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/test", Token: tok})
	assert.EqualValues(t, 0, r.JSON["status_code"])
	assert.Contains(t, r.JSON["error"], "AX_ALLOW_PRIVATE_TARGETS=true")
}
