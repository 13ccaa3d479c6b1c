package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// idle registers n tasks none of which is due for an hour and measures what
// ax and PostgreSQL spend while nothing is due.
//
// One task is created through the API; the other n−1 are copies of its row
// made in SQL (jsonb_populate_record over the whole row, with a new id, name
// and slot), because a million API calls would take longer than the
// measurement. Slots are spread over the hour after next.
func idle(ctx context.Context, st *stack, o options, n int) (*result, error) {
	s, err := open(ctx, st, "idle", true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{Scenario: "idle", Tasks: n, WindowSeconds: o.duration.Seconds()}
	first := time.Now().Add(time.Hour).Truncate(time.Second)
	var t struct {
		ID string `json:"id"`
	}
	err = s.ax.call(ctx, http.MethodPost, "/v1/tasks", map[string]any{
		"name": "idle-0000000", "endpoint_id": s.epID,
		"schedule": map[string]any{"type": "interval", "interval_seconds": 3600, "start_at": first.UTC().Format(time.RFC3339)},
	}, &t)
	if err != nil {
		return res, fmt.Errorf("create the template task: %w", err)
	}
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	start := time.Now()
	const chunk = 50_000
	for lo := 1; lo < n; lo += chunk {
		hi := min(lo+chunk, n) - 1
		_, err := conn.Exec(ctx, `
INSERT INTO tasks
SELECT r.*
FROM tasks t, generate_series($1::int, $2::int) g,
     LATERAL jsonb_populate_record(t, jsonb_build_object(
          'id', gen_random_uuid(),
          'name', 'idle-' || lpad(g::text, 7, '0'),
          'start_at', $3::timestamptz + (g * 3600.0 / $4) * interval '1 second',
          'next_run_at', $3::timestamptz + (g * 3600.0 / $4) * interval '1 second')) r
WHERE t.tenant_id = 'bench' AND t.id = $5`, lo, hi, first, n, t.ID)
		if err != nil {
			return res, fmt.Errorf("copy tasks %d-%d: %w", lo, hi, err)
		}
		st.logf("idle: %d/%d tasks", hi+1, n)
	}
	res.CreateSeconds = math.Round(time.Since(start).Seconds()*100) / 100
	res.CreatePerSecond = math.Round(float64(n) / time.Since(start).Seconds())
	res.Notes = append(res.Notes, fmt.Sprintf("1 task created through the API, %d copied in SQL in %.1f s", n-1, res.CreateSeconds))
	// Leave no maintenance debt to be paid inside the window.
	for _, q := range []string{"VACUUM ANALYZE tasks", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("%s: %w", q, err)
		}
	}
	if err := s.waitUntil(ctx, time.Now().Add(5*time.Second), "settling"); err != nil {
		return res, err
	}

	a, err := readDBStats(ctx, conn, st.pgss)
	if err != nil {
		return res, err
	}
	cpu0 := sampleCPU(s.ax.Pid(), st)
	if err := s.waitUntil(ctx, time.Now().Add(o.duration), "idle window ends"); err != nil {
		return res, err
	}
	cpu1 := sampleCPU(s.ax.Pid(), st)
	// Statistics reach pg_stat_database when a backend goes idle, at most
	// once a second; wait for the window's last ones.
	time.Sleep(1500 * time.Millisecond)
	b, err := readDBStats(ctx, conn, st.pgss)
	if err != nil {
		return res, err
	}
	res.setCPU(cpu0, cpu1)
	secs := cpu1.at.Sub(cpu0.at).Seconds()
	// Less this connection's own: one transaction for the first reading's
	// statement count, one for the second's transaction count.
	x := math.Round(float64(b.xacts-a.xacts-2)/secs*10) / 10
	res.PGXactsPerSec = &x
	if st.pgss {
		c := math.Round(float64(b.calls-a.calls-2)/secs*10) / 10
		res.PGStmtsPerSec = &c
	}
	if got := s.rcv.count(); got > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d webhooks arrived although nothing was due", got))
	}
	s.ax.stop()
	s.finish(ctx, res)
	return res, nil
}

// apiStats is one request type under load.
type apiStats struct {
	Name         string        `json:"name"`
	Concurrency  int           `json:"concurrency"`
	Requests     int           `json:"requests"`
	PerSecond    float64       `json:"per_second"`
	Latency      *latencyStats `json:"latency_ms"`
	Errors       int           `json:"errors"`
	ErrorSamples []string      `json:"error_samples,omitempty"`
}

// apiScenario measures POST /v1/tasks and GET /v1/executions at a fixed
// concurrency, each for the measurement duration.
func apiScenario(ctx context.Context, st *stack, o options) (*result, error) {
	s, err := open(ctx, st, "api", true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{Scenario: "api", WindowSeconds: o.duration.Seconds()}

	// Executions to list: 1,000 one-shot tasks fired a few seconds from now.
	seedAt := time.Now().Add(5 * time.Second).Truncate(time.Second)
	cr := s.ax.createTasks(ctx, 1000, o.concurrency, func(i int) map[string]any {
		return map[string]any{
			"name": fmt.Sprintf("seed-%04d", i), "endpoint_id": s.epID,
			"schedule": map[string]any{"type": "once", "run_at": seedAt.UTC().Format(time.RFC3339)},
		}
	})
	if cr.errors > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of 1000 seed tasks failed: %v", cr.errors, cr.samples))
	}

	// POST /v1/tasks: one-shot tasks a day away, so they add rows, not fires.
	far := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	var seq atomic.Int64
	waits := s.sampleWaits(ctx, res)
	cpu0 := sampleCPU(s.ax.Pid(), s.st)
	post := load(ctx, "POST /v1/tasks", o.concurrency, o.duration, func(ctx context.Context) error {
		i := seq.Add(1)
		return s.ax.call(ctx, http.MethodPost, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("api-%08d", i), "endpoint_id": s.epID,
			"schedule": map[string]any{"type": "once", "run_at": far},
			"payload":  map[string]any{"i": i},
		}, nil)
	})
	res.setCPU(cpu0, sampleCPU(s.ax.Pid(), s.st)) // the POST phase's
	if waits != nil {
		res.Waits = waits.result(12)
	}
	res.API = append(res.API, post)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}

	// By now the seed tasks have fired: their executions exist.
	var page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := s.ax.call(ctx, http.MethodGet, "/v1/executions?limit=50", nil, &page); err != nil {
		res.Notes = append(res.Notes, "GET /v1/executions before the run: "+err.Error())
	} else if len(page.Items) == 0 {
		res.Notes = append(res.Notes, "GET /v1/executions found no executions to list")
	}
	get := load(ctx, "GET /v1/executions?limit=50", o.concurrency, o.duration, func(ctx context.Context) error {
		return s.ax.call(ctx, http.MethodGet, "/v1/executions?limit=50", nil, nil)
	})
	res.API = append(res.API, get)
	for _, a := range res.API {
		res.Errors += a.Errors
		res.ErrorSamples = append(res.ErrorSamples, a.ErrorSamples...)
	}
	s.finish(ctx, res)
	return res, nil
}

// load calls fn from concurrency goroutines for d and times each call.
func load(ctx context.Context, name string, concurrency int, d time.Duration, fn func(context.Context) error) apiStats {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		lat     []time.Duration
		errs    int
		samples []string
	)
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				err := fn(ctx)
				if ctx.Err() != nil && err != nil {
					break // cut off by the end of the window: not a sample
				}
				mine = append(mine, time.Since(t0))
				if err != nil {
					mu.Lock()
					errs++
					if len(samples) < 3 {
						samples = append(samples, name+": "+err.Error())
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	return apiStats{
		Name: name, Concurrency: concurrency, Requests: len(lat),
		PerSecond: math.Round(float64(len(lat)-errs) / elapsed.Seconds()),
		Latency:   summarize(lat), Errors: errs, ErrorSamples: samples,
	}
}

// noopArgs is the ceiling scenario's job: it does nothing.
type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// ceilingConfig is one River configuration the ceiling scenario tries.
type ceilingConfig struct {
	Workers           int           `json:"workers"`
	FetchCooldown     time.Duration `json:"fetch_cooldown_ns"`
	FetchPollInterval time.Duration `json:"fetch_poll_interval_ns"`
	Label             string        `json:"label"`
}

// ceilingRun is one configuration's outcome.
type ceilingRun struct {
	ceilingConfig
	Jobs          int     `json:"jobs"`
	Completed     int     `json:"completed"`
	Seconds       float64 `json:"seconds"`
	JobsPerSecond float64 `json:"jobs_per_second"`
}

// ceilingConfigs: River's defaults, the settings ax's deliver queue uses
// (jobs/river.go), and ten times the workers. One fetch takes at most
// Workers − running jobs, and fetches are at least FetchCooldown apart, so
// Workers/FetchCooldown bounds the rate.
var ceilingConfigs = []ceilingConfig{
	{100, river.FetchCooldownDefault, river.FetchPollIntervalDefault, "River defaults, 100 workers"},
	{100, 10 * time.Millisecond, 50 * time.Millisecond, "ax deliver queue settings"},
	{1000, 10 * time.Millisecond, 50 * time.Millisecond, "ax settings, 1000 workers"},
}

// ceiling measures River alone on this cluster: for each configuration, n
// no-op jobs inserted up front into a fresh database, then worked by one
// client; jobs/s counts the completions River reports.
func ceiling(ctx context.Context, st *stack, _ options, n int) (*result, error) {
	res := &result{Scenario: "ceiling", Tasks: n}
	for i, c := range ceilingConfigs {
		run, err := ceilingOnce(ctx, st, fmt.Sprintf("bench_ceiling_%d", i+1), c, n)
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.Label, err)
		}
		res.Ceiling = append(res.Ceiling, run)
		res.JobsPerSecond = max(res.JobsPerSecond, run.JobsPerSecond)
	}
	return res, nil
}

func ceilingOnce(ctx context.Context, st *stack, dbName string, c ceilingConfig, n int) (ceilingRun, error) {
	run := ceilingRun{ceilingConfig: c, Jobs: n}
	dbURL, err := st.createDatabase(ctx, dbName)
	if err != nil {
		return run, err
	}
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return run, err
	}
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return run, err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return run, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return run, fmt.Errorf("migrate river: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.Workers}},
		Workers:           workers,
		FetchCooldown:     c.FetchCooldown,
		FetchPollInterval: c.FetchPollInterval,
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return run, err
	}
	st.logf("ceiling: %s: inserting %d no-op jobs", c.Label, n)
	batch := make([]river.InsertManyParams, 0, 5000)
	for i := 0; i < n; i += cap(batch) {
		batch = batch[:0]
		for range min(cap(batch), n-i) {
			batch = append(batch, river.InsertManyParams{Args: noopArgs{}})
		}
		if _, err := client.InsertManyFast(ctx, batch); err != nil {
			return run, fmt.Errorf("insert jobs: %w", err)
		}
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: n + 1000,
	})
	defer cancelSub()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return run, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()
	deadline := time.NewTimer(5 * time.Minute)
	defer deadline.Stop()
	var last time.Time
wait:
	for run.Completed < n {
		select {
		case <-events:
			run.Completed++
			last = time.Now()
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			return run, ctx.Err()
		}
	}
	if run.Completed == 0 {
		return run, errors.New("no job completed within 5 minutes")
	}
	run.Seconds = math.Round(last.Sub(start).Seconds()*100) / 100
	run.JobsPerSecond = math.Round(float64(run.Completed) / last.Sub(start).Seconds())
	st.logf("ceiling: %s: %.0f jobs/s", c.Label, run.JobsPerSecond)
	return run, nil
}
