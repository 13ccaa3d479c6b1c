// Package receiver verifies the webhooks ax sends, for tenant services that
// receive them. It depends on the standard library only, so importing it
// does not pull in the server; the Postgres idempotency store lives in the
// sub-package pgstore.
//
// ax signs every delivery the Standard Webhooks way
// (https://www.standardwebhooks.com): the headers webhook-id,
// webhook-timestamp (unix seconds) and webhook-signature, a space-separated
// list of "v1,<base64 HMAC-SHA256>" over id + "." + timestamp + "." + body,
// keyed with the base64 part of the endpoint's whsec_ secret. During a
// secret rotation ax signs with the new and the old secret; a Verifier
// given both secrets accepts either.
package receiver

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks header names.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far webhook-timestamp may lie from the receiver's
// clock (either way) before a delivery counts as a replay.
const DefaultTolerance = 5 * time.Minute

const secretPrefix = "whsec_"

// Errors Verify returns; test for them with errors.Is.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is absent.
	ErrMissingHeaders = errors.New("receiver: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrInvalidTimestamp: webhook-timestamp is not unix seconds.
	ErrInvalidTimestamp = errors.New("receiver: webhook-timestamp is not a unix time in seconds")
	// ErrTimestampTooOld: the timestamp is older than the tolerance (a replay, or a badly skewed clock).
	ErrTimestampTooOld = errors.New("receiver: webhook-timestamp is too old")
	// ErrTimestampTooNew: the timestamp lies further in the future than the tolerance.
	ErrTimestampTooNew = errors.New("receiver: webhook-timestamp is too far in the future")
	// ErrNoMatchingSignature: no v1 signature matches any of the secrets.
	ErrNoMatchingSignature = errors.New("receiver: no matching signature")
)

// Verifier checks signatures against one or more secrets. The zero value is
// not usable; build one with NewVerifier.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// Option configures a Verifier.
type Option func(*Verifier)

// WithTolerance sets the replay window (default DefaultTolerance). A
// non-positive d turns the timestamp check off, which only makes sense when
// something else (an idempotency store keeping ids forever) stops replays.
func WithTolerance(d time.Duration) Option { return func(v *Verifier) { v.tolerance = d } }

// WithClock replaces time.Now (for tests).
func WithClock(now func() time.Time) Option { return func(v *Verifier) { v.now = now } }

// NewVerifier returns a Verifier that accepts a signature made with any of
// secrets. Each secret is the endpoint's "whsec_<base64>" (the prefix may be
// left off). Pass the new and the old secret while a rotation is under way.
func NewVerifier(secrets []string, opts ...Option) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("receiver: at least one secret is required")
	}
	v := &Verifier{tolerance: DefaultTolerance, now: time.Now}
	for i, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), secretPrefix))
		if err != nil || len(key) == 0 {
			return nil, fmt.Errorf("receiver: secret %d is not whsec_ followed by base64", i+1)
		}
		v.keys = append(v.keys, key)
	}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// Verify checks one delivery: the headers (as received) and the exact body
// bytes. It returns nil when some v1 signature matches some secret and the
// timestamp lies within the tolerance.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrInvalidTimestamp
	}
	if v.tolerance > 0 {
		now := v.now().Unix()
		tol := int64(v.tolerance / time.Second)
		switch {
		case sec < now-tol:
			return ErrTimestampTooOld
		case sec > now+tol:
			return ErrTimestampTooNew
		}
	}
	for _, key := range v.keys {
		want := sign(key, id, ts, body)
		for _, s := range strings.Fields(sigs) {
			version, sig, ok := strings.Cut(s, ",")
			if !ok || version != "v1" {
				continue
			}
			got, err := base64.StdEncoding.DecodeString(sig)
			if err == nil && hmac.Equal(got, want) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// Sign returns the webhook-signature value ("v1,<base64>") that ax sends for
// this id, time and body with secret (whsec_…). Receivers rarely need it;
// it is here for tests that build signed requests.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil || len(key) == 0 {
		return "", errors.New("receiver: the secret is not whsec_ followed by base64")
	}
	return "v1," + base64.StdEncoding.EncodeToString(sign(key, id, strconv.FormatInt(ts.Unix(), 10), body)), nil
}

func sign(key []byte, id, ts string, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// DefaultMaxBody bounds the body Middleware reads (1 MiB, ax's own payload
// limit is smaller).
const DefaultMaxBody = 1 << 20

// Middleware returns a handler that reads the body (at most DefaultMaxBody
// bytes), verifies it and calls next with the body restored, so next can
// read it again. A delivery without the headers, with a malformed timestamp
// or with a body too large gets 400; a bad signature or a timestamp outside
// the tolerance gets 401. Either way next is not called.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(w, r)
		if err != nil {
			http.Error(w, "the request body could not be read", http.StatusBadRequest)
			return
		}
		if err := v.Verify(r.Header, body); err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, ErrMissingHeaders) || errors.Is(err, ErrInvalidTimestamp) {
				status = http.StatusBadRequest
			}
			http.Error(w, err.Error(), status)
			return
		}
		r.Body = nopCloser{bytes.NewReader(body)}
		next.ServeHTTP(w, r)
	})
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	defer r.Body.Close()
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, DefaultMaxBody))
	return buf.Bytes(), err
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
