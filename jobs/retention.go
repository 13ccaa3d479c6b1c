package jobs

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/axhq/ax/service"
)

// Retention loop defaults.
const (
	// RetentionEveryDefault is how often the retention loop sweeps when
	// the previous sweep left nothing behind.
	RetentionEveryDefault = time.Minute
	// RetentionPauseDefault is the pause between sweeps while a backlog
	// lasts (a sweep that stopped at its budget): the database gets as
	// much time to itself as the sweep took.
	RetentionPauseDefault = time.Second
)

// RetentionLoopConfig configures RunRetention.
type RetentionLoopConfig struct {
	// Every is the time between sweeps that found nothing left. Defaults
	// to RetentionEveryDefault.
	Every time.Duration
	// Pause is the time between sweeps while a backlog lasts. Defaults
	// to RetentionPauseDefault.
	Pause time.Duration
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// OnSweep, if set, observes what each sweep removed (metrics, tests).
	OnSweep func(service.RetentionResult)
}

// RunRetention removes expired history (service.Retention.Sweep) until ctx
// is done: a sweep at start, then one every Every, or every Pause while a
// sweep stops at its budget with work left. It runs beside the scheduler
// loop, not in it: a sweep never delays a fire.
func RunRetention(ctx context.Context, r *service.Retention, cfg RetentionLoopConfig) {
	cfg.Every = cmp.Or(cfg.Every, RetentionEveryDefault)
	cfg.Pause = cmp.Or(cfg.Pause, RetentionPauseDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for {
		res, err := r.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Warn("could not remove expired history", "error", err.Error())
		}
		if cfg.OnSweep != nil {
			cfg.OnSweep(res)
		}
		if n := res.Executions + res.Audit + res.Runs; n > 0 {
			cfg.Logger.Debug("removed expired history", "executions", res.Executions, "events", res.Events, "workflow_runs", res.Runs,
				"audit_records", res.Audit)
		}
		wait := cfg.Every
		if res.More && err == nil {
			wait = cfg.Pause
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
