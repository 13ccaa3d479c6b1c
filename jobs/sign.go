package jobs

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// signatureVersion prefixes symmetric (HMAC-SHA256) Standard Webhooks
// signatures.
const signatureVersion = "v1,"

// Sign returns the Standard Webhooks v1 signature of one delivery:
// "v1," + base64(HMAC-SHA256(key, msgID + "." + unix seconds + "." + body)).
// body must be the exact bytes sent; re-serialising it breaks the signature.
func Sign(key []byte, msgID string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, ts.Unix(), 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return signatureVersion + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SignatureHeader returns the webhook-signature header value: one signature
// per key, space-separated, in the order given. During a secret rotation
// callers pass the new key first and the old one after it; receivers accept
// any one match.
func SignatureHeader(keys [][]byte, msgID string, ts time.Time, body []byte) string {
	sigs := make([]string, len(keys))
	for i, key := range keys {
		sigs[i] = Sign(key, msgID, ts, body)
	}
	return strings.Join(sigs, " ")
}

// macs keeps HMAC-SHA256 states keyed and ready for each signing key, so
// that a delivery's signature costs the hashing of its message, not a new
// HMAC (two digests, the key's two pad blocks) each time. It forgets
// everything past macKeysMax keys, as Sender.urls does. The zero value is
// ready.
type macs struct {
	mu    sync.Mutex
	pools map[string]*sync.Pool // key → *hmac states keyed with it
}

// macKeysMax bounds the keys macs keeps states for.
const macKeysMax = 10_000

// pool returns the pool of states keyed with key.
func (m *macs) pool(key []byte) *sync.Pool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pools[string(key)]; p != nil {
		return p
	}
	if m.pools == nil || len(m.pools) >= macKeysMax {
		m.pools = map[string]*sync.Pool{}
	}
	k := bytes.Clone(key)
	p := &sync.Pool{New: func() any { return hmac.New(sha256.New, k) }}
	m.pools[string(k)] = p
	return p
}

// signatureHeader is SignatureHeader, signing with m's states.
func (m *macs) signatureHeader(keys [][]byte, msgID string, ts time.Time, body []byte) string {
	prefix := make([]byte, 0, len(msgID)+22)
	prefix = append(prefix, msgID...)
	prefix = append(prefix, '.')
	prefix = strconv.AppendInt(prefix, ts.Unix(), 10)
	prefix = append(prefix, '.')
	enc := base64.StdEncoding
	out := make([]byte, 0, len(keys)*(len(signatureVersion)+enc.EncodedLen(sha256.Size)+1))
	sum := make([]byte, 0, sha256.Size)
	for i, key := range keys {
		p := m.pool(key)
		mac := p.Get().(hash.Hash)
		mac.Write(prefix)
		mac.Write(body)
		sum = mac.Sum(sum[:0])
		mac.Reset()
		p.Put(mac)
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, signatureVersion...)
		out = enc.AppendEncode(out, sum)
	}
	return string(out)
}
