// Package pglocal runs a private PostgreSQL cluster from the machine's own
// PostgreSQL binaries. ax uses it for its embedded default (no
// AX_DATABASE_URL) and the test harness uses it for throwaway clusters.
//
// The cluster listens only on a Unix socket in a directory that only its
// owner can enter, with trust authentication on that socket: nothing else on
// the machine can connect. When the current user is root, initdb refuses to
// run, so the cluster runs as the unprivileged "postgres" user and its
// directories are owned by that user.
package pglocal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries means no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (looked for initdb and postgres on PATH, " +
	"in `pg_config --bindir` and under /usr/lib/postgresql/*/bin): install them with " +
	"`apt-get install postgresql`, or set AX_DATABASE_URL to use an existing server")

// Superuser is the name of the cluster's superuser.
const Superuser = "ax"

// socketPathMax is the longest Unix socket path the kernel accepts, less a
// margin for the ".s.PGSQL.5432" file name.
const socketPathMax = 107 - len("/.s.PGSQL.5432")

// Config describes a cluster to start.
type Config struct {
	// Dir holds the cluster: its data directory (Dir/data) and its socket
	// directory (Dir/run). It is created when missing and reused when it
	// already holds a cluster.
	Dir string
	// BinDir is where initdb and postgres live. Empty means FindBinaries.
	BinDir string
	// Getenv reads PATH for FindBinaries. Defaults to os.Getenv.
	Getenv func(string) string
	// Durable keeps fsync on. Test clusters turn it off for speed.
	Durable bool
	// Settings are extra server settings (`-c name=value`).
	Settings map[string]string
	// TCPPort, when set, makes the server also listen on 127.0.0.1 at this
	// port (TCPURL), as a server a deployment reaches over the network
	// would; local connections are trusted. AnyTCPPort: a free port, picked
	// again should another process take it first. 0: the Unix socket only.
	TCPPort int
	// Logger receives the server's output at debug level and lifecycle
	// messages at info level. Defaults to a discarding logger.
	Logger *slog.Logger
	// StartTimeout bounds how long Start waits for the server to accept
	// connections. Defaults to 60 seconds.
	StartTimeout time.Duration
	// StandbyOf, when set and Dir holds no cluster yet, makes the new
	// cluster a streaming standby of that running cluster rather than a
	// fresh one: its data directory is a base backup of it (pg_basebackup
	// -R), and it replays the WAL the primary streams to it, answering
	// read-only queries, until Promote. For failover tests.
	StandbyOf *Cluster
	// StandbyName is the application_name the standby connects to its
	// primary with (default "standby"): the name the primary's
	// synchronous_standby_names lists to wait for it on each commit.
	StandbyName string
}

// AnyTCPPort, as Config.TCPPort, listens on a free port of 127.0.0.1.
const AnyTCPPort = -1

// Cluster is a running server started by Start.
type Cluster struct {
	cfg       Config
	socketDir string
	cmd       *exec.Cmd
	done      chan struct{}
	waitErr   error
	stopOnce  sync.Once
	stopErr   error
	cleanupFn func()
}

// FindBinaries returns the directory holding initdb and postgres: PATH
// first, then `pg_config --bindir`, then the newest /usr/lib/postgresql/*/bin.
func FindBinaries(getenv func(string) string) (string, error) {
	return findBinaries(getenv, "/usr/lib/postgresql")
}

func findBinaries(getenv func(string) string, libRoot string) (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		if dir != "" && has(dir) {
			return dir, nil
		}
	}
	for _, dir := range filepath.SplitList(getenv("PATH")) {
		pgConfig := filepath.Join(dir, "pg_config")
		if _, err := os.Stat(pgConfig); err != nil {
			continue
		}
		out, err := exec.Command(pgConfig, "--bindir").Output() //nolint:noctx // a local, instant command
		if err == nil && has(strings.TrimSpace(string(out))) {
			return strings.TrimSpace(string(out)), nil
		}
		break
	}
	if libRoot != "" {
		dirs, _ := filepath.Glob(filepath.Join(libRoot, "*", "bin"))
		sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
		for _, dir := range dirs {
			if has(dir) {
				return dir, nil
			}
		}
	}
	return "", ErrNoBinaries
}

func versionOf(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// Start starts the cluster in cfg.Dir, creating it on first use, and waits
// until it accepts connections. The server runs until Stop or until this
// process dies (it receives SIGINT, a fast shutdown, when its parent exits).
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Getenv == nil {
		cfg.Getenv = os.Getenv
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres directory: %w", err)
	}
	cfg.Dir = dir
	if cfg.BinDir == "" {
		if cfg.BinDir, err = FindBinaries(cfg.Getenv); err != nil {
			return nil, err
		}
	}
	owner, err := clusterOwner()
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, done: make(chan struct{})}
	if err := c.prepareDirs(owner); err != nil {
		return nil, err
	}
	dataDir := c.dataDir()
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		create := c.initdb
		if cfg.StandbyOf != nil {
			create = c.baseBackup
		}
		if err := create(ctx, owner); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	stopStale(dataDir, cfg.Logger)
	for try := 1; ; try++ {
		if cfg.TCPPort == AnyTCPPort {
			// A port free now may be taken before the server binds it:
			// then the server exits during start-up, and another port is
			// tried.
			if c.cfg.TCPPort, err = FreePort(); err != nil {
				return nil, err
			}
		}
		if err := c.start(owner); err != nil {
			return nil, err
		}
		err := c.waitReady(ctx)
		if err == nil {
			break
		}
		if cfg.TCPPort != AnyTCPPort || try == 3 || ctx.Err() != nil {
			_ = c.Stop(context.Background())
			return nil, err
		}
		c.halt()
		c.done = make(chan struct{})
	}
	cfg.Logger.Info("embedded postgres started", "dir", dir, "bin_dir", cfg.BinDir)
	return c, nil
}

// URL returns a connection URL for database name on the cluster, through
// its Unix socket.
func (c *Cluster) URL(name string) string {
	q := url.Values{}
	q.Set("host", c.socketDir)
	if c.cfg.TCPPort != 0 { // the socket file is named after the port
		q.Set("port", strconv.Itoa(c.cfg.TCPPort))
	}
	q.Set("user", Superuser)
	q.Set("sslmode", "disable")
	return "postgres:///" + url.PathEscape(name) + "?" + q.Encode()
}

// TCPURL returns a connection URL for database name over TCP on
// 127.0.0.1, or "" when the cluster listens on its socket only
// (Config.TCPPort).
func (c *Cluster) TCPURL(name string) string {
	if c.cfg.TCPPort == 0 {
		return ""
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, c.cfg.TCPPort, url.PathEscape(name))
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on now,
// for Config.TCPPort.
func FreePort() (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CreateDatabase creates database name unless it exists.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to embedded postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// Done is closed when the server process has exited.
func (c *Cluster) Done() <-chan struct{} { return c.done }

// Stop shuts the server down (fast shutdown: sessions are disconnected,
// committed data is kept) and waits for it to exit. After ctx expires the
// server is killed with an immediate shutdown.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		defer func() {
			if c.cleanupFn != nil {
				c.cleanupFn()
			}
		}()
		select {
		case <-c.done:
			return
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-ctx.Done():
			_ = c.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-c.done:
			case <-time.After(10 * time.Second):
				_ = c.cmd.Process.Kill()
				<-c.done
			}
			c.stopErr = fmt.Errorf("embedded postgres did not stop in time: %w", ctx.Err())
		}
		c.cfg.Logger.Info("embedded postgres stopped")
	})
	return c.stopErr
}

// Kill ends the server as a crash of its machine or container would: the
// postmaster and every server process it started get SIGKILL at once, so
// none writes anything more (WAL still in shared memory is lost; what was
// written to the kernel is kept, and recovered on the next start). It
// returns when all of them are gone. The cluster can then be started again
// with Restart. For fault tests; not safe concurrently with other methods.
func (c *Cluster) Kill() error {
	select {
	case <-c.done:
		return nil
	default:
	}
	pid := c.cmd.Process.Pid
	// Stopped, the postmaster starts no process between the listing of
	// its children and the kill.
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	children := childrenOf(pid)
	_ = c.cmd.Process.Kill()
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	<-c.done
	// Until the last one is gone the shared memory is in use, and a new
	// postmaster refuses to start.
	deadline := time.Now().Add(10 * time.Second)
	for _, child := range children {
		for alive(child) {
			if time.Now().After(deadline) {
				return fmt.Errorf("embedded postgres: server process %d outlived SIGKILL", child)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.cfg.Logger.Info("embedded postgres killed")
	return nil
}

// Restart starts a server that exited (Kill, or a crash) again, on the
// same directory and port, and waits until it accepts connections: it
// recovers from the WAL first, as after any crash. Not safe concurrently
// with other methods.
func (c *Cluster) Restart(ctx context.Context) error {
	select {
	case <-c.done:
	default:
		return errors.New("embedded postgres: restart of a running server")
	}
	owner, err := clusterOwner()
	if err != nil {
		return err
	}
	c.done = make(chan struct{})
	if err := c.start(owner); err != nil {
		close(c.done)
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		c.halt()
		return err
	}
	c.cfg.Logger.Info("embedded postgres restarted")
	return nil
}

// Promote makes a standby (Config.StandbyOf) a primary: it stops
// following its primary, replays the WAL it received and starts accepting
// writes. It returns once the standby accepts them.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the standby: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var promoted bool
	// pg_promote waits (up to 60 s) until the promotion is complete.
	if err := conn.QueryRow(ctx, "SELECT pg_promote(true, 60)").Scan(&promoted); err != nil {
		return fmt.Errorf("promote the standby: %w", err)
	}
	if !promoted {
		return errors.New("promote the standby: not promoted within 60 s")
	}
	c.cfg.Logger.Info("embedded postgres promoted")
	return nil
}

// childrenOf returns the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// alive reports whether process pid exists and is not a zombie (a zombie
// holds no memory, shared or not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// halt ends a server that did not come up, for another try (Stop would
// also remove what the next try needs).
func (c *Cluster) halt() {
	_ = c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *Cluster) dataDir() string { return filepath.Join(c.cfg.Dir, "data") }

// owner is the account the server runs as: nil means the current user.
type owner struct {
	uid, gid uint32
	name     string
}

func clusterOwner() (*owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("running as root: PostgreSQL refuses to run as root, and the unprivileged " +
			"'postgres' account to run it as does not exist (`apt-get install postgresql` creates it)")
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &owner{uid: uint32(uid), gid: uint32(gid), name: u.Username}, nil
}

func (c *Cluster) prepareDirs(o *owner) error {
	// Parents ax creates itself are traversable (not listable), so that the
	// postgres account can reach the cluster when ax runs as root.
	if err := os.MkdirAll(filepath.Dir(c.cfg.Dir), 0o711); err != nil { //nolint:gosec // traversable, not listable
		return fmt.Errorf("create embedded postgres directory: %w", err)
	}
	c.socketDir = filepath.Join(c.cfg.Dir, "run")
	if len(c.socketDir) > socketPathMax {
		// A deep directory would make the socket path too long for the
		// kernel; use a short private directory instead.
		tmp, err := os.MkdirTemp("", "ax-pg-")
		if err != nil {
			return fmt.Errorf("create socket directory: %w", err)
		}
		c.socketDir = tmp
		c.cleanupFn = func() { _ = os.RemoveAll(tmp) }
	}
	for _, d := range []string{c.cfg.Dir, c.socketDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o700); err != nil { //nolint:gosec // a directory: owner-only
			return fmt.Errorf("chmod %s: %w", d, err)
		}
		if o != nil {
			if err := os.Lchown(d, int(o.uid), int(o.gid)); err != nil {
				return fmt.Errorf("chown %s to %s: %w", d, o.name, err)
			}
		}
	}
	if o != nil {
		if err := checkTraversable(c.cfg.Dir, o); err != nil {
			return err
		}
	}
	return nil
}

// checkTraversable fails clearly when the postgres account cannot reach dir
// because a parent directory is closed to it (e.g. a checkout under /root).
func checkTraversable(dir string, o *owner) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("embedded postgres: %w", err)
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		ok := fi.Mode().Perm()&0o001 != 0 ||
			(st != nil && st.Uid == o.uid && fi.Mode().Perm()&0o100 != 0) ||
			(st != nil && st.Gid == o.gid && fi.Mode().Perm()&0o010 != 0)
		if !ok {
			return fmt.Errorf("embedded postgres runs as the %q account (PostgreSQL refuses root), which cannot enter %s; "+
				"set AX_DATA_DIR to a directory it can reach (e.g. under /tmp or /var/lib) or allow it with `chmod o+x %s`",
				o.name, p, p)
		}
		if p == "/" || p == filepath.Dir(p) {
			return nil
		}
	}
}

// command runs program name of BinDir (or at path name, when absolute)
// as the cluster's owner.
func (c *Cluster) command(ctx context.Context, o *owner, name string, args ...string) *exec.Cmd {
	if !filepath.IsAbs(name) {
		name = filepath.Join(c.cfg.BinDir, name)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.cfg.Dir
	cmd.Env = []string{"LC_ALL=C", "PATH=" + c.cfg.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if o != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: o.uid, Gid: o.gid}
	}
	return cmd
}

func (c *Cluster) initdb(ctx context.Context, o *owner) error {
	args := []string{"-D", c.dataDir(), "-U", Superuser, "--auth=trust", "-E", "UTF8", "--locale=C"}
	if !c.cfg.Durable {
		args = append(args, "--no-sync")
	}
	cmd := c.command(ctx, o, "initdb", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(c.dataDir())
		return fmt.Errorf("initdb failed: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// baseBackup creates the data directory as a standby of cfg.StandbyOf:
// a copy of the primary with the WAL written meanwhile (pg_basebackup,
// through the primary's socket), and the settings that make it follow the
// primary when it starts (-R: standby.signal and primary_conninfo).
func (c *Cluster) baseBackup(ctx context.Context, o *owner) error {
	primary := c.cfg.StandbyOf
	bin, err := c.tool("pg_basebackup")
	if err != nil {
		return err
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=%s application_name=%s", primary.socketDir,
		cmp.Or(primary.cfg.TCPPort, 5432), Superuser, cmp.Or(c.cfg.StandbyName, "standby"))
	args := []string{"-D", c.dataDir(), "-d", conninfo, "-R", "-X", "stream", "-c", "fast"}
	if !c.cfg.Durable {
		args = append(args, "--no-sync")
	}
	out, err := c.command(ctx, o, bin, args...).CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(c.dataDir())
		return fmt.Errorf("pg_basebackup failed: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// tool returns the path of one of PostgreSQL's client programs: in BinDir,
// else beside the real postgres binary (BinDir may hold links to the
// server's programs only).
func (c *Cluster) tool(name string) (string, error) {
	candidates := []string{filepath.Join(c.cfg.BinDir, name)}
	if real, err := filepath.EvalSymlinks(filepath.Join(c.cfg.BinDir, "postgres")); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(real), name))
	}
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s nor beside its postgres", name, c.cfg.BinDir)
}

func (c *Cluster) start(o *owner) error {
	settings := map[string]string{
		"listen_addresses":        "",
		"unix_socket_directories": c.socketDir,
		"unix_socket_permissions": "0700",
		"max_connections":         "200",
		"shared_buffers":          "128MB",
		"logging_collector":       "off",
	}
	if c.cfg.TCPPort != 0 {
		settings["listen_addresses"] = "127.0.0.1"
		settings["port"] = strconv.Itoa(c.cfg.TCPPort)
	}
	if !c.cfg.Durable {
		settings["fsync"] = "off"
		settings["synchronous_commit"] = "off"
		settings["full_page_writes"] = "off"
	}
	for k, v := range c.cfg.Settings {
		settings[k] = v
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []string{"-D", c.dataDir()}
	for _, k := range keys {
		args = append(args, "-c", k+"="+settings[k])
	}
	// Not tied to a context: the server lives until Stop.
	cmd := c.command(context.Background(), o, "postgres", args...)
	// If ax dies without stopping the server (even by SIGKILL), the kernel
	// sends the server SIGINT: a fast shutdown. No postgres outlives ax.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	out := &logWriter{logger: c.cfg.Logger}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.cmd = cmd
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("postgres exited during start-up: %w (run with AX_LOG_LEVEL=debug to see its log)", c.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections within %s: %w", c.cfg.StartTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopStale stops a server left running on dataDir by an earlier process
// that could not stop it, so that this start can proceed.
func stopStale(dataDir string, logger *slog.Logger) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), dataDir) {
		return // not running, or a different process reused the pid
	}
	logger.Warn("stopping a postgres left running by an earlier ax", "pid", pid)
	_ = syscall.Kill(pid, syscall.SIGINT)
	for range 300 {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logWriter forwards the server's output to the logger line by line.
type logWriter struct {
	mu     sync.Mutex
	logger *slog.Logger
	buf    []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		w.logger.Debug("postgres", "line", string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

var _ io.Writer = (*logWriter)(nil)
