package api_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var secretRE = regexp.MustCompile(`^whsec_[A-Za-z0-9+/]+=*$`)

func TestEndpointLifecycle(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")

	created := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: map[string]any{
		"name": "billing", "url": "https://hooks.example.com/ax", "method": "post", "headers": map[string]string{"X-Env": "prod"},
		"timeout_ms": 5000,
	}})
	id := created.JSON["id"].(string)
	require.Regexp(t, secretRE, created.JSON["secret"])
	require.Equal(t, "POST", created.JSON["method"])
	require.EqualValues(t, 5000, created.JSON["timeout_ms"])
	require.Equal(t, true, created.JSON["enabled"])

	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/endpoints/" + id, Token: tok})
	require.Nil(t, got.JSON["secret"], "the secret is shown on create and rotate only")
	require.Equal(t, map[string]any{"X-Env": "prod"}, got.JSON["headers"])

	// PATCH: present fields replace; headers are replaced as a whole.
	patched := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/endpoints/" + id, Token: tok,
		Body: map[string]any{"name": "billing-v2", "headers": map[string]string{"X-Team": "pay"}, "enabled": false},
	})
	require.Equal(t, "billing-v2", patched.JSON["name"])
	require.Equal(t, "https://hooks.example.com/ax", patched.JSON["url"])
	require.Equal(t, map[string]any{"X-Team": "pay"}, patched.JSON["headers"])
	require.Equal(t, false, patched.JSON["enabled"])
	require.EqualValues(t, 5000, patched.JSON["timeout_ms"])

	// Read-only and secret fields cannot be patched.
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPatch, Path: "/v1/endpoints/" + id, Token: tok,
		Body: map[string]any{"id": "x", "secret": "whsec_x"},
	})
	require.ElementsMatch(t, []string{"id", "secret"}, fieldErrors(r))

	// Rotation: a new secret; the old one keeps signing for 24 h.
	rotated := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/rotate-secret", Token: tok})
	require.Regexp(t, secretRE, rotated.JSON["secret"])
	require.NotEqual(t, created.JSON["secret"], rotated.JSON["secret"])
	until, err := time.Parse(time.RFC3339Nano, rotated.JSON["previous_secret_expires_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), until, time.Minute)
	var prev string
	require.NoError(t, a.pool.QueryRow(context.Background(), "SELECT previous_secret FROM endpoints WHERE id = $1", id).Scan(&prev))
	require.Equal(t, created.JSON["secret"], prev)

	// A supplied secret is validated.
	supplied := "whsec_" + strings.Repeat("QUJD", 8) // 24 bytes
	rotated = a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/rotate-secret", Token: tok,
		Body: map[string]any{"secret": supplied},
	})
	require.Equal(t, supplied, rotated.JSON["secret"])
	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/endpoints/" + id + "/rotate-secret", Token: tok,
		Body: map[string]any{"secret": "whsec_c2hvcnQ="},
	})

	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + id, Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/endpoints/" + id, Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + id, Token: tok})
}

func TestEndpointValidation(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	valid := func() map[string]any { return map[string]any{"name": "n", "url": "https://example.com/hook"} }
	cases := []struct {
		name  string
		set   map[string]any
		field string
	}{
		{"missing name", map[string]any{"name": ""}, "name"},
		{"long name", map[string]any{"name": strings.Repeat("n", 129)}, "name"},
		{"missing url", map[string]any{"url": ""}, "url"},
		{"relative url", map[string]any{"url": "/hook"}, "url"},
		{"ftp url", map[string]any{"url": "ftp://example.com/x"}, "url"},
		{"userinfo", map[string]any{"url": "https://user:pw@example.com/"}, "url"},
		{"no host", map[string]any{"url": "https:///path"}, "url"},
		{"fragment", map[string]any{"url": "https://example.com/#frag"}, "url"},
		{"long url", map[string]any{"url": "https://example.com/" + strings.Repeat("a", 2100)}, "url"},
		{"bad method", map[string]any{"method": "GET"}, "method"},
		{"reserved header", map[string]any{"headers": map[string]string{"Idempotency-Key": "x"}}, "headers.Idempotency-Key"},
		{"webhook header", map[string]any{"headers": map[string]string{"webhook-signature": "x"}}, "headers.webhook-signature"},
		{"ax header", map[string]any{"headers": map[string]string{"X-Ax-Attempt": "1"}}, "headers.X-Ax-Attempt"},
		{"bad header name", map[string]any{"headers": map[string]string{"Bad Name": "x"}}, "headers.Bad Name"},
		{"header CRLF", map[string]any{"headers": map[string]string{"X-A": "a\r\nX-B: b"}}, "headers.X-A"},
		{"timeout low", map[string]any{"timeout_ms": 99}, "timeout_ms"},
		{"timeout high", map[string]any{"timeout_ms": 300001}, "timeout_ms"},
		{"bad secret prefix", map[string]any{"secret": "sk_abc"}, "secret"},
		{"short secret", map[string]any{"secret": "whsec_c2hvcnQ="}, "secret"},
		{"unknown field", map[string]any{"colour": "red"}, "colour"},
		{"read-only id", map[string]any{"id": "x"}, "id"},
		{"wrong type", map[string]any{"timeout_ms": "fast"}, "timeout_ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := valid()
			for k, v := range tc.set {
				body[k] = v
			}
			r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: body})
			require.Contains(t, fieldErrors(r), tc.field)
		})
	}
	var n int
	require.NoError(t, a.pool.QueryRow(context.Background(), "SELECT count(*) FROM endpoints").Scan(&n))
	require.Zero(t, n, "nothing invalid was stored")
}

func TestEndpointInUseCannotBeDeleted(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "target")
	alert := a.createEndpoint(tok, "alerts")
	task := a.createTask(tok, ep, "uses-it", map[string]any{"alert_endpoint_id": alert})
	r := a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + ep, Token: tok})
	require.Contains(t, r.JSON["detail"], "used by 1 task (as target or alert endpoint): uses-it (")
	a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + alert, Token: tok})
	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/tasks/" + task.JSON["id"].(string), Token: tok})
	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + ep, Token: tok})
	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + alert, Token: tok})
}

func TestEndpointPagination(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	var ids []string
	for i := range 5 {
		ids = append(ids, a.createEndpoint(tok, fmt.Sprintf("ep-%d", i)))
	}
	a.createEndpoint(token(t, "other"), "not-mine")

	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 4)
		path := "/v1/endpoints?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: tok})
		for _, it := range r.JSON["items"].([]any) {
			seen = append(seen, it.(map[string]any)["id"].(string))
		}
		next, ok := r.JSON["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	// Newest first, each exactly once, only the caller's.
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, seen)

	r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/endpoints?limit=100000", Token: tok})
	require.Len(t, r.JSON["items"], 5, "a huge limit is clamped, not an error")
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/endpoints?limit=-1", Token: tok})
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/endpoints?cursor=garbage", Token: tok})
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/endpoints?cursor=" +
		"eHh4eHh4eHgteHh4eC14eHh4LXh4eHgteHh4eHh4eHh4eHh4", Token: tok}) // 36 bytes, not a uuid
}
