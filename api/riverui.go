package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// RiverUIPrefix is where River's web UI is mounted (Config.RiverUI).
const RiverUIPrefix = "/riverui"

// riverUICookie holds an operator's token after the ?token= exchange. It is
// scoped to RiverUIPrefix/, HttpOnly and SameSite=Strict.
const riverUICookie = "ax_riverui_token"

// riverUITokenParam carries a token on the UI's entry page: a browser
// cannot send a bearer header while navigating.
const riverUITokenParam = "token"

// credential says where a River UI request's token came from.
type credential int

const (
	fromHeader credential = iota + 1
	fromQuery
	fromCookie
)

// riverUIRedirect sends /riverui to /riverui/, keeping the query: the
// cookie's path does not cover /riverui itself.
func riverUIRedirect(c echo.Context) error {
	target := RiverUIPrefix + "/"
	if q := c.Request().URL.RawQuery; q != "" {
		target += "?" + q
	}
	return c.Redirect(http.StatusMovedPermanently, target)
}

// riverUI serves River's UI (Config.RiverUI) to operators only: an
// operator token (isOperator) from the Authorization header, from ?token= on the
// entry page (exchanged at once for a cookie, and the browser redirected
// to the page without it), or from that cookie. The UI shows every
// tenant's jobs and can cancel, retry and delete them and pause queues, so
// requests that change something must also come from the UI's own origin
// (Sec-Fetch-Site or Origin): the cookie alone would let another site
// forge them. The UI never sees the token: the header, the cookie and the
// query parameter are removed before it is called.
func (h *handlers) riverUI(c echo.Context) error {
	req := c.Request()
	p, raw, from, err := riverUIPrincipal(c, h.cfg.Auth)
	if err != nil {
		return err
	}
	if p.Operator() {
		setLogAttrs(c, "operator", p.Subject)
	} else {
		setLogAttrs(c, "tenant", p.Tenant, "subject", p.Subject)
	}
	if !h.isOperator(p) {
		return operatorNeeded(p, "the River UI, which shows every tenant's jobs,")
	}
	res := c.Response()
	res.Header().Set("X-Frame-Options", "DENY")
	if from == fromQuery {
		http.SetCookie(res, riverUICookieOf(c, raw, 0))
		res.Header().Set(echo.HeaderCacheControl, "no-store")
		res.Header().Set("Referrer-Policy", "no-referrer")
		return c.Redirect(http.StatusSeeOther, withoutToken(req.URL).RequestURI())
	}
	if !safeMethod(req.Method) && !sameOrigin(req) {
		return &problem{
			Status: http.StatusForbidden, Title: "Forbidden",
			Detail: "cross-site request refused: River UI changes must come from the UI's own origin (Sec-Fetch-Site: same-origin or a matching Origin header)",
		}
	}
	h.cfg.RiverUI.ServeHTTP(res, withoutCredentials(req))
	return nil
}

// riverUIPrincipal verifies the request's token: the Authorization header
// first, then ?token= on the entry page, then the cookie. It returns the
// raw token too, for the cookie.
func riverUIPrincipal(c echo.Context, a *Authenticator) (Principal, string, credential, error) {
	req := c.Request()
	var (
		raw  string
		from credential
	)
	switch {
	case req.Header.Get(echo.HeaderAuthorization) != "":
		scheme, tok, ok := strings.Cut(req.Header.Get(echo.HeaderAuthorization), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return Principal{}, "", 0, &authError{challenge: `Bearer realm="ax"`, detail: "the Authorization header must be `Bearer <token>`"}
		}
		raw, from = strings.TrimSpace(tok), fromHeader
	case isRiverUIEntry(req) && req.URL.Query().Has(riverUITokenParam):
		raw, from = req.URL.Query().Get(riverUITokenParam), fromQuery
	default:
		if ck, err := req.Cookie(riverUICookie); err == nil && ck.Value != "" {
			raw, from = ck.Value, fromCookie
		}
	}
	if from == 0 {
		return Principal{}, "", 0, &authError{
			challenge: `Bearer realm="ax"`,
			detail:    "missing token: send `Authorization: Bearer <token>`, or open " + RiverUIPrefix + "/?token=<token> once in a browser",
		}
	}
	invalid := &authError{challenge: `Bearer realm="ax", error="invalid_token"`, detail: "the token is invalid or expired"}
	if len(raw) > maxAuthorizationBytes {
		return Principal{}, "", 0, invalid
	}
	p, err := a.Verify(raw)
	if err != nil {
		logFrom(c).Info("rejected token", "error", err.Error(), "source", from.String())
		if from == fromCookie {
			// Forget the stale cookie, so the next visit asks for a token.
			http.SetCookie(c.Response(), riverUICookieOf(c, "", -1))
		}
		return Principal{}, "", 0, invalid
	}
	return p, raw, from, nil
}

// riverUICookieOf returns the session cookie that holds token (maxAge -1
// deletes it): only for
// the UI's paths, never readable by scripts, never sent by requests that
// other sites start, and Secure whenever the request came over TLS (or
// through a proxy that terminated it).
func riverUICookieOf(c echo.Context, token string, maxAge int) *http.Cookie {
	return &http.Cookie{ //nolint:gosec // Secure whenever the request came over TLS; on plain HTTP a Secure cookie would never come back
		Name: riverUICookie, Value: token, Path: RiverUIPrefix + "/", MaxAge: maxAge,
		HttpOnly: true, Secure: c.Scheme() == "https", SameSite: http.SameSiteStrictMode,
	}
}

func (f credential) String() string {
	switch f {
	case fromHeader:
		return "header"
	case fromQuery:
		return "query"
	case fromCookie:
		return "cookie"
	}
	return "none"
}

// isRiverUIEntry reports whether req loads the UI's entry page, the only
// place ?token= is accepted.
func isRiverUIEntry(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) && req.URL.Path == RiverUIPrefix+"/"
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin reports whether a browser says req comes from a page of the
// server's own origin. Browsers send Sec-Fetch-Site, or at least Origin,
// on every cross-origin POST, PUT, PATCH and DELETE; a page of another
// site can forge neither.
func sameOrigin(req *http.Request) bool {
	if req.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return true
	}
	o := req.Header.Get(echo.HeaderOrigin)
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, req.Host)
}

// withoutToken returns u without the token query parameter.
func withoutToken(u *url.URL) *url.URL {
	out := *u
	q := out.Query()
	q.Del(riverUITokenParam)
	out.RawQuery = q.Encode()
	return &out
}

// withoutCredentials returns a copy of req without the token in any of its
// forms, so that nothing behind the UI can log or leak it.
func withoutCredentials(req *http.Request) *http.Request {
	out := req.Clone(req.Context())
	out.Header.Del(echo.HeaderAuthorization)
	out.Header.Del("Cookie")
	for _, ck := range req.Cookies() {
		if ck.Name != riverUICookie {
			out.AddCookie(ck)
		}
	}
	if out.URL.Query().Has(riverUITokenParam) {
		out.URL = withoutToken(out.URL)
		out.RequestURI = out.URL.RequestURI()
	}
	return out
}
