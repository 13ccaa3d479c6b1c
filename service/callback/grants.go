package callback

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/axhq/ax/db"
)

// Grants keeps what the callback tokens a replica handed out (Prepare)
// or looked up grant, so that a heartbeat or a completion does not read
// its token's row before anything else: at thousands of completions a
// second, that read was a statement and a transaction per request.
//
// A kept grant may be stale: the token's row replaced by the attempt's
// new token (the attempt sent again, maybe by another replica) or gone
// with its execution. It then names the attempt the token was given for,
// and the token is no longer valid. So a kept grant is never the last
// word: the acts check the token's hash against the attempt's row where
// they lock it (Current; the batched completion's CompletesWithoutDecision),
// and a request authorised by a kept grant that fails is checked against
// the database before its answer, so that an invalid token gets the
// answer it always got.
type Grants struct {
	mu      sync.Mutex
	max     int
	byHash  map[[sha256.Size]byte]kept
	swept   time.Time // the last sweep of the expired
	nowFunc func() time.Time
}

type kept struct {
	grant Grant
	until time.Time // past the attempt's deadline, no act can succeed
}

// GrantsMax bounds the grants a replica keeps (about 200 bytes each):
// beyond it, a token is looked up in the database as before.
const GrantsMax = 65_536

// NewGrants returns an empty Grants of at most limit grants (0:
// GrantsMax).
func NewGrants(limit int) *Grants {
	if limit <= 0 {
		limit = GrantsMax
	}
	return &Grants{max: limit, byHash: map[[sha256.Size]byte]kept{}, nowFunc: time.Now}
}

// Prepare is the package's Prepare, keeping the grant of the token it
// returns until the attempt's deadline.
func (g *Grants) Prepare(ctx context.Context, q db.Querier, tenant, executionID string, attempt, lease int, spec Spec) (string, error) {
	token, err := Prepare(ctx, q, tenant, executionID, attempt, lease, spec)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(token))
	g.keep(h, Grant{TenantID: tenant, ExecutionID: executionID, Attempt: attempt, TokenHash: h[:]}, g.nowFunc().Add(spec.Timeout))
	return token, nil
}

// Kept returns the grant kept for token (Grant.Kept), if any: ok false,
// the token is to be looked up (GrantsOf) and what was found kept
// (Learn).
func (g *Grants) Kept(token string) (Grant, bool) {
	if !WellFormed(token) {
		return Grant{}, false
	}
	h := sha256.Sum256([]byte(token))
	g.mu.Lock()
	defer g.mu.Unlock()
	k, ok := g.byHash[h]
	if !ok {
		return Grant{}, false
	}
	if !g.nowFunc().Before(k.until) {
		delete(g.byHash, h)
		return Grant{}, false
	}
	grant := k.grant
	grant.Kept = true
	return grant, true
}

// Learn keeps what a lookup of token found while the grant may act, and
// forgets the token otherwise (an invalid token, an attempt over).
func (g *Grants) Learn(token string, l Looked) {
	if !WellFormed(token) {
		return
	}
	h := sha256.Sum256([]byte(token))
	if l.Err != nil || l.Until.IsZero() {
		g.forget(h)
		return
	}
	g.keep(h, l.Grant, l.Until)
}

// Forget drops grant's token once its attempt is over: none of its acts
// can succeed any more, and the database gives every later request its
// answer.
func (g *Grants) Forget(grant *Grant) {
	if grant != nil && len(grant.TokenHash) == sha256.Size {
		g.forget([sha256.Size]byte(grant.TokenHash))
	}
}

func (g *Grants) forget(h [sha256.Size]byte) {
	g.mu.Lock()
	delete(g.byHash, h)
	g.mu.Unlock()
}

// keep keeps grant until until; when full, it first drops the expired
// (at most once a second), then keeps nothing more.
func (g *Grants) keep(h [sha256.Size]byte, grant Grant, until time.Time) {
	grant.Kept = false
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.byHash[h]; !ok && len(g.byHash) >= g.max {
		now := g.nowFunc()
		if now.Sub(g.swept) >= time.Second {
			g.swept = now
			for k, v := range g.byHash {
				if !now.Before(v.until) {
					delete(g.byHash, k)
				}
			}
		}
		if len(g.byHash) >= g.max {
			return
		}
	}
	g.byHash[h] = kept{grant: grant, until: until}
}

// Len is how many grants are kept.
func (g *Grants) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.byHash)
}
