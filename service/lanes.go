package service

import (
	"sync"
	"sync/atomic"
	"time"
)

// QueueDeliverBulk is the deliver queue's bulk lane: fires of a tenant's
// burst and fires to slow endpoints. It has its own River workers and send
// slots, so that neither can take the workers of everyone else's on-time
// fires (docs/architecture.md, "Limits and fairness").
const QueueDeliverBulk = "deliver_bulk"

// QueueDeliverBulkBatch carries the bulk lane's batches, bounded like the
// main lane's (DeliverBatchWorkers of the bulk lane's send slots), so that
// one replica does not take a whole burst it cannot start soon.
const QueueDeliverBulkBatch = "deliver_bulk_batch"

// Lanes defaults. See Lanes.
const (
	// BurstPerSecondDefault: a tenant with this many fires whose slots
	// fall in the same second, in one scheduler pass, has a burst.
	BurstPerSecondDefault = 500
	// SlowLatencyDefault: an endpoint whose recent attempts average this
	// long is slow.
	SlowLatencyDefault = 500 * time.Millisecond
)

// Lanes decides which deliver queue (lane) a fire's job goes to: the
// bulk lane for a tenant's burst and for slow endpoints, the main lane
// for everything else. It learns endpoints' latencies from the attempts
// this process makes (Observe); a nil *Lanes puts everything in the main
// lane.
type Lanes struct {
	// BurstPerSecond and SlowLatency: zero takes the defaults.
	BurstPerSecond int
	SlowLatency    time.Duration

	latency sync.Map // endpoint id → *atomic.Int64 (EWMA, ns)
}

// Observe records the latency of an attempt to endpoint (an exponentially
// weighted average over about the last five attempts). It costs a map
// lookup and an atomic update.
func (l *Lanes) Observe(endpoint string, d time.Duration) {
	if l == nil || endpoint == "" {
		return
	}
	v, ok := l.latency.Load(endpoint)
	if !ok {
		n := new(atomic.Int64)
		n.Store(int64(d))
		if v, ok = l.latency.LoadOrStore(endpoint, n); !ok {
			return
		}
	}
	avg := v.(*atomic.Int64) //nolint:forcetypeassert // only *atomic.Int64 is stored
	for {
		old := avg.Load()
		if avg.CompareAndSwap(old, old+(int64(d)-old)/5) {
			return
		}
	}
}

// Slow reports whether endpoint's recent attempts were slow.
func (l *Lanes) Slow(endpoint string) bool {
	if l == nil {
		return false
	}
	v, ok := l.latency.Load(endpoint)
	return ok && time.Duration(v.(*atomic.Int64).Load()) >= l.slowLatency() //nolint:forcetypeassert // as above
}

func (l *Lanes) slowLatency() time.Duration {
	if l.SlowLatency > 0 {
		return l.SlowLatency
	}
	return SlowLatencyDefault
}

func (l *Lanes) burstPerSecond() int {
	if l.BurstPerSecond > 0 {
		return l.BurstPerSecond
	}
	return BurstPerSecondDefault
}

// assign sets the Bulk lane of fired executions: those of a tenant with a
// burst (BurstPerSecond fires or more in one second of slots among them)
// and those to a slow endpoint.
func (l *Lanes) assign(fired []firedExecution) {
	if l == nil {
		return
	}
	type key struct {
		tenant string
		second int64
	}
	counts := make(map[key]int)
	for _, f := range fired {
		counts[key{f.TenantID, f.ScheduledFor.Unix()}]++
	}
	limit := l.burstPerSecond()
	for i, f := range fired {
		fired[i].Bulk = counts[key{f.TenantID, f.ScheduledFor.Unix()}] >= limit || l.Slow(f.EndpointID)
	}
}
