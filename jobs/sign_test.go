package jobs

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// The Standard Webhooks known-answer vector (libraries/go/webhook_test.go).
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignKnownAnswer(t *testing.T) {
	t.Parallel()

	// The vector's key is 24 bytes, the minimum, so ParseSecret takes it.
	key, err := service.ParseSecret(vectorSecret)
	require.NoError(t, err)
	require.Len(t, key, 24)

	ts := time.Unix(vectorTimestamp, 0)
	require.Equal(t, vectorSignature, Sign(key, vectorMsgID, ts, []byte(vectorBody)))
	// Only whole seconds are signed.
	require.Equal(t, vectorSignature, Sign(key, vectorMsgID, ts.Add(999*time.Millisecond), []byte(vectorBody)))
	require.Equal(t, vectorSignature, SignatureHeader([][]byte{key}, vectorMsgID, ts, []byte(vectorBody)))
}

func TestSignDependsOnEveryInput(t *testing.T) {
	t.Parallel()

	key, err := service.ParseSecret(vectorSecret)
	require.NoError(t, err)
	ts := time.Unix(vectorTimestamp, 0)
	body := []byte(vectorBody)

	tests := []struct {
		name string
		sig  string
	}{
		{name: "other key", sig: Sign(append([]byte{1}, key[1:]...), vectorMsgID, ts, body)},
		{name: "other id", sig: Sign(key, vectorMsgID+"x", ts, body)},
		{name: "other timestamp", sig: Sign(key, vectorMsgID, ts.Add(time.Second), body)},
		{name: "re-serialised body", sig: Sign(key, vectorMsgID, ts, []byte(`{"test":2432232314}`))},
		{name: "empty body", sig: Sign(key, vectorMsgID, ts, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, strings.HasPrefix(tt.sig, "v1,"))
			require.NotEqual(t, vectorSignature, tt.sig)
		})
	}
}

func TestSignatureHeaderRotation(t *testing.T) {
	t.Parallel()

	oldKey := mustKey(t)
	newKey := mustKey(t)
	ts := time.Unix(1_700_000_000, 0)
	body := []byte(`{"b":1,  "a":2}`)

	header := SignatureHeader([][]byte{newKey, oldKey}, "exec_1", ts, body)
	sigs := strings.Split(header, " ")
	require.Len(t, sigs, 2)
	require.Equal(t, Sign(newKey, "exec_1", ts, body), sigs[0], "the new key signs first")
	require.Equal(t, Sign(oldKey, "exec_1", ts, body), sigs[1])
	require.True(t, verifySignatureHeader(header, newKey, "exec_1", ts, body))
	require.True(t, verifySignatureHeader(header, oldKey, "exec_1", ts, body))
	require.False(t, verifySignatureHeader(header, mustKey(t), "exec_1", ts, body))
}

// mustKey returns the key of a fresh ax-generated secret.
func mustKey(t *testing.T) []byte {
	t.Helper()
	secret, err := service.GenerateSecret()
	require.NoError(t, err)
	key, err := service.ParseSecret(secret)
	require.NoError(t, err)
	return key
}

// verifySignatureHeader is a receiver's check, written from the spec: any
// one v1 signature in the space-separated list must match, compared in
// constant time.
func verifySignatureHeader(header string, key []byte, msgID string, ts time.Time, body []byte) bool {
	want, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(Sign(key, msgID, ts, body), "v1,"))
	for _, versioned := range strings.Split(header, " ") {
		version, sig, ok := strings.Cut(versioned, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// TestKeptMACsSignAsSignatureHeader: signing with the states a Sender
// keeps per key gives SignatureHeader's header, for one key and for a
// rotation's two, again and again (a state is reset and reused), and
// after the states are forgotten past macKeysMax.
func TestKeptMACsSignAsSignatureHeader(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() []byte {
		k := make([]byte, 24+rng.IntN(41))
		for i := range k {
			k[i] = byte(rng.Uint32())
		}
		return k
	}
	cur, prev := key(), key()
	var m macs
	for i := range 50 {
		body := make([]byte, rng.IntN(300))
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		id, ts := fmt.Sprintf("exec-%d", i), time.Unix(1_700_000_000+int64(i), 0)
		require.Equal(t, SignatureHeader([][]byte{cur}, id, ts, body), m.signatureHeader([][]byte{cur}, id, ts, body))
		require.Equal(t, SignatureHeader([][]byte{cur, prev}, id, ts, body), m.signatureHeader([][]byte{cur, prev}, id, ts, body))
	}
	for range macKeysMax {
		m.pool(key())
	}
	require.Less(t, len(m.pools), macKeysMax/2, "forgotten past macKeysMax")
	require.Equal(t, SignatureHeader([][]byte{cur}, "x", time.Unix(1, 0), nil), m.signatureHeader([][]byte{cur}, "x", time.Unix(1, 0), nil))
}

// BenchmarkSignatureHeader: a delivery's signature with a new HMAC each
// time (SignatureHeader) and with the states a Sender keeps per key.
func BenchmarkSignatureHeader(b *testing.B) {
	keys := [][]byte{bytes.Repeat([]byte{7}, 32)}
	body := []byte(`{"i": 1234}`)
	ts := time.Unix(1_700_000_000, 0)
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			SignatureHeader(keys, "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", ts, body)
		}
	})
	b.Run("kept", func(b *testing.B) {
		b.ReportAllocs()
		var m macs
		for b.Loop() {
			m.signatureHeader(keys, "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", ts, body)
		}
	})
}
