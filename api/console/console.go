// Package console serves the tenant web console at /console/: server-rendered
// pages (html/template, embedded) over the same services and scopes as the
// REST API. It holds no SQL and no rules of its own: every page reads through
// service/, every button calls the service method the matching REST route
// calls, with the same tenant, scopes and audit actor.
//
// A browser signs in with a tenant token (pasted into the sign-in form, or
// /console/?token=… once); the token then lives in an HttpOnly,
// SameSite=Strict cookie scoped to /console/ until it expires. Every change
// is a POST that must come from the console's own origin (Sec-Fetch-Site or
// Origin) and carry the session's CSRF token.
package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/event"
)

// Prefix is where the console is mounted.
const Prefix = "/console"

const (
	// cookieName holds the signed-in token, for Prefix/ only.
	cookieName = "ax_console_token"
	// tokenParam carries a token on the entry page (a link can sign in).
	tokenParam = "token"
	// csrfField is the form field every change carries.
	csrfField = "csrf"
	// maxTokenBytes bounds a pasted token.
	maxTokenBytes = 8 << 10
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config holds what the console needs: the API's authenticator and the
// services the REST handlers use.
type Config struct {
	// Limits, when set, counts each page view and form post of a signed-in
	// tenant against its API rate (api_requests_per_second), the budget the
	// REST API spends too: past it, the console's 429 page.
	Logger     *slog.Logger
	Auth       *api.Authenticator
	Tenants    *service.Tenants
	Endpoints  *service.Endpoints
	Tasks      *service.Tasks
	Executions *service.Executions
	Stats      *service.Stats
	Backfills  *service.Backfills
	Workflows  *service.Workflows
	Limits     *service.Limits
	// EndpointProbe sends an endpoint's test request (the webhook
	// sender's, as for POST /v1/endpoints/{id}/test); without it the
	// endpoints page has no Test button.
	EndpointProbe service.EndpointProbe
	// Calendars, Audit: the calendars page (and the task form's calendar
	// choices) and the audit log page; nil leaves them out.
	Calendars *service.Calendars
	Audit     *audit.Log
	// AdminIsOperator is the API's deprecated rule (api.Config): a token
	// with admin may set its own tenant's limits, so the limits page lets
	// it edit them too.
	AdminIsOperator bool
	// Events serves the events page (nil: no events page).
	Events *event.Events
}

// console carries the dependencies of every page.
type console struct {
	cfg   Config
	pages pages
}

// Mount registers the console's routes on e (the API's echo, so that the
// request id, the request log and the panic recovery apply).
func Mount(e *echo.Echo, cfg Config) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &console{cfg: cfg, pages: mustParsePages()}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix(Prefix+"/static/", http.FileServer(http.FS(static)))

	e.GET(Prefix, func(ec echo.Context) error {
		target := Prefix + "/"
		if q := ec.Request().URL.RawQuery; q != "" {
			target += "?" + q
		}
		return ec.Redirect(http.StatusMovedPermanently, target)
	})
	g := e.Group(Prefix, c.headers)
	g.GET("/static/*", func(ec echo.Context) error {
		ec.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=3600")
		files.ServeHTTP(ec.Response(), ec.Request())
		return nil
	})
	g.GET("/", c.entry)
	g.POST("/sign-in", c.signIn)

	r := func(path string, h handlerFunc, scope string) { g.GET(path, c.page(h, scope)) }
	w := func(path string, h handlerFunc, scope string) { g.POST(path, c.change(h, scope)) }

	// Signing out is never refused for the rate: it spends nothing.
	g.POST("/sign-out", c.guard(c.signOut, "", false))
	r("/dashboard", c.dashboard, api.ScopeExecutionsRead)

	r("/tasks", c.tasks, api.ScopeTasksRead)
	r("/tasks/new", c.newTask, api.ScopeTasksWrite)
	w("/tasks", c.createTask, api.ScopeTasksWrite)
	r("/tasks/:id", c.task, api.ScopeTasksRead)
	w("/tasks/:id/pause", c.pauseTask, api.ScopeTasksWrite)
	w("/tasks/:id/resume", c.resumeTask, api.ScopeTasksWrite)
	w("/tasks/:id/trigger", c.triggerTask, api.ScopeTasksWrite)
	w("/tasks/:id/skip", c.skipSlot, api.ScopeTasksWrite)
	w("/tasks/:id/backfill", c.backfillTask, api.ScopeTasksWrite)
	r("/tasks/:id/edit", c.editTask, api.ScopeTasksWrite)
	w("/tasks/:id/edit", c.updateTask, api.ScopeTasksWrite)
	r("/tasks/:id/preview", c.previewTask, api.ScopeTasksRead)

	r("/executions/:id", c.execution, api.ScopeExecutionsRead)
	w("/executions/:id/retry", c.retryExecution, api.ScopeExecutionsWrite)
	w("/executions/:id/cancel", c.cancelExecution, api.ScopeExecutionsWrite)
	w("/executions/:id/hold", c.holdExecution, api.ScopeExecutionsWrite)
	w("/executions/:id/release", c.releaseExecution, api.ScopeExecutionsWrite)

	r("/endpoints", c.endpoints, api.ScopeEndpointsRead)
	w("/endpoints", c.createEndpoint, api.ScopeEndpointsWrite)
	w("/endpoints/:id/rotate-secret", c.rotateSecret, api.ScopeEndpointsWrite)
	w("/endpoints/:id/disable", c.disableEndpoint, api.ScopeEndpointsWrite)
	w("/endpoints/:id/enable", c.enableEndpoint, api.ScopeEndpointsWrite)
	w("/endpoints/:id/test", c.testEndpoint, api.ScopeEndpointsWrite)
	r("/endpoints/:id/edit", c.editEndpoint, api.ScopeEndpointsWrite)
	w("/endpoints/:id/edit", c.updateEndpoint, api.ScopeEndpointsWrite)

	r("/audit", c.audit, api.ScopeAuditRead)
	r("/calendars", c.calendars, api.ScopeTasksRead)
	w("/calendars", c.createCalendar, api.ScopeTasksWrite)
	r("/calendars/:id", c.calendar, api.ScopeTasksRead)
	w("/calendars/:id", c.updateCalendar, api.ScopeTasksWrite)
	w("/calendars/:id/delete", c.deleteCalendar, api.ScopeTasksWrite)
	r("/limits", c.limits, "")
	w("/limits", c.setLimits, api.ScopeAdmin)

	r("/backfills", c.backfills, api.ScopeTasksRead)
	r("/alerts", c.alerts, api.ScopeExecutionsRead)
	r("/workflows", c.workflows, api.ScopeWorkflowsRead)
	r("/workflows/new", c.newWorkflow, api.ScopeWorkflowsWrite)
	w("/workflows", c.createWorkflow, api.ScopeWorkflowsWrite)
	w("/workflows/preview", c.previewWorkflow, api.ScopeWorkflowsWrite)
	r("/workflows/:id", c.workflow, api.ScopeWorkflowsRead)
	r("/workflows/:id/edit", c.editWorkflow, api.ScopeWorkflowsWrite)
	w("/workflows/:id/edit", c.updateWorkflow, api.ScopeWorkflowsWrite)
	w("/workflows/:id/pause", c.pauseWorkflow, api.ScopeWorkflowsWrite)
	w("/workflows/:id/resume", c.resumeWorkflow, api.ScopeWorkflowsWrite)
	w("/workflows/:id/trigger", c.triggerWorkflow, api.ScopeWorkflowsWrite)
	w("/workflows/:id/backfill", c.backfillWorkflow, api.ScopeWorkflowsWrite)
	r("/workflow-runs/:id", c.workflowRun, api.ScopeWorkflowsRead)
	w("/workflow-runs/:id/cancel", c.cancelRun, api.ScopeWorkflowsWrite)
	w("/workflow-runs/:id/nodes/:key/run", c.runNode, api.ScopeWorkflowsWrite)
	w("/workflow-runs/:id/nodes/:key/skip", c.skipNode, api.ScopeWorkflowsWrite)

	if cfg.Events != nil {
		r("/events", c.events, api.ScopeEventsRead)
		w("/events", c.postEvent, api.ScopeEventsWrite)
	}

	// Anything else under the prefix is the console's own 404 page.
	g.Any("/*", func(ec echo.Context) error {
		return c.render(ec, http.StatusNotFound, "error", nil, errorView{Title: "Not found", Detail: "There is no console page at this address."})
	})
}

// contentSecurityPolicy allows the console's own files only: no inline
// script or style, no framing, forms posting to the console only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// headers sets the console's security headers on every response.
func (c *console) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		h := ec.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		h.Set(echo.HeaderCacheControl, "no-store")
		return next(ec)
	}
}

// session is a signed-in browser: the verified principal, its token's
// expiry and the CSRF token derived from the token.
type session struct {
	api.Principal
	Expires time.Time
	CSRF    string
}

// can reports whether the session may use scope: it holds the scope or
// admin (api.Principal.Allows, the REST API's rule).
func (s *session) can(scope string) bool { return s != nil && s.Allows(scope) }

// csrfFor derives a session's CSRF token from its bearer token: another
// site can read neither (the cookie is HttpOnly and never sent to it), and
// every replica derives the same one without shared state.
func csrfFor(raw string) string {
	sum := sha256.Sum256([]byte("ax-console-csrf\x00" + raw))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// verify checks a raw token and returns its session.
func (c *console) verify(ec echo.Context, raw string) (*session, error) {
	if raw == "" || len(raw) > maxTokenBytes {
		return nil, errBadToken
	}
	p, err := c.cfg.Auth.Verify(raw)
	if err != nil {
		c.cfg.Logger.Info("console: rejected token", "error", err.Error())
		return nil, errBadToken
	}
	// The token verified: its exp claim (required) is read for display.
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(raw, &claims); err != nil || claims.ExpiresAt == nil {
		return nil, errBadToken
	}
	if p.Operator() {
		return nil, errOperatorToken
	}
	if err := c.cfg.Tenants.Ensure(ec.Request().Context(), p.Tenant); err != nil {
		return nil, err
	}
	return &session{Principal: p, Expires: claims.ExpiresAt.UTC(), CSRF: csrfFor(raw)}, nil
}

var errBadToken = errors.New("the token is invalid or expired")

// errOperatorToken refuses an operator token: the console shows one
// tenant's resources, and an operator acts for no tenant.
var errOperatorToken = errors.New("this is an operator token, which acts for no tenant: the console needs a tenant's token " +
	"(operators have " + api.RiverUIPrefix + "/ and the /v1/admin routes)")

// signInStatus is the status of a sign-in refused with err.
func signInStatus(err error) int {
	if errors.Is(err, errOperatorToken) {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// current returns the request's session from its cookie, nil when signed
// out (a stale cookie is forgotten).
func (c *console) current(ec echo.Context) (*session, error) {
	ck, err := ec.Request().Cookie(cookieName)
	if err != nil || ck.Value == "" {
		return nil, nil //nolint:nilerr // no cookie: signed out
	}
	s, err := c.verify(ec, ck.Value)
	if errors.Is(err, errBadToken) || errors.Is(err, errOperatorToken) {
		http.SetCookie(ec.Response(), cookie(ec, "", -1))
		return nil, nil
	}
	return s, err
}

// cookie returns the session cookie holding token for maxAge seconds (-1
// deletes it): the console's paths only, never readable by scripts, never
// sent by requests other sites start, Secure over TLS.
func cookie(ec echo.Context, token string, maxAge int) *http.Cookie {
	return &http.Cookie{ //nolint:gosec // Secure whenever the request came over TLS; on plain HTTP a Secure cookie would never come back
		Name: cookieName, Value: token, Path: Prefix + "/", MaxAge: maxAge,
		HttpOnly: true, Secure: ec.Scheme() == "https", SameSite: http.SameSiteStrictMode,
	}
}

// startSession sets the cookie for a verified token.
func startSession(ec echo.Context, raw string, s *session) {
	maxAge := int(time.Until(s.Expires).Seconds())
	if maxAge < 1 {
		maxAge = 1
	}
	http.SetCookie(ec.Response(), cookie(ec, raw, maxAge))
}

// entry is /console/: ?token= signs in and redirects to the page without
// it; signed in, the tasks page; otherwise the sign-in page.
func (c *console) entry(ec echo.Context) error {
	req := ec.Request()
	if req.URL.Query().Has(tokenParam) {
		raw := req.URL.Query().Get(tokenParam)
		s, err := c.verify(ec, raw)
		if err != nil {
			return c.signInPage(ec, signInStatus(err), err)
		}
		startSession(ec, raw, s)
		u := *req.URL
		q := u.Query()
		q.Del(tokenParam)
		u.RawQuery = q.Encode()
		return ec.Redirect(http.StatusSeeOther, u.RequestURI())
	}
	s, err := c.current(ec)
	if err != nil {
		return c.fail(ec, s, err)
	}
	if s == nil {
		return c.signInPage(ec, http.StatusOK, nil)
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/tasks")
}

func (c *console) signInPage(ec echo.Context, status int, err error) error {
	v := signInView{Origin: ec.Scheme() + "://" + ec.Request().Host}
	if err != nil {
		v.Error = err.Error()
	}
	return c.render(ec, status, "signin", nil, v)
}

// signIn takes a pasted token. There is no session yet, so no CSRF token:
// the same-origin check keeps other sites from signing a browser into
// their own tenant.
func (c *console) signIn(ec echo.Context) error {
	if !sameOrigin(ec.Request()) {
		return c.render(ec, http.StatusForbidden, "error", nil, errorView{Title: "Forbidden", Detail: crossSiteDetail})
	}
	raw := strings.TrimSpace(ec.FormValue(tokenParam))
	raw = strings.TrimPrefix(raw, "Bearer ")
	s, err := c.verify(ec, raw)
	if err != nil {
		return c.signInPage(ec, signInStatus(err), err)
	}
	startSession(ec, raw, s)
	return ec.Redirect(http.StatusSeeOther, Prefix+"/tasks")
}

func (c *console) signOut(ec echo.Context, _ *session) error {
	http.SetCookie(ec.Response(), cookie(ec, "", -1))
	return ec.Redirect(http.StatusSeeOther, Prefix+"/")
}

// handlerFunc is a page or a change for a signed-in session.
type handlerFunc func(ec echo.Context, s *session) error

// page wraps a read-only page: signed in, holding scope.
func (c *console) page(h handlerFunc, scope string) echo.HandlerFunc {
	return func(ec echo.Context) error {
		s, err := c.current(ec)
		if err != nil {
			return c.fail(ec, nil, err)
		}
		if s == nil {
			return c.signInPage(ec, http.StatusUnauthorized, errors.New("sign in to see this page"))
		}
		if done, err := c.rateLimited(ec, s); done || err != nil {
			return err
		}
		if scope != "" && !s.can(scope) {
			return c.render(ec, http.StatusForbidden, "error", s, errorView{
				Title:  "Forbidden",
				Detail: "This token lacks the \"" + scope + "\" scope this page needs.",
			})
		}
		if err := h(ec, s); err != nil {
			return c.fail(ec, s, err)
		}
		return nil
	}
}

const crossSiteDetail = "Cross-site request refused: console changes must come from the console's own pages."

// change wraps a change: signed in, from the console's own origin, with
// the session's CSRF token, holding scope, within the tenant's API rate;
// the service records it in the audit log with the token's subject and
// the request id.
func (c *console) change(h handlerFunc, scope string) echo.HandlerFunc {
	return c.guard(h, scope, true)
}

// guard is change; metered: the post counts against the tenant's rate.
func (c *console) guard(h handlerFunc, scope string, metered bool) echo.HandlerFunc {
	return func(ec echo.Context) error {
		req := ec.Request()
		if !sameOrigin(req) {
			return c.render(ec, http.StatusForbidden, "error", nil, errorView{Title: "Forbidden", Detail: crossSiteDetail})
		}
		s, err := c.current(ec)
		if err != nil {
			return c.fail(ec, nil, err)
		}
		if s == nil {
			return c.signInPage(ec, http.StatusUnauthorized, errors.New("your session ended: sign in again"))
		}
		if metered {
			if done, err := c.rateLimited(ec, s); done || err != nil {
				return err
			}
		}
		if got := ec.FormValue(csrfField); subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
			return c.render(ec, http.StatusForbidden, "error", s, errorView{
				Title:  "Forbidden",
				Detail: "The form's CSRF token is missing or wrong. Reload the page and try again.",
			})
		}
		if scope != "" && !s.can(scope) {
			return c.render(ec, http.StatusForbidden, "error", s, errorView{
				Title:  "Forbidden",
				Detail: "This token lacks the \"" + scope + "\" scope this action needs.",
			})
		}
		actor := audit.Actor{Subject: s.Subject, RequestID: ec.Response().Header().Get(echo.HeaderXRequestID)}
		ec.SetRequest(req.WithContext(audit.WithActor(req.Context(), actor)))
		if err := h(ec, s); err != nil {
			return c.fail(ec, s, err)
		}
		return nil
	}
}

// rateLimited counts a signed-in request against its tenant's API rate,
// with the REST API's own accounting (api.CountTenantRequest: the same
// budget, shared by the replicas, the same RateLimit-* headers). Past the
// rate it renders the 429 page, with Retry-After, and reports done.
func (c *console) rateLimited(ec echo.Context, s *session) (done bool, err error) {
	h := ec.Response().Header()
	refused, err := api.CountTenantRequest(ec.Request().Context(), c.cfg.Limits, s.Tenant, h)
	if err != nil {
		return true, c.fail(ec, s, err)
	}
	if !refused {
		return false, nil
	}
	wait := h.Get(echo.HeaderRetryAfter)
	return true, c.render(ec, http.StatusTooManyRequests, "error", s, errorView{
		Title: "Too many requests",
		Detail: "Your tenant's limit of API requests per second (api_requests_per_second), which the console's pages and " +
			"buttons share with the REST API, is reached. Try again in " + wait + " s.",
	})
}

// sameOrigin reports whether a browser says req comes from a page of the
// server's own origin (Sec-Fetch-Site, or else Origin); other sites can
// forge neither.
func sameOrigin(req *http.Request) bool {
	if site := req.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	o := req.Header.Get(echo.HeaderOrigin)
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, req.Host)
}

// fail renders a service error as a page: not found (another tenant's id
// too) 404, invalid input 422, a conflict 409, anything else 500 or 503.
func (c *console) fail(ec echo.Context, s *session, err error) error {
	var ve *service.ValidationError
	switch {
	case errors.Is(err, service.ErrNotFound):
		return c.render(ec, http.StatusNotFound, "error", s, errorView{
			Title:  "Not found",
			Detail: "Nothing with this id exists for your tenant.",
		})
	case errors.As(err, &ve):
		return c.render(ec, http.StatusUnprocessableEntity, "error", s, errorView{Title: "Invalid input", Fields: ve.Fields})
	case errors.Is(err, service.ErrConflict):
		return c.render(ec, http.StatusConflict, "error", s, errorView{Title: "Conflict", Detail: err.Error()})
	case service.IsUnavailable(err):
		return c.render(ec, http.StatusServiceUnavailable, "error", s, errorView{
			Title:  "Unavailable",
			Detail: "The database is unavailable; try again shortly.",
		})
	}
	var qe *service.QuotaError
	if errors.As(err, &qe) {
		return c.render(ec, http.StatusConflict, "error", s, errorView{Title: "Quota exceeded", Detail: err.Error()})
	}
	c.cfg.Logger.Error("console: request failed", "path", ec.Request().URL.Path, "error", err.Error())
	return c.render(ec, http.StatusInternalServerError, "error", s, errorView{
		Title:  "Something went wrong",
		Detail: "The request failed; the server log has the details (request id " + ec.Response().Header().Get(echo.HeaderXRequestID) + ").",
	})
}
