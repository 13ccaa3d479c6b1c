package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/retention"
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

// LoopRetention is the retention loop's name.
const LoopRetention = "retention"

// RetentionLoopConfig configures RetentionLoop.
type RetentionLoopConfig struct {
	// Every is the time between sweeps that found nothing left. Defaults
	// to RetentionEveryDefault.
	Every time.Duration
	// Pause is the time between sweeps while a backlog lasts. Defaults
	// to RetentionPauseDefault.
	Pause time.Duration
	// Logger receives what the sweeps removed, at debug. Defaults to a
	// discarding logger.
	Logger *slog.Logger
	// Metrics counts what each sweep removed (ax_retention_deleted_total).
	// Optional.
	Metrics *metrics.Metrics
}

// RetentionLoop is the loop that removes expired history
// (retention.Sweeper.Sweep): a sweep at start, then one every Every, or
// every Pause while a sweep stops at its budget with work left. It runs
// beside the scheduler loop, not in it: a sweep never delays a fire.
func RetentionLoop(r *retention.Sweeper, cfg RetentionLoopConfig) Loop {
	cfg.Every = cmp.Or(cfg.Every, RetentionEveryDefault)
	cfg.Pause = cmp.Or(cfg.Pause, RetentionPauseDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return Loop{Name: LoopRetention, Every: cfg.Every, Pass: func(ctx context.Context) (time.Duration, error) {
		res, err := r.Sweep(ctx)
		observeRetention(cfg.Metrics, res)
		if n := res.Executions + res.Audit + res.Runs + res.PostedEvents; n > 0 {
			cfg.Logger.DebugContext(ctx, "removed expired history", "executions", res.Executions, "events", res.Events,
				"workflow_runs", res.Runs, "audit_records", res.Audit, "posted_events", res.PostedEvents)
		}
		if err != nil {
			return 0, fmt.Errorf("remove expired history: %w", err)
		}
		if res.More {
			return cfg.Pause, nil
		}
		return 0, nil
	}}
}
