package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/axhq/ax/service"
)

// BackfillPollDefault is how often RunBackfills looks for running
// backfills without being woken: the backstop for a wake lost to a crash
// or made on another replica.
const BackfillPollDefault = time.Second

// RunBackfills drives the running backfills until ctx ends: a pump pass
// (service.Backfills.Pump) when woken (a backfill was created, an attempt
// of one of its executions was recorded) and every poll interval; passes
// repeat at once while they create executions. Every replica runs it; a
// backfill one replica is pumping is skipped by the others.
func RunBackfills(ctx context.Context, b *service.Backfills, poll time.Duration, logger *slog.Logger) {
	if poll <= 0 {
		poll = BackfillPollDefault
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-b.Woken():
		}
		for ctx.Err() == nil {
			n, err := b.Pump(ctx)
			if err != nil {
				if ctx.Err() == nil {
					logger.Warn("backfill pass failed", "error", err.Error())
				}
				break
			}
			if n == 0 {
				break
			}
		}
	}
}
