package db

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// IdempotencyRecord is a stored Idempotency-Key.
type IdempotencyRecord struct {
	RequestHash []byte
	Status      *int
	Response    []byte
}

// IdempotencyClaim bounds ClaimIdempotencyKey.
type IdempotencyClaim struct {
	// TTLSeconds: a key older than this is forgotten, and claimed anew.
	TTLSeconds int
	// StaleSeconds: a committed key without a response (status NULL)
	// older than this is abandoned, and claimed anew by a request with
	// the same hash. Such keys are left by earlier versions of ax, which
	// committed the key before handling the request and stored the
	// response in a statement of its own; ClaimIdempotencyKey's keys
	// commit only with their response.
	StaleSeconds int
	// Wait bounds how long the claim waits for another transaction that
	// holds the key (lock_timeout); then it fails with ErrLockTimeout.
	Wait time.Duration
}

// ClaimIdempotencyKey records key for a request with hash in tx, the
// transaction that handles the request and then stores its response
// (FinishIdempotencyKey): the key commits with the request's changes and
// its response, or not at all. It returns (nil, nil) when tx holds the
// key: a new one, an expired one or an abandoned one (IdempotencyClaim).
// Otherwise it returns the key's record: a response to replay, another
// request hash, or (an earlier version's key, not yet abandoned) none.
//
// While another transaction holds the key, the claim waits for it to end
// (at most c.Wait): after its commit the claim returns the record it
// stored, after its rollback (a failed request, a dead process whose
// connection the server closed) the claim takes the key.
//
// The wait is bounded by setting lock_timeout for the claim alone; the
// statement after it sets it back to the session's default, which is the
// value the main pool's sessions run with (mainSessionParams sets no
// lock_timeout).
func ClaimIdempotencyKey(ctx context.Context, tx Tx, tenant, route, key string, hash []byte, c IdempotencyClaim) (*IdempotencyRecord, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, strconv.FormatInt(c.Wait.Milliseconds(), 10))
	b.Queue(`INSERT INTO idempotency_keys (tenant_id, route, key, request_hash) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant_id, route, key) DO UPDATE
			SET request_hash = EXCLUDED.request_hash, status = NULL, response = NULL, created_at = now()
			WHERE idempotency_keys.created_at < now() - make_interval(secs => $5)
			   OR (idempotency_keys.status IS NULL AND idempotency_keys.request_hash = EXCLUDED.request_hash
			       AND idempotency_keys.created_at < now() - make_interval(secs => $6))
		RETURNING true`, tenant, route, key, hash, c.TTLSeconds, c.StaleSeconds)
	b.Queue(`SET LOCAL lock_timeout TO DEFAULT`)
	// Read only when the insert returned nothing: a statement of its own
	// sees what the transaction the insert waited for committed.
	b.Queue(`SELECT request_hash, status, response FROM idempotency_keys
		WHERE tenant_id = $1 AND route = $2 AND key = $3`, tenant, route, key)
	br := tx.SendBatch(ctx, b)
	claimed, rec, err := readClaim(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	switch {
	case claimed:
		return nil, wrap("claim idempotency key", err)
	case errors.Is(err, pgx.ErrNoRows):
		// Gone between the insert and the read (expired, or released by
		// an earlier version): a request in flight a moment ago, as far
		// as this claim knows. The next claim takes the key.
		return &IdempotencyRecord{RequestHash: hash}, nil
	case err != nil:
		return nil, wrap("claim idempotency key", err)
	}
	return rec, nil
}

// readClaim reads the results of ClaimIdempotencyKey's batch: whether the
// insert claimed the key, and the key's record (pgx.ErrNoRows: none).
func readClaim(br pgx.BatchResults) (bool, *IdempotencyRecord, error) {
	if _, err := br.Exec(); err != nil {
		return false, nil, err
	}
	var claimed bool
	if err := br.QueryRow().Scan(&claimed); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, nil, err
	}
	if _, err := br.Exec(); err != nil {
		return claimed, nil, err
	}
	var rec IdempotencyRecord
	err := br.QueryRow().Scan(&rec.RequestHash, &rec.Status, &rec.Response)
	return claimed, &rec, err
}

// FinishIdempotencyKey stores the response to replay for a claimed key.
func FinishIdempotencyKey(ctx context.Context, q Querier, tenant, route, key string, status int, response []byte) error {
	_, err := q.Exec(ctx, `UPDATE idempotency_keys SET status = $4, response = $5
		WHERE tenant_id = $1 AND route = $2 AND key = $3`, tenant, route, key, status, response)
	return wrap("store idempotent response", err)
}

// DeleteExpiredIdempotencyKeys removes up to limit keys older than
// ttlSeconds, oldest first (by idempotency_keys_created_idx), and returns
// how many it removed; call it again while it returns limit.
func DeleteExpiredIdempotencyKeys(ctx context.Context, q Querier, ttlSeconds, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM idempotency_keys WHERE (tenant_id, route, key) IN (
			SELECT tenant_id, route, key FROM idempotency_keys
			WHERE created_at < now() - make_interval(secs => $1)
			ORDER BY created_at LIMIT $2)`, ttlSeconds, limit)
	return tag.RowsAffected(), wrap("delete expired idempotency keys", err)
}
