package jobs

import (
	"context"
	"slices"
	"sync"
	"time"
)

// sendSlots bounds the webhooks sent at once by one process in one lane,
// whether by DeliverWorker or DeliverBatchWorker jobs
// (RiverConfig.DeliverWorkers, BulkWorkers).
//
// The slots are shared fairly between tenants: while one is free it is
// taken at once (one mutex and a map update: the cost of a single
// tenant), and when every slot is busy the next one freed goes to the
// waiting tenant that holds the fewest, the longest waiter among that
// tenant's, instead of to whoever waited longest. So a tenant whose
// batches hold hundreds of deliveries waiting for a slow receiver takes
// turns with another tenant's on-time fire rather than making it wait for
// its whole backlog (docs/architecture.md, "Limits and fairness").
type sendSlots struct{ *slotPool }

type slotPool struct {
	mu   sync.Mutex
	free int
	held map[string]int // tenant → slots it holds
	// waiting: each tenant's waiters in arrival order, and the tenants
	// that have any, in the order they started waiting (ties in held go
	// to the earlier).
	waiting map[string][]*slotWaiter
	tenants []string
}

// slotWaiter is one delivery waiting for a slot; granted receives once
// the slot is its.
type slotWaiter struct {
	tenant  string
	granted chan struct{}
}

func newSendSlots(n int) sendSlots {
	return sendSlots{&slotPool{free: n, held: map[string]int{}, waiting: map[string][]*slotWaiter{}}}
}

// acquire takes a slot for a delivery of tenant, waiting up to wait (0:
// as long as ctx lasts). It reports whether it got one.
func (s sendSlots) acquire(ctx context.Context, tenant string, wait time.Duration) bool {
	p := s.slotPool
	p.mu.Lock()
	if p.free > 0 && len(p.tenants) == 0 {
		p.free--
		p.held[tenant]++
		p.mu.Unlock()
		return true
	}
	w := &slotWaiter{tenant: tenant, granted: make(chan struct{}, 1)}
	if len(p.waiting[tenant]) == 0 {
		p.tenants = append(p.tenants, tenant)
	}
	p.waiting[tenant] = append(p.waiting[tenant], w)
	p.mu.Unlock()

	var expired <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		expired = t.C
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
	s.release(tenant)
	return false
}

// dequeue removes w from the waiters, reporting whether it was still
// waiting (not granted). p.mu is held.
func (p *slotPool) dequeue(w *slotWaiter) bool {
	q := p.waiting[w.tenant]
	i := slices.Index(q, w)
	if i < 0 {
		return false
	}
	q = slices.Delete(q, i, i+1)
	if len(q) == 0 {
		delete(p.waiting, w.tenant)
		p.tenants = slices.DeleteFunc(p.tenants, func(t string) bool { return t == w.tenant })
	} else {
		p.waiting[w.tenant] = q
	}
	return true
}

// release gives back a slot of tenant's: to the waiting tenant holding
// the fewest, or to the pool when nobody waits.
func (s sendSlots) release(tenant string) {
	p := s.slotPool
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.held[tenant] - 1; n > 0 {
		p.held[tenant] = n
	} else {
		delete(p.held, tenant)
	}
	if len(p.tenants) == 0 {
		p.free++
		return
	}
	next := p.tenants[0]
	for _, t := range p.tenants[1:] {
		if p.held[t] < p.held[next] {
			next = t
		}
	}
	w := p.waiting[next][0]
	p.dequeue(w)
	p.held[next]++
	w.granted <- struct{}{}
}

// holder returns a function that releases a slot tenant acquired the
// first time it is called, and does nothing after: the slot goes back
// when the request is over, or when the caller ends without sending. It
// is for one goroutine.
func (s sendSlots) holder(tenant string) func() {
	held := true
	return func() {
		if held {
			held = false
			s.release(tenant)
		}
	}
}
