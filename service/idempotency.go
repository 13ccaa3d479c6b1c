package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/axhq/ax/db"
)

// IdempotencyTTL is how long an Idempotency-Key is remembered.
const IdempotencyTTL = 24 * time.Hour

// Errors of an Idempotency-Key claim.
var (
	// ErrIdempotencyMismatch: the key was used with a different request body.
	ErrIdempotencyMismatch = errors.New("this Idempotency-Key was already used with a different request body")
	// ErrIdempotencyInFlight: the first request with this key is still running.
	ErrIdempotencyInFlight = errors.New("a request with this Idempotency-Key is still in progress; retry shortly")
)

// StoredResponse is a response kept for an Idempotency-Key.
type StoredResponse struct {
	Status int
	Body   []byte
}

// IdempotencyKeys remembers the first response to each Idempotency-Key.
type IdempotencyKeys struct {
	pool *db.Pool
}

// NewIdempotencyKeys returns an IdempotencyKeys backed by pool.
func NewIdempotencyKeys(pool *db.Pool) *IdempotencyKeys {
	return &IdempotencyKeys{pool: pool}
}

// Claim registers key for a request with body on route. It returns the
// stored response when the same request was already answered, nil when the
// caller should handle the request (and then call Finish or Release),
// ErrIdempotencyMismatch for a different body and ErrIdempotencyInFlight
// while the first request is running.
func (s *IdempotencyKeys) Claim(ctx context.Context, tenant, route, key string, body []byte) (*StoredResponse, error) {
	hash := sha256.Sum256(body)
	rec, err := db.ClaimIdempotencyKey(ctx, s.pool, tenant, route, key, hash[:], int(IdempotencyTTL.Seconds()))
	if err != nil {
		return nil, fmt.Errorf("idempotency key: %w", err)
	}
	switch {
	case rec == nil:
		return nil, nil
	case !bytes.Equal(rec.RequestHash, hash[:]):
		return nil, ErrIdempotencyMismatch
	case rec.Status == nil:
		return nil, ErrIdempotencyInFlight
	}
	return &StoredResponse{Status: *rec.Status, Body: rec.Response}, nil
}

// Finish stores the response to replay for key.
func (s *IdempotencyKeys) Finish(ctx context.Context, tenant, route, key string, resp StoredResponse) error {
	return db.FinishIdempotencyKey(ctx, s.pool, tenant, route, key, resp.Status, resp.Body)
}

// Release forgets key so that the client may retry the request.
func (s *IdempotencyKeys) Release(ctx context.Context, tenant, route, key string) error {
	return db.ReleaseIdempotencyKey(ctx, s.pool, tenant, route, key)
}
