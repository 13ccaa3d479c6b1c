package limits

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// APIDecision is the answer to one API request under its tenant's rate.
type APIDecision struct {
	// Limited: the tenant has a rate (the RateLimit-* headers apply).
	Limited bool
	Allowed bool
	// Limit is the rate per second. Remaining is what is left of the
	// tenant's budget after this request, as this replica knows it: the
	// share it holds (taken from the shared bucket, spent here) plus what
	// the shared bucket held when it last took from it. Other replicas
	// spend the same bucket and it refills at Limit per second, so it is
	// an estimate of what fits now, never a promise; 0 on a refusal.
	Limit     float64
	Remaining int
	// RetryAfter: when refused, how long until the next request fits.
	RetryAfter time.Duration
}

// apiShare is the part of a tenant's API budget this replica took from
// the shared bucket (api_budgets): requests are counted against it in
// memory, and only when it is spent does the replica go to the database
// for the next chunk. Tokens not used within a second are dropped, so no
// replica can hoard the budget.
type apiShare struct {
	mu      sync.Mutex
	tokens  int
	expires time.Time
	// shared is what the shared bucket held after this replica's last
	// take (whole requests).
	shared int
	// refusedUntil: the shared bucket was empty; refuse without asking
	// the database again before then.
	refusedUntil time.Time
}

// apiChunk is how many requests a replica takes from the shared bucket at
// once: a tenth of a second's worth (at least one, at most 100).
func apiChunk(rate float64) int { return min(max(int(rate/10), 1), 100) }

// apiBurst is how many tokens a tenant's shared bucket holds: a second's
// worth, at least one.
func apiBurst(rate float64) float64 { return max(rate, 1) }

// AllowAPI counts one API request of tenant against its rate. A tenant
// without a rate costs a map lookup.
func (l *Limits) AllowAPI(ctx context.Context, tenant string) (APIDecision, error) {
	rate := l.For(tenant).APIRequestsPerSecond
	if rate <= 0 {
		return APIDecision{Allowed: true}, nil
	}
	v, _ := l.api.LoadOrStore(tenant, &apiShare{})
	s := v.(*apiShare) //nolint:forcetypeassert // only *apiShare is stored
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	d := APIDecision{Limited: true, Limit: rate}
	if s.tokens > 0 && now.Before(s.expires) {
		s.tokens--
		d.Allowed, d.Remaining = true, s.tokens+s.shared
		return d, nil
	}
	if now.Before(s.refusedUntil) {
		d.RetryAfter = s.refusedUntil.Sub(now)
		return d, nil
	}
	took, left, wait, err := l.takeAPIBudget(ctx, tenant, rate, apiChunk(rate))
	if err != nil {
		return APIDecision{}, err
	}
	if took == 0 {
		s.tokens, s.shared, s.refusedUntil = 0, 0, now.Add(wait)
		d.RetryAfter = wait
		return d, nil
	}
	s.tokens, s.shared, s.expires = took-1, int(left), now.Add(time.Second)
	d.Allowed, d.Remaining = true, s.tokens+s.shared
	return d, nil
}

// takeAPIBudget takes up to want requests from tenant's shared API
// budget, a token bucket of rate per second (apiBurst), in a transaction
// of its own. It returns how many it took, what the bucket held after the
// take and, when it took none, how long until the next one.
func (l *Limits) takeAPIBudget(ctx context.Context, tenant string, rate float64, want int) (took int, left float64,
	wait time.Duration, err error,
) {
	err = db.InTx(ctx, l.pool, func(tx db.Tx) error {
		b, err := db.LockAPIBudget(ctx, tx, tenant, apiBurst(rate))
		if err != nil {
			return err
		}
		took, left, wait = spend(b.Tokens, rate, apiBurst(rate), b.Now.Sub(b.RefilledAt), want)
		if took == 0 {
			// Unchanged but for the refill, which a later take computes
			// alike from the stored tokens.
			return nil
		}
		return db.SaveAPIBudget(ctx, tx, tenant, left)
	})
	return took, left, wait, errs.Store(err, "take API budget")
}

// spend takes up to want whole tokens from a bucket of size that held
// tokens elapsed ago, refilled at rate per second since: it returns how
// many it took, how many are left, and — when it took none — how long
// until the next token.
func spend(tokens, rate, size float64, elapsed time.Duration, want int) (took int, left float64, wait time.Duration) {
	avail := refill(tokens, rate, size, elapsed)
	took = max(min(want, int(math.Floor(avail))), 0)
	if took == 0 {
		return 0, avail, time.Duration((1 - avail) / rate * float64(time.Second))
	}
	return took, avail - float64(took), 0
}
