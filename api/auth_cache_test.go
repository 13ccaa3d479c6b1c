package api

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// A remembered token answers exactly as verifying it again would, at every
// instant around its expiry, and only its exact text is remembered.
func TestVerifyRemembersTokensUntilTheyExpire(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	cached, err := NewAuthenticator(AuthConfig{HMACSecret: secret, Now: clock})
	require.NoError(t, err)
	sign := func(c Claims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
		require.NoError(t, err)
		return s
	}
	exp := t0.Add(10 * time.Second)
	token := sign(Claims{Tenant: "acme", Scope: "tasks:read tasks:write", RegisteredClaims: jwt.RegisteredClaims{
		Subject: "ci", IssuedAt: jwt.NewNumericDate(t0), ExpiresAt: jwt.NewNumericDate(exp),
	}})

	p, err := cached.Verify(token)
	require.NoError(t, err)
	require.Equal(t, Principal{Tenant: "acme", Subject: "ci", Scopes: []string{"tasks:read", "tasks:write"}}, p)
	require.Equal(t, int64(1), cached.verifiedCount.Load(), "remembered")

	// A forged signature or a swapped character is a different text:
	// verified afresh, and refused.
	i := len(token) - 10 // inside the signature, where every bit counts
	swap := byte('A')
	if token[i] == 'A' {
		swap = 'B'
	}
	forged := token[:i] + string(swap) + token[i+1:]
	_, err = cached.Verify(forged)
	require.ErrorIs(t, err, errInvalidToken)

	for _, at := range []time.Time{
		t0.Add(time.Second),
		exp,
		exp.Add(LeewayDefault - time.Nanosecond),
		exp.Add(LeewayDefault),
		exp.Add(LeewayDefault + time.Nanosecond),
		exp.Add(time.Hour),
	} {
		now.Store(at.UnixNano())
		fresh, err := NewAuthenticator(AuthConfig{HMACSecret: secret, Now: clock})
		require.NoError(t, err)
		wantP, wantErr := fresh.Verify(token)
		gotP, gotErr := cached.Verify(token)
		require.Equal(t, wantErr == nil, gotErr == nil, "at exp%+v: fresh %v, remembered %v", at.Sub(exp), wantErr, gotErr)
		require.Equal(t, wantP, gotP)
	}
	_, stillThere := cached.verified.Load(token)
	require.False(t, stillThere, "an expired token is forgotten")
}

// The cache is bounded: past verifiedMax tokens it starts over.
func TestVerifyCacheIsBounded(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	a, err := NewAuthenticator(AuthConfig{HMACSecret: secret})
	require.NoError(t, err)
	exp := jwt.NewNumericDate(time.Now().Add(time.Hour))
	for i := range verifiedMax + 10 {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, Claims{Tenant: "acme", RegisteredClaims: jwt.RegisteredClaims{
			Subject: strconv.Itoa(i), ExpiresAt: exp,
		}}).SignedString(secret)
		require.NoError(t, err)
		_, err = a.Verify(s)
		require.NoError(t, err)
	}
	n := 0
	a.verified.Range(func(any, any) bool { n++; return true })
	require.LessOrEqual(t, n, verifiedMax)
	require.Equal(t, int64(n), a.verifiedCount.Load())
}
