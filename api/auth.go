package api

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"
)

// Scopes a token may carry (README, "Authentication"). The tenant scopes
// and admin are a tenant's; operator is ax's operators', on operator
// tokens only (OperatorTenant).
const (
	ScopeTasksRead       = "tasks:read"
	ScopeTasksWrite      = "tasks:write"
	ScopeEndpointsRead   = "endpoints:read"
	ScopeEndpointsWrite  = "endpoints:write"
	ScopeExecutionsRead  = "executions:read"
	ScopeExecutionsWrite = "executions:write"
	ScopeAuditRead       = "audit:read"
	ScopeWorkflowsRead   = "workflows:read"
	ScopeWorkflowsWrite  = "workflows:write"
	ScopeEventsRead      = "events:read"
	ScopeEventsWrite     = "events:write"
	// ScopeAdmin is a tenant's every scope, those to come included: it
	// reaches all of its own tenant's routes and nothing of another's.
	ScopeAdmin = "admin"
	// ScopeOperator is ax's operator: any tenant's limits, the replicas and
	// River UI. Only an operator token carries it (OperatorTenant); no
	// tenant scope implies it, and it implies none.
	ScopeOperator = "operator"
)

// OperatorTenant is the tenant claim of an operator token. It can never
// be a tenant's id (tenantPattern starts with a letter or digit), so no
// tenant token is mistaken for one and no tenant needs renaming.
const OperatorTenant = "*"

// AllScopes returns every scope a tenant token may carry, admin included,
// in a slice of the caller's own.
func AllScopes() []string { return append(TenantScopes(), ScopeAdmin) }

// TenantScopes returns every tenant scope but admin, what a tenant's own
// tooling needs, in a slice of the caller's own.
func TenantScopes() []string {
	return []string{
		ScopeTasksRead, ScopeTasksWrite, ScopeEndpointsRead, ScopeEndpointsWrite,
		ScopeExecutionsRead, ScopeExecutionsWrite, ScopeAuditRead, ScopeWorkflowsRead, ScopeWorkflowsWrite,
		ScopeEventsRead, ScopeEventsWrite,
	}
}

const (
	// LeewayDefault absorbs clock skew between the issuer and ax.
	LeewayDefault = 30 * time.Second
	// maxAuthorizationBytes bounds the Authorization header ax will parse.
	maxAuthorizationBytes = 8 << 10
)

// tenantPattern is what a tenant id may look like: it becomes a key in every
// table and a label in logs.
var tenantPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// Claims are the JWT claims ax reads.
type Claims struct {
	jwt.RegisteredClaims
	// Tenant is the tenant the caller acts for, or OperatorTenant for an
	// operator token. Required.
	Tenant string `json:"tenant"`
	// Scope is a space-separated list of scopes.
	Scope string `json:"scope,omitempty"`
}

// Principal is the verified caller of a request.
type Principal struct {
	// Tenant is the tenant it acts for; empty for an operator, who acts
	// for none.
	Tenant  string
	Subject string
	Scopes  []string
}

// Has reports whether the principal's token lists scope.
func (p Principal) Has(scope string) bool { return slices.Contains(p.Scopes, scope) }

// Operator reports whether the principal is an operator: an operator
// token, which carries the operator scope and no tenant. A tenant token
// listing the operator scope is not one.
func (p Principal) Operator() bool { return p.Tenant == "" && p.Has(ScopeOperator) }

// Allows reports whether the principal may use a tenant scope: it acts
// for a tenant and holds the scope or admin. An operator holds no tenant
// scope.
func (p Principal) Allows(scope string) bool {
	return p.Tenant != "" && (p.Has(scope) || p.Has(ScopeAdmin))
}

// AuthConfig configures token verification.
type AuthConfig struct {
	// HMACSecret verifies HS256 tokens. Empty disables HS256.
	HMACSecret []byte
	// PublicKeys verify RS256, ES256 and EdDSA tokens.
	PublicKeys []PublicKey
	// Issuer and Audience, when set, must match the token's iss and aud.
	Issuer, Audience string
	// Leeway for exp, nbf and iat. Defaults to LeewayDefault.
	Leeway time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// PublicKey is a verification key, optionally named by a key id (kid).
type PublicKey struct {
	ID  string
	Key crypto.PublicKey
}

// Authenticator verifies bearer tokens.
type Authenticator struct {
	cfg AuthConfig
	// verified remembers tokens that passed Verify, by their exact text,
	// until they expire; verifiedCount counts its entries.
	verified      sync.Map // string → verifiedToken
	verifiedCount atomic.Int64
}

// verifiedToken is a remembered verification.
type verifiedToken struct {
	principal Principal
	until     time.Time // exp plus the leeway: the first instant it is refused
}

// verifiedMax bounds Authenticator.verified; past it, the cache starts over.
const verifiedMax = 10_000

// NewAuthenticator checks cfg and returns an Authenticator.
func NewAuthenticator(cfg AuthConfig) (*Authenticator, error) {
	if len(cfg.HMACSecret) == 0 && len(cfg.PublicKeys) == 0 {
		return nil, errors.New("no token verification key configured")
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = LeewayDefault
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Authenticator{cfg: cfg}, nil
}

// errInvalidToken is the one answer every bad token gets; the reason stays
// in the server log.
var errInvalidToken = errors.New("invalid token")

// Verify parses and verifies a raw token and returns its principal (whose
// Scopes callers must not modify: they may be shared).
//
// A token that verified is remembered by its exact text until it expires,
// so that a client's next requests skip parsing it (decoding, JSON, claim
// checks: a fifteenth of a list request's CPU). That answers the same as
// verifying again: the keys, issuer and audience come from the
// configuration, which a running process never changes; not-before and
// issued-at, once passed, stay passed; and expiry is checked at every use.
func (a *Authenticator) Verify(raw string) (Principal, error) {
	now := a.cfg.Now()
	if v, ok := a.verified.Load(raw); ok {
		if t := v.(verifiedToken); now.Before(t.until) {
			return t.principal, nil
		}
		if _, loaded := a.verified.LoadAndDelete(raw); loaded {
			a.verifiedCount.Add(-1)
		}
	}
	var claims Claims
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(a.methods()),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(a.cfg.Leeway),
		jwt.WithTimeFunc(a.cfg.Now),
	}
	if a.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(a.cfg.Issuer))
	}
	if a.cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(a.cfg.Audience))
	}
	_, err := jwt.NewParser(opts...).ParseWithClaims(raw, &claims, a.keyFor)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %w", errInvalidToken, err)
	}
	p := Principal{Tenant: claims.Tenant, Subject: claims.Subject, Scopes: strings.Fields(claims.Scope)}
	switch {
	case claims.Tenant == OperatorTenant:
		if !p.Has(ScopeOperator) {
			return Principal{}, fmt.Errorf("%w: tenant claim %q without the %q scope", errInvalidToken, OperatorTenant, ScopeOperator)
		}
		p.Tenant = ""
	case !tenantPattern.MatchString(claims.Tenant):
		return Principal{}, fmt.Errorf("%w: tenant claim missing or malformed", errInvalidToken)
	}
	if claims.ExpiresAt != nil { // required, so always
		if a.verifiedCount.Load() >= verifiedMax {
			a.verified.Clear()
			a.verifiedCount.Store(0)
		}
		// Counted once per entry, however many requests verified it at once.
		if _, loaded := a.verified.LoadOrStore(raw, verifiedToken{principal: p, until: claims.ExpiresAt.Add(a.cfg.Leeway)}); !loaded {
			a.verifiedCount.Add(1)
		}
	}
	return p, nil
}

func (a *Authenticator) methods() []string {
	var m []string
	if len(a.cfg.HMACSecret) > 0 {
		m = append(m, "HS256")
	}
	for _, k := range a.cfg.PublicKeys {
		m = append(m, methodFor(k.Key)...)
	}
	slices.Sort(m)
	return slices.Compact(m)
}

func methodFor(k crypto.PublicKey) []string {
	switch k.(type) {
	case *rsa.PublicKey:
		return []string{"RS256"}
	case *ecdsa.PublicKey:
		return []string{"ES256"}
	case ed25519.PublicKey:
		return []string{"EdDSA"}
	}
	return nil
}

// keyFor picks the verification key for a token. Keys come only from
// configuration: jku, x5u and embedded jwk headers are ignored, and kid only
// selects among configured keys. Each key verifies only its own algorithm,
// so an HS256 token "signed" with a public key is rejected.
func (a *Authenticator) keyFor(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if alg == "HS256" {
		if len(a.cfg.HMACSecret) == 0 {
			return nil, errors.New("HS256 is not configured")
		}
		return a.cfg.HMACSecret, nil
	}
	kid, _ := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range a.cfg.PublicKeys {
		if !slices.Contains(methodFor(k.Key), alg) || (kid != "" && k.ID != "" && k.ID != kid) {
			continue
		}
		set.Keys = append(set.Keys, k.Key)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("no configured key for this token")
	}
	return set, nil
}

// ParsePublicKeys reads PEM-encoded public keys ("PUBLIC KEY" in PKIX form
// for RSA, ECDSA P-256 and Ed25519, or "RSA PUBLIC KEY"). A block's "kid"
// header, if any, names the key.
func ParsePublicKeys(data []byte) ([]PublicKey, error) {
	var keys []PublicKey
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var (
			key crypto.PublicKey
			err error
		)
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		default:
			return nil, fmt.Errorf("PEM block %d: type %q is not a public key", n, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		if ec, ok := key.(*ecdsa.PublicKey); ok && ec.Curve.Params().Name != "P-256" {
			return nil, fmt.Errorf("PEM block %d: only P-256 ECDSA keys (ES256) are supported", n)
		}
		if rk, ok := key.(*rsa.PublicKey); ok && rk.N.BitLen() < 2048 {
			return nil, fmt.Errorf("PEM block %d: RSA keys must have at least 2048 bits", n)
		}
		if methodFor(key) == nil {
			return nil, fmt.Errorf("PEM block %d: unsupported key type %T", n, key)
		}
		keys = append(keys, PublicKey{ID: block.Headers["kid"], Key: key})
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public keys found")
	}
	return keys, nil
}

// IssueToken signs an HS256 token for tenant with the given scopes, valid
// for ttl. iss and aud are set when given. It serves `ax token` and the dev
// banner. The operator scope is refused: that is IssueOperatorToken's.
func IssueToken(secret []byte, tenant, subject string, scopes []string, ttl time.Duration, issuer, audience string) (string, error) {
	if !tenantPattern.MatchString(tenant) {
		return "", fmt.Errorf("tenant %q: must match %s", tenant, tenantPattern)
	}
	if slices.Contains(scopes, ScopeOperator) {
		return "", fmt.Errorf("the %q scope is for operator tokens, which act for no tenant", ScopeOperator)
	}
	return issue(secret, tenant, subject, scopes, ttl, issuer, audience)
}

// IssueOperatorToken signs an HS256 operator token (tenant claim
// OperatorTenant, scope operator) for subject, valid for ttl.
func IssueOperatorToken(secret []byte, subject string, ttl time.Duration, issuer, audience string) (string, error) {
	return issue(secret, OperatorTenant, subject, []string{ScopeOperator}, ttl, issuer, audience)
}

func issue(secret []byte, tenant, subject string, scopes []string, ttl time.Duration, issuer, audience string) (string, error) {
	now := time.Now()
	claims := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   subject,
			Issuer:    issuer,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
		Tenant: tenant,
		Scope:  strings.Join(scopes, " "),
	}
	if audience != "" {
		claims.Audience = jwt.ClaimStrings{audience}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// principalFrom returns the request's verified principal. Routes behind
// authenticate always have one.
func principalFrom(c echo.Context) Principal {
	p, _ := c.Get(principalContextKey).(Principal)
	return p
}

const principalContextKey = "ax.principal"

// authenticate verifies the bearer token and stores the principal.
// ensure creates the tenant on its first authenticated use (an operator
// acts for no tenant: none is created).
func authenticate(a *Authenticator, ensure func(c echo.Context, tenant string) error) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			if h == "" {
				return &authError{challenge: `Bearer realm="ax"`, detail: "missing bearer token"}
			}
			scheme, raw, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
				return &authError{challenge: `Bearer realm="ax"`, detail: "the Authorization header must be `Bearer <token>`"}
			}
			if len(h) > maxAuthorizationBytes {
				return &authError{challenge: `Bearer realm="ax", error="invalid_token"`, detail: "the token is invalid or expired"}
			}
			p, err := a.Verify(strings.TrimSpace(raw))
			if err != nil {
				logFrom(c).Info("rejected token", "error", err.Error())
				return &authError{challenge: `Bearer realm="ax", error="invalid_token"`, detail: "the token is invalid or expired"}
			}
			if p.Operator() {
				c.Set(principalContextKey, p)
				setLogAttrs(c, "operator", p.Subject)
				return next(c)
			}
			if err := ensure(c, p.Tenant); err != nil {
				return err
			}
			c.Set(principalContextKey, p)
			setLogAttrs(c, "tenant", p.Tenant)
			return next(c)
		}
	}
}

// requireScope answers 403 unless the principal may use the tenant scope
// (Principal.Allows: the scope or admin, on a tenant token).
func requireScope(scope string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := principalFrom(c)
			if p.Operator() {
				return forbidden(fmt.Sprintf("an operator token acts for no tenant: this route needs a tenant token with the %q scope", scope))
			}
			if !p.Allows(scope) {
				return forbidden(fmt.Sprintf("this token lacks the %q scope", scope))
			}
			return next(c)
		}
	}
}

// requireTenant answers 403 to an operator, who has no tenant of its own,
// on a route about the caller's tenant that needs no scope.
func requireTenant(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if principalFrom(c).Operator() {
			return forbidden("an operator token acts for no tenant: this route needs a tenant token")
		}
		return next(c)
	}
}

// isOperator reports whether p has an operator's powers: an operator
// token, or, while Config.AdminIsOperator (deprecated) restores the old
// rule, a tenant token with admin.
func (h *handlers) isOperator(p Principal) bool {
	return p.Operator() || (h.cfg.AdminIsOperator && p.Tenant != "" && p.Has(ScopeAdmin))
}

// requireOperator answers 403 unless the principal has an operator's
// powers (isOperator); what names the route in the answer.
func (h *handlers) requireOperator(what string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if p := principalFrom(c); !h.isOperator(p) {
				return operatorNeeded(p, what)
			}
			return next(c)
		}
	}
}

// operatorNeeded is the 403 of a tenant token on an operator's route: what
// it asked for needs an operator token, which a tenant's admin is not.
func operatorNeeded(p Principal, what string) *problem {
	detail := what + ` needs an operator token (tenant claim "*", scope "operator"; ` + "`ax token --operator`" + `)`
	switch {
	case p.Has(ScopeOperator):
		detail += `: this token lists the "operator" scope but acts for tenant ` + fmt.Sprintf("%q", p.Tenant) + `, so it is a tenant token`
	case p.Has(ScopeAdmin):
		detail += `: a tenant's "admin" scope covers its own tenant only`
	}
	return forbidden(detail)
}

func forbidden(detail string) *problem {
	return &problem{Status: http.StatusForbidden, Title: "Forbidden", Detail: detail}
}

// authError is a 401 with its WWW-Authenticate challenge.
type authError struct {
	challenge string
	detail    string
}

func (e *authError) Error() string { return "unauthorized: " + e.detail }
