package jobs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
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
