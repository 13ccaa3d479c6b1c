package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// IdempotencyRecord is a stored Idempotency-Key.
type IdempotencyRecord struct {
	RequestHash []byte
	Status      *int
	Response    []byte
}

// ClaimIdempotencyKey records a new key for a request and returns
// (nil, nil); when the key is already recorded (and younger than ttlSeconds)
// it returns that record instead. An expired record is replaced.
func ClaimIdempotencyKey(ctx context.Context, q Querier, tenant, route, key string, hash []byte, ttlSeconds int) (*IdempotencyRecord, error) {
	var inserted bool
	err := q.QueryRow(ctx, `INSERT INTO idempotency_keys (tenant_id, route, key, request_hash) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant_id, route, key) DO UPDATE
			SET request_hash = EXCLUDED.request_hash, status = NULL, response = NULL, created_at = now()
			WHERE idempotency_keys.created_at < now() - make_interval(secs => $5)
		RETURNING true`, tenant, route, key, hash, ttlSeconds).Scan(&inserted)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("claim idempotency key", err)
	}
	var rec IdempotencyRecord
	err = q.QueryRow(ctx, `SELECT request_hash, status, response FROM idempotency_keys
		WHERE tenant_id = $1 AND route = $2 AND key = $3`, tenant, route, key).Scan(&rec.RequestHash, &rec.Status, &rec.Response)
	if err != nil {
		return nil, wrap("read idempotency key", err)
	}
	return &rec, nil
}

// FinishIdempotencyKey stores the response to replay for a claimed key.
func FinishIdempotencyKey(ctx context.Context, q Querier, tenant, route, key string, status int, response []byte) error {
	_, err := q.Exec(ctx, `UPDATE idempotency_keys SET status = $4, response = $5
		WHERE tenant_id = $1 AND route = $2 AND key = $3`, tenant, route, key, status, response)
	return wrap("store idempotent response", err)
}

// ReleaseIdempotencyKey forgets a claimed key (the request failed in a way
// the client should be able to retry).
func ReleaseIdempotencyKey(ctx context.Context, q Querier, tenant, route, key string) error {
	_, err := q.Exec(ctx, `DELETE FROM idempotency_keys WHERE tenant_id = $1 AND route = $2 AND key = $3`, tenant, route, key)
	return wrap("release idempotency key", err)
}

// DeleteExpiredIdempotencyKeys removes keys older than ttlSeconds.
func DeleteExpiredIdempotencyKeys(ctx context.Context, q Querier, ttlSeconds int) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)`, ttlSeconds)
	return tag.RowsAffected(), wrap("delete expired idempotency keys", err)
}
