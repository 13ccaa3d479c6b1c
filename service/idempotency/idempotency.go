// Package idempotency remembers the first response to each
// Idempotency-Key (Keys.Handle): the key, the request's changes and its
// response commit in one transaction, so that a retry replays what was
// committed, or runs when nothing was.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Idempotency-Key bounds.
const (
	// TTL is how long an Idempotency-Key is remembered.
	TTL = 24 * time.Hour
	// Wait is how long a request waits for another one with the same key
	// to finish before it is told that one is in progress.
	Wait = 5 * time.Second
	// StaleAfter: a key without a response older than this
	// was abandoned by its request and is taken over by the next one with
	// the same body. Only earlier versions of ax left such keys: they
	// committed the key, then the create, then the response, a few quick
	// statements, and a crash in between kept the key. One still without
	// a response after twice the server's write timeout (60 s, the longest
	// its client waited) is taken for dead.
	StaleAfter = 2 * time.Minute
)

// Errors of an Idempotency-Key claim.
var (
	// ErrMismatch: the key was used with a different request body.
	ErrMismatch = errs.New("this Idempotency-Key was already used with a different request body")
	// ErrInFlight: the first request with this key is still running.
	ErrInFlight = errs.New("a request with this Idempotency-Key is still in progress; retry shortly")
)

// Response is a response kept for an Idempotency-Key.
type Response struct {
	Status int
	Body   []byte
}

// Keys remembers the first response to each Idempotency-Key.
type Keys struct {
	pool *db.Pool
	// wait is Wait; tests shorten it.
	wait time.Duration
}

// New returns Keys backed by pool.
func New(pool *db.Pool) *Keys {
	return &Keys{pool: pool, wait: Wait}
}

// errDiscard rolls back the transaction of Handle.
var errDiscard = errors.New("discard the request's transaction")

// Handle answers a request with body on route that carries key. The key,
// the request's changes and its response commit in one transaction, so
// that whatever happens to the process, a key is either unknown (nothing
// was done; the next request with it runs) or replays the response that
// describes the committed change.
//
// Handle claims key in a new transaction (db.ClaimIdempotencyKey) and
// calls handle with a context carrying that transaction: the services'
// writes with that context join it (db.WithTx). handle returns the
// rendered response and must not send it: it is not final until Handle
// returns without error.
//
//   - A 2xx or 3xx response is stored with the changes, and committed.
//   - A 4xx response is stored, and committed without the changes: a
//     refused request changes nothing.
//   - A 5xx response rolls everything back, the key too, so that the
//     client may retry.
//
// When the key already has a response for the same body, Handle returns
// it with replayed set, without calling handle. It returns
// ErrMismatch for another body, and ErrInFlight when
// another request with the key is still running after Wait. A
// request with the key that is running waits for it: after its commit it
// replays its response, after its rollback it runs. Any other error (the
// commit's) means that nothing was committed.
func (s *Keys) Handle(ctx context.Context, tenant, route, key string, body []byte,
	handle func(context.Context) Response,
) (resp Response, replayed bool, err error) {
	hash := sha256.Sum256(body)
	claim := db.IdempotencyClaim{
		TTLSeconds: int(TTL.Seconds()), StaleSeconds: int(StaleAfter.Seconds()), Wait: s.wait,
	}
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		rec, err := db.ClaimIdempotencyKey(ctx, tx, tenant, route, key, hash[:], claim)
		if err != nil {
			return errs.Store(err, "claim idempotency key", errs.OnLockTimeout(ErrInFlight))
		}
		switch {
		case rec == nil:
		case !bytes.Equal(rec.RequestHash, hash[:]):
			return ErrMismatch
		case rec.Status == nil:
			return ErrInFlight
		default:
			resp, replayed = Response{Status: *rec.Status, Body: rec.Response}, true
			return nil
		}
		// The request runs in a savepoint, so that a refusal keeps the
		// key and its response but nothing the request did.
		txCtx := db.WithTx(ctx, s.pool, tx)
		err = db.InTx(txCtx, s.pool, func(rtx db.Tx) error {
			resp = handle(db.WithTx(ctx, s.pool, rtx))
			if resp.Status >= 400 {
				return errDiscard
			}
			return nil
		})
		switch {
		case err != nil && !errors.Is(err, errDiscard):
			return err
		case resp.Status >= 500:
			return errDiscard
		}
		return db.FinishIdempotencyKey(ctx, tx, tenant, route, key, resp.Status, resp.Body)
	})
	if errors.Is(err, errDiscard) {
		return resp, false, nil
	}
	if err != nil {
		return Response{}, false, errs.Store(err, "handle idempotency key")
	}
	return resp, replayed, nil
}

// expiredKeysBatch bounds one statement of ExpireKeys.
const expiredKeysBatch = 5000

// ExpireKeys removes the Idempotency-Keys older than TTL (they
// are never replayed again), in batches, and returns how many it removed.
func (s *Keys) ExpireKeys(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := db.DeleteExpiredIdempotencyKeys(ctx, s.pool, int(TTL.Seconds()), expiredKeysBatch)
		total += n
		if err != nil || n < expiredKeysBatch {
			return total, errs.Store(err, "expire idempotency keys")
		}
	}
}
