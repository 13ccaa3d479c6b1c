// Package runner is `ax runner`: a webhook receiver that runs commands, so
// that crontab scripts move to ax without an HTTP wrapper of their own.
//
// It verifies each delivery's Standard Webhooks signature (with
// openapi/receiver), runs the payload's command in its own process group
// when its program matches an --allow pattern, and reports: in callback
// mode (the delivery carries X-Ax-Callback-Token) it answers 202 at once,
// heartbeats while the command runs and completes the execution with the
// exit status and the output's tails; in response mode it runs the command
// within the request and answers 200 or 500 with the same output.
//
// A webhook-id runs once: while it runs, a redelivery starts nothing (in
// callback mode it takes over the new attempt's token); once it succeeded,
// a redelivery within a day is answered from the record (kept on disk with
// a state directory); a failed run is forgotten, so ax's retry runs again.
// receiver.Once does not fit as is: in callback mode a 2xx is not the end
// of the work, and the record must keep the output to answer with.
package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axhq/ax/openapi/receiver"
)

// Defaults of Config.
const (
	WorkersDefault   = 16
	TimeoutDefault   = time.Hour
	KillAfterDefault = 5 * time.Second
	GraceDefault     = 30 * time.Second
	// HeartbeatDefault is the heartbeat period of a callback-mode run
	// whose delivery does not say its heartbeat timeout.
	HeartbeatDefault = 30 * time.Second
	// Retention is how long a success is remembered.
	Retention = 24 * time.Hour
)

// The headers the runner reads besides the signature's.
const (
	HeaderCallbackToken    = "X-Ax-Callback-Token" //nolint:gosec // a header name, not a credential
	HeaderExecutionID      = "X-Ax-Execution-Id"
	HeaderHeartbeatTimeout = "X-Ax-Heartbeat-Timeout-Ms"
	HeaderTaskID           = "X-Ax-Task-Id"
	HeaderScheduledFor     = "X-Ax-Scheduled-For"
	HeaderAttempt          = "X-Ax-Attempt"
)

// Config is the runner's configuration (the flags of `ax runner`).
type Config struct {
	// Secrets verify signatures: the endpoint's secret, and during a
	// rotation the previous one too.
	Secrets []string
	Allow   Allowlist
	// Workers bounds the commands running at once; a delivery beyond it
	// is answered 429 with Retry-After.
	Workers int
	// AXURL is ax's API base URL, where callback-mode runs heartbeat and
	// complete. Without it callback-mode deliveries are refused (400).
	AXURL string
	// StateDir, when set, keeps the successes of the last Retention on
	// disk, so a restarted runner still answers them from the record.
	StateDir string
	// Timeout is a command's limit when its payload gives none.
	Timeout time.Duration
	// KillAfter is the wait between SIGTERM and SIGKILL of a process
	// group being ended.
	KillAfter time.Duration
	// Grace is how long Shutdown lets running commands finish before it
	// ends them and reports them failed and retryable.
	Grace time.Duration
	// Heartbeat is the heartbeat period when a delivery does not carry
	// X-Ax-Heartbeat-Timeout-Ms (with it: a third of that timeout).
	Heartbeat time.Duration
	// RetryExitCodes are the non-zero exit statuses reported retryable.
	RetryExitCodes []int
	// Env is the environment commands start from (BaseEnv(os.Environ())
	// in `ax runner`).
	Env    []string
	Client *http.Client
	Logger *slog.Logger
	// Tolerance is the signature's replay window (receiver's default).
	Tolerance time.Duration
}

// Runner serves deliveries; build it with New.
type Runner struct {
	cfg      Config
	verifier *receiver.Verifier
	records  *records
	log      *slog.Logger

	mu       sync.Mutex
	running  map[string]*run
	draining atomic.Bool
	wg       sync.WaitGroup // runs and their reports
}

// run is one command in flight, keyed by its webhook-id.
type run struct {
	id          string
	executionID string
	stop        chan stopReason // buffered: the first reason wins

	mu        sync.Mutex
	token     string        // the current attempt's callback token ("" in response mode)
	heartbeat time.Duration // period
	adopted   chan struct{} // closed and replaced when a new token arrives
}

// New checks cfg, fills its defaults and loads the state directory.
func New(cfg Config) (*Runner, error) {
	if len(cfg.Allow) == 0 {
		return nil, errors.New("at least one --allow pattern is required: the runner runs only the programs they match")
	}
	opts := []receiver.Option{}
	if cfg.Tolerance != 0 {
		opts = append(opts, receiver.WithTolerance(cfg.Tolerance))
	}
	v, err := receiver.NewVerifier(cfg.Secrets, opts...)
	if err != nil {
		return nil, err
	}
	cfg.Workers = positive(cfg.Workers, WorkersDefault)
	cfg.Timeout = positive(cfg.Timeout, TimeoutDefault)
	cfg.KillAfter = positive(cfg.KillAfter, KillAfterDefault)
	cfg.Grace = positive(cfg.Grace, GraceDefault)
	cfg.Heartbeat = positive(cfg.Heartbeat, HeartbeatDefault)
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	recs, err := openRecords(cfg.StateDir, Retention, time.Now)
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, verifier: v, records: recs, log: cfg.Logger, running: make(map[string]*run)}, nil
}

func positive[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Handler is the runner's HTTP handler: deliveries are POSTed to any
// path; GET /healthz answers 200 (503 while shutting down).
func (r *Runner) Handler() http.Handler {
	verified := r.verifier.Middleware(http.HandlerFunc(r.serve))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && req.URL.Path == "/healthz" {
			if r.draining.Load() {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		if req.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST a signed delivery", http.StatusMethodNotAllowed)
			return
		}
		verified.ServeHTTP(w, req)
	})
}

// Running returns how many commands run now.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

func (r *Runner) serve(w http.ResponseWriter, req *http.Request) {
	if r.draining.Load() {
		retryAfter(w, http.StatusServiceUnavailable, 30, "the runner is shutting down")
		return
	}
	var body bytes.Buffer
	if _, err := body.ReadFrom(req.Body); err != nil {
		http.Error(w, "the request body could not be read", http.StatusBadRequest)
		return
	}
	cmd, err := ParseCommand(body.Bytes())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !r.cfg.Allow.Allows(cmd.Program()) {
		http.Error(w, fmt.Sprintf("program %q matches no --allow pattern of this runner", cmd.Program()), http.StatusBadRequest)
		return
	}
	id, token := req.Header.Get(receiver.HeaderID), req.Header.Get(HeaderCallbackToken)
	executionID := req.Header.Get(HeaderExecutionID)
	if token != "" && (r.cfg.AXURL == "" || executionID == "") {
		http.Error(w, "a callback-mode delivery needs the runner's --ax-url (AX_URL) and X-Ax-Execution-Id", http.StatusBadRequest)
		return
	}
	hb := r.heartbeatPeriod(req.Header.Get(HeaderHeartbeatTimeout))

	r.mu.Lock()
	if cur := r.running[id]; cur != nil {
		r.mu.Unlock()
		if token != "" {
			cur.adopt(token, hb) // ax retried the attempt: report with the new token
			w.WriteHeader(http.StatusAccepted)
			return
		}
		retryAfter(w, http.StatusServiceUnavailable, 10, "webhook-id "+id+" is running; try again later")
		return
	}
	if out, ok := r.records.succeeded(id); ok {
		r.mu.Unlock()
		if token != "" {
			w.WriteHeader(http.StatusAccepted)
			r.wg.Go(func() {
				r.complete(context.Background(), &run{id: id, executionID: executionID, token: token, adopted: make(chan struct{})}, result{Output: out})
			})
			return
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	if len(r.running) >= r.cfg.Workers {
		r.mu.Unlock()
		retryAfter(w, http.StatusTooManyRequests, 5, "all "+strconv.Itoa(r.cfg.Workers)+" workers are busy")
		return
	}
	cur := &run{id: id, executionID: executionID, token: token, heartbeat: hb, stop: make(chan stopReason, 1), adopted: make(chan struct{})}
	r.running[id] = cur
	r.wg.Add(1)
	r.mu.Unlock()

	facts := map[string]string{"AX_WEBHOOK_ID": id}
	for name, h := range map[string]string{
		"AX_EXECUTION_ID": HeaderExecutionID, "AX_TASK_ID": HeaderTaskID,
		"AX_SCHEDULED_FOR": HeaderScheduledFor, "AX_ATTEMPT": HeaderAttempt,
	} {
		if v := req.Header.Get(h); v != "" {
			facts[name] = v
		}
	}
	env := environ(r.cfg.Env, facts, cmd.Env)
	timeout := cmd.Timeout
	if timeout == 0 {
		timeout = r.cfg.Timeout
	}
	results := make(chan result, 1)
	// Not the request's context: the command outlives a request ax gave
	// up on, and a callback-mode run outlives its 202.
	go func() { //nolint:gosec // see above

		defer r.wg.Done()
		var beats sync.WaitGroup
		hbCtx, stopBeats := context.WithCancel(context.Background())
		defer stopBeats()
		if token != "" {
			beats.Go(func() { r.heartbeats(hbCtx, cur) })
		}
		res := execute(cmd, env, timeout, r.cfg.KillAfter, r.cfg.RetryExitCodes, cur.stop)
		r.log.Info("command finished", "webhook_id", id, "execution_id", executionID, "exit_code", res.ExitCode,
			"duration_ms", res.DurationMS, "error", res.Err)
		if res.ok() {
			if err := r.records.add(id, res.Output); err != nil {
				r.log.Error("record a success", "webhook_id", id, "error", err)
			}
		}
		r.mu.Lock()
		delete(r.running, id)
		r.mu.Unlock()
		if token != "" {
			stopBeats()
			beats.Wait()
			r.complete(context.Background(), cur, res)
			return
		}
		results <- res
	}()
	if token != "" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	select {
	case res := <-results:
		status := http.StatusOK
		if !res.ok() {
			status = http.StatusInternalServerError
		}
		writeJSON(w, status, res.Output)
	case <-req.Context().Done():
		// ax gave up on this request (its timeout): the command goes on,
		// and its redelivery is answered from the record once it succeeds.
	}
}

// heartbeatPeriod is a third of the delivery's heartbeat timeout, or the
// configured period.
func (r *Runner) heartbeatPeriod(header string) time.Duration {
	if ms, err := strconv.ParseInt(header, 10, 64); err == nil && ms > 0 {
		return max(time.Duration(ms)*time.Millisecond/3, 100*time.Millisecond)
	}
	return r.cfg.Heartbeat
}

// adopt makes token the one the run reports with.
func (c *run) adopt(token string, heartbeat time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if token == c.token {
		return
	}
	c.token, c.heartbeat = token, heartbeat
	close(c.adopted)
	c.adopted = make(chan struct{})
}

func (c *run) current() (token string, period time.Duration, adopted <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token, c.heartbeat, c.adopted
}

// Shutdown stops taking deliveries, lets running commands finish within
// the grace period, then ends the rest; those are reported failed and
// retryable (so ax runs them again, here after a restart or on another
// runner). It returns when every report is sent or ctx ends.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.draining.Store(true)
	idle := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(idle)
	}()
	grace := time.NewTimer(r.cfg.Grace)
	defer grace.Stop()
	select {
	case <-idle:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	r.mu.Lock()
	for _, c := range r.running {
		r.log.Warn("ending a command at shutdown", "webhook_id", c.id, "execution_id", c.executionID)
		select {
		case c.stop <- stopShutdown:
		default:
		}
	}
	r.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func retryAfter(w http.ResponseWriter, status, seconds int, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(seconds))
	http.Error(w, msg, status)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Close releases the state directory's file; call it after Shutdown.
func (r *Runner) Close() error { return r.records.close() }
