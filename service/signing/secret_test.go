package signing

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGenerateSecret(t *testing.T) {
	t.Parallel()

	seen := make(map[string]bool)
	for range 50 {
		s, err := GenerateSecret()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(s, SecretPrefix), "secret must start with %q", SecretPrefix)
		require.False(t, seen[s], "secrets must not repeat")
		seen[s] = true

		key, err := ParseSecret(s)
		require.NoError(t, err)
		require.Len(t, key, SecretBytesDefault)
		require.Equal(t, s, SecretPrefix+base64.StdEncoding.EncodeToString(key))
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()

	keyOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + 3)
		}
		return b
	}
	std := func(n int) string { return SecretPrefix + base64.StdEncoding.EncodeToString(keyOf(n)) }
	raw := func(n int) string { return SecretPrefix + base64.RawStdEncoding.EncodeToString(keyOf(n)) }

	tests := []struct {
		name    string
		in      string
		wantLen int // 0: want an error
	}{
		{name: "standard webhooks test vector", in: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", wantLen: 24},
		{name: "min length", in: std(SecretBytesMin), wantLen: SecretBytesMin},
		{name: "default length", in: std(SecretBytesDefault), wantLen: SecretBytesDefault},
		{name: "max length", in: std(SecretBytesMax), wantLen: SecretBytesMax},
		{name: "unpadded", in: raw(SecretBytesDefault), wantLen: SecretBytesDefault},
		{name: "unpadded max", in: raw(SecretBytesMax), wantLen: SecretBytesMax},
		{name: "too short", in: std(SecretBytesMin - 1)},
		{name: "too long", in: std(SecretBytesMax + 1)},
		{name: "far too long", in: SecretPrefix + strings.Repeat("A", 1<<20)},
		{name: "empty", in: ""},
		{name: "prefix only", in: SecretPrefix},
		{name: "no prefix", in: base64.StdEncoding.EncodeToString(keyOf(32))},
		{name: "upper-case prefix", in: "WHSEC_" + base64.StdEncoding.EncodeToString(keyOf(32))},
		{name: "asymmetric prefix", in: "whsk_" + base64.StdEncoding.EncodeToString(keyOf(32))},
		{name: "url-safe alphabet", in: SecretPrefix + base64.URLEncoding.EncodeToString([]byte(strings.Repeat("\xfb\xff", 16)))},
		{name: "embedded newline", in: std(32)[:20] + "\n" + std(32)[20:]},
		{name: "leading space", in: " " + std(32)},
		{name: "trailing space", in: std(32) + " "},
		{name: "non-zero trailing bits", in: withTrailingBits(std(32))},
		{name: "bad padding", in: std(32) + "="},
		{name: "not base64", in: SecretPrefix + strings.Repeat("!", 44)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			key, err := ParseSecret(tt.in)
			if tt.wantLen == 0 {
				require.ErrorIs(t, err, ErrInvalidSecret)
				require.Nil(t, key)
				// The message must never echo the secret or any part of it.
				if in := strings.TrimSpace(tt.in); len(in) >= 8 {
					require.NotContains(t, err.Error(), in[len(in)-8:])
				}
				return
			}
			require.NoError(t, err)
			require.Len(t, key, tt.wantLen)
		})
	}
}

// withTrailingBits sets the unused low bits of the last base64 digit of a
// padded encoding: decoders accept it, but it is not the canonical form.
func withTrailingBits(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(s, '=') - 1
	v := strings.IndexByte(alphabet, s[i])
	return s[:i] + string(alphabet[v|1]) + s[i+1:]
}

func TestParseSecretErrorHidesSecret(t *testing.T) {
	t.Parallel()

	secrets := []string{
		"whsec_c2VjcmV0LXRvby1zaG9ydA==", // 16 bytes
		"whsec_c2VjcmV0LXRoYXQtaXMtdG9vLXNob3J0!!!",
		"whsec_c2VjcmV0LXRoYXQtaXMtdG9vLXNob3J0\n",
		"sk_c2VjcmV0LXRoYXQtaXMtdG9vLXNob3J0",
	}
	for _, s := range secrets {
		_, err := ParseSecret(s)
		require.ErrorIs(t, err, ErrInvalidSecret)
		require.NotContains(t, err.Error(), "c2VjcmV0")
	}
}

// TestKeysRemembersValidSecrets: Keys reads a secret as ParseSecret does,
// once (the second read returns the same key), refuses an invalid one
// each time without remembering it, and a nil Keys reads afresh.
func TestKeysRemembersValidSecrets(t *testing.T) {
	t.Parallel()
	secret, err := GenerateSecret()
	require.NoError(t, err)
	want, err := ParseSecret(secret)
	require.NoError(t, err)

	var keys Keys
	first, err := keys.Parse(secret)
	require.NoError(t, err)
	require.Equal(t, want, first)
	again, err := keys.Parse(secret)
	require.NoError(t, err)
	require.Same(t, &first[0], &again[0], "read once, then remembered")

	for range 2 {
		_, err = keys.Parse("whsec_not base64")
		require.ErrorIs(t, err, ErrInvalidSecret)
	}
	require.EqualValues(t, 1, keys.count.Load(), "only the valid secret is remembered")

	var none *Keys
	fresh, err := none.Parse(secret)
	require.NoError(t, err)
	require.Equal(t, want, fresh)
}
