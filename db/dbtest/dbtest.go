// Package dbtest gives tests a migrated PostgreSQL database of their own. It
// is for tests only (a lint rule keeps it out of production code).
//
// With AX_TEST_DATABASE_URL set it uses that server, which must allow the
// user to create databases. Otherwise it starts one throwaway cluster per
// test binary with the same launcher as ax's embedded mode (db/pglocal). If
// Postgres cannot be had, tests fail with the reason; they never skip.
//
// Each test gets a fresh database cloned from a migrated template (CREATE
// DATABASE … TEMPLATE), so tests can run in parallel, commit, LISTEN and
// start River against it without seeing each other.
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/pglocal"
)

// EnvURL names the variable that points the tests at an existing server.
const EnvURL = "AX_TEST_DATABASE_URL"

type server struct {
	adminURL string // a URL on the server's maintenance database
	template string
	cluster  *pglocal.Cluster
	dir      string
}

var (
	once    sync.Once
	srv     *server
	errSrv  error
	counter atomic.Int64
)

// Main runs the package's tests, stops the throwaway cluster if one was
// started, checks that no goroutine outlived them (goleak) and exits. Call
// it from TestMain: `func TestMain(m *testing.M) { dbtest.Main(m) }`.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with more to do before it exits: it returns
// the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if srv != nil && srv.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = srv.cluster.Stop(ctx)
		cancel()
		_ = os.RemoveAll(srv.dir)
	}
	if code == 0 {
		if err := findLeaks(20 * time.Second); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	return code
}

// findLeaks reports goroutines still running after grace. Some libraries
// finish on their own schedule after Stop returns: River's leadership
// elector, for one, makes three attempts (with backoff, ~7 s in all) to
// resign leadership on a context it does not let anyone cancel, so a test
// that stopped the database first sees it linger for a few seconds. Those
// are not leaks; a goroutine still there after grace is.
func findLeaks(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func get(t testing.TB) *server {
	t.Helper()
	once.Do(func() { srv, errSrv = start() })
	if errSrv != nil {
		t.Fatalf("dbtest: cannot get a PostgreSQL server for tests: %v", errSrv)
	}
	return srv
}

func start() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &server{}
	if u := os.Getenv(EnvURL); u != "" {
		s.adminURL = u
	} else {
		dir, err := os.MkdirTemp("", "ax-test-pg-")
		if err != nil {
			return nil, err
		}
		s.dir = dir
		c, err := pglocal.Start(ctx, pglocal.Config{
			Dir: dir, Settings: map[string]string{"max_connections": "500"},
			TCPPort: pglocal.AnyTCPPort,
		})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.cluster = c
		s.adminURL = c.URL("postgres")
	}
	tmpl, err := ensureTemplate(ctx, s.adminURL)
	if err != nil {
		if s.cluster != nil {
			_ = s.cluster.Stop(ctx)
			_ = os.RemoveAll(s.dir)
		}
		return nil, err
	}
	s.template = tmpl
	return s, nil
}

// ensureTemplate creates (once per schema version, shared by concurrent
// test binaries) a migrated template database and returns its name.
func ensureTemplate(ctx context.Context, adminURL string) (string, error) {
	migrations, err := db.Migrations()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, m := range migrations {
		h.Write([]byte(m.SQL))
	}
	name := "ax_template_" + hex.EncodeToString(h.Sum(nil))[:12]

	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redact(adminURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Serialise template creation across test binaries sharing a server.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7202201)"); err != nil {
		return "", err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7202201)") }()
	var ready bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&ready)
	if err != nil {
		return "", err
	}
	if ready {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, withDatabase(adminURL, building))
	if err != nil {
		return "", err
	}
	err = db.Migrate(ctx, pool, nil)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	for _, q := range []string{
		"ALTER DATABASE " + building + " RENAME TO " + name,
		"ALTER DATABASE " + name + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", q, err)
		}
	}
	return name, nil
}

// URL creates a fresh migrated database for t, dropped when t ends, and
// returns its connection URL.
func URL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, " TEMPLATE "+get(t).template+" STRATEGY FILE_COPY")
}

// TCPURL is URL reached over TCP on 127.0.0.1, as a deployment reaches
// its database, rather than through the throwaway cluster's Unix socket.
// With AX_TEST_DATABASE_URL set it is that server's URL for the database.
func TCPURL(t testing.TB) string {
	t.Helper()
	u := URL(t)
	if c := get(t).cluster; c != nil {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		return c.TCPURL(strings.TrimPrefix(parsed.Path, "/"))
	}
	return u
}

// EmptyURL creates a fresh database with no migrations applied, dropped
// when t ends, for tests of migrations themselves.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "")
}

func newDatabase(t testing.TB, opts string) string {
	t.Helper()
	s := get(t)
	name := fmt.Sprintf("ax_test_%d_%d", os.Getpid(), counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+opts); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	dbURL := withDatabase(s.adminURL, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if !t.Failed() {
			checkUnfinished(ctx, t, dbURL)
		}
		conn, err := pgx.Connect(ctx, s.adminURL)
		if err != nil {
			t.Errorf("dbtest: connect for cleanup: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database: %v", err)
		}
	})
	return dbURL
}

// unfinishedMismatch lists the executions that unfinished_executions gets
// wrong: a row of an execution that is final or gone, or a missing row of
// one that is not final.
const unfinishedMismatch = `
	SELECT coalesce(e.id, u.id)::text, coalesce(e.state, 'no execution'), u.id IS NOT NULL
	FROM (SELECT * FROM executions WHERE state IN ('pending', 'running', 'retrying')) e
	FULL JOIN unfinished_executions u
	  ON u.tenant_id = e.tenant_id AND u.task_id = e.task_id AND u.scheduled_for = e.scheduled_for AND u.id = e.id
	WHERE e.id IS NULL OR u.id IS NULL
	LIMIT 20`

// checkUnfinished fails t when unfinished_executions does not hold exactly
// the executions that are not final (pending, running, retrying): every
// statement that changes whether an execution is final maintains it, and
// each test's database is checked when the test ends.
func checkUnfinished(ctx context.Context, t testing.TB, dbURL string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Errorf("dbtest: connect to check unfinished_executions: %v", err)
		return
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('unfinished_executions') IS NOT NULL").Scan(&exists); err != nil || !exists {
		return // not migrated (a migration test)
	}
	rows, err := conn.Query(ctx, unfinishedMismatch)
	if err != nil {
		t.Errorf("dbtest: check unfinished_executions: %v", err)
		return
	}
	type mismatch struct {
		ID, State string
		Listed    bool
	}
	bad, err := pgx.CollectRows(rows, pgx.RowToStructByPos[mismatch])
	if err != nil {
		t.Errorf("dbtest: check unfinished_executions: %v", err)
		return
	}
	for _, m := range bad {
		if m.Listed {
			t.Errorf("dbtest: unfinished_executions lists execution %s, which is %s", m.ID, m.State)
		} else {
			t.Errorf("dbtest: unfinished_executions misses execution %s, which is %s", m.ID, m.State)
		}
	}
}

// Execer runs a statement: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// SyncUnfinished makes unfinished_executions hold exactly the executions
// that are not final, for a test that inserted or changed executions by
// hand (ax's own statements keep it so themselves).
func SyncUnfinished(t testing.TB, q Execer) {
	t.Helper()
	_, err := q.Exec(context.Background(), `
		DELETE FROM unfinished_executions;
		INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
			SELECT tenant_id, task_id, scheduled_for, id FROM executions WHERE state IN ('pending', 'running', 'retrying')`)
	if err != nil {
		t.Fatalf("dbtest: sync unfinished_executions: %v", err)
	}
}

// Pool returns a pool on a fresh migrated database for t, closed and
// dropped when t ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := URL(t)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close) // registered after the drop, so it runs first
	return pool
}

// Pools returns ax's main and delivery pools (db.OpenPools, with the
// session parameters of production) on a fresh migrated database, closed
// when t ends.
func Pools(t testing.TB) db.Pools {
	t.Helper()
	p, err := db.OpenPools(context.Background(), URL(t), 10)
	if err != nil {
		t.Fatalf("dbtest: open pools: %v", err)
	}
	t.Cleanup(p.Close) // registered after the drop, so it runs first
	return p
}

// AdminURL returns a URL on the test server's maintenance database, for
// tests that manage databases themselves.
func AdminURL(t testing.TB) string {
	t.Helper()
	return get(t).adminURL
}

// Cluster returns the throwaway cluster, or nil when AX_TEST_DATABASE_URL
// points at an external server.
func Cluster(t testing.TB) *pglocal.Cluster {
	t.Helper()
	return get(t).cluster
}

func withDatabase(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// A keyword/value connection string.
		return raw + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the configured server"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return strings.TrimSpace(u.String())
}
