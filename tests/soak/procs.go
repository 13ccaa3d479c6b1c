package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/axhq/ax/db/pglocal"
	"github.com/axhq/ax/tests/axproc"
)

// env is what every scenario shares: the ax binary, one durable cluster,
// the temporary directory holding both, the receiver.
type env struct {
	o       options
	dir     string
	axBin   string
	cluster *pglocal.Cluster
	pgMu    sync.Mutex // the cluster's Restart is not safe concurrently
	dbURL   string
	secret  string
	pool    *pgxpool.Pool // the checker's and the tracker's own connections
	recv    *receiver
	token   string
	client  *http.Client
	start   time.Time
}

func newEnv(ctx context.Context, o options) (e *env, err error) {
	dir, err := os.MkdirTemp("", "ax-soak-")
	if err != nil {
		return nil, err
	}
	e = &env{o: o, dir: dir, start: time.Now()}
	defer func() {
		if err != nil {
			e.close()
			e = nil
		}
	}()
	// As root, PostgreSQL runs as the postgres account, which must be able
	// to traverse (not list) the directories above its own.
	if err := os.Chmod(dir, 0o711); err != nil { //nolint:gosec // traversable, not listable
		return nil, err
	}
	if e.axBin = o.axPath; e.axBin == "" {
		e.axBin = filepath.Join(dir, "ax")
		e.logf("building ax")
		if err := axproc.Build(ctx, e.axBin, false); err != nil {
			return nil, err
		}
	}
	raw := make([]byte, 48)
	_, _ = rand.Read(raw)
	e.secret = base64.RawURLEncoding.EncodeToString(raw)
	e.logf("starting a durable PostgreSQL (fsync on) in %s", dir)
	e.cluster, err = pglocal.Start(ctx, pglocal.Config{
		Dir: filepath.Join(dir, "pg"), Durable: true, Logger: slog.New(slog.DiscardHandler),
		Settings: map[string]string{"max_connections": "300"},
	})
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	if err := e.cluster.CreateDatabase(ctx, "soak"); err != nil {
		return nil, err
	}
	e.dbURL = e.cluster.URL("soak")
	if e.pool, err = pgxpool.New(ctx, e.dbURL+"&pool_max_conns=4"); err != nil {
		return nil, err
	}
	if e.recv, err = startReceiver(ctx); err != nil {
		return nil, err
	}
	e.client = &http.Client{Timeout: 15 * time.Second}
	return e, nil
}

func (e *env) close() {
	if e.recv != nil {
		e.recv.close()
	}
	if e.pool != nil {
		e.pool.Close()
	}
	if e.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := e.cluster.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "soak: stop postgres:", err)
		}
		cancel()
	}
	if e.o.keep {
		fmt.Fprintln(os.Stderr, "soak: kept", e.dir)
		return
	}
	_ = os.RemoveAll(e.dir)
}

func (e *env) logf(format string, args ...any) {
	if e.o.verbose {
		fmt.Fprintf(os.Stderr, "%s soak %7.1fs: %s\n", time.Now().Format("15:04:05.000"), time.Since(e.start).Seconds(),
			fmt.Sprintf(format, args...))
	}
}

func (e *env) axEnv() []string {
	out := []string{
		"PATH=" + os.Getenv("PATH"),
		"AX_DATABASE_URL=" + e.dbURL,
		"AX_JWT_SECRET=" + e.secret,
		"AX_ALLOW_PRIVATE_TARGETS=true",
		"AX_HTTP_ADDR=127.0.0.1:0",
		"AX_LOG_LEVEL=info",
	}
	return append(out, e.o.env...)
}

// mintToken runs `ax token` for the soak's tenant.
func (e *env) mintToken(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, e.axBin, "token", "--tenant", "soak", "--ttl", "24h")
	cmd.Env = e.axEnv()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("ax token: %w", err)
	}
	e.token = strings.TrimSpace(string(out))
	return nil
}

// replica is one slot of the soak's replicas: the process running in it
// now (nil while down).
type replica struct {
	name string
	mu   sync.Mutex
	cur  *axProc
	runs int
}

func (r *replica) proc() *axProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// axProc is one ax process.
type axProc struct {
	*axproc.Proc
	base      string
	replicaID string // its first replica id, also its River client ID
	logPath   string
}

var replicaIDRE = regexp.MustCompile(`"msg":"ax started".*"replica_id":"([0-9a-f-]{36})"`)

// startAx starts `ax serve` and waits for its banner and its replica id.
// A start while PostgreSQL is down fails; the caller tries again.
func (e *env) startAx(ctx context.Context, r *replica) (*axProc, error) {
	r.mu.Lock()
	r.runs++
	logPath := filepath.Join(e.dir, fmt.Sprintf("%s.%d.log", r.name, r.runs))
	r.mu.Unlock()
	ap, err := axproc.Start(ctx, axproc.Config{
		Binary: e.axBin, Args: []string{"serve"}, Env: e.axEnv(),
		LogFile: logPath, ParentDeathSignal: syscall.SIGKILL,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, lastLine(logPath))
	}
	p := &axProc{Proc: ap, base: ap.Base(), logPath: logPath}
	deadline := time.NewTimer(axproc.ReadyTimeoutDefault)
	defer deadline.Stop()
	for p.replicaID == "" {
		b, _ := os.ReadFile(logPath)
		if m := replicaIDRE.FindSubmatch(b); m != nil {
			p.replicaID = string(m[1])
			break
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-deadline.C:
			p.kill()
			return nil, errors.New("ax did not log its replica id")
		}
	}
	r.mu.Lock()
	r.cur = p
	r.mu.Unlock()
	e.logf("%s started (replica %s, %s)", r.name, p.replicaID, p.base)
	return p, nil
}

// startAxRetry starts ax until it comes up (PostgreSQL may be restarting).
func (e *env) startAxRetry(ctx context.Context, r *replica) (*axProc, error) {
	for {
		p, err := e.startAx(ctx, r)
		if err == nil || ctx.Err() != nil {
			return p, err
		}
		e.logf("%s did not start (%v); trying again", r.name, err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (p *axProc) signal(sig syscall.Signal) { _ = p.Signal(sig) }

// kill ends the process with SIGKILL and waits.
func (p *axProc) kill() { p.Kill() }

// terminate sends SIGTERM (to a process that may be stopped: SIGCONT
// first) and waits up to 90 s, then kills.
func (p *axProc) terminate() {
	p.signal(syscall.SIGCONT)
	if err := p.Stop(syscall.SIGTERM, 90*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
	}
}

func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// postmasterPID reads the cluster's postmaster.pid.
func (e *env) postmasterPID() (int, bool) {
	b, err := os.ReadFile(filepath.Join(e.dir, "pg", "data", "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid, err == nil && pid > 0
}

// restartPostgres shuts PostgreSQL down in mode (fast: SIGINT, sessions
// disconnected, a checkpoint; immediate: SIGQUIT, no checkpoint, crash
// recovery at the next start), waits down for a while and starts it again.
func (e *env) restartPostgres(ctx context.Context, immediate bool, down time.Duration) error {
	e.pgMu.Lock()
	defer e.pgMu.Unlock()
	pid, ok := e.postmasterPID()
	if !ok {
		return errors.New("no postmaster.pid")
	}
	sig := syscall.SIGINT
	if immediate {
		sig = syscall.SIGQUIT
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return err
	}
	select {
	case <-e.cluster.Done():
	case <-time.After(60 * time.Second):
		return errors.New("postgres did not stop within 60s")
	}
	select {
	case <-time.After(down):
	case <-ctx.Done():
	}
	// Until the last server process is gone the shared memory is in use.
	var err error
	for range 30 {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		err = e.cluster.Restart(rctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("restart postgres: %w", err)
}

// apiError is a non-2xx answer.
type apiError struct {
	Status int
	Body   string
}

func (a *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", a.Status, a.Body) }

// call sends one API request to base.
func (e *env) call(ctx context.Context, base, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return &apiError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b[:min(len(b), 300)]))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
