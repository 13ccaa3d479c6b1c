package jobs

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/axhq/ax/service"
)

// Callback loop defaults.
const (
	// CallbackEveryDefault is the longest the loop sleeps: an SLA deadline
	// is recorded within about this of passing, and so is a callback
	// deadline that a heartbeat moved while the loop slept.
	CallbackEveryDefault = 500 * time.Millisecond
	// callbackEveryMin keeps a backlog from spinning the loop.
	callbackEveryMin = 10 * time.Millisecond
)

// CallbackLoopConfig configures RunCallbacks.
type CallbackLoopConfig struct {
	// Every is the longest sleep between passes. Defaults to
	// CallbackEveryDefault.
	Every time.Duration
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// OnCallbacks and OnSLA, if set, observe each pass (metrics, tests).
	OnCallbacks func(service.CallbackSweep)
	OnSLA       func(service.SLASweep)
}

// RunCallbacks is the callback sweeper: until ctx is done, it fails the
// callback attempts whose heartbeat or completion deadline passed
// (service.Deliveries.SweepCallbacks: retried under the task's retry
// policy, with a new deliver job) and records the executions that missed
// their SLA, and the workflow runs that missed theirs
// (service.Deliveries.SweepSLA). Deadlines are the database's:
// a pass finds what expired by its clock through the indexes, so the loop
// survives restarts and runs on every replica (their row locks keep each
// expiry and each miss to one). Between passes it sleeps until the
// earliest waiting attempt expires, at most Every. An idle ax — however
// many executions wait — costs three index probes a pass (expired waits,
// SLA misses, the next expiry).
func RunCallbacks(ctx context.Context, d *service.Deliveries, cfg CallbackLoopConfig) {
	cfg.Every = cmp.Or(cfg.Every, CallbackEveryDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for {
		cb, err := d.SweepCallbacks(ctx)
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("could not sweep expired callbacks", "error", err.Error())
		}
		if cfg.OnCallbacks != nil {
			cfg.OnCallbacks(cb)
		}
		for class, n := range cb.TimedOut {
			cfg.Logger.Info("callback attempts timed out", "error_class", class, "count", n)
		}
		more := cb.More && err == nil
		sla, err := d.SweepSLA(ctx)
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("could not sweep SLA misses", "error", err.Error())
		}
		if cfg.OnSLA != nil {
			cfg.OnSLA(sla)
		}
		if sla.Missed > 0 {
			cfg.Logger.Info("executions missed their SLA", "count", sla.Missed)
		}
		if sla.RunsMissed > 0 {
			cfg.Logger.Info("workflow runs missed their SLA", "count", sla.RunsMissed)
		}
		more = more || (sla.More && err == nil)

		wait := cfg.Every
		if more {
			wait = callbackEveryMin
		} else if next, ok, err := d.NextCallbackExpiry(ctx); err == nil && ok {
			wait = min(max(next, callbackEveryMin), cfg.Every)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
