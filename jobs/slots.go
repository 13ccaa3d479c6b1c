package jobs

import (
	"context"
	"slices"
	"sync"
	"time"
)

// sendSlots bounds the webhooks sent at once by one process in one lane,
// whether by DeliverWorker or DeliverBatchWorker jobs
// (RiverConfig.DeliverWorkers, BulkWorkers), and shares them between
// tenants and endpoints (docs/limits.md, "Fairness").
//
// A lane has n slots, which anyone may take while one is free: a tenant
// alone gets the whole lane. When every slot is busy, the next one freed
// goes to the waiting tenant that holds the fewest (its longest waiter),
// not to whoever waited longest, so that a tenant with hundreds of
// deliveries waiting for a slow receiver takes turns with another's
// on-time fire.
//
// Turns are not enough when the slots are held by sends that will not
// end soon — an endpoint that accepts and never answers holds its slots
// until its timeout, and a send in flight cannot be taken back. So a lane
// also has a reserve, a quarter of n (slotReserveDiv), which only a
// delivery within its share may use: of a tenant holding less than
// RiverConfig.SlotShare of n (not counting what its endpoints hold beyond
// theirs), to an endpoint holding less than half of that. The reserve is
// only open while some tenant or endpoint holds more than its share, and
// no further than that excess: the lane sends more than n at once only
// against slots held beyond a share. So a tenant whose deliveries hang
// on one endpoint may fill the lane, but other tenants, and that tenant's
// other endpoints, still start at once.
//
// Each acquire and release is one mutex and a few map updates; the
// waiters are looked at only when there are some.
type sendSlots struct{ *slotPool }

// slotReserveDiv: a lane's reserve is its slots / slotReserveDiv
// (rounded up).
const slotReserveDiv = 4

// slotKey is whose a slot is: a delivery's tenant and the endpoint its job
// names ("" when the job names none: shared by tenant alone).
type slotKey struct{ tenant, endpoint string }

type slotPool struct {
	mu sync.Mutex
	// n slots, plus reserve for deliveries within their share;
	// tenantShare and endpointShare are those shares, in slots.
	n, reserve                 int
	tenantShare, endpointShare int
	used                       int // slots held
	// lent: the slots tenants and endpoints hold beyond their share, the
	// most the reserve lends (sum of tenantSlots.lent).
	lent      int
	tenants   map[string]*tenantSlots
	spare     []*tenantSlots // of tenants gone, for the next ones
	endpoints map[string]int // endpoint → slots held
	// waiting: the tenants that have waiters, in the order they started
	// waiting (ties in held go to the earlier).
	waiting []string
}

// tenantSlots is one tenant's part of a lane.
type tenantSlots struct {
	held int
	// over: slots held by its endpoints beyond endpointShare.
	over int
	// waiters, in arrival order; waitingTo counts them by endpoint, so
	// that a lane full of one endpoint's waiters finds in a look per
	// endpoint, not per waiter, that none of them may use the reserve.
	waiters   []*slotWaiter
	waitingTo map[string]int
}

// anyWithin reports whether some waiter of t is to an endpoint within
// its share (or to none), for the reserve: without one, dispatch need
// not look at t's waiters one by one.
func (t *tenantSlots) anyWithin(p *slotPool) bool {
	for endpoint := range t.waitingTo {
		if endpoint == "" || p.endpoints[endpoint] < p.endpointShare {
			return true
		}
	}
	return false
}

// lent is what the tenant holds beyond its share: its endpoints' excess,
// or its own, whichever is more.
func (t *tenantSlots) lent(share int) int { return max(t.over, t.held-share, 0) }

// slotWaiter is one delivery waiting for a slot; granted receives once
// the slot is its.
type slotWaiter struct {
	key     slotKey
	granted chan struct{}
}

// newSendSlots returns a lane of n send slots in which a tenant's share is
// sharePercent of them (SlotShareDefault when 0).
func newSendSlots(n, sharePercent int) sendSlots {
	if sharePercent <= 0 {
		sharePercent = SlotShareDefault
	}
	tenantShare := max((n*sharePercent+99)/100, 1)
	return sendSlots{&slotPool{
		n: n, reserve: (n + slotReserveDiv - 1) / slotReserveDiv,
		tenantShare: tenantShare, endpointShare: max((tenantShare+1)/2, 1),
		tenants: map[string]*tenantSlots{}, endpoints: map[string]int{},
	}}
}

// acquire takes a slot for a delivery of tenant to endpoint, waiting up to
// wait (0: as long as ctx lasts). It reports whether it got one.
func (s sendSlots) acquire(ctx context.Context, tenant, endpoint string, wait time.Duration) bool {
	p := s.slotPool
	k := slotKey{tenant, endpoint}
	p.mu.Lock()
	if len(p.waiting) == 0 && p.eligible(k) {
		p.take(k)
		p.mu.Unlock()
		return true
	}
	w := p.enqueue(k)
	p.dispatch()
	p.mu.Unlock()
	select {
	case <-w.granted: // its turn at once: before waiting waits
		return true
	default:
	}

	var expired <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-w.granted:
		return true
	case <-ctx.Done():
	case <-expired:
	}
	p.mu.Lock()
	if p.dequeue(w) {
		p.mu.Unlock()
		return false
	}
	p.mu.Unlock()
	// Granted while giving up: pass the slot on.
	<-w.granted
	s.release(tenant, endpoint)
	return false
}

// tryWithinShare takes a slot for a delivery of tenant to endpoint only
// if both are within their share and a slot (or one of the reserve) is
// free now; it never waits. It is for a delivery that must not hold its
// worker while it waits (DeliverWorker, to a slow endpoint).
func (s sendSlots) tryWithinShare(tenant, endpoint string) bool {
	p := s.slotPool
	k := slotKey{tenant, endpoint}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.within(k) || p.used >= p.n && !p.reserveOpen() {
		return false
	}
	p.take(k)
	return true
}

// release gives back a slot of tenant's to endpoint, and hands out what
// that frees to the waiters.
func (s sendSlots) release(tenant, endpoint string) {
	p := s.slotPool
	p.mu.Lock()
	defer p.mu.Unlock()
	p.give(slotKey{tenant, endpoint})
	p.dispatch()
}

// holder returns a function that releases a slot acquired for tenant and
// endpoint the first time it is called, and does nothing after: the slot
// goes back when the request is over, or when the caller ends without
// sending. It is for one goroutine.
func (s sendSlots) holder(tenant, endpoint string) func() {
	held := true
	return func() {
		if held {
			held = false
			s.release(tenant, endpoint)
		}
	}
}

// The methods below are called with p.mu held.

func (p *slotPool) tenant(name string) *tenantSlots {
	t := p.tenants[name]
	if t == nil {
		if n := len(p.spare); n > 0 {
			t, p.spare = p.spare[n-1], p.spare[:n-1]
		} else {
			t = &tenantSlots{}
		}
		p.tenants[name] = t
	}
	return t
}

// enqueue adds a waiter for a slot of k's at the end of its tenant's.
func (p *slotPool) enqueue(k slotKey) *slotWaiter {
	w := &slotWaiter{key: k, granted: make(chan struct{}, 1)}
	t := p.tenant(k.tenant)
	if len(t.waiters) == 0 {
		p.waiting = append(p.waiting, k.tenant)
	}
	t.waiters = append(t.waiters, w)
	if t.waitingTo == nil {
		t.waitingTo = map[string]int{}
	}
	t.waitingTo[k.endpoint]++
	return w
}

// forget drops tenant name's part once it holds and awaits nothing.
func (p *slotPool) forget(name string, t *tenantSlots) {
	if t.held == 0 && len(t.waiters) == 0 {
		delete(p.tenants, name)
		*t = tenantSlots{waiters: t.waiters[:0], waitingTo: t.waitingTo} // empty: kept for the next tenant
		p.spare = append(p.spare, t)
	}
}

// eligible reports whether a delivery of k may take a slot now: a free
// one, or one of the reserve while others hold slots beyond their share
// and k's tenant and endpoint are within theirs.
func (p *slotPool) eligible(k slotKey) bool {
	return p.used < p.n || p.reserveOpen() && p.within(k)
}

// reserveOpen reports whether a slot of the reserve is free: the lane
// lends no more of it than is held beyond a share.
func (p *slotPool) reserveOpen() bool { return p.used < p.n+min(p.reserve, p.lent) }

// within reports whether k's tenant and endpoint each hold less than
// their share (the tenant's not counting its endpoints' excess).
func (p *slotPool) within(k slotKey) bool {
	if t := p.tenants[k.tenant]; t != nil && t.held-t.over >= p.tenantShare {
		return false
	}
	return k.endpoint == "" || p.endpoints[k.endpoint] < p.endpointShare
}

// take gives k a slot.
func (p *slotPool) take(k slotKey) {
	t := p.tenant(k.tenant)
	before := t.lent(p.tenantShare)
	p.used++
	t.held++
	if k.endpoint != "" {
		held := p.endpoints[k.endpoint]
		if held >= p.endpointShare {
			t.over++
		}
		p.endpoints[k.endpoint] = held + 1
	}
	p.lent += t.lent(p.tenantShare) - before
}

// give takes back a slot of k's.
func (p *slotPool) give(k slotKey) {
	t := p.tenants[k.tenant]
	if t == nil || t.held == 0 {
		panic("jobs: a send slot released that was not held")
	}
	before := t.lent(p.tenantShare)
	p.used--
	t.held--
	if k.endpoint != "" {
		held := p.endpoints[k.endpoint] - 1
		if held >= p.endpointShare {
			t.over--
		}
		if held > 0 {
			p.endpoints[k.endpoint] = held
		} else {
			delete(p.endpoints, k.endpoint)
		}
	}
	p.lent += t.lent(p.tenantShare) - before
	p.forget(k.tenant, t)
}

// dispatch grants slots to waiters while one may take one: each time to
// the waiting tenant holding the fewest, its longest waiter that may.
func (p *slotPool) dispatch() {
	for len(p.waiting) > 0 {
		var (
			best    *tenantSlots
			bestAt  int
			bestIdx int
		)
		free := p.used < p.n
		reserve := !free && p.reserveOpen()
		for i, name := range p.waiting {
			t := p.tenants[name]
			switch {
			case best != nil && t.held >= best.held:
			case free:
				best, bestAt, bestIdx = t, i, 0
			case reserve && t.held-t.over < p.tenantShare && t.anyWithin(p):
				// Its first waiter to an endpoint within its share.
				if j := slices.IndexFunc(t.waiters, func(w *slotWaiter) bool { return p.eligible(w.key) }); j >= 0 {
					best, bestAt, bestIdx = t, i, j
				}
			}
		}
		if best == nil {
			return
		}
		w := best.waiters[bestIdx]
		p.remove(bestAt, best, bestIdx)
		p.take(w.key)
		w.granted <- struct{}{}
	}
}

// dequeue removes w from the waiters, reporting whether it was still
// waiting (not granted).
func (p *slotPool) dequeue(w *slotWaiter) bool {
	t := p.tenants[w.key.tenant]
	if t == nil {
		return false
	}
	j := slices.Index(t.waiters, w)
	if j < 0 {
		return false
	}
	p.remove(slices.Index(p.waiting, w.key.tenant), t, j)
	p.forget(w.key.tenant, t)
	return true
}

// remove takes waiter j of t, the tenant at p.waiting[at], off the queue.
func (p *slotPool) remove(at int, t *tenantSlots, j int) {
	if ep := t.waiters[j].key.endpoint; t.waitingTo[ep] > 1 {
		t.waitingTo[ep]--
	} else {
		delete(t.waitingTo, ep)
	}
	t.waiters = slices.Delete(t.waiters, j, j+1)
	if len(t.waiters) == 0 {
		p.waiting = slices.Delete(p.waiting, at, at+1)
	}
}
