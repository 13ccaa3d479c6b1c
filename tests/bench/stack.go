package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/axhq/ax/db/pglocal"
	"github.com/axhq/ax/tests/axproc"
)

// stack is what every scenario shares: the ax binary, one durable cluster,
// the temporary directory holding both.
type stack struct {
	o       options
	dir     string
	axBin   string
	cluster *pglocal.Cluster // it also listens on 127.0.0.1 (TCPURL)
	secret  string
	pgss    bool // pg_stat_statements is loaded
}

func newStack(ctx context.Context, o options) (st *stack, err error) {
	dir, err := os.MkdirTemp("", "ax-bench-")
	if err != nil {
		return nil, err
	}
	built := &stack{o: o, dir: dir}
	st = built
	defer func() {
		if err != nil {
			built.close() // the returns below set st to nil
		}
	}()
	// As root, PostgreSQL runs as the postgres account, which must be able
	// to traverse (not list) the directories above its own.
	if err := os.Chmod(dir, 0o711); err != nil { //nolint:gosec // traversable, not listable
		return nil, err
	}
	if o.axPath != "" {
		if fi, err := os.Stat(o.axPath); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("-ax %s: not an executable file", o.axPath)
		}
	}
	if st.axBin = o.axPath; st.axBin == "" {
		st.axBin = filepath.Join(dir, "ax")
		st.logf("building ax")
		if err := axproc.Build(ctx, st.axBin, false); err != nil {
			return nil, err
		}
	}
	raw := make([]byte, 48)
	_, _ = rand.Read(raw)
	st.secret = base64.RawURLEncoding.EncodeToString(raw)

	st.logf("starting a durable PostgreSQL (fsync on) in %s, also listening on 127.0.0.1", dir)
	settings := map[string]string{"max_connections": "300"}
	if hasPGStatStatements() {
		settings["shared_preload_libraries"] = "pg_stat_statements"
		settings["pg_stat_statements.track"] = "all"
		st.pgss = true
	}
	for _, kv := range o.pgSettings {
		k, v, _ := strings.Cut(kv, "=")
		settings[k] = v
	}
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	st.cluster, err = pglocal.Start(ctx, pglocal.Config{
		Dir: filepath.Join(dir, "pg"), Durable: true, Settings: settings, Logger: logger, TCPPort: pglocal.AnyTCPPort,
	})
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	return st, nil
}

// hasPGStatStatements reports whether the pg_stat_statements extension is
// installed next to the server binaries.
func hasPGStatStatements() bool {
	bin, err := pglocal.FindBinaries(os.Getenv)
	if err != nil {
		return false
	}
	// PATH may hold symlinks (/usr/local/bin/postgres → …/15/bin/postgres).
	if real, err := filepath.EvalSymlinks(filepath.Join(bin, "postgres")); err == nil {
		bin = filepath.Dir(real)
	}
	out, err := exec.Command(filepath.Join(bin, "pg_config"), "--sharedir").Output() //nolint:noctx // instant, local
	share := strings.TrimSpace(string(out))
	if err != nil || share == "" {
		// Debian layout: /usr/lib/postgresql/15/bin → /usr/share/postgresql/15.
		share = filepath.Join("/usr/share/postgresql", filepath.Base(filepath.Dir(bin)))
	}
	_, err = os.Stat(filepath.Join(share, "extension", "pg_stat_statements.control"))
	return err == nil
}

func (st *stack) close() {
	if st.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := st.cluster.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench: stop postgres:", err)
		}
		cancel()
	}
	if st.o.keep {
		fmt.Fprintln(os.Stderr, "bench: kept", st.dir)
		return
	}
	_ = os.RemoveAll(st.dir)
}

func (st *stack) logf(format string, args ...any) {
	if st.o.verbose {
		fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// createDatabase creates a fresh database for one scenario.
func (st *stack) createDatabase(ctx context.Context, name string) (string, error) {
	if err := st.cluster.CreateDatabase(ctx, name); err != nil {
		return "", err
	}
	u := st.cluster.URL(name)
	if st.pgss {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return "", err
		}
		_, err = conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
		_ = conn.Close(ctx)
		if err != nil {
			return "", fmt.Errorf("create pg_stat_statements: %w", err)
		}
	}
	return u, nil
}

// axEnv is the environment ax runs with for database url.
func (st *stack) axEnv(dbURL string) []string {
	if st.o.poolConns > 0 {
		dbURL += "&pool_max_conns=" + strconv.Itoa(st.o.poolConns)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"AX_DATABASE_URL=" + dbURL,
		"AX_JWT_SECRET=" + st.secret,
		"AX_ALLOW_PRIVATE_TARGETS=true",
		"AX_HTTP_ADDR=127.0.0.1:0",
	}
	// Pass through tuning the operator set for this run (AX_* in the
	// bench's own environment), then -env, which wins.
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AX_") && !strings.HasPrefix(kv, "AX_DATABASE_URL=") &&
			!strings.HasPrefix(kv, "AX_JWT_SECRET=") && !strings.HasPrefix(kv, "AX_HTTP_ADDR=") &&
			!strings.HasPrefix(kv, "AX_DATA_DIR=") && !strings.HasPrefix(kv, "AX_TEST_") {
			env = append(env, kv)
		}
	}
	return append(env, st.o.env...)
}

// publicEnv is the ax environment without secrets and per-run paths, for
// the report.
func (st *stack) publicEnv() map[string]string {
	m := map[string]string{}
	for _, kv := range st.axEnv("postgres:///x?host=/x") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "AX_JWT_SECRET":
			continue
		case "AX_DATABASE_URL":
			v = "(local durable cluster)"
			if st.o.poolConns > 0 {
				v += " pool_max_conns=" + strconv.Itoa(st.o.poolConns)
			}
		}
		m[k] = v
	}
	return m
}

// axProc is a running ax server.
type axProc struct {
	*axproc.Proc
	base    string
	env     []string
	logPath string
	token   string
	client  *http.Client
	// debugAddr is where ax serves Go's profiles ("" unless -ax-cpuprofile).
	debugAddr string
}

// exitedEarly reports whether ax exited without being asked to.
func (p *axProc) exitedEarly() bool { return p.ExitedEarly() }

// startAx starts `ax serve` on the database at dbURL, waits for its banner
// and mints an API token with `ax token` under the same configuration.
func (st *stack) startAx(ctx context.Context, name, dbURL string) (*axProc, error) {
	env := st.axEnv(dbURL)
	debugAddr := ""
	if st.o.axProfile != "" {
		var err error
		if debugAddr, err = freeLoopbackAddr(ctx); err != nil {
			return nil, err
		}
		env = append(env, "AX_DEBUG_ADDR="+debugAddr)
	}
	logPath := filepath.Join(st.dir, name+".ax.log")
	var stderr io.Writer
	if st.o.verbose {
		stderr = os.Stderr
	}
	// If the bench dies, so does ax.
	ap, err := axproc.Start(ctx, axproc.Config{
		Binary: st.axBin, Args: []string{"serve"}, Env: env,
		Log: stderr, LogFile: logPath, ParentDeathSignal: syscall.SIGTERM,
	})
	if err != nil {
		return nil, fmt.Errorf("%w; its log:\n%s", err, tail(logPath, 20))
	}
	p := &axProc{Proc: ap, base: ap.Base(), env: env, logPath: logPath, debugAddr: debugAddr}
	cmdTok := exec.CommandContext(ctx, st.axBin, "token", "--tenant", "bench", "--ttl", "12h")
	cmdTok.Env = env
	out, err := cmdTok.Output()
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("ax token: %w", err)
	}
	p.token = strings.TrimSpace(string(out))
	p.client = &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns: 512, MaxIdleConnsPerHost: 512, MaxConnsPerHost: 0,
			IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		},
	}
	return p, nil
}

// stop sends SIGTERM and waits up to a minute, then kills.
func (p *axProc) stop() {
	if err := p.Stop(syscall.SIGTERM, 60*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	if p.client != nil {
		p.client.CloseIdleConnections()
	}
}

// apiError is a non-2xx answer.
type apiError struct {
	Status int
	Body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

// call sends a JSON request and decodes a JSON answer into out (when not
// nil). 429 and 503 are retried a few times.
func (p *axProc) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		err := p.callOnce(ctx, method, path, body, out)
		var ae *apiError
		if attempt < 5 && errors.As(err, &ae) && (ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
			continue
		}
		return err
	}
}

func (p *axProc) callOnce(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &apiError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b[:min(len(b), 300)]))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// createEndpoint registers the receiver and returns the endpoint id.
func (p *axProc) createEndpoint(ctx context.Context, hookURL string) (string, error) {
	var ep struct {
		ID string `json:"id"`
	}
	err := p.call(ctx, http.MethodPost, "/v1/endpoints", map[string]any{
		"name": "bench-receiver", "url": hookURL, "timeout_ms": 10000,
	}, &ep)
	if err != nil {
		return "", fmt.Errorf("create endpoint: %w", err)
	}
	return ep.ID, nil
}

// createResult is what a concurrent creation did.
type createResult struct {
	ids []string // by task index; "" when it failed
	// nextRunAt is each task's first slot, as the create response gave it.
	nextRunAt []time.Time
	elapsed   time.Duration
	errors    int
	samples   []string // a few error messages
}

func (c createResult) perSec() float64 {
	ok := 0
	for _, id := range c.ids {
		if id != "" {
			ok++
		}
	}
	return float64(ok) / c.elapsed.Seconds()
}

// createTasks POSTs n tasks, body(i) each, with the configured concurrency.
func (p *axProc) createTasks(ctx context.Context, n, concurrency int, body func(i int) map[string]any) createResult {
	res := createResult{ids: make([]string, n), nextRunAt: make([]time.Time, n)}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan int)
	)
	start := time.Now()
	for range min(concurrency, n) {
		wg.Go(func() {
			for i := range next {
				var t struct {
					ID        string    `json:"id"`
					NextRunAt time.Time `json:"next_run_at"`
				}
				err := p.call(ctx, http.MethodPost, "/v1/tasks", body(i), &t)
				if err == nil && t.ID == "" {
					err = errors.New("no id in the response")
				}
				if err != nil {
					mu.Lock()
					res.errors++
					if len(res.samples) < 5 {
						res.samples = append(res.samples, "create task: "+err.Error())
					}
					mu.Unlock()
					continue
				}
				res.ids[i], res.nextRunAt[i] = t.ID, t.NextRunAt
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// dbStats reads the database's transaction counter and, with
// pg_stat_statements, its statement count.
type dbStats struct {
	xacts int64
	calls int64
}

func readDBStats(ctx context.Context, conn *pgx.Conn, pgss bool) (dbStats, error) {
	var s dbStats
	err := conn.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.xacts)
	if err != nil {
		return s, err
	}
	if pgss {
		err = conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&s.calls)
	}
	return s, err
}

// topStatements returns the n statements with the most total execution
// time in the current database.
func topStatements(ctx context.Context, dbURL string, n int) ([]statement, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
SELECT calls, total_exec_time, mean_exec_time, rows, regexp_replace(query, '\s+', ' ', 'g')
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (statement, error) {
		var s statement
		err := r.Scan(&s.Calls, &s.TotalMS, &s.MeanMS, &s.Rows, &s.Query)
		if len(s.Query) > 160 {
			s.Query = s.Query[:160] + "…"
		}
		return s, err
	})
}

// tableStat is one table's row-write counters (pg_stat_user_tables).
type tableStat struct {
	Name       string `json:"name"`
	Inserted   int64  `json:"inserted"`
	Updated    int64  `json:"updated"`
	HOTUpdated int64  `json:"hot_updated"`
	Deleted    int64  `json:"deleted"`
}

// tableStats returns the row-write counters of the tables that were
// written to, most written first.
func tableStats(ctx context.Context, dbURL string) ([]tableStat, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables
WHERE n_tup_ins + n_tup_upd + n_tup_del > 0
ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (tableStat, error) {
		var t tableStat
		err := r.Scan(&t.Name, &t.Inserted, &t.Updated, &t.HOTUpdated, &t.Deleted)
		return t, err
	})
}

// walStat is the cluster's WAL and checkpoint activity since the
// scenario's start (pg_stat_wal, pg_stat_bgwriter).
type walStat struct {
	Records     int64 `json:"records"`
	FullPages   int64 `json:"full_page_images"`
	Bytes       int64 `json:"bytes"`
	Checkpoints int64 `json:"checkpoints"`
}

func resetSharedStats(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `SELECT pg_stat_reset_shared('wal'), pg_stat_reset_shared('bgwriter')`)
	return err
}

func walStats(ctx context.Context, dbURL string) (*walStat, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var w walStat
	err = conn.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::bigint, (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)
		FROM pg_stat_wal`).Scan(&w.Records, &w.FullPages, &w.Bytes, &w.Checkpoints)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// statement is one pg_stat_statements row.
type statement struct {
	Calls   int64   `json:"calls"`
	TotalMS float64 `json:"total_ms"`
	MeanMS  float64 `json:"mean_ms"`
	Rows    int64   `json:"rows"`
	Query   string  `json:"query"`
}

// hostInfo describes the machine and the software measured.
func hostInfo(ctx context.Context, st *stack) map[string]string {
	h := map[string]string{"cpus": strconv.Itoa(numCPU())}
	if len(st.o.pgSettings) > 0 {
		h["postgres_settings"] = strings.Join(st.o.pgSettings, " ")
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				h["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.CommandContext(ctx, st.axBin, "version").Output(); err == nil {
		h["ax"] = strings.TrimSpace(string(out))
	}
	if st.o.axPath == "" {
		// Built from this checkout: name the commit, and say when the
		// working tree differs from it.
		if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
			h["source"] = "git " + strings.TrimSpace(string(out))
			if out, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(out) > 0 {
				h["source"] += " with uncommitted changes"
			}
		}
	} else {
		h["source"] = st.o.axPath
	}
	h["receiver"] = st.o.receiver
	if st.o.label != "" {
		h["label"] = st.o.label
	}
	if conn, err := pgx.Connect(ctx, st.cluster.URL("postgres")); err == nil {
		var v string
		if conn.QueryRow(ctx, "SHOW server_version").Scan(&v) == nil {
			h["postgres"] = v
		}
		var fsync, sc string
		if conn.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &sc) == nil {
			h["postgres_fsync"], h["postgres_synchronous_commit"] = fsync, sc
		}
		_ = conn.Close(ctx)
	}
	return h
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// stage is one step between a slot and its delivery, in ms after the slot.
type stage struct {
	Stage string  `json:"stage"`
	N     int64   `json:"n"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// stageStats reads, for the slots scheduled in [from, to), when each step
// happened relative to the slot: the execution row written by the scheduler
// (materialised, its transaction's start), River's fetch of the job that
// carried it (fetched: attempted_at of the last attempt of its deliver or
// deliver_batch job, the earlier of the two), the worker's start and end
// (started, finished). Negative values are ahead of the slot.
func stageStats(ctx context.Context, dbURL string, from, to time.Time, tenant string) ([]stage, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
WITH s AS (
    SELECT e.created_at - e.scheduled_for  AS materialised,
           j.attempted_at - e.scheduled_for AS fetched,
           e.started_at - e.scheduled_for  AS started,
           e.finished_at - e.scheduled_for AS finished
    FROM executions e
    LEFT JOIN (
        SELECT id, min(attempted_at) AS attempted_at FROM (
            SELECT (args->>'execution_id')::uuid AS id, attempted_at FROM river_job WHERE kind = 'deliver'
            UNION ALL
            SELECT split_part(m, '.', 2)::uuid, j.attempted_at
            FROM river_job j, regexp_split_to_table(j.args->>'executions', ' ') m WHERE j.kind = 'deliver_batch'
        ) refs GROUP BY id
    ) j ON j.id = e.id
    WHERE e.scheduled_for >= $1 AND e.scheduled_for < $2 AND ($3 = '' OR e.tenant_id = $3)
), v AS (
    SELECT x.stage, x.ord, extract(epoch FROM x.d) * 1000 AS ms
    FROM s, LATERAL (VALUES ('materialised', 1, s.materialised), ('fetched', 2, s.fetched),
                            ('started', 3, s.started), ('finished', 4, s.finished)) AS x(stage, ord, d)
    WHERE x.d IS NOT NULL
)
SELECT stage, count(*),
       percentile_disc(0.5) WITHIN GROUP (ORDER BY ms)::float8,
       percentile_disc(0.99) WITHIN GROUP (ORDER BY ms)::float8,
       max(ms)::float8
FROM v GROUP BY stage, ord ORDER BY ord`, from, to, tenant)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (stage, error) {
		var s stage
		err := r.Scan(&s.Stage, &s.N, &s.P50, &s.P99, &s.Max)
		s.P50, s.P99, s.Max = round1(s.P50), round1(s.P99), round1(s.Max)
		return s, err
	})
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// waitSampler samples, every 100 ms, what the database's busy sessions are
// doing (pg_stat_activity: the wait event, "CPU" when not waiting, or idle
// in a transaction while the client works).
type waitSampler struct {
	stop   context.CancelFunc
	done   chan struct{}
	counts map[string]int
	polls  int
}

// startWaitSampler starts sampling dbURL's sessions; with a logPath, each
// poll is also written there with its time, next to what the cluster's own
// processes (autovacuum, the checkpointer) and ANALYZE/VACUUM progress say,
// to line a short episode up with the lateness trend (-trend 1s).
func startWaitSampler(ctx context.Context, dbURL, logPath string) (*waitSampler, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	var logFile *os.File
	if logPath != "" {
		if logFile, err = os.Create(logPath); err != nil {
			_ = conn.Close(ctx)
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &waitSampler{stop: cancel, done: make(chan struct{}), counts: map[string]int{}}
	go func() {
		defer close(w.done)
		defer conn.Close(context.WithoutCancel(ctx))
		var timeline *timelineLog
		if logFile != nil {
			timeline = newTimelineLog(ctx, logFile)
			defer func() {
				_ = timeline.w.Flush()
				_ = logFile.Close()
			}()
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := conn.Query(ctx, `
SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'CPU')
            ELSE 'idle in transaction (client side), last:' END || ' ' ||
       CASE WHEN query ~* '^\s*commit' THEN 'commit' ELSE left(regexp_replace(query, '\s+', ' ', 'g'), 40) END
FROM pg_stat_activity
WHERE datname = current_database() AND state IN ('active', 'idle in transaction') AND pid <> pg_backend_pid()`)
			if err != nil {
				continue
			}
			events, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				continue
			}
			w.polls++
			for _, e := range events {
				w.counts[e]++
			}
			if timeline != nil {
				timeline.write(ctx, conn, events)
			}
		}
	}()
	return w, nil
}

// write writes one poll's line: the time, the machine's CPU since the last
// line (busy, iowait and steal, in % of all CPUs), the probe's worst
// oversleep, the client sessions' states counted, and the cluster's
// background work.
func (t *timelineLog) write(ctx context.Context, conn *pgx.Conn, events []string) {
	w := t.w
	cpu := procStatCPU()
	var busy, iowait, steal float64
	if total := float64(cpu.total - t.cpu.total); t.cpu.total > 0 && total > 0 {
		busy = 100 * float64(cpu.busy-t.cpu.busy) / total
		iowait = 100 * float64(cpu.iowait-t.cpu.iowait) / total
		steal = 100 * float64(cpu.steal-t.cpu.steal) / total
	}
	t.cpu = cpu
	late := time.Duration(t.late.Swap(0))
	at := time.Now()
	var background []string
	rows, err := conn.Query(ctx, `
SELECT backend_type || ' ' || coalesce(wait_event, 'CPU') || coalesce(' ' || left(regexp_replace(query, '\s+', ' ', 'g'), 60), '')
FROM pg_stat_activity
WHERE backend_type NOT IN ('client backend', 'walwriter', 'logical replication launcher', 'autovacuum launcher')
  AND NOT (backend_type = 'checkpointer' AND wait_event = 'CheckpointerMain')
  AND NOT (backend_type = 'background writer' AND wait_event = 'BgWriterHibernate')
UNION ALL
SELECT 'analyze ' || relid::regclass::text || ' ' || phase FROM pg_stat_progress_analyze
UNION ALL
SELECT 'vacuum ' || relid::regclass::text || ' ' || phase FROM pg_stat_progress_vacuum`)
	if err == nil {
		background, _ = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	counts := map[string]int{}
	for _, e := range events {
		counts[e]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	fmt.Fprintf(w, "%s cpu %3.0f%% io %2.0f%% steal %2.0f%% probe +%4.1fms %d active |", at.UTC().Format("15:04:05.000"),
		busy, iowait, steal, float64(late.Microseconds())/1000, len(events))
	for _, k := range keys {
		fmt.Fprintf(w, " %d×%s;", counts[k], k)
	}
	if len(background) > 0 {
		fmt.Fprintf(w, " || %s", strings.Join(background, "; "))
	}
	_ = w.WriteByte('\n')
}

// result stops the sampler and returns the most frequent states with the
// average number of sessions in each.
func (w *waitSampler) result(n int) []waitEvent {
	w.stop()
	<-w.done
	out := make([]waitEvent, 0, len(w.counts))
	for k, c := range w.counts {
		out = append(out, waitEvent{Event: k, Sessions: round2(float64(c) / float64(max(w.polls, 1)))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sessions > out[j].Sessions })
	return out[:min(n, len(out))]
}

// waitEvent is how many active sessions were, on average, in one state.
type waitEvent struct {
	Event    string  `json:"event"`
	Sessions float64 `json:"sessions"`
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// timelineLog is the wait sampler's timeline (-waits with -keep): its file,
// the last /proc/stat reading, and a probe goroutine that sleeps 5 ms at a
// time and keeps its worst oversleep since the last line, so that a stall
// of the whole machine (a paused virtual CPU) tells itself apart from one
// of PostgreSQL (the sampler's own query is late, the probe is not).
type timelineLog struct {
	w    *bufio.Writer
	cpu  cpuTimes
	late atomic.Int64 // nanoseconds
}

func newTimelineLog(ctx context.Context, f *os.File) *timelineLog {
	t := &timelineLog{w: bufio.NewWriter(f), cpu: procStatCPU()}
	go func() {
		const nap = 5 * time.Millisecond
		for ctx.Err() == nil {
			t0 := time.Now()
			time.Sleep(nap)
			if over := int64(time.Since(t0) - nap); over > t.late.Load() {
				t.late.Store(over)
			}
		}
	}()
	return t
}

// cpuTimes is the first line of /proc/stat, in clock ticks.
type cpuTimes struct{ total, busy, iowait, steal int64 }

func procStatCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var c cpuTimes
	// user nice system idle iowait irq softirq steal
	for i, v := range f[1:9] {
		n, _ := strconv.ParseInt(v, 10, 64)
		c.total += n
		switch i {
		case 3:
		case 4:
			c.iowait = n
		case 7:
			c.steal = n
		default:
			c.busy += n
		}
	}
	return c
}
