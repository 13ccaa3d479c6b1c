package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/axhq/ax/service/metrics"
)

// Loop is a background loop: a pass, run when the loop starts and then
// again after each wait, until the Runner stops it. Every loop of ax is
// registered with the process's Runner; nothing else starts a goroutine
// that loops.
type Loop struct {
	// Name names the loop in the logs (the loop attribute) and the
	// metrics (the loop label): snake_case, unique in a Runner. Required.
	Name string
	// Every is the wait after a pass that returned no wait of its own,
	// and after a pass that panicked. Required.
	Every time.Duration
	// Wake, if set, ends a wait early: the next pass starts when it
	// receives (a notification, a local change).
	Wake <-chan struct{}
	// Pass runs one pass. It returns the wait before the next pass (zero
	// or less: Every) and what went wrong; an error is logged and counted,
	// and the loop goes on. ctx ends when the Runner stops the loop; an
	// error returned then is not reported.
	Pass func(ctx context.Context) (time.Duration, error)
}

// Step is a start-up step with its undo, run in the Runner's order
// between loops: waiting for the schema, registering the replica,
// starting River. Loops registered after a step start once it is done,
// and stop before it is undone.
type Step struct {
	// Name names the step in the logs (the step attribute). Required.
	Name string
	// Start does the step. ctx lasts as long as the step: it ends when
	// the Runner stops, before Stop is called. Required.
	Start func(ctx context.Context) error
	// Retry, if positive, runs Start again this long after it failed, until
	// it succeeds or the Runner stops (the first failure is logged at
	// warn). Zero: a failure is logged at error and nothing registered
	// after the step starts.
	Retry time.Duration
	// Stop, if set, undoes Start when the Runner stops. ctx is Stop's;
	// the step bounds its own wait.
	Stop func(ctx context.Context) error
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	// Logger receives each loop's start, stop, failures and panics, with
	// its name as loop (a step's as step). Default: discard.
	Logger *slog.Logger
	// Metrics counts each loop's passes, errors and panics
	// (ax_loop_passes_total, ax_loop_errors_total, ax_loop_panics_total)
	// and records its last success (ax_loop_last_success_timestamp_seconds).
	// Default: metrics on a private registry.
	Metrics *metrics.Metrics
}

// Runner owns the process's background loops, as River's startstop
// services are owned by its client: each is registered with a name and
// an interval, they start in registration order (the steps among them in
// turn: a loop starts once the steps before it are done) and stop in the
// reverse order, each waited for before the next is stopped.
//
// A pass that panics does not take the process down: the panic is
// recovered, logged at error with its stack, counted (ax_loop_panics_total
// and ax_loop_errors_total), and the loop goes on after its interval — as
// River recovers a worker's panic. A pass that panics on every run shows
// as a steadily rising count and a stale
// ax_loop_last_success_timestamp_seconds, which is what an operator
// alerts on; a crash loop of the whole process would stop the API and
// every other loop with it.
type Runner struct {
	logger  *slog.Logger
	metrics *metrics.Metrics
	items   []item
	names   map[string]bool

	mu      sync.Mutex
	state   runnerState
	current context.CancelFunc // ends the item being started
	started []*started         // in start order
	// startDone is closed when the start sequence ended (all started, a
	// step failed, or Stop).
	startDone chan struct{}
}

type runnerState int

const (
	runnerIdle runnerState = iota
	runnerStarted
	runnerStopped
)

// item is a Loop or a Step.
type item struct {
	loop *Loop
	step *Step
}

// started is a started item: cancel ends its context; done is closed
// when a loop's goroutine returned.
type started struct {
	item   item
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRunner returns a Runner with nothing registered.
func NewRunner(cfg RunnerConfig) *Runner {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	return &Runner{logger: cfg.Logger, metrics: cfg.Metrics, names: map[string]bool{}}
}

// Add registers loops, in order, after what is registered already. It
// panics on a loop without a name, an interval or a pass, on a name
// registered twice, and after Start: registration is wiring.
func (r *Runner) Add(loops ...Loop) {
	for _, l := range loops {
		if l.Name == "" || l.Every <= 0 || l.Pass == nil {
			panic(fmt.Sprintf("jobs: loop %q needs a name, a positive interval and a pass", l.Name))
		}
		r.register(item{loop: &l}, l.Name)
		// Reported from the start, at 0.
		r.metrics.LoopPasses.WithLabelValues(l.Name)
		r.metrics.LoopErrors.WithLabelValues(l.Name)
		r.metrics.LoopPanics.WithLabelValues(l.Name)
		r.metrics.LoopLastSuccess.WithLabelValues(l.Name)
	}
}

// AddStep registers a step after what is registered already. It panics
// as Add does.
func (r *Runner) AddStep(s Step) {
	if s.Name == "" || s.Start == nil || s.Retry < 0 {
		panic(fmt.Sprintf("jobs: step %q needs a name and a start", s.Name))
	}
	r.register(item{step: &s}, s.Name)
}

func (r *Runner) register(it item, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != runnerIdle {
		panic("jobs: register " + name + " after the runner started")
	}
	if r.names[name] {
		panic("jobs: " + name + " is registered twice")
	}
	r.names[name] = true
	r.items = append(r.items, it)
}

// Start starts the registered steps and loops in order and returns at
// once; a step that waits (Retry) holds back what comes after it, not
// the caller. The loops run until Stop, or until ctx ends (to outlive
// ctx, as cmd/server's loops outlive the HTTP server's shutdown, pass
// context.WithoutCancel(ctx) and call Stop). Start panics when called
// twice.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != runnerIdle {
		panic("jobs: the runner was started already")
	}
	r.state = runnerStarted
	r.startDone = make(chan struct{})
	go r.startAll(ctx)
}

// startAll is the start sequence.
func (r *Runner) startAll(ctx context.Context) {
	defer close(r.startDone)
	for _, it := range r.items {
		ictx, cancel := context.WithCancel(ctx)
		s := &started{item: it, cancel: cancel, done: make(chan struct{})}
		r.mu.Lock()
		if r.state == runnerStopped {
			r.mu.Unlock()
			cancel()
			return
		}
		r.current = cancel
		r.mu.Unlock()
		if it.step != nil && !r.startStep(ictx, it.step) {
			cancel()
			return
		}
		r.mu.Lock()
		r.current = nil
		stopped := r.state == runnerStopped
		if !stopped {
			r.started = append(r.started, s)
		}
		r.mu.Unlock()
		if stopped {
			// Stop came while the step finished: undo it here, since Stop
			// no longer looks at what starts.
			cancel()
			r.stopStep(context.WithoutCancel(ctx), it.step)
			return
		}
		if it.loop != nil {
			r.logger.InfoContext(ctx, "background loop started", "loop", it.loop.Name, "every", it.loop.Every.String())
			go r.run(ictx, it.loop, s.done)
		}
	}
}

// startStep runs s.Start, again after each failure when s.Retry is set;
// it reports whether the step is done.
func (r *Runner) startStep(ctx context.Context, s *Step) bool {
	for attempt := 1; ; attempt++ {
		err := guard(ctx, s.Start)
		if err == nil {
			r.logger.InfoContext(ctx, "background step done", "step", s.Name)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if s.Retry <= 0 {
			r.logger.ErrorContext(ctx, "background step failed; the steps and loops after it do not start",
				"step", s.Name, "error", err.Error())
			return false
		}
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		r.logger.Log(ctx, level, "background step failed; retrying", "step", s.Name, "retry", s.Retry.String(),
			"attempt", attempt, "error", err.Error())
		t := time.NewTimer(s.Retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// run is a loop's goroutine.
func (r *Runner) run(ctx context.Context, l *Loop, done chan<- struct{}) {
	defer close(done)
	defer r.logger.InfoContext(context.WithoutCancel(ctx), "background loop stopped", "loop", l.Name)
	passes := r.metrics.LoopPasses.WithLabelValues(l.Name)
	errs := r.metrics.LoopErrors.WithLabelValues(l.Name)
	panics := r.metrics.LoopPanics.WithLabelValues(l.Name)
	lastSuccess := r.metrics.LoopLastSuccess.WithLabelValues(l.Name)
	failing := 0 // passes failed in a row
	for {
		wait, err := r.pass(ctx, l)
		if ctx.Err() != nil {
			return
		}
		passes.Inc()
		var p *panicError
		switch {
		case err == nil:
			lastSuccess.SetToCurrentTime()
			if failing > 0 {
				r.logger.InfoContext(ctx, "background loop recovered", "loop", l.Name, "failed_passes", failing)
			}
			failing = 0
		case errors.As(err, &p):
			errs.Inc()
			panics.Inc()
			failing++
			wait = l.Every
			r.logger.ErrorContext(ctx, "background loop pass panicked; the loop goes on after its interval",
				"loop", l.Name, "panic", p.value, "stack", p.stack)
		default:
			errs.Inc()
			failing++
			// The first failure of a run says so; the next ones (a database
			// away fails every pass) go to debug until a pass succeeds.
			level := slog.LevelDebug
			if failing == 1 {
				level = slog.LevelWarn
			}
			r.logger.Log(ctx, level, "background loop pass failed", "loop", l.Name, "error", err.Error(),
				"failed_passes", failing)
		}
		if wait <= 0 {
			wait = l.Every
		}
		if !sleep(ctx, wait, l.Wake) {
			return
		}
	}
}

// pass runs one pass of l, a panic turned into a *panicError.
func (r *Runner) pass(ctx context.Context, l *Loop) (wait time.Duration, err error) {
	defer func() {
		if v := recover(); v != nil {
			wait, err = 0, &panicError{value: fmt.Sprint(v), stack: string(debug.Stack())}
		}
	}()
	return l.Pass(ctx)
}

// guard runs f, a panic turned into a *panicError.
func guard(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: fmt.Sprint(v), stack: string(debug.Stack())}
		}
	}()
	return f(ctx)
}

// panicError is a recovered panic of a pass or a step.
type panicError struct {
	value, stack string
}

func (p *panicError) Error() string { return "panic: " + p.value }

// Stop stops what Start started, in the reverse order: a loop is
// cancelled and waited for (its pass in progress ends with its context), a
// step is undone (its context ends, then its Stop runs with ctx). A step
// still being started is abandoned, and nothing after it starts. Stop
// returns when all is stopped; it does nothing before Start or the second
// time.
func (r *Runner) Stop(ctx context.Context) {
	r.mu.Lock()
	if r.state != runnerStarted {
		r.state = runnerStopped
		r.mu.Unlock()
		return
	}
	r.state = runnerStopped
	if r.current != nil {
		r.current()
	}
	r.mu.Unlock()
	<-r.startDone
	// The start sequence is over: r.started is no longer written.
	for i := len(r.started) - 1; i >= 0; i-- {
		s := r.started[i]
		s.cancel()
		if s.item.loop != nil {
			<-s.done
			continue
		}
		r.stopStep(ctx, s.item.step)
	}
}

// stopStep undoes a step that was done.
func (r *Runner) stopStep(ctx context.Context, s *Step) {
	if s.Stop == nil {
		return
	}
	if err := guard(ctx, s.Stop); err != nil {
		r.logger.ErrorContext(ctx, "background step could not be undone", "step", s.Name, "error", err.Error())
		return
	}
	r.logger.InfoContext(ctx, "background step undone", "step", s.Name)
}

// sleep waits for d, a wake-up or ctx; it reports false when ctx is done.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return true
	case <-t.C:
		return true
	}
}
