package console_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleRateLimit: a signed-in tenant's page views and form posts
// spend its api_requests_per_second budget, the one the REST API spends:
// past it the console answers its own 429 page with Retry-After and the
// RateLimit-* headers, and the REST API refuses the tenant too. Static
// files, the sign-in page and another tenant are not limited.
func TestConsoleRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	csrf := e.csrf(tok)
	e.rest(http.MethodPut, "/v1/admin/tenants/acme/limits", operatorToken(t), `{"api_requests_per_second":2}`)

	var limited page
	ok := 0
	for range 20 {
		p := e.get("/console/tasks", tok)
		require.Equal(t, "2", p.Header.Get("RateLimit-Limit"), "the REST API's headers")
		if p.Status == http.StatusTooManyRequests {
			limited = p
			break
		}
		require.Equal(t, http.StatusOK, p.Status, p.Body)
		ok++
	}
	require.Equal(t, http.StatusTooManyRequests, limited.Status, "20 page views at once exceed 2 per second")
	assert.LessOrEqual(t, ok, 3, "at most the bucket (2) and what it refilled meanwhile")
	wait, err := strconv.Atoi(limited.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, wait, 1)
	assert.Equal(t, "0", limited.Header.Get("RateLimit-Remaining"))
	assert.True(t, strings.HasPrefix(limited.Header.Get("Content-Type"), "text/html"), "the console's own page, not a problem+json")
	assert.Contains(t, limited.Body, "Too many requests")
	assert.Contains(t, limited.Body, "api_requests_per_second")
	assert.Contains(t, limited.Body, "Try again in "+limited.Header.Get("Retry-After")+" s")
	assertSecurityHeaders(t, limited)

	// A form post is counted too (before it changes anything).
	p := e.do(http.MethodPost, "/console/workflows/0190b0a0-0000-7000-8000-000000000000/trigger", url.Values{"csrf": {csrf}},
		opts{Cookie: tok, Site: "same-origin"})
	assert.Equal(t, http.StatusTooManyRequests, p.Status, p.Body)
	assert.NotEmpty(t, p.Header.Get("Retry-After"))

	// The budget is the REST API's: it is spent there too.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/v1/me", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)

	// Not limited per tenant: static files, the sign-in page, signing out,
	// and other tenants.
	assert.Equal(t, http.StatusOK, e.get("/console/static/console.css", tok).Status)
	assert.Equal(t, http.StatusOK, e.get("/console/", "").Status)
	p = e.do(http.MethodPost, "/console/sign-out", url.Values{"csrf": {csrf}}, opts{Cookie: tok, Site: "same-origin"})
	assert.Equal(t, http.StatusSeeOther, p.Status, "signing out is never refused")
	other := e.get("/console/tasks", token(t, "globex"))
	assert.Equal(t, http.StatusOK, other.Status)
	assert.Empty(t, other.Header.Get("RateLimit-Limit"), "a tenant without a rate gets no headers")
}
