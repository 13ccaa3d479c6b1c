package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/axhq/ax/service"
)

// BackfillPollDefault is how often BackfillLoop looks for running
// backfills without being woken: the backstop for a wake lost to a crash
// or made on another replica.
const BackfillPollDefault = time.Second

// LoopBackfills is the backfill pump's loop name.
const LoopBackfills = "backfills"

// BackfillLoop is the loop that drives the running backfills: a pump pass
// (service.Backfills.Pump) when woken (a backfill was created, an attempt
// of one of its executions was recorded) and every poll interval
// (BackfillPollDefault when zero); passes repeat at once while they create
// executions. Every replica runs it; a backfill one replica is pumping is
// skipped by the others.
func BackfillLoop(b *service.Backfills, poll time.Duration) Loop {
	if poll <= 0 {
		poll = BackfillPollDefault
	}
	return Loop{Name: LoopBackfills, Every: poll, Wake: b.Woken(), Pass: func(ctx context.Context) (time.Duration, error) {
		for ctx.Err() == nil {
			n, err := b.Pump(ctx)
			if err != nil {
				return 0, fmt.Errorf("backfill pass: %w", err)
			}
			if n == 0 {
				break
			}
		}
		return 0, nil
	}}
}
