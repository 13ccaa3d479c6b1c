package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// Callback loop defaults.
const (
	// CallbackEveryDefault is the longest the loops sleep: an SLA deadline
	// is recorded within about this of passing, and so is a callback
	// deadline that a heartbeat moved while the loop slept.
	CallbackEveryDefault = 500 * time.Millisecond
	// callbackEveryMin keeps a backlog from spinning the loops.
	callbackEveryMin = 10 * time.Millisecond
)

// The callback sweeper's loops (CallbackLoops), by name.
const (
	LoopCallbacks = "callbacks"
	LoopSLA       = "sla"
)

// CallbackLoopConfig configures CallbackLoops.
type CallbackLoopConfig struct {
	// Every is the longest sleep between passes. Defaults to
	// CallbackEveryDefault.
	Every time.Duration
	// Logger receives what the passes found, at info. Defaults to a
	// discarding logger.
	Logger *slog.Logger
	// Metrics counts what the passes did (ax_callback_timeouts_total,
	// ax_delivery_retries_scheduled_total, ax_sla_missed_total; the
	// executions they end are counted by service, in
	// ax_executions_finished_total, through its own Config). Optional.
	Metrics *metrics.Metrics
}

// CallbackLoops returns the callback sweeper's two loops. callbacks fails
// the callback attempts whose heartbeat or completion deadline passed
// (service.Deliveries.SweepCallbacks: retried under the task's retry
// policy, with a new deliver job); between passes it sleeps until the
// earliest waiting attempt expires, at most Every. sla records the
// executions that missed their SLA, and the workflow runs that missed
// theirs (service.Deliveries.SweepSLA), every Every. Deadlines are the
// database's: a pass finds what expired by its clock through the
// indexes, so the loops survive restarts and run on every replica (their
// row locks keep each expiry and each miss to one). While a pass leaves
// work behind the next follows within callbackEveryMin. An idle ax —
// however many executions wait — costs three index probes per Every
// (expired waits, the next expiry, SLA misses).
func CallbackLoops(d *service.Deliveries, cfg CallbackLoopConfig) []Loop {
	cfg.Every = cmp.Or(cfg.Every, CallbackEveryDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	callbacks := Loop{Name: LoopCallbacks, Every: cfg.Every, Pass: func(ctx context.Context) (time.Duration, error) {
		cb, err := d.SweepCallbacks(ctx)
		observeCallbacks(cfg.Metrics, cb)
		for class, n := range cb.TimedOut {
			cfg.Logger.InfoContext(ctx, "callback attempts timed out", "error_class", class, "count", n)
		}
		if err != nil {
			return 0, fmt.Errorf("sweep expired callbacks: %w", err)
		}
		if cb.More {
			return callbackEveryMin, nil
		}
		if next, ok, err := d.NextCallbackExpiry(ctx); err == nil && ok {
			return min(max(next, callbackEveryMin), cfg.Every), nil
		}
		return 0, nil
	}}
	sla := Loop{Name: LoopSLA, Every: cfg.Every, Pass: func(ctx context.Context) (time.Duration, error) {
		res, err := d.SweepSLA(ctx)
		observeSLA(cfg.Metrics, res)
		if res.Missed > 0 {
			cfg.Logger.InfoContext(ctx, "executions missed their SLA", "count", res.Missed)
		}
		if res.RunsMissed > 0 {
			cfg.Logger.InfoContext(ctx, "workflow runs missed their SLA", "count", res.RunsMissed)
		}
		if err != nil {
			return 0, fmt.Errorf("sweep SLA misses: %w", err)
		}
		if res.More {
			return callbackEveryMin, nil
		}
		return 0, nil
	}}
	return []Loop{callbacks, sla}
}
