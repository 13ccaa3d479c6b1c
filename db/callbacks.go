package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// CallbackAttempt is a row of callback_attempts: one attempt of an
// execution in callback completion mode, with what decides whether its
// token may still act.
type CallbackAttempt struct {
	TenantID    string `db:"tenant_id"`
	ExecutionID string `db:"execution_id"`
	Attempt     int    `db:"attempt"`
	Lease       int    `db:"lease"`
	TokenHash   []byte `db:"token_hash"`
	// Current: the execution is running under this attempt (its attempts
	// and lease), and the attempt has not ended.
	Current bool `db:"current"`
	// Accepted: the receiver answered the attempt with a 2xx.
	Accepted bool `db:"accepted"`
	// Expired: the attempt's wait is past its deadline (database clock).
	Expired bool `db:"expired"`
	// ExpiredClass says which deadline passed first: heartbeat_timeout or
	// callback_timeout ("" when not Expired).
	ExpiredClass       string          `db:"expired_class"`
	DeadlineAt         time.Time       `db:"deadline_at"`
	HeartbeatTimeoutMS *int64          `db:"heartbeat_timeout_ms"`
	ExpiresAt          *time.Time      `db:"expires_at"`
	Progress           json.RawMessage `db:"progress"`
	Output             json.RawMessage `db:"output"`
}

var callbackColumns = `w.tenant_id, w.execution_id::text, w.attempt, w.lease, w.token_hash,
	(e.state = ` + execRunning + ` AND e.attempts = w.attempt AND e.lease_attempt = w.lease AND w.ended_at IS NULL) AS current,
	w.accepted_at IS NOT NULL AS accepted,
	coalesce(w.expires_at <= now(), false) AS expired,
	CASE WHEN w.expires_at <= now() THEN
		CASE WHEN w.expires_at < w.deadline_at THEN 'heartbeat_timeout' ELSE 'callback_timeout' END
	ELSE '' END AS expired_class,
	w.deadline_at, w.heartbeat_timeout_ms, w.expires_at, w.progress, w.output`

// InsertCallbackAttempt records attempt (under lease) of a running
// execution before it is sent: its token's hash and its deadline, timeout
// from now (database clock). It reports false, and writes nothing, when
// the execution is not running under that attempt and lease.
func InsertCallbackAttempt(ctx context.Context, q Querier, tenant, executionID string, attempt, lease int, tokenHash []byte,
	timeout time.Duration, heartbeatTimeout *time.Duration,
) (bool, error) {
	var hb *int64
	if heartbeatTimeout != nil {
		ms := heartbeatTimeout.Milliseconds()
		hb = &ms
	}
	tag, err := q.Exec(ctx, `INSERT INTO callback_attempts (tenant_id, execution_id, attempt, lease, token_hash, deadline_at,
			heartbeat_timeout_ms)
		SELECT e.tenant_id, e.id, e.attempts, e.lease_attempt, $5, now() + make_interval(secs => $6), $7
		FROM executions e
		WHERE e.tenant_id = $1 AND e.id = $2 AND e.state = `+execRunning+` AND e.attempts = $3 AND e.lease_attempt = $4
		ON CONFLICT (tenant_id, execution_id, attempt) DO UPDATE SET lease = excluded.lease,
			token_hash = excluded.token_hash, created_at = now(), deadline_at = excluded.deadline_at,
			heartbeat_timeout_ms = excluded.heartbeat_timeout_ms, accepted_at = NULL, heartbeat_at = NULL,
			expires_at = NULL, progress = NULL, output = NULL, ended_at = NULL`,
		tenant, executionID, attempt, lease, tokenHash, timeout.Seconds(), hb)
	if err != nil {
		return false, wrap("record callback attempt", err)
	}
	return tag.RowsAffected() == 1, nil
}

// AcceptCallback starts the wait of attempt of an execution that is still
// running under it: expires_at becomes the earlier of its deadline and
// now plus its heartbeat timeout, and the execution's last_status_code
// the 2xx that accepted it. It reports false when the attempt is not
// current any more (it was completed already, or ended).
func AcceptCallback(ctx context.Context, q Querier, tenant, executionID string, attempt, lease, statusCode int) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `WITH w AS (
			UPDATE callback_attempts w SET accepted_at = now(),
				expires_at = least(w.deadline_at, now() + make_interval(secs => w.heartbeat_timeout_ms / 1000.0))
			FROM executions e
			WHERE w.tenant_id = $1 AND w.execution_id = $2 AND w.attempt = $3 AND w.lease = $4
			  AND w.accepted_at IS NULL AND w.ended_at IS NULL
			  AND e.tenant_id = w.tenant_id AND e.id = w.execution_id
			  AND e.state = `+execRunning+` AND e.attempts = w.attempt AND e.lease_attempt = w.lease
			RETURNING w.tenant_id, w.execution_id
		), x AS (
			UPDATE executions x SET last_status_code = $5 FROM w
			WHERE x.tenant_id = w.tenant_id AND x.id = w.execution_id
		)
		SELECT count(*) FROM w`, tenant, executionID, attempt, lease, statusCode).Scan(&n)
	if err != nil {
		return false, wrap("accept callback attempt", err)
	}
	return n == 1, nil
}

// GetCallbacksByTokens finds the attempts whose tokens hash to hashes, in
// one statement, whatever their tenants: a token is the capability. A
// hash no attempt has is absent from the result.
func GetCallbacksByTokens(ctx context.Context, q Querier, hashes [][]byte) ([]CallbackAttempt, error) {
	// Not tenant-scoped on purpose: the token names its tenant.
	rows, err := q.Query(ctx, `SELECT `+callbackColumns+`
		FROM callback_attempts w
		JOIN executions e ON e.tenant_id = w.tenant_id AND e.id = w.execution_id
		WHERE w.token_hash = ANY($1::bytea[])`, hashes)
	if err != nil {
		return nil, wrap("find callback tokens", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[CallbackAttempt])
	return out, wrap("find callback tokens", err)
}

// GetLatestCallback returns the latest attempt of an execution in
// callback mode; with forUpdate it locks the row (lock the execution
// first). ErrNotFound: the execution has none.
func GetLatestCallback(ctx context.Context, q Querier, tenant, executionID string, forUpdate bool) (CallbackAttempt, error) {
	sql := `SELECT ` + callbackColumns + `
		FROM callback_attempts w
		JOIN executions e ON e.tenant_id = w.tenant_id AND e.id = w.execution_id
		WHERE w.tenant_id = $1 AND w.execution_id = $2
		ORDER BY w.attempt DESC LIMIT 1`
	if forUpdate {
		sql += ` FOR UPDATE OF w`
	}
	rows, err := q.Query(ctx, sql, tenant, executionID)
	return collectOne[CallbackAttempt](rows, err)
}

// GetCallbackForUpdate reads and locks one attempt (lock the execution
// first). ErrNotFound: no such attempt.
func GetCallbackForUpdate(ctx context.Context, q Querier, tenant, executionID string, attempt int) (CallbackAttempt, error) {
	rows, err := q.Query(ctx, `SELECT `+callbackColumns+`
		FROM callback_attempts w
		JOIN executions e ON e.tenant_id = w.tenant_id AND e.id = w.execution_id
		WHERE w.tenant_id = $1 AND w.execution_id = $2 AND w.attempt = $3
		FOR UPDATE OF w`, tenant, executionID, attempt)
	return collectOne[CallbackAttempt](rows, err)
}

// HeartbeatCallback extends the wait of the current, unexpired attempt:
// its heartbeat deadline moves to now plus its heartbeat timeout (never
// past its deadline), and progress, when not nil, replaces the kept one.
// It reports false when the attempt is not current or its wait expired.
func HeartbeatCallback(ctx context.Context, q Querier, tenant, executionID string, attempt int, progress json.RawMessage) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE callback_attempts w SET heartbeat_at = now(), progress = coalesce($4, w.progress),
			expires_at = CASE WHEN w.expires_at IS NULL THEN NULL
				ELSE least(w.deadline_at, now() + make_interval(secs => w.heartbeat_timeout_ms / 1000.0)) END
		FROM executions e
		WHERE w.tenant_id = $1 AND w.execution_id = $2 AND w.attempt = $3 AND w.ended_at IS NULL
		  AND (w.expires_at IS NULL OR w.expires_at > now())
		  AND e.tenant_id = w.tenant_id AND e.id = w.execution_id
		  AND e.state = `+execRunning+` AND e.attempts = w.attempt AND e.lease_attempt = w.lease`,
		tenant, executionID, attempt, jsonOrNull(progress))
	if err != nil {
		return false, wrap("record heartbeat", err)
	}
	return tag.RowsAffected() == 1, nil
}

// EndCallback ends an attempt's wait (a completion, a timeout, a cancel):
// its token can no longer act and the sweeper no longer sees it. output,
// when not nil, is kept as the attempt's output.
func EndCallback(ctx context.Context, q Querier, tenant, executionID string, attempt int, output json.RawMessage) error {
	_, err := q.Exec(ctx, `UPDATE callback_attempts SET ended_at = coalesce(ended_at, now()), expires_at = NULL,
			output = coalesce($4, output)
		WHERE tenant_id = $1 AND execution_id = $2 AND attempt = $3`, tenant, executionID, attempt, jsonOrNull(output))
	return wrap("end callback attempt", err)
}

// EndCallbacks ends every open attempt of an execution (a cancel through
// the API) and reports whether one of them was waiting for its callback.
func EndCallbacks(ctx context.Context, q Querier, tenant, executionID string) (bool, error) {
	var waiting bool
	err := q.QueryRow(ctx, `WITH x AS (
			UPDATE callback_attempts w SET ended_at = now(), expires_at = NULL
			FROM (SELECT w.attempt, w.expires_at IS NOT NULL AS waiting FROM callback_attempts w
				WHERE w.tenant_id = $1 AND w.execution_id = $2 AND w.ended_at IS NULL FOR UPDATE) o
			WHERE w.tenant_id = $1 AND w.execution_id = $2 AND w.attempt = o.attempt
			RETURNING o.waiting)
		SELECT coalesce(bool_or(waiting), false) FROM x`, tenant, executionID).Scan(&waiting)
	return waiting, wrap("end callback attempts", err)
}

// IsWaitingForCallback reports whether a running execution waits for the
// callback of its current attempt.
func IsWaitingForCallback(ctx context.Context, q Querier, tenant, executionID string) (bool, error) {
	var waiting bool
	err := q.QueryRow(ctx, `SELECT `+WaitingForCallback+` FROM executions e
		WHERE e.tenant_id = $1 AND e.id = $2 AND e.state = `+execRunning, tenant, executionID).Scan(&waiting)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return waiting, wrap("check callback wait", err)
}

// CallbackRef names one attempt.
type CallbackRef struct {
	TenantID    string `db:"tenant_id"`
	ExecutionID string `db:"execution_id"`
	Attempt     int    `db:"attempt"`
}

// FindExpiredCallbacks returns up to limit attempts whose wait expired by
// the database clock, earliest first, by the partial index of expires_at.
func FindExpiredCallbacks(ctx context.Context, q Querier, limit int) ([]CallbackRef, error) {
	// Across tenants on purpose: the sweeper serves them all.
	rows, err := q.Query(ctx, `SELECT tenant_id, execution_id::text, attempt FROM callback_attempts
		WHERE expires_at <= now() ORDER BY expires_at LIMIT $1`, limit)
	if err != nil {
		return nil, wrap("find expired callbacks", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[CallbackRef])
	return out, wrap("find expired callbacks", err)
}

// NextCallbackExpiry returns the earliest expires_at of a waiting attempt
// (nil: none) and the database's now.
func NextCallbackExpiry(ctx context.Context, q Querier) (*time.Time, time.Time, error) {
	var (
		next *time.Time
		now  time.Time
	)
	// Across tenants on purpose: the sweeper serves them all.
	err := q.QueryRow(ctx, `SELECT (SELECT min(expires_at) FROM callback_attempts WHERE expires_at IS NOT NULL), now()`).
		Scan(&next, &now)
	return next, now, wrap("next callback expiry", err)
}

// ExecutionCallback is what GET of an execution shows of its callbacks:
// the latest attempt's progress and output.
type ExecutionCallback struct {
	Progress json.RawMessage `db:"progress"`
	Output   json.RawMessage `db:"output"`
}

// GetExecutionCallback returns the latest callback attempt's progress and
// output of an execution; ErrNotFound when it has none.
func GetExecutionCallback(ctx context.Context, q Querier, tenant, executionID string) (ExecutionCallback, error) {
	rows, err := q.Query(ctx, `SELECT progress, output FROM callback_attempts
		WHERE tenant_id = $1 AND execution_id = $2 ORDER BY attempt DESC LIMIT 1`, tenant, executionID)
	return collectOne[ExecutionCallback](rows, err)
}

// jsonOrNull is nil for an empty or null document.
func jsonOrNull(v json.RawMessage) *string {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	s := string(v)
	return &s
}
