package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// Scheduler loop defaults.
const (
	// PollCeilingDefault bounds how long the loop sleeps without looking at
	// the tasks table, whatever the timers and notifications say.
	PollCeilingDefault = time.Second
	// GatherDefault is how long the loop lets due tasks accumulate.
	GatherDefault = 500 * time.Millisecond
	// ClaimersDefault is how many claims run at once through a backlog.
	ClaimersDefault = 2
	// analyzeEvery is how often the analyze loop looks for young tables
	// to ANALYZE (service.Scheduler.AnalyzeYoungTables): a generic plan
	// the delivery pool cached while a table's statistics said it was
	// empty lasts until that ANALYZE. Looking every 10 s, the workflow
	// bench's 500 runs (started right after an ANALYZE of the empty
	// tables) ran their whole 4.7 s on plans that looked executions up
	// through executions_task_idx, 1.6 ms a row; every second, 3.0 s. A
	// look is one statement on pg_stat_user_tables.
	analyzeEvery = time.Second
	// sweepEvery is how often the unfinished_sweep loop sweeps
	// unfinished_executions of rows a writer other than ax left
	// (service.Scheduler.SweepUnfinished), and the idempotency_expiry loop
	// removes expired keys; the first of each is at start.
	sweepEvery = time.Minute
	// reconcileEvery is how often the reconcile loop resumes executions
	// no live job carries (service.Scheduler.Reconcile).
	reconcileEvery = 10 * time.Second
)

// The scheduler's loops (SchedulerLoops), by name.
const (
	LoopScheduler         = "scheduler"
	LoopTaskListener      = "task_listener"
	LoopReconcile         = "reconcile"
	LoopUnfinishedSweep   = "unfinished_sweep"
	LoopIdempotencyExpiry = "idempotency_expiry"
	LoopAnalyze           = "analyze"
)

// SchedulerLoopConfig configures SchedulerLoops.
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
	// Claimers is how many claims (service.Scheduler.Tick) run at once
	// while they come back full: a backlog of due tasks, such as a burst
	// of 100,000 fires due at one instant, which is claimed 1,000 tasks a
	// transaction. One claim's statements alternate between ax and
	// PostgreSQL, so one at a time keeps about one core busy; a second
	// one, locking other rows (SKIP LOCKED, as replicas share the work),
	// keeps the other busy and writes the burst's slots before it is due.
	// Defaults to 2; 1 claims one batch at a time.
	Claimers int
	// Logger receives what the housekeeping found (the runner logs the
	// failures). Defaults to a discarding logger.
	Logger *slog.Logger
	// Metrics records the passes (ax_scheduler_pass_duration_seconds,
	// ax_scheduler_claimed_tasks, ax_fires_total, ax_missed_slots_total)
	// and the reconciliations (ax_reconciled_executions_total). Optional.
	Metrics *metrics.Metrics
	// OnTick, if set, observes every pass (tests); concurrent claims
	// (Claimers) call it concurrently.
	OnTick func(service.TickResult, time.Duration)
	// ReconcileAfter is how long after its slot an unfinished execution
	// may go without a live River job before the loop resumes it.
	// Defaults to service.ReconcileAfterDefault.
	ReconcileAfter time.Duration
	// ExpireKeys, if set, is called with each sweep to remove expired
	// Idempotency-Keys (idempotency.Keys.ExpireKeys).
	ExpireKeys func(context.Context) (int64, error)
}

// SchedulerLoops returns the scheduler's loops, in the order to register
// them:
//
//   - task_listener turns task changes into wake-ups of the scheduler
//     (LISTEN: service.Scheduler.ListenForChanges); its pass lasts as long
//     as its connection, and it reconnects after a backoff (100 ms
//     doubling to 5 s) while the scheduler polls.
//   - scheduler claims due tasks in batches until none are left
//     (service.Scheduler.Tick), then sleeps until the earliest
//     next_run_at minus the look-ahead, a task change, or PollCeiling.
//   - the housekeeping, each beside the firing loop, never in it: under
//     load a step can take seconds (a reconciliation reads every
//     unfinished execution), and a slot must not be materialised late
//     because housekeeping held the loop. reconcile (every 10 s) resumes
//     executions no live job carries; unfinished_sweep (every minute)
//     removes rows of unfinished_executions whose execution is final;
//     idempotency_expiry (every minute, when ExpireKeys is set) removes
//     expired Idempotency-Keys; analyze (every 10 s) ANALYZEs young
//     tables.
func SchedulerLoops(s *service.Scheduler, cfg SchedulerLoopConfig) []Loop {
	cfg.PollCeiling = cmp.Or(cfg.PollCeiling, PollCeilingDefault)
	cfg.Claimers = max(cmp.Or(cfg.Claimers, ClaimersDefault), 1)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	lookAhead := s.Config().LookAhead
	ceiling := max(min(cfg.PollCeiling, service.TaskWakeWithin-lookAhead), 100*time.Millisecond)
	gather := min(cmp.Or(cfg.Gather, GatherDefault), lookAhead/2)
	wake := make(chan struct{}, 1)

	listenBackoff := 100 * time.Millisecond
	listener := Loop{Name: LoopTaskListener, Every: 5 * time.Second, Pass: func(ctx context.Context) (time.Duration, error) {
		err := s.ListenForChanges(ctx, func() { notify(wake) })
		wait := listenBackoff
		listenBackoff = min(listenBackoff*2, 5*time.Second)
		return wait, fmt.Errorf("task-change listener lost its connection; the scheduler polls until it is back: %s",
			errString(err))
	}}

	backoff := 100 * time.Millisecond
	observe := func(res service.TickResult, d time.Duration) {
		observeTick(cfg.Metrics, res, d)
		if cfg.OnTick != nil {
			cfg.OnTick(res, d)
		}
	}
	scheduler := Loop{Name: LoopScheduler, Every: ceiling, Wake: wake, Pass: func(ctx context.Context) (time.Duration, error) {
		if err := claimDue(ctx, s, cfg.Claimers, observe); err != nil {
			wait := backoff
			backoff = min(backoff*2, 5*time.Second)
			return wait, err
		}
		backoff = 100 * time.Millisecond
		due, known, err := s.NextDueIn(ctx)
		return nextWait(due, known && err == nil, ceiling, s.CurrentLookAhead(), gather), nil
	}}

	reconcileAfter := cmp.Or(cfg.ReconcileAfter, service.ReconcileAfterDefault)
	loops := []Loop{
		listener, scheduler,
		{Name: LoopReconcile, Every: reconcileEvery, Pass: func(ctx context.Context) (time.Duration, error) {
			n, err := s.Reconcile(ctx, reconcileAfter)
			if err != nil {
				return 0, fmt.Errorf("reconcile executions with their jobs: %w", err)
			}
			if cfg.Metrics != nil {
				cfg.Metrics.Reconciled.Add(float64(n))
			}
			return 0, nil
		}},
		{Name: LoopUnfinishedSweep, Every: sweepEvery, Pass: func(ctx context.Context) (time.Duration, error) {
			n, err := s.SweepUnfinished(ctx)
			if err != nil {
				return 0, fmt.Errorf("sweep unfinished executions: %w", err)
			}
			if n > 0 {
				cfg.Logger.WarnContext(ctx, "removed rows of unfinished_executions whose execution is final; something other "+
					"than this version of ax writes executions (an older replica?)", "rows", n)
			}
			return 0, nil
		}},
	}
	if cfg.ExpireKeys != nil {
		loops = append(loops, Loop{
			Name: LoopIdempotencyExpiry, Every: sweepEvery,
			Pass: func(ctx context.Context) (time.Duration, error) {
				n, err := cfg.ExpireKeys(ctx)
				if err != nil {
					return 0, fmt.Errorf("remove expired Idempotency-Keys: %w", err)
				}
				if n > 0 {
					cfg.Logger.DebugContext(ctx, "removed expired Idempotency-Keys", "keys", n)
				}
				return 0, nil
			},
		})
	}
	return append(loops, Loop{Name: LoopAnalyze, Every: analyzeEvery, Pass: func(ctx context.Context) (time.Duration, error) {
		names, err := s.AnalyzeYoungTables(ctx)
		if err != nil {
			return 0, fmt.Errorf("analyze young tables: %w", err)
		}
		if len(names) > 0 {
			cfg.Logger.DebugContext(ctx, "analyzed young tables", "tables", names)
		}
		return 0, nil
	}})
}

// claimDue claims due tasks (service.Scheduler.Tick) until a claim comes
// back with room to spare. When two claims in a row come back full (a
// backlog: a large instant, or downtime), claimers run at once, each until
// its own claim is not full; they lock different tasks (SKIP LOCKED), so
// they share the backlog as replicas do. One full claim is not a backlog:
// at 10,000 fires a second, two groups of tasks due together (about 1,800)
// are claimed now and then, and two claimers at once wrote their 22,000
// executions on both cores while the deliveries waited. The goroutines end
// before it returns.
func claimDue(ctx context.Context, s *service.Scheduler, claimers int, observe func(service.TickResult, time.Duration)) error {
	claim := func() (bool, error) {
		start := time.Now()
		res, err := s.Tick(ctx)
		if err != nil {
			return false, err
		}
		observe(res, time.Since(start))
		return res.More && ctx.Err() == nil, nil
	}
	for range 2 {
		more, err := claim()
		if err != nil || !more {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, claimers)
	for i := range claimers {
		wg.Go(func() {
			for more := true; more && errs[i] == nil; {
				more, errs[i] = claim()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RunScheduler runs the scheduler's loops (SchedulerLoops) on a Runner of
// their own until ctx is done: for tests and tools that want a scheduler
// without the rest of ax. cmd/server registers SchedulerLoops with the
// process's Runner instead.
func RunScheduler(ctx context.Context, s *service.Scheduler, cfg SchedulerLoopConfig) {
	r := NewRunner(RunnerConfig{Logger: cfg.Logger, Metrics: cfg.Metrics})
	r.Add(SchedulerLoops(s, cfg)...)
	r.Start(ctx)
	<-ctx.Done()
	r.Stop(context.WithoutCancel(ctx))
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
