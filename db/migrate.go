package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockID is the advisory lock that serialises migrators: replicas
// starting at once take turns, and the second finds nothing left to do.
const migrationLockID = 0x61785f6d6967 // "ax_mig"

// Migration is one numbered application migration.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded application migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, wrap("read embedded migrations", err)
	}
	out := make([]Migration, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_description.sql", name)
		}
		b, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, wrap("read migration "+name, err)
		}
		out = append(out, Migration{Version: v, Name: rest, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("migration versions must be 1..n without gaps; found %d at position %d", out[i].Version, i+1)
		}
	}
	return out, nil
}

// Migrate brings the database up to date: River's tables first, then ax's.
// It holds an advisory lock for the whole run, so concurrent callers (two
// replicas starting at once) apply each migration exactly once. Each
// migration runs in its own transaction; running Migrate again is a no-op.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return wrap("migrate: acquire connection", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLockID)); err != nil {
		return wrap("migrate: take advisory lock", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLockID))
	}()

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return wrap("migrate: river migrator", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return wrap("migrate: river", err)
	}
	for _, v := range res.Versions {
		logger.Info("applied river migration", "version", v.Version, "name", v.Name)
	}

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS ax_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return wrap("migrate: create ax_migrations", err)
	}
	applied, err := appliedVersion(ctx, conn.Conn())
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if m.Version <= applied {
			continue
		}
		err := pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO ax_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return wrap(fmt.Sprintf("migrate: apply %04d_%s", m.Version, m.Name), err)
		}
		logger.Info("applied migration", "version", m.Version, "name", m.Name)
	}
	return nil
}

// ErrNotMigrated means the database lacks migrations this binary expects.
var ErrNotMigrated = errors.New("database schema is not up to date")

// CheckMigrated returns nil when both River's and ax's migrations are all
// applied, ErrNotMigrated (wrapped with what is missing) when some are not,
// and another error when the database cannot be queried.
func CheckMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	var applied int
	err = pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM ax_migrations`).Scan(&applied)
	if err != nil {
		if isUndefinedTable(err) {
			return fmt.Errorf("%w: ax migrations were never applied", ErrNotMigrated)
		}
		return wrap("read ax_migrations", err)
	}
	if want := migrations[len(migrations)-1].Version; applied < want {
		return fmt.Errorf("%w: ax schema at version %d, this binary needs %d", ErrNotMigrated, applied, want)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return wrap("river migrator", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		return wrap("validate river migrations", err)
	}
	if !res.OK {
		return fmt.Errorf("%w: river: %s", ErrNotMigrated, strings.Join(res.Messages, "; "))
	}
	return nil
}

func appliedVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM ax_migrations").Scan(&v); err != nil {
		return 0, wrap("migrate: read applied version", err)
	}
	return v, nil
}
