package jobs

import (
	"context"
	"time"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/limits"
)

// The limits' loops (LimitsLoops), by name.
const (
	LoopLimitsRefresh  = "limits_refresh"
	LoopLimitsDispatch = "limits_dispatch"
	LoopPermitSweep    = "permit_sweep"
	LoopFairness       = "fairness"
)

// LimitsLoops returns the loops that keep l working, each on every
// replica (l's errors say what failed; the runner adds the loop):
//
//   - limits_refresh re-reads the tenants' limits every
//     LimitsConfig.Refresh (changes made on this replica apply at once).
//   - limits_dispatch grants permits to held deliveries
//     (service.Limits.Dispatch) when woken (a permit was released on this
//     replica: service.Limits.Wake), every 50 ms while some are held, at
//     the next token of a rate-limited gate, and every second otherwise.
//   - permit_sweep frees the permits past their TTL every 10 s
//     (service.Limits.SweepPermits).
//   - fairness starts the deliver queues' due jobs round-robin across
//     tenants where a backlog formed (service.Limits.Share), every
//     LimitsConfig.FairEvery.
func LimitsLoops(l *service.Limits) []Loop {
	cfg := l.Config()
	return []Loop{
		{Name: LoopLimitsRefresh, Every: cfg.Refresh, Pass: func(ctx context.Context) (time.Duration, error) {
			return 0, l.Refresh(ctx)
		}},
		{Name: LoopLimitsDispatch, Every: limits.DispatchIdlePoll, Wake: l.Wakes(), Pass: func(ctx context.Context) (time.Duration, error) {
			next, held, err := l.Dispatch(ctx)
			wait := limits.DispatchPoll
			if !held && err == nil {
				wait = limits.DispatchIdlePoll
			}
			if !next.IsZero() {
				wait = min(wait, max(time.Until(next), time.Millisecond))
			}
			return wait, err
		}},
		{Name: LoopPermitSweep, Every: limits.SweepEvery, Pass: func(ctx context.Context) (time.Duration, error) {
			_, err := l.SweepPermits(ctx)
			return 0, err
		}},
		{Name: LoopFairness, Every: cfg.FairEvery, Pass: func(ctx context.Context) (time.Duration, error) {
			_, err := l.Share(ctx)
			return 0, err
		}},
	}
}
