package pglocal

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestFindBinariesMissing(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	getenv := func(k string) string {
		if k == "PATH" {
			return empty
		}
		return ""
	}
	_, err := findBinaries(getenv, filepath.Join(empty, "nothing-here"))
	require.ErrorIs(t, err, ErrNoBinaries)
	require.Contains(t, err.Error(), "apt-get install postgresql")
	require.Contains(t, err.Error(), "AX_DATABASE_URL")

	// Start reports the same error before touching the directory.
}

func TestFindBinariesLibFallbackPicksNewest(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"13", "16", "9.6"} {
		bin := filepath.Join(root, v, "bin")
		require.NoError(t, os.MkdirAll(bin, 0o755))
		for _, name := range []string{"initdb", "postgres"} {
			require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755))
		}
	}
	dir, err := findBinaries(func(string) string { return "" }, root)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "16", "bin"), dir)
}

// TestStartReuseStop starts a cluster, writes data, stops it, checks that no
// server process is left, then starts it again and finds the data.
func TestStartReuseStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(tempDir(t), "pg")

	c, err := Start(ctx, Config{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, c.CreateDatabase(ctx, "ax"))
	require.NoError(t, c.CreateDatabase(ctx, "ax")) // idempotent
	conn, err := pgx.Connect(ctx, c.URL("ax"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	pid := c.cmd.Process.Pid

	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx)) // idempotent
	requireGone(t, pid)
	_, err = os.Stat(filepath.Join(dir, "data", "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "a clean shutdown removes postmaster.pid")

	c2, err := Start(ctx, Config{Dir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, c2.Stop(ctx)) }()
	conn, err = pgx.Connect(ctx, c2.URL("ax"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "hello", v)
}

// TestTCPPort: a cluster asked to also listen on TCP answers on 127.0.0.1
// (and on its socket); a port another process holds fails an explicit
// request, and AnyTCPPort finds a free one.
func TestTCPPort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var lc net.ListenConfig
	taken, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port

	_, err = Start(ctx, Config{Dir: filepath.Join(tempDir(t), "pg"), TCPPort: port, StartTimeout: 20 * time.Second})
	require.Error(t, err, "the port is taken")

	c, err := Start(ctx, Config{Dir: filepath.Join(tempDir(t), "pg"), TCPPort: AnyTCPPort})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	require.NotEqual(t, port, c.cfg.TCPPort)
	require.Contains(t, c.TCPURL("postgres"), "@127.0.0.1:"+strconv.Itoa(c.cfg.TCPPort)+"/postgres")
	for _, u := range []string{c.TCPURL("postgres"), c.URL("postgres")} {
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err, u)
		var one int
		require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
		require.NoError(t, conn.Close(ctx))
	}

	plain, err := Start(ctx, Config{Dir: filepath.Join(tempDir(t), "pg")})
	require.NoError(t, err)
	defer func() { require.NoError(t, plain.Stop(ctx)) }()
	require.Empty(t, plain.TCPURL("postgres"), "no TCP unless asked")
}

// TestKillRestart: Kill ends the postmaster and every server process at
// once; Restart brings the cluster back on the same socket and port, with
// what was committed durably before the kill.
func TestKillRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := Start(ctx, Config{Dir: filepath.Join(tempDir(t), "pg"), TCPPort: AnyTCPPort})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	require.Error(t, c.Restart(ctx), "running")

	conn, err := pgx.Connect(ctx, c.TCPURL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	// A test cluster commits asynchronously unless told otherwise.
	_, err = conn.Exec(ctx, "SET synchronous_commit = on; CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')")
	require.NoError(t, err)
	pid := c.cmd.Process.Pid
	children := childrenOf(pid)
	require.NotEmpty(t, children, "a backend, the checkpointer, the WAL writer…")

	require.NoError(t, c.Kill())
	require.NoError(t, c.Kill()) // already dead
	<-c.Done()
	requireGone(t, pid)
	for _, child := range children {
		require.False(t, alive(child), "server process %d", child)
	}
	_, err = conn.Exec(ctx, "SELECT 1")
	require.Error(t, err, "the session died with the server")

	require.NoError(t, c.Restart(ctx))
	select {
	case <-c.Done():
		t.Fatal("Done is closed after Restart")
	default:
	}
	for _, u := range []string{c.TCPURL("postgres"), c.URL("postgres")} {
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err, u)
		var v string
		require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
		require.Equal(t, "hello", v)
		require.NoError(t, conn.Close(ctx))
	}
	newPid := c.cmd.Process.Pid
	require.NoError(t, c.Stop(ctx))
	requireGone(t, newPid)
}

// TestStandbyPromote: a standby built from a running primary streams from
// it synchronously (the primary's commits wait for it) and refuses
// writes; once the primary is killed and the standby promoted, every
// commit the primary acknowledged is there and the standby takes writes.
func TestStandbyPromote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	settings := map[string]string{"synchronous_commit": "on", "synchronous_standby_names": "pglocal_standby"}
	primary, err := Start(ctx, Config{Dir: filepath.Join(tempDir(t), "pg"), Settings: settings})
	require.NoError(t, err)
	defer func() { require.NoError(t, primary.Stop(ctx)) }()
	standby, err := Start(ctx, Config{Dir: filepath.Join(tempDir(t), "pg"), StandbyOf: primary, StandbyName: "pglocal_standby"})
	require.NoError(t, err)
	defer func() { require.NoError(t, standby.Stop(ctx)) }()

	conn, err := pgx.Connect(ctx, primary.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	// Synchronous once it has caught up with the primary.
	require.Eventually(t, func() bool {
		var state string
		err := conn.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication
			WHERE application_name = 'pglocal_standby'`).Scan(&state)
		return err == nil && state == "sync"
	}, 30*time.Second, 50*time.Millisecond)
	// Acknowledged only once the standby has it.
	_, err = conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')")
	require.NoError(t, err)

	sconn, err := pgx.Connect(ctx, standby.URL("postgres"))
	require.NoError(t, err)
	var inRecovery bool
	require.NoError(t, sconn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery))
	require.True(t, inRecovery)
	_, err = sconn.Exec(ctx, "CREATE TABLE refused (v text)")
	require.Error(t, err, "a standby is read-only")
	require.NoError(t, sconn.Close(ctx))

	require.NoError(t, primary.Kill())
	require.NoError(t, standby.Promote(ctx))
	sconn, err = pgx.Connect(ctx, standby.URL("postgres"))
	require.NoError(t, err)
	defer sconn.Close(ctx)
	require.NoError(t, sconn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery))
	require.False(t, inRecovery)
	var v string
	require.NoError(t, sconn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "hello", v)
	_, err = sconn.Exec(ctx, "INSERT INTO kept VALUES ('after')")
	require.NoError(t, err)
}

// TestStaleServerIsStopped simulates an earlier ax that died without
// stopping its server: a new Start on the same directory must succeed.
func TestStaleServerIsStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(tempDir(t), "pg")
	c, err := Start(ctx, Config{Dir: dir})
	require.NoError(t, err)
	oldPid := c.cmd.Process.Pid
	// Forget about it, as a crashed parent would.
	c2, err := Start(ctx, Config{Dir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, c2.Stop(ctx)) }()
	requireGone(t, oldPid)
	<-c.Done()
}

func requireGone(t *testing.T, pid int) {
	t.Helper()
	require.Eventually(t, func() bool {
		err := syscall.Kill(pid, 0)
		if err != nil {
			return true
		}
		// A zombie not yet reaped by its parent counts as gone.
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return strings.Contains(string(b), ") Z ")
	}, 10*time.Second, 20*time.Millisecond, "postgres pid %d still running", pid)
}

// tempDir is t.TempDir opened for traversal, as the postgres account needs
// when the tests run as root.
func tempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	require.NoError(t, os.Chmod(d, 0o711))
	require.NoError(t, os.Chmod(filepath.Dir(d), 0o711))
	return d
}

// TestMain checks that no goroutine outlives the tests (a cluster's wait
// goroutine ends when it stops).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
