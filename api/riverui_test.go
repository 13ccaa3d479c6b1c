package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// fakeUI stands in for River's UI and records what reaches it.
type fakeUI struct {
	mu    sync.Mutex
	calls []uiCall
}

type uiCall struct {
	Method, Path, Query, Authorization string
	Cookies                            []string
}

func (f *fakeUI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := uiCall{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Authorization: r.Header.Get("Authorization")}
	for _, ck := range r.Cookies() {
		c.Cookies = append(c.Cookies, ck.Name+"="+ck.Value)
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ui "+r.Method+" "+r.URL.Path)
}

func (f *fakeUI) Calls() []uiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uiCall(nil), f.calls...)
}

// uiServer is the API with a fake River UI, over HTTP. No database: the
// River UI's authentication needs none.
type uiServer struct {
	t    *testing.T
	e    *echo.Echo
	srv  *httptest.Server
	ui   *fakeUI
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newUIServer(t *testing.T, ui http.Handler) *uiServer {
	t.Helper()
	auth, err := api.NewAuthenticator(api.AuthConfig{HMACSecret: []byte(testSecret)})
	require.NoError(t, err)
	s := &uiServer{t: t, logs: &syncBuffer{}}
	if f, ok := ui.(*fakeUI); ok {
		s.ui = f
	}
	s.e = api.New(api.Config{
		Logger:  slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Auth:    auth,
		Ready:   func(context.Context) error { return nil },
		RiverUI: ui,
	})
	s.srv = httptest.NewServer(s.e)
	t.Cleanup(s.srv.Close)
	return s
}

// send sends a request without following redirects.
func (s *uiServer) send(method, path string, header map[string]string, cookies ...*http.Cookie) resp {
	s.t.Helper()
	r, err := http.NewRequestWithContext(s.t.Context(), method, s.srv.URL+path, nil)
	require.NoError(s.t, err)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	for _, c := range cookies {
		r.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(r)
	require.NoError(s.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(s.t, err)
	out := resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	_ = json.Unmarshal(raw, &out.JSON)
	return out
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

func uiCookie(value string) *http.Cookie { return &http.Cookie{Name: "ax_riverui_token", Value: value} }

// setCookie returns the response's ax_riverui_token cookie, if any.
func setCookie(r resp) *http.Cookie {
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == "ax_riverui_token" {
			return c
		}
	}
	return nil
}

func TestRiverUIAuth(t *testing.T) {
	t.Parallel()
	s := newUIServer(t, &fakeUI{})
	op, tenant := operatorToken(t), token(t, "acme")

	for _, tc := range []struct {
		name   string
		path   string
		header map[string]string
		status int
	}{
		{"no token", "/riverui/", nil, http.StatusUnauthorized},
		{"no token, API", "/riverui/api/jobs", nil, http.StatusUnauthorized},
		{"not a bearer", "/riverui/", map[string]string{"Authorization": "Basic b3BzOm9wcw=="}, http.StatusUnauthorized},
		{"invalid token", "/riverui/", bearer("eyJ.bad.token"), http.StatusUnauthorized},
		{"token of another key", "/riverui/", bearer(otherKeyToken(t)), http.StatusUnauthorized},
		{"tenant token", "/riverui/", bearer(tenant), http.StatusForbidden},
		{"tenant token, API", "/riverui/api/jobs", bearer(tenant), http.StatusForbidden},
		{"tenant admin token", "/riverui/", bearer(token(t, "ops", api.ScopeAdmin)), http.StatusForbidden},
		{"tenant admin token, API", "/riverui/api/jobs", bearer(token(t, "ops", api.ScopeAdmin)), http.StatusForbidden},
		{"tenant admin token, entry page", "/riverui/?token=" + token(t, "ops", api.ScopeAdmin), nil, http.StatusForbidden},
	} {
		r := s.send(http.MethodGet, tc.path, tc.header)
		require.Equal(t, tc.status, r.Status, "%s: %s", tc.name, r.Raw)
		requireProblem(t, r, tc.status)
		if tc.status == http.StatusUnauthorized {
			require.Contains(t, r.Header.Get("WWW-Authenticate"), "Bearer", tc.name)
		} else {
			require.Contains(t, r.JSON["detail"], `needs an operator token (tenant claim "*", scope "operator"`, tc.name)
			require.Nil(t, setCookie(r), "%s: no cookie for a refused token", tc.name)
		}
	}
	require.Empty(t, s.ui.Calls(), "nothing reaches the UI without an operator token")

	// An operator token reaches the UI, which never sees it.
	r := s.send(http.MethodGet, "/riverui/", bearer(op))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.Equal(t, "ui GET /riverui/", string(r.Raw))
	require.Equal(t, "DENY", r.Header.Get("X-Frame-Options"))
	r = s.send(http.MethodGet, "/riverui/api/jobs?state=available", bearer(op))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.Equal(t, []uiCall{
		{Method: http.MethodGet, Path: "/riverui/"},
		{Method: http.MethodGet, Path: "/riverui/api/jobs", Query: "state=available"},
	}, s.ui.Calls())

	// /riverui is redirected, query and all.
	r = s.send(http.MethodGet, "/riverui", nil)
	require.Equal(t, http.StatusMovedPermanently, r.Status)
	require.Equal(t, "/riverui/", r.Header.Get("Location"))
	r = s.send(http.MethodGet, "/riverui?token=abc", nil)
	require.Equal(t, "/riverui/?token=abc", r.Header.Get("Location"))
}

func otherKeyToken(t *testing.T) string {
	t.Helper()
	tok, err := api.IssueToken([]byte("another-secret-0123456789abcdef0123456789"), "ops", "x", []string{api.ScopeAdmin}, time.Hour, "", "")
	require.NoError(t, err)
	return tok
}

func TestRiverUICookie(t *testing.T) {
	t.Parallel()
	s := newUIServer(t, &fakeUI{})
	op, tenant := operatorToken(t), token(t, "acme")

	// ?token= on the entry page sets the cookie and redirects to the page
	// without the token; the UI is not called.
	r := s.send(http.MethodGet, "/riverui/?token="+op+"&view=jobs", nil)
	require.Equal(t, http.StatusSeeOther, r.Status, string(r.Raw))
	require.Equal(t, "/riverui/?view=jobs", r.Header.Get("Location"))
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	require.Equal(t, "no-referrer", r.Header.Get("Referrer-Policy"))
	ck := setCookie(r)
	require.NotNil(t, ck)
	require.Equal(t, op, ck.Value)
	require.Equal(t, "/riverui/", ck.Path)
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.False(t, ck.Secure, "plain HTTP: a Secure cookie would never come back")
	require.Zero(t, ck.MaxAge, "a session cookie; the token's exp still applies")
	require.Empty(t, s.ui.Calls())

	// Over TLS (or behind a proxy that terminated it) the cookie is Secure.
	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "https://ax.example.com/riverui/?token="+op, nil),
		func() *http.Request {
			req := httptest.NewRequest(http.MethodGet, "/riverui/?token="+op, nil)
			req.RemoteAddr = "10.0.0.7:41000" // a proxy on the private network
			req.Header.Set("X-Forwarded-Proto", "https")
			return req
		}(),
	} {
		rec := httptest.NewRecorder()
		s.e.ServeHTTP(rec, req)
		require.Equal(t, http.StatusSeeOther, rec.Code)
		cks := rec.Result().Cookies()
		require.Len(t, cks, 1)
		require.True(t, cks[0].Secure)
	}

	// The cookie then authenticates the UI and its API; neither it nor the
	// token is passed on, other cookies are.
	r = s.send(http.MethodGet, "/riverui/", nil, uiCookie(op), &http.Cookie{Name: "theme", Value: "dark"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r = s.send(http.MethodGet, "/riverui/api/states", nil, uiCookie(op))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.Equal(t, []uiCall{
		{Method: http.MethodGet, Path: "/riverui/", Cookies: []string{"theme=dark"}},
		{Method: http.MethodGet, Path: "/riverui/api/states"},
	}, s.ui.Calls())

	// A tenant's or a bad token gets no cookie.
	r = s.send(http.MethodGet, "/riverui/?token="+tenant, nil)
	require.Equal(t, http.StatusForbidden, r.Status)
	require.Nil(t, setCookie(r))
	r = s.send(http.MethodGet, "/riverui/?token=nope", nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Nil(t, setCookie(r))
	// ?token= works on the entry page only.
	r = s.send(http.MethodGet, "/riverui/jobs?token="+op, nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	r = s.send(http.MethodGet, "/riverui/api/jobs?token="+op, nil)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	// ... and is never passed on elsewhere.
	r = s.send(http.MethodGet, "/riverui/jobs?token=x&id=1", nil, uiCookie(op))
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, uiCall{Method: http.MethodGet, Path: "/riverui/jobs", Query: "id=1"}, s.ui.Calls()[2])

	// A cookie that no longer verifies is a 401 that clears it; a tenant
	// token in the cookie is a 403.
	r = s.send(http.MethodGet, "/riverui/", nil, uiCookie("expired.or.forged"))
	require.Equal(t, http.StatusUnauthorized, r.Status)
	requireProblem(t, r, http.StatusUnauthorized)
	ck = setCookie(r)
	require.NotNil(t, ck)
	require.Negative(t, ck.MaxAge)
	require.Equal(t, "/riverui/", ck.Path)
	r = s.send(http.MethodGet, "/riverui/", nil, uiCookie(tenant))
	require.Equal(t, http.StatusForbidden, r.Status)
	require.Len(t, s.ui.Calls(), 3)

	// A browser with a cookie jar: one visit with ?token=, then the cookie.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	res, err := browser.Get(s.srv.URL + "/riverui/?token=" + op)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.Equal(t, "ui GET /riverui/", string(body))
	require.Equal(t, s.srv.URL+"/riverui/", res.Request.URL.String())
	res, err = browser.Get(s.srv.URL + "/riverui/api/jobs")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	u, _ := url.Parse(s.srv.URL + "/v1/me")
	require.Empty(t, jar.Cookies(u), "the cookie is scoped to /riverui/")

	// The token is never logged.
	require.NotContains(t, s.logs.String(), op)
	require.NotContains(t, s.logs.String(), strings.Split(op, ".")[2])
	require.Contains(t, s.logs.String(), `"route":"/riverui/*"`)
}

func TestRiverUICrossSite(t *testing.T) {
	t.Parallel()
	s := newUIServer(t, &fakeUI{})
	op, tenant := operatorToken(t), token(t, "acme")
	self := s.srv.URL // http://127.0.0.1:port

	refused := []map[string]string{
		nil, // no Origin, no Sec-Fetch-Site
		{"Origin": "https://evil.example"},
		{"Origin": "null"},
		{"Origin": "http://127.0.0.1:1"},
		{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "same-site", "Origin": "https://ops.example"},
	}
	for _, m := range []struct{ method, path string }{
		{http.MethodPost, "/riverui/api/jobs/cancel"},
		{http.MethodPut, "/riverui/api/queues/deliver/pause"},
		{http.MethodPatch, "/riverui/api/queues/deliver"},
		{http.MethodDelete, "/riverui/api/jobs/1"},
	} {
		for _, h := range refused {
			r := s.send(m.method, m.path, h, uiCookie(op))
			require.Equal(t, http.StatusForbidden, r.Status, "%s %s %v", m.method, m.path, h)
			requireProblem(t, r, http.StatusForbidden)
			require.Contains(t, r.JSON["detail"], "cross-site")
		}
		// A bearer header does not exempt a request either.
		r := s.send(m.method, m.path, map[string]string{"Authorization": "Bearer " + op, "Origin": "https://evil.example"})
		require.Equal(t, http.StatusForbidden, r.Status)
	}
	require.Empty(t, s.ui.Calls())

	// The UI's own pages pass.
	r := s.send(http.MethodPost, "/riverui/api/jobs/cancel", map[string]string{"Sec-Fetch-Site": "same-origin"}, uiCookie(op))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r = s.send(http.MethodPut, "/riverui/api/queues/deliver/pause", map[string]string{"Origin": self}, uiCookie(op))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	// Reads need no origin check.
	r = s.send(http.MethodGet, "/riverui/api/jobs", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, uiCookie(op))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.Len(t, s.ui.Calls(), 3)

	// Authorization comes first: a same-origin request still needs an operator.
	r = s.send(http.MethodPost, "/riverui/api/jobs/cancel", map[string]string{"Sec-Fetch-Site": "same-origin"}, uiCookie(tenant))
	require.Equal(t, http.StatusForbidden, r.Status)
	r = s.send(http.MethodPost, "/riverui/api/jobs/cancel", map[string]string{"Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Len(t, s.ui.Calls(), 3)
}

func TestRiverUIDisabled(t *testing.T) {
	t.Parallel()
	s := newUIServer(t, nil)
	for _, p := range []string{"/riverui", "/riverui/", "/riverui/api/jobs"} {
		r := s.send(http.MethodGet, p, bearer(operatorToken(t)))
		require.Equal(t, http.StatusNotFound, r.Status, p)
	}
}
