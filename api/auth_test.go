package api_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// testKeys are the asymmetric keys the auth tests sign with. RSA key
// generation is slow (more so under -race), so they are made once.
type testKeys struct {
	rsa1, rsa2, rsaOther *rsa.PrivateKey
	ec, ecOther          *ecdsa.PrivateKey
	ed, edOther          ed25519.PrivateKey
}

var authKeys = sync.OnceValue(func() testKeys {
	rsaKey := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	}
	ecKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	}
	edKey := func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	}
	return testKeys{rsa1: rsaKey(), rsa2: rsaKey(), rsaOther: rsaKey(), ec: ecKey(), ecOther: ecKey(), ed: edKey(), edOther: edKey()}
})

// pemPublic returns the PKIX PEM of pub with the given PEM headers.
func pemPublic(t *testing.T, pub crypto.PublicKey, headers map[string]string) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Headers: headers, Bytes: der})
}

// signToken builds a token with golang-jwt. header entries are added to (or,
// with a nil value, removed from) the JOSE header.
func signToken(t *testing.T, m jwt.SigningMethod, key any, claims jwt.MapClaims, header map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	for k, v := range header {
		if v == nil {
			delete(tok.Header, k)
		} else {
			tok.Header[k] = v
		}
	}
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

// rawHS256 assembles an HS256 token by hand, for headers and claims
// golang-jwt would not produce.
func rawHS256(header, claims any, key []byte) string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	in := enc(header) + "." + enc(claims)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(in))
	return in + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// claimsFor returns valid claims for tenant (exp in an hour, iat now) with
// extra merged in; an extra entry with a nil value removes the claim.
func claimsFor(tenant string, extra map[string]any) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"tenant": tenant, "sub": "auth-test", "scope": strings.Join(api.TenantScopes(), " "),
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// withT returns a copy of a bound to a subtest's t, so parallel subtests fail
// themselves rather than their parent.
func (a *testAPI) withT(t *testing.T) *testAPI {
	t.Helper()
	return &testAPI{t: t, pool: a.pool, srv: a.srv}
}

// requireUnauthorized checks a 401 problem with a Bearer challenge; a
// presented-but-bad token must be named invalid_token in the challenge.
func requireUnauthorized(t *testing.T, r resp, invalidToken bool) {
	t.Helper()
	require.Equal(t, http.StatusUnauthorized, r.Status, string(r.Raw))
	requireProblem(t, r, http.StatusUnauthorized)
	challenge := r.Header.Get("WWW-Authenticate")
	require.True(t, strings.HasPrefix(challenge, "Bearer"), "WWW-Authenticate: %q", challenge)
	if invalidToken {
		require.Contains(t, challenge, `error="invalid_token"`)
	} else {
		require.NotContains(t, challenge, `error="invalid_token"`)
	}
	// The reason a token was refused stays in the server log.
	require.NotContains(t, string(r.Raw), "signature")
}

// tenantExists reports whether the tenants table has a row for id.
func (a *testAPI) tenantExists(id string) bool {
	a.t.Helper()
	var n int
	require.NoError(a.t, a.pool.QueryRow(a.t.Context(), `SELECT count(*) FROM tenants WHERE id = $1`, id).Scan(&n))
	return n == 1
}

const (
	testIssuer   = "https://issuer.ax.test"
	testAudience = "ax-api"
)

// TestAuthTokens drives token verification through GET /v1/me on an API
// that accepts HS256 (testSecret) and, from a PEM file with kids, RS256
// (k1, k2), ES256 (e1) and EdDSA (no kid), and requires iss and aud.
func TestAuthTokens(t *testing.T) {
	t.Parallel()
	k := authKeys()
	var pemFile []byte
	pemFile = append(pemFile, pemPublic(t, &k.rsa1.PublicKey, map[string]string{"kid": "k1"})...)
	pemFile = append(pemFile, pemPublic(t, &k.rsa2.PublicKey, map[string]string{"kid": "k2"})...)
	pemFile = append(pemFile, pemPublic(t, &k.ec.PublicKey, map[string]string{"kid": "e1"})...)
	pemFile = append(pemFile, pemPublic(t, k.ed.Public(), nil)...)
	pub, err := api.ParsePublicKeys(pemFile)
	require.NoError(t, err)
	require.Len(t, pub, 4)

	a := newAPI(t, &apiOpts{Auth: &api.AuthConfig{
		HMACSecret: []byte(testSecret), PublicKeys: pub, Issuer: testIssuer, Audience: testAudience,
	}})

	// jku must never be fetched: count any request to the attacker's JWKS.
	var jkuHits atomic.Int64
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		jkuHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]any{
			"kty": "OKP", "crv": "Ed25519", "kid": "attacker",
			"x": base64.RawURLEncoding.EncodeToString(k.edOther.Public().(ed25519.PublicKey)),
		}}})
	}))
	t.Cleanup(jwks.Close)

	secret := []byte(testSecret)
	good := func(extra map[string]any) jwt.MapClaims {
		c := claimsFor("acme", map[string]any{"iss": testIssuer, "aud": testAudience})
		for key, v := range extra {
			if v == nil {
				delete(c, key)
			} else {
				c[key] = v
			}
		}
		return c
	}
	hs := func(extra map[string]any) string {
		return signToken(t, jwt.SigningMethodHS256, secret, good(extra), nil)
	}
	now := time.Now()
	attackerJWK := map[string]any{
		"kty": "OKP", "crv": "Ed25519",
		"x": base64.RawURLEncoding.EncodeToString(k.edOther.Public().(ed25519.PublicKey)),
	}
	pemRSA1 := pemPublic(t, &k.rsa1.PublicKey, map[string]string{"kid": "k1"})

	// An expired token with a bad signature (CVE-2024-51744's shape).
	expiredForged := signToken(t, jwt.SigningMethodHS256, []byte("not-the-secret-0123456789abcdef01"),
		good(map[string]any{"exp": now.Add(-time.Hour).Unix()}), nil)
	// A token whose signature is valid but whose payload was swapped after signing.
	valid := hs(nil)
	parts := strings.Split(valid, ".")
	otherPayload := strings.Split(hs(map[string]any{"tenant": "victim"}), ".")[1]
	spliced := parts[0] + "." + otherPayload + "." + parts[2]

	cases := []struct {
		name   string
		header map[string]string // raw request headers; Authorization "" means none
		token  string            // sent as "Bearer <token>" unless header sets Authorization
		// timed, if set, makes the token when the subtest runs: its claims
		// are relative to that moment (parallel subtests may start late on
		// a loaded machine, and the leeway is only 30 s).
		timed func(now time.Time) string
		ok    bool
		// challenge without error="invalid_token" (no token presented)
		noToken bool
	}{
		{name: "valid HS256", token: valid, ok: true},
		{name: "lower-case bearer scheme", header: map[string]string{"Authorization": "bearer " + valid}, ok: true},
		{name: "no Authorization header", noToken: true},
		{name: "Basic scheme", header: map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("acme:pw"))}, noToken: true},
		{name: "Bearer without a token", header: map[string]string{"Authorization": "Bearer"}, noToken: true},
		{name: "token in the query string is ignored", header: map[string]string{"X-Path": "/v1/me?access_token=" + valid}, noToken: true},
		{name: "garbage token", token: "not-a-jwt"},
		{name: "three garbage segments", token: "a.b.c"},
		{name: "Bearer and only spaces", header: map[string]string{"Authorization": "Bearer    "}, noToken: true},
		{name: "wrong HS256 key", token: signToken(t, jwt.SigningMethodHS256, []byte("wrong-secret-0123456789abcdef0123456"), good(nil), nil)},
		{name: "payload swapped after signing", token: spliced},
		{name: "signature stripped", token: parts[0] + "." + parts[1] + "."},
		{name: "alg none", token: signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good(nil), nil)},
		{name: "alg none with a signature segment", token: func() string {
			p := strings.Split(signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good(nil), nil), ".")
			return p[0] + "." + p[1] + "." + parts[2]
		}()},
		{name: "HS512 with the right secret (alg not pinned)", token: signToken(t, jwt.SigningMethodHS512, secret, good(nil), nil)},
		{name: "HS256 keyed with the RSA public key PEM", token: signToken(t, jwt.SigningMethodHS256, pemRSA1, good(nil), map[string]any{"kid": "k1"})},
		{name: "HS256 keyed with the RSA public key DER", token: func() string {
			der, err := x509.MarshalPKIXPublicKey(&k.rsa1.PublicKey)
			require.NoError(t, err)
			return signToken(t, jwt.SigningMethodHS256, der, good(nil), map[string]any{"kid": "k1"})
		}()},
		{name: "expired beyond leeway", timed: func(now time.Time) string { return hs(map[string]any{"exp": now.Add(-2 * time.Minute).Unix()}) }},
		{name: "expired within leeway", timed: func(now time.Time) string { return hs(map[string]any{"exp": now.Add(-10 * time.Second).Unix()}) }, ok: true},
		{name: "expired with a bad signature", token: expiredForged},
		{name: "missing exp", token: hs(map[string]any{"exp": nil})},
		{name: "exp not a number", token: hs(map[string]any{"exp": "tomorrow"})},
		{name: "nbf 60s in the future", timed: func(now time.Time) string { return hs(map[string]any{"nbf": now.Add(time.Minute).Unix()}) }},
		{name: "nbf within leeway", timed: func(now time.Time) string { return hs(map[string]any{"nbf": now.Add(10 * time.Second).Unix()}) }, ok: true},
		{name: "iat 10 min in the future", timed: func(now time.Time) string { return hs(map[string]any{"iat": now.Add(10 * time.Minute).Unix()}) }},
		{name: "wrong iss", token: hs(map[string]any{"iss": "https://evil.example"})},
		{name: "missing iss", token: hs(map[string]any{"iss": nil})},
		{name: "wrong aud", token: hs(map[string]any{"aud": "other-api"})},
		{name: "missing aud", token: hs(map[string]any{"aud": nil})},
		{name: "empty aud", token: hs(map[string]any{"aud": ""})},
		{name: "aud list containing ours", token: hs(map[string]any{"aud": []string{"other-api", testAudience}}), ok: true},
		{name: "missing tenant", token: hs(map[string]any{"tenant": nil})},
		{name: "empty tenant", token: hs(map[string]any{"tenant": ""})},
		{name: "tenant not a string", token: hs(map[string]any{"tenant": 42})},
		{name: "tenant with a space", token: hs(map[string]any{"tenant": "a b"})},
		{name: "tenant of 200 chars", token: hs(map[string]any{"tenant": strings.Repeat("a", 200)})},
		{name: "tenant of 129 chars", token: hs(map[string]any{"tenant": strings.Repeat("a", 129)})},
		{name: "tenant of 128 chars", token: hs(map[string]any{"tenant": strings.Repeat("a", 128)}), ok: true},
		{name: "tenant with a path", token: hs(map[string]any{"tenant": "../acme"})},
		{name: "tenant with a newline", token: hs(map[string]any{"tenant": "acme\nadmin"})},
		{name: "non-ASCII tenant", token: hs(map[string]any{"tenant": "äcme"})},
		{name: "RS256 k1", token: signToken(t, jwt.SigningMethodRS256, k.rsa1, good(nil), map[string]any{"kid": "k1"}), ok: true},
		{name: "RS256 kid selects k2", token: signToken(t, jwt.SigningMethodRS256, k.rsa2, good(nil), map[string]any{"kid": "k2"}), ok: true},
		{name: "RS256 signed by k2, kid says k1", token: signToken(t, jwt.SigningMethodRS256, k.rsa2, good(nil), map[string]any{"kid": "k1"})},
		{name: "RS256 without kid tries the configured keys", token: signToken(t, jwt.SigningMethodRS256, k.rsa2, good(nil), nil), ok: true},
		{name: "RS256 unknown kid", token: signToken(t, jwt.SigningMethodRS256, k.rsa1, good(nil), map[string]any{"kid": "k9"})},
		{name: "RS256 kid path traversal", token: signToken(t, jwt.SigningMethodRS256, k.rsa1, good(nil), map[string]any{"kid": "../../../../dev/null"})},
		{name: "HS256 kid path traversal, empty key", token: rawHS256(map[string]any{"alg": "HS256", "typ": "JWT", "kid": "../../../../dev/null"}, good(nil), nil)},
		{name: "HS256 kid SQL injection", token: rawHS256(map[string]any{"alg": "HS256", "typ": "JWT", "kid": "' UNION SELECT 'k'--"}, good(nil), []byte("k"))},
		{name: "RS256 by an unconfigured key", token: signToken(t, jwt.SigningMethodRS256, k.rsaOther, good(nil), map[string]any{"kid": "k1"})},
		{name: "PS256 with a configured RSA key (alg not pinned)", token: signToken(t, jwt.SigningMethodPS256, k.rsa1, good(nil), map[string]any{"kid": "k1"})},
		{name: "RS512 with a configured RSA key (alg not pinned)", token: signToken(t, jwt.SigningMethodRS512, k.rsa1, good(nil), map[string]any{"kid": "k1"})},
		{name: "ES256", token: signToken(t, jwt.SigningMethodES256, k.ec, good(nil), map[string]any{"kid": "e1"}), ok: true},
		{name: "ES256 by an unconfigured key", token: signToken(t, jwt.SigningMethodES256, k.ecOther, good(nil), map[string]any{"kid": "e1"})},
		{name: "EdDSA", token: signToken(t, jwt.SigningMethodEdDSA, k.ed, good(nil), nil), ok: true},
		{name: "EdDSA by an unconfigured key", token: signToken(t, jwt.SigningMethodEdDSA, k.edOther, good(nil), nil)},
		{name: "embedded jwk header with the attacker's key", token: signToken(t, jwt.SigningMethodEdDSA, k.edOther, good(nil), map[string]any{"jwk": attackerJWK})},
		{name: "jku header pointing at the attacker's JWKS", token: signToken(t, jwt.SigningMethodEdDSA, k.edOther, good(nil),
			map[string]any{"jku": jwks.URL + "/jwks.json", "kid": "attacker"})},
		{name: "jku header, no kid", token: signToken(t, jwt.SigningMethodEdDSA, k.edOther, good(nil), map[string]any{"jku": jwks.URL + "/jwks.json"})},
		{name: "x5u header", token: signToken(t, jwt.SigningMethodEdDSA, k.edOther, good(nil), map[string]any{"x5u": jwks.URL + "/cert.pem"})},
		{name: "64 KiB of dots", token: strings.Repeat(".", 64<<10)},
		{name: "a huge kid", token: signToken(t, jwt.SigningMethodRS256, k.rsa1, good(nil), map[string]any{"kid": strings.Repeat("k", 4000)})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			token := tc.token
			if tc.timed != nil {
				token = tc.timed(time.Now())
			}
			r := req{Method: http.MethodGet, Path: "/v1/me", Token: token, Header: map[string]string{}}
			for key, v := range tc.header {
				if key == "X-Path" {
					r.Path = v
					continue
				}
				r.Header[key] = v
			}
			out := a.withT(t).do(r)
			if tc.ok {
				require.Equal(t, http.StatusOK, out.Status, string(out.Raw))
				return
			}
			requireUnauthorized(t, out, !tc.noToken)
		})
	}
	t.Cleanup(func() { require.Zero(t, jkuHits.Load(), "the server fetched a jku URL") })
}

// TestAuthAlgorithmConfusion configures only an RSA public key: an HS256
// token MACed with that key's PEM (or anything else) must be refused.
func TestAuthAlgorithmConfusion(t *testing.T) {
	t.Parallel()
	k := authKeys()
	pemBytes := pemPublic(t, &k.rsa1.PublicKey, nil)
	pub, err := api.ParsePublicKeys(pemBytes)
	require.NoError(t, err)
	a := newAPI(t, &apiOpts{Auth: &api.AuthConfig{PublicKeys: pub}})

	der, err := x509.MarshalPKIXPublicKey(&k.rsa1.PublicKey)
	require.NoError(t, err)
	for name, tok := range map[string]string{
		"HS256 keyed with the PEM":       signToken(t, jwt.SigningMethodHS256, pemBytes, claimsFor("acme", nil), nil),
		"HS256 keyed with the DER":       signToken(t, jwt.SigningMethodHS256, der, claimsFor("acme", nil), nil),
		"HS256 keyed with an empty key":  rawHS256(map[string]any{"alg": "HS256", "typ": "JWT"}, claimsFor("acme", nil), nil),
		"HS256 keyed with the test key":  token(t, "acme"),
		"alg none":                       signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claimsFor("acme", nil), nil),
		"ES256 when no EC key is set":    signToken(t, jwt.SigningMethodES256, k.ec, claimsFor("acme", nil), nil),
		"EdDSA when no Ed key is set":    signToken(t, jwt.SigningMethodEdDSA, k.ed, claimsFor("acme", nil), nil),
		"RS256 by an unconfigured key":   signToken(t, jwt.SigningMethodRS256, k.rsaOther, claimsFor("acme", nil), nil),
		"HS384 keyed with the PEM":       signToken(t, jwt.SigningMethodHS384, pemBytes, claimsFor("acme", nil), nil),
		"RS256 with a kid, key has none": signToken(t, jwt.SigningMethodRS256, k.rsaOther, claimsFor("acme", nil), map[string]any{"kid": "x"}),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			requireUnauthorized(t, a.withT(t).do(req{Method: http.MethodGet, Path: "/v1/me", Token: tok}), true)
		})
	}
	// The configured key itself works, with or without a kid (the key has none).
	a.must(http.StatusOK, req{
		Method: http.MethodGet, Path: "/v1/me",
		Token: signToken(t, jwt.SigningMethodRS256, k.rsa1, claimsFor("acme", nil), nil),
	})
	a.must(http.StatusOK, req{
		Method: http.MethodGet, Path: "/v1/me",
		Token: signToken(t, jwt.SigningMethodRS256, k.rsa1, claimsFor("acme", nil), map[string]any{"kid": "any"}),
	})
}

// TestAuthIssuerAudienceUnchecked: without AuthConfig.Issuer/Audience any
// iss and aud (or none) are accepted.
func TestAuthIssuerAudienceUnchecked(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	for _, extra := range []map[string]any{
		nil,
		{"iss": "https://anyone.example", "aud": "whatever"},
		{"aud": []string{"a", "b"}},
	} {
		a.must(http.StatusOK, req{
			Method: http.MethodGet, Path: "/v1/me",
			Token: signToken(t, jwt.SigningMethodHS256, []byte(testSecret), claimsFor("acme", extra), nil),
		})
	}
}

// TestAuthHugeHeader sends "Bearer " + 1 MiB of dots: the server must refuse
// it (401, or 431 from net/http's header limit) and keep serving.
func TestAuthHugeHeader(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	for _, size := range []int{1 << 20, 1<<20 + 8<<10} {
		out := a.do(req{
			Method: http.MethodGet, Path: "/v1/me",
			Header: map[string]string{"Authorization": "Bearer " + strings.Repeat(".", size)},
		})
		t.Logf("Authorization of %d bytes: %d", size+len("Bearer "), out.Status)
		switch out.Status {
		case http.StatusRequestHeaderFieldsTooLarge:
		case http.StatusUnauthorized:
			requireUnauthorized(t, out, true)
		default:
			t.Fatalf("size %d: status %d, want 401 or 431: %s", size, out.Status, out.Raw)
		}
		a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: token(t, "acme")})
	}
}

// TestMe returns the principal and creates the tenant on first use, and
// only for a verified token.
func TestMe(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)

	forged := signToken(t, jwt.SigningMethodHS256, []byte("forged-secret-0123456789abcdef012345"), claimsFor("mallory", nil), nil)
	requireUnauthorized(t, a.do(req{Method: http.MethodGet, Path: "/v1/me", Token: forged}), true)
	require.False(t, a.tenantExists("mallory"), "a forged token created its tenant")

	require.False(t, a.tenantExists("acme.prod"))
	tok, err := api.IssueToken([]byte(testSecret), "acme.prod", "ci-bot", []string{api.ScopeTasksRead, api.ScopeEndpointsWrite}, time.Hour, "", "")
	require.NoError(t, err)
	out := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok})
	require.Equal(t, map[string]any{
		"tenant": "acme.prod", "subject": "ci-bot",
		"scopes": []any{api.ScopeTasksRead, api.ScopeEndpointsWrite},
	}, out.JSON)
	require.True(t, a.tenantExists("acme.prod"))
	// Again: still one row, still 200.
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok})
	require.True(t, a.tenantExists("acme.prod"))

	// No scope and no subject: empty list, not null; /v1/me needs no scope.
	bare := signToken(t, jwt.SigningMethodHS256, []byte(testSecret), claimsFor("bare", map[string]any{"scope": nil, "sub": nil}), nil)
	out = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: bare})
	require.Equal(t, map[string]any{"tenant": "bare", "subject": "", "scopes": []any{}}, out.JSON)

	// Extra spaces in scope are separators, not scopes.
	spaced := signToken(t, jwt.SigningMethodHS256, []byte(testSecret), claimsFor("acme", map[string]any{"scope": "  tasks:read   admin "}), nil)
	out = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: spaced})
	require.Equal(t, []any{"tasks:read", "admin"}, out.JSON["scopes"])
}

// TestAuthScopes: a valid token without the route's scope gets 403; admin
// holds every scope.
func TestAuthScopes(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	list := func(tok string) resp { return a.do(req{Method: http.MethodGet, Path: "/v1/tasks", Token: tok}) }

	for _, scopes := range [][]string{
		{api.ScopeTasksWrite},
		{api.ScopeEndpointsRead, api.ScopeExecutionsRead},
		{"tasks:read:extra"},
		{"TASKS:READ"},
	} {
		out := list(token(t, "acme", scopes...))
		require.Equal(t, http.StatusForbidden, out.Status, "%v: %s", scopes, out.Raw)
		requireProblem(t, out, http.StatusForbidden)
		require.Contains(t, out.JSON["detail"], api.ScopeTasksRead)
	}
	none := signToken(t, jwt.SigningMethodHS256, []byte(testSecret), claimsFor("acme", map[string]any{"scope": nil}), nil)
	requireProblem(t, list(none), http.StatusForbidden)

	// A bad token is 401, not 403, even on a scoped route.
	requireUnauthorized(t, list("garbage"), true)
	requireUnauthorized(t, a.do(req{Method: http.MethodGet, Path: "/v1/tasks"}), false)

	require.Equal(t, http.StatusOK, list(token(t, "acme", api.ScopeTasksRead)).Status)
	require.Equal(t, http.StatusOK, list(token(t, "acme", api.ScopeAdmin)).Status)
	// Write routes need the write scope: a read-only token may not create.
	out := a.do(req{Method: http.MethodPost, Path: "/v1/tasks", Token: token(t, "acme", api.ScopeTasksRead), Body: map[string]any{}})
	require.Equal(t, http.StatusForbidden, out.Status, string(out.Raw))
	requireProblem(t, out, http.StatusForbidden)
}

// TestParsePublicKeys reads PEM files with kid headers and refuses garbage.
func TestParsePublicKeys(t *testing.T) {
	t.Parallel()
	k := authKeys()
	var file []byte
	file = append(file, []byte("comment lines before a block are ignored\n")...)
	file = append(file, pemPublic(t, &k.rsa1.PublicKey, map[string]string{"kid": "k1"})...)
	file = append(file, pemPublic(t, &k.ec.PublicKey, map[string]string{"kid": "e1"})...)
	file = append(file, pemPublic(t, k.ed.Public(), nil)...)
	file = append(file, pem.EncodeToMemory(&pem.Block{
		Type: "RSA PUBLIC KEY", Headers: map[string]string{"kid": "k2"},
		Bytes: x509.MarshalPKCS1PublicKey(&k.rsa2.PublicKey),
	})...)

	got, err := api.ParsePublicKeys(file)
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, "k1", got[0].ID)
	require.True(t, k.rsa1.PublicKey.Equal(got[0].Key))
	require.Equal(t, "e1", got[1].ID)
	require.True(t, k.ec.PublicKey.Equal(got[1].Key))
	require.Empty(t, got[2].ID)
	require.True(t, k.ed.Public().(ed25519.PublicKey).Equal(got[2].Key))
	require.Equal(t, "k2", got[3].ID)
	require.True(t, k.rsa2.PublicKey.Equal(got[3].Key))

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	small, err := rsa.GenerateKey(rand.Reader, 1024) // deliberately too small
	require.NoError(t, err)
	ecPriv, err := x509.MarshalECPrivateKey(k.ec)
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"empty":              nil,
		"garbage":            []byte("garbage\x00\xff not a pem file"),
		"PEM with bad DER":   pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("garbage")}),
		"private key":        pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecPriv}),
		"certificate type":   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}),
		"P-384 key":          pemPublic(t, &p384.PublicKey, nil),
		"1024-bit RSA key":   pemPublic(t, &small.PublicKey, nil),
		"good then garbage":  append(pemPublic(t, &k.rsa1.PublicKey, nil), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("x")})...),
		"truncated PEM":      pemPublic(t, &k.rsa1.PublicKey, nil)[:100],
		"DER without armour": func() []byte { d, _ := x509.MarshalPKIXPublicKey(&k.rsa1.PublicKey); return d }(),
	} {
		parsed, err := api.ParsePublicKeys(data)
		require.Error(t, err, name)
		require.Nil(t, parsed, name)
	}
}

// TestNewAuthenticatorNeedsAKey: no secret and no public key is a
// configuration error, not an API that accepts nothing (or anything).
func TestNewAuthenticatorNeedsAKey(t *testing.T) {
	t.Parallel()
	_, err := api.NewAuthenticator(api.AuthConfig{})
	require.Error(t, err)
	_, err = api.NewAuthenticator(api.AuthConfig{Issuer: testIssuer, Audience: testAudience})
	require.Error(t, err)
}

// TestIssueToken: ax token's output verifies, and its tenant rule matches
// the verifier's.
func TestIssueToken(t *testing.T) {
	t.Parallel()
	auth, err := api.NewAuthenticator(api.AuthConfig{HMACSecret: []byte(testSecret), Issuer: testIssuer, Audience: testAudience})
	require.NoError(t, err)
	tok, err := api.IssueToken([]byte(testSecret), "acme", "cli", []string{api.ScopeAdmin}, time.Minute, testIssuer, testAudience)
	require.NoError(t, err)
	p, err := auth.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, api.Principal{Tenant: "acme", Subject: "cli", Scopes: []string{api.ScopeAdmin}}, p)

	_, err = api.IssueToken([]byte(testSecret), "a b", "cli", nil, time.Minute, "", "")
	require.Error(t, err)
	expired, err := api.IssueToken([]byte(testSecret), "acme", "cli", nil, -time.Hour, testIssuer, testAudience)
	require.NoError(t, err)
	_, err = auth.Verify(expired)
	require.Error(t, err)
}

// TestScopeListsAreTheCallers: each call returns a slice of its own, so a
// caller that appends to the tenant scopes (as a token issuer adding
// admin for one token would) cannot change the list of every scope. They
// used to share one backing array: an append overwrote admin.
func TestScopeListsAreTheCallers(t *testing.T) {
	t.Parallel()
	tenant := api.TenantScopes()
	require.NotContains(t, tenant, api.ScopeAdmin)
	_ = append(tenant, "custom:scope")
	tenant[0] = "changed"
	all := api.AllScopes()
	require.Equal(t, api.ScopeAdmin, all[len(all)-1], "admin is still the last of every scope")
	require.NotContains(t, all, "custom:scope")
	require.Equal(t, api.ScopeTasksRead, all[0])
	require.Equal(t, append(api.TenantScopes(), api.ScopeAdmin), all)
	require.Equal(t, api.ScopeTasksRead, api.TenantScopes()[0], "a change to a returned slice does not last")
}
