// Package signing holds the endpoints' signing secrets: their one form
// (Standard Webhooks' whsec_ and base64), how a new one is made and how
// one is read into the key that signs.
package signing

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/axhq/ax/service/errs"
)

// Endpoint signing secrets follow Standard Webhooks: "whsec_" followed by the
// standard base64 encoding of 24 to 64 random bytes. The key that signs is
// the decoded bytes, not the string.
const (
	// SecretPrefix starts every symmetric signing secret.
	SecretPrefix = "whsec_"
	// SecretBytesMin is the shortest key ParseSecret accepts.
	SecretBytesMin = 24
	// SecretBytesMax is the longest key ParseSecret accepts.
	SecretBytesMax = 64
	// SecretBytesDefault is the key length GenerateSecret produces.
	SecretBytesDefault = 32
)

// ErrInvalidSecret means a signing secret is not in the accepted format.
// Errors wrapping it describe the problem but never contain the secret.
var ErrInvalidSecret = errs.New("invalid signing secret")

// GenerateSecret returns a new random signing secret: "whsec_" followed by
// the standard base64 encoding of SecretBytesDefault bytes from crypto/rand.
func GenerateSecret() (string, error) {
	key := make([]byte, SecretBytesDefault)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate signing secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// ParseSecret returns the key bytes of a signing secret. It accepts only
// "whsec_" followed by canonical standard base64 (padded, or unpadded)
// decoding to SecretBytesMin..SecretBytesMax bytes. URL-safe base64,
// embedded whitespace and other spellings are rejected so that a secret has
// exactly one form. The returned error wraps ErrInvalidSecret and never
// echoes the input.
func ParseSecret(s string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: must start with %q", ErrInvalidSecret, SecretPrefix)
	}
	// Bound the work before decoding: nothing longer can hold a valid key.
	if len(encoded) > base64.StdEncoding.EncodedLen(SecretBytesMax) {
		return nil, secretLengthError()
	}
	key, err := decodeCanonical(encoded)
	if err != nil {
		return nil, err
	}
	if len(key) < SecretBytesMin || len(key) > SecretBytesMax {
		return nil, secretLengthError()
	}
	return key, nil
}

// decodeCanonical decodes standard base64, padded or not, and insists that
// the input is exactly what encoding the result gives back. That rejects
// what the decoders tolerate: embedded newlines and non-zero trailing bits.
// Decoder errors are not wrapped because they quote input offsets.
func decodeCanonical(encoded string) ([]byte, error) {
	enc := base64.StdEncoding
	if !strings.HasSuffix(encoded, "=") && len(encoded)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	key, err := enc.DecodeString(encoded)
	if err != nil || enc.EncodeToString(key) != encoded {
		return nil, fmt.Errorf("%w: must be %q followed by standard base64", ErrInvalidSecret, SecretPrefix)
	}
	return key, nil
}

func secretLengthError() error {
	return fmt.Errorf("%w: key must decode to %d to %d bytes", ErrInvalidSecret, SecretBytesMin, SecretBytesMax)
}

// Keys reads signing secrets into their keys as ParseSecret does,
// remembering the keys of the secrets it has read: every delivery to an
// endpoint signs with the same secret, and decoding it for each was a
// twentieth of ax's CPU in a burst. The keys it returns are shared: never
// change one. A nil *Keys remembers nothing. Safe for concurrent use.
type Keys struct {
	keys  sync.Map // secret → []byte
	count atomic.Int64
}

// keysMax bounds what Keys remembers; past it, it starts over.
const keysMax = 10_000

// Parse returns the key of secret (ParseSecret). Only valid secrets are
// remembered.
func (k *Keys) Parse(secret string) ([]byte, error) {
	if k == nil {
		return ParseSecret(secret)
	}
	if key, ok := k.keys.Load(secret); ok {
		return key.([]byte), nil
	}
	key, err := ParseSecret(secret)
	if err != nil {
		return nil, err
	}
	if k.count.Add(1) > keysMax {
		k.keys.Clear()
		k.count.Store(1)
	}
	k.keys.Store(secret, key)
	return key, nil
}
