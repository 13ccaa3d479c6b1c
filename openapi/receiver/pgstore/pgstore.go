// Package pgstore is a receiver.Store in PostgreSQL (pgx v5), for tenant
// services with several replicas: a webhook-id claimed by one replica is
// InProgress or Done for all of them.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axhq/ax/openapi/receiver"
)

// DefaultTable is the table Store uses unless told otherwise.
const DefaultTable = "webhook_receipts"

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// Store implements receiver.Store on one table:
//
//	id text PRIMARY KEY, done boolean, expires_at timestamptz
type Store struct {
	pool      *pgxpool.Pool
	table     string
	retention time.Duration
	lease     time.Duration
}

var _ receiver.Store = (*Store)(nil)

// New returns a Store on table (DefaultTable when empty; "schema.table" is
// allowed) that keeps done ids for retention and unfinished claims for
// receiver.DefaultLease. Call CreateTable once (or create the table with
// your migrations, see CreateTable's statement).
func New(pool *pgxpool.Pool, table string, retention time.Duration) (*Store, error) {
	if table == "" {
		table = DefaultTable
	}
	if !identRE.MatchString(table) {
		return nil, fmt.Errorf("pgstore: %q is not a plain table name", table)
	}
	if retention <= 0 {
		return nil, errors.New("pgstore: retention must be positive")
	}
	return &Store{pool: pool, table: table, retention: retention, lease: receiver.DefaultLease}, nil
}

// CreateTable creates the table and its expiry index if they do not exist.
func (s *Store) CreateTable(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
	id         text PRIMARY KEY,
	done       boolean NOT NULL DEFAULT false,
	expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS %[2]s_expires_at ON %[1]s (expires_at)`, s.table, indexPrefix(s.table)))
	return err
}

func indexPrefix(table string) string {
	for i := len(table) - 1; i >= 0; i-- {
		if table[i] == '.' {
			return table[i+1:]
		}
	}
	return table
}

// Claim implements receiver.Store: one statement inserts the id, or takes
// over a lapsed row, and otherwise reports the row that holds it.
func (s *Store) Claim(ctx context.Context, id string) (receiver.Claim, error) {
	var claimed, done bool
	err := s.pool.QueryRow(ctx, fmt.Sprintf(`
WITH ins AS (
	INSERT INTO %s AS r (id, done, expires_at) VALUES ($1, false, now() + make_interval(secs => $2))
	ON CONFLICT (id) DO UPDATE SET done = false, expires_at = EXCLUDED.expires_at
	WHERE r.expires_at <= now()
	RETURNING true AS claimed
)
SELECT true, false FROM ins
UNION ALL
SELECT false, done FROM %[1]s WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ins)`, s.table),
		id, s.lease.Seconds()).Scan(&claimed, &done)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The conflicting row is not in this statement's snapshot: another
		// delivery committed it (or released it) a moment ago. Treat it as
		// in progress; ax retries and the next Claim sees it.
		return receiver.InProgress, nil
	case err != nil:
		return 0, fmt.Errorf("pgstore: claim: %w", err)
	case claimed:
		return receiver.Claimed, nil
	case done:
		return receiver.Done, nil
	}
	return receiver.InProgress, nil
}

// Complete implements receiver.Store.
func (s *Store) Complete(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s AS r (id, done, expires_at) VALUES ($1, true, now() + make_interval(secs => $2))
ON CONFLICT (id) DO UPDATE SET done = true, expires_at = EXCLUDED.expires_at`, s.table), id, s.retention.Seconds())
	if err != nil {
		return fmt.Errorf("pgstore: complete: %w", err)
	}
	return nil
}

// Release implements receiver.Store.
func (s *Store) Release(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE id = $1 AND NOT done`, s.table), id); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	return nil
}

// Sweep deletes expired rows and returns how many; run it now and then
// (expired rows are harmless, Claim takes them over, but they take space).
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE expires_at <= now()`, s.table))
	if err != nil {
		return 0, fmt.Errorf("pgstore: sweep: %w", err)
	}
	return tag.RowsAffected(), nil
}
