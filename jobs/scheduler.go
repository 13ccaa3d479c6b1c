package jobs

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/axhq/ax/service"
)

// Scheduler loop defaults.
const (
	// PollCeilingDefault bounds how long the loop sleeps without looking at
	// the tasks table, whatever the timers and notifications say.
	PollCeilingDefault = time.Second
	// GatherDefault is how long the loop lets due tasks accumulate.
	GatherDefault = 500 * time.Millisecond
	// analyzeEvery is how often the loop looks for young tables to
	// ANALYZE (service.Scheduler.AnalyzeYoungTables).
	analyzeEvery = 10 * time.Second
	// sweepEvery is how often the loop sweeps unfinished_executions of
	// rows a writer other than ax left (service.Scheduler.SweepUnfinished);
	// the first sweep is at start.
	sweepEvery = time.Minute
	// reconcileEvery is how often the loop resumes executions no live
	// job carries (service.Scheduler.Reconcile).
	reconcileEvery = 10 * time.Second
)

// SchedulerLoopConfig configures RunScheduler.
type SchedulerLoopConfig struct {
	// PollCeiling is the longest sleep between passes. Defaults to 1 s; at
	// most service.TaskWakeWithin minus the look-ahead, since a new task
	// due later than that wakes no loop (service.Tasks.Create).
	PollCeiling time.Duration
	// Gather lets tasks that come due accumulate for up to this long
	// before a pass claims them, so that a steady stream of slots (1,000
	// tasks a second, each at its own millisecond) is claimed in a few
	// large batches a second rather than one task per pass. Slots are
	// still materialised at least LookAhead − Gather before they are due;
	// a task change wakes the loop at once. Defaults to 500 ms; it is
	// capped at half the look-ahead.
	Gather time.Duration
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// OnTick, if set, observes every pass (metrics, tests).
	OnTick func(service.TickResult, time.Duration)
	// ReconcileAfter is how long after its slot an unfinished execution
	// may go without a live River job before the loop resumes it.
	// Defaults to service.ReconcileAfterDefault.
	ReconcileAfter time.Duration
	// OnReconcile, if set, observes how many executions a reconciliation
	// resumed.
	OnReconcile func(int)
	// ExpireKeys, if set, is called with each sweep to remove expired
	// Idempotency-Keys (service.IdempotencyKeys.ExpireKeys).
	ExpireKeys func(context.Context) (int64, error)
}

// RunScheduler runs the scheduler loop until ctx is done. It wakes at the
// earliest next_run_at minus the look-ahead, when a task changes (LISTEN on
// the task-change channel) and at least every PollCeiling; each wake claims
// due tasks in batches until none are left.
func RunScheduler(ctx context.Context, s *service.Scheduler, cfg SchedulerLoopConfig) {
	cfg.PollCeiling = cmp.Or(cfg.PollCeiling, PollCeilingDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	wake := make(chan struct{}, 1)
	listenDone := make(chan struct{})
	go func() {
		defer close(listenDone)
		listen(ctx, s, wake, cfg.Logger)
	}()
	defer func() { <-listenDone }()

	lookAhead := s.Config().LookAhead
	cfg.PollCeiling = max(min(cfg.PollCeiling, service.TaskWakeWithin-lookAhead), 100*time.Millisecond)

	// maintain gets its own copy: the loop below never writes cfg again,
	// but the copy keeps the two goroutines from sharing it at all.
	maintainCfg := cfg
	maintainDone := make(chan struct{})
	go func() {
		defer close(maintainDone)
		maintain(ctx, s, maintainCfg)
	}()
	defer func() { <-maintainDone }()

	gather := min(cmp.Or(cfg.Gather, GatherDefault), lookAhead/2)
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		res, err := s.Tick(ctx)
		if cfg.OnTick != nil && err == nil {
			cfg.OnTick(res, time.Since(start))
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			cfg.Logger.Error("scheduler pass failed", "error", err.Error())
			if !sleep(ctx, backoff, wake) {
				return
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		if res.More {
			continue
		}
		due, known, err := s.NextDueIn(ctx)
		if !sleep(ctx, nextWait(due, known && err == nil, cfg.PollCeiling, lookAhead, gather), wake) {
			return
		}
	}
}

// maintain runs the scheduler's housekeeping until ctx is done:
// reconciliation every reconcileEvery, the unfinished_executions sweep and
// the expiry of Idempotency-Keys every sweepEvery (the first of each at
// start), and ANALYZE of young tables every analyzeEvery. It runs beside
// the firing loop, never in it: under load each step can take seconds
// (a reconciliation reads every unfinished execution), and a slot must
// not be materialised late because housekeeping held the loop.
func maintain(ctx context.Context, s *service.Scheduler, cfg SchedulerLoopConfig) {
	reconcileAfter := cmp.Or(cfg.ReconcileAfter, service.ReconcileAfterDefault)
	var analyzed, swept, reconciled time.Time
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if time.Since(reconciled) >= reconcileEvery {
			reconciled = time.Now()
			n, err := s.Reconcile(ctx, reconcileAfter)
			switch {
			case err != nil && ctx.Err() == nil:
				cfg.Logger.Warn("could not reconcile executions with their jobs", "error", err.Error())
			case err == nil && cfg.OnReconcile != nil:
				cfg.OnReconcile(n)
			}
		}
		if time.Since(swept) >= sweepEvery {
			swept = time.Now()
			if n, err := s.SweepUnfinished(ctx); err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("could not sweep unfinished executions", "error", err.Error())
			} else if n > 0 {
				cfg.Logger.Warn("removed rows of unfinished_executions whose execution is final; something other than "+
					"this version of ax writes executions (an older replica?)", "rows", n)
			}
			if cfg.ExpireKeys != nil {
				if n, err := cfg.ExpireKeys(ctx); err != nil && ctx.Err() == nil {
					cfg.Logger.Warn("could not remove expired Idempotency-Keys", "error", err.Error())
				} else if n > 0 {
					cfg.Logger.Debug("removed expired Idempotency-Keys", "keys", n)
				}
			}
		}
		if time.Since(analyzed) >= analyzeEvery {
			analyzed = time.Now()
			if names, err := s.AnalyzeYoungTables(ctx); err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("could not analyze young tables", "error", err.Error())
			} else if len(names) > 0 {
				cfg.Logger.Debug("analyzed young tables", "tables", names)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// nextWait is how long the loop sleeps after a pass that left nothing to
// claim, given how far off the earliest due task is (known: there is one):
// until it comes within the look-ahead plus the gathering time, at most
// ceiling, and never a hot loop.
func nextWait(due time.Duration, known bool, ceiling, lookAhead, gather time.Duration) time.Duration {
	wait := ceiling
	if known {
		wait = min(wait, max(due-lookAhead+gather, 0))
	}
	if wait <= 0 {
		// Due within the look-ahead and still unclaimed: another replica
		// holds it or just advanced it.
		wait = 10 * time.Millisecond
	}
	return wait
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

// listen turns task changes into wake-ups
// (service.Scheduler.ListenForChanges), reconnecting after failures.
func listen(ctx context.Context, s *service.Scheduler, wake chan<- struct{}, logger *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.ListenForChanges(ctx, func() { notify(wake) })
		if ctx.Err() != nil {
			return
		}
		logger.Warn("task-change listener lost its connection; polling until it is back", "error", errString(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func notify(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

func errString(err error) string {
	if err == nil {
		return "closed"
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	return err.Error()
}
