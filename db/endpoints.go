package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Endpoint is a row of endpoints.
type Endpoint struct {
	TenantID                string            `db:"tenant_id"`
	ID                      string            `db:"id"`
	Name                    string            `db:"name"`
	URL                     string            `db:"url"`
	Method                  string            `db:"method"`
	Headers                 map[string]string `db:"headers"`
	Secret                  string            `db:"secret"`
	PreviousSecret          *string           `db:"previous_secret"`
	PreviousSecretExpiresAt *time.Time        `db:"previous_secret_expires_at"`
	TimeoutMS               int               `db:"timeout_ms"`
	Enabled                 bool              `db:"enabled"`
	DisabledReason          *string           `db:"disabled_reason"`
	DisabledAt              *time.Time        `db:"disabled_at"`
	CreatedAt               time.Time         `db:"created_at"`
	UpdatedAt               time.Time         `db:"updated_at"`
	// Format shapes the alerts sent to the endpoint: ax or slack.
	Format string `db:"format"`
	// MaxConcurrency and RateLimitPerSecond limit its deliveries across
	// replicas (nil: none).
	MaxConcurrency     *int32   `db:"max_concurrency"`
	RateLimitPerSecond *float64 `db:"rate_limit_per_second"`
}

const endpointColumns = `tenant_id, id::text, name, url, method, headers, secret, previous_secret,
	previous_secret_expires_at, timeout_ms, enabled, disabled_reason, disabled_at, created_at, updated_at, format,
	max_concurrency, rate_limit_per_second`

// collectOne scans exactly one row into a T by column name; no row is
// ErrNotFound.
func collectOne[T any](rows pgx.Rows, err error) (T, error) {
	return exactlyOne(rows, err, pgx.RowToStructByName[T])
}

// exactlyOne scans exactly one row with scan; no row is ErrNotFound.
// Errors are translated.
func exactlyOne[T any](rows pgx.Rows, err error, scan pgx.RowToFunc[T]) (T, error) {
	var zero T
	if err != nil {
		return zero, translate(err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	if err != nil {
		return zero, translate(err)
	}
	return v, nil
}

// InsertEndpoint inserts e and returns the stored row.
func InsertEndpoint(ctx context.Context, q Querier, e Endpoint) (Endpoint, error) {
	rows, err := q.Query(ctx, `INSERT INTO endpoints (tenant_id, id, name, url, method, headers, secret, timeout_ms, enabled,
			format, max_concurrency, rate_limit_per_second)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING `+endpointColumns,
		e.TenantID, e.ID, e.Name, e.URL, e.Method, e.Headers, e.Secret, e.TimeoutMS, e.Enabled, endpointFormat(e.Format),
		e.MaxConcurrency, e.RateLimitPerSecond)
	return collectOne[Endpoint](rows, err)
}

// GetEndpoint reads one endpoint; forUpdate locks it until the transaction ends.
func GetEndpoint(ctx context.Context, q Querier, tenant, id string, forUpdate bool) (Endpoint, error) {
	sql := `SELECT ` + endpointColumns + ` FROM endpoints WHERE tenant_id = $1 AND id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, tenant, id)
	return collectOne[Endpoint](rows, err)
}

// ListEndpoints returns up to limit endpoints newest first, with ids below
// before when it is set.
func ListEndpoints(ctx context.Context, q Querier, tenant, before string, limit int) ([]Endpoint, error) {
	rows, err := q.Query(ctx, `SELECT `+endpointColumns+` FROM endpoints
		WHERE tenant_id = $1 AND ($2 = '' OR id < NULLIF($2, '')::uuid) ORDER BY endpoints.id DESC LIMIT $3`, tenant, before, limit)
	if err != nil {
		return nil, wrap("list endpoints", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Endpoint])
	return out, wrap("list endpoints", err)
}

// UpdateEndpoint writes e's mutable fields and returns the stored row.
func UpdateEndpoint(ctx context.Context, q Querier, e Endpoint) (Endpoint, error) {
	rows, err := q.Query(ctx, `UPDATE endpoints SET name = $3, url = $4, method = $5, headers = $6, secret = $7,
		previous_secret = $8, previous_secret_expires_at = $9, timeout_ms = $10, enabled = $11,
		disabled_reason = $12, disabled_at = $13, format = $14, max_concurrency = $15, rate_limit_per_second = $16,
		updated_at = now()
		WHERE tenant_id = $1 AND id = $2 RETURNING `+endpointColumns,
		e.TenantID, e.ID, e.Name, e.URL, e.Method, e.Headers, e.Secret, e.PreviousSecret, e.PreviousSecretExpiresAt,
		e.TimeoutMS, e.Enabled, e.DisabledReason, e.DisabledAt, endpointFormat(e.Format), e.MaxConcurrency,
		e.RateLimitPerSecond)
	return collectOne[Endpoint](rows, err)
}

// endpointFormat is format, or ax when it is unset.
func endpointFormat(format string) string {
	if format == "" {
		return "ax"
	}
	return format
}

// DeleteEndpoint deletes an endpoint and reports whether it existed. A
// foreign-key violation means tasks still use it.
func DeleteEndpoint(ctx context.Context, q Querier, tenant, id string) (bool, error) {
	tag, err := q.Exec(ctx, `DELETE FROM endpoints WHERE tenant_id = $1 AND id = $2`, tenant, id)
	if err != nil {
		return false, wrap("delete endpoint", err)
	}
	return tag.RowsAffected() == 1, nil
}
