// Package lane picks the deliver queue (lane) of a fire's job (Picker;
// docs/architecture.md, "Limits and fairness"), from what this process
// learns of the endpoints' latencies.
package lane

import (
	"sync"
	"sync/atomic"
	"time"
)

// Picker defaults. See Picker.
const (
	// BurstPerSecondDefault: a tenant with this many fires whose slots
	// fall in the same second, in one scheduler pass, has a burst.
	BurstPerSecondDefault = 500
	// SlowLatencyDefault: an endpoint whose recent attempts average this
	// long, or whose attempts in flight have been so on average, is slow.
	SlowLatencyDefault = 500 * time.Millisecond
)

// Picker decides which deliver queue (lane) a fire's job goes to: the
// bulk lane for a tenant's burst and for slow endpoints, the main lane
// for everything else. It learns endpoints' latencies from the attempts
// this process makes (Sending): those that finished, and those still in
// flight, so that an endpoint that stops answering is slow from the
// moment its attempts have waited SlowLatency, not only once they time
// out. A nil *Picker puts everything in the main lane.
type Picker struct {
	// BurstPerSecond and SlowLatency: zero takes the defaults.
	BurstPerSecond int
	SlowLatency    time.Duration

	endpoints sync.Map // endpoint id → *endpointLatency
}

// endpointLatency is what Picker knows of one endpoint's attempts. Only
// atomics: every attempt of every delivery updates one, so there is no
// lock to share.
type endpointLatency struct {
	// avg: the finished attempts' latency, an exponentially weighted
	// average over about the last five (ns); -1 until the first.
	avg atomic.Int64
	// inflight and started: the attempts in flight, and the sum of their
	// start times (µs after since), whence their mean age (inflightAge).
	inflight atomic.Int64
	started  atomic.Int64
	since    time.Time // fixed at creation; monotonic
}

// Sending is one attempt in flight to an endpoint (Picker.Sending).
type Sending struct {
	e     *endpointLatency
	start int64 // µs after e.since
}

// Sending records that an attempt to endpoint starts now; call Done with
// its latency when it is over. It costs a map lookup and two atomic
// additions, as Done does.
func (l *Picker) Sending(endpoint string) Sending {
	if l == nil || endpoint == "" {
		return Sending{}
	}
	e := l.endpoint(endpoint)
	start := time.Since(e.since).Microseconds()
	e.started.Add(start)
	e.inflight.Add(1)
	return Sending{e: e, start: start}
}

// Done records the attempt's end and its latency d.
func (s Sending) Done(d time.Duration) {
	if s.e == nil {
		return
	}
	s.e.inflight.Add(-1)
	s.e.started.Add(-s.start)
	s.e.observe(d)
}

// Observe records the latency of a finished attempt to endpoint (as
// Sending then Done does).
func (l *Picker) Observe(endpoint string, d time.Duration) {
	if l == nil || endpoint == "" {
		return
	}
	l.endpoint(endpoint).observe(d)
}

func (l *Picker) endpoint(id string) *endpointLatency {
	if v, ok := l.endpoints.Load(id); ok {
		return v.(*endpointLatency) //nolint:forcetypeassert // only *endpointLatency is stored
	}
	e := &endpointLatency{since: time.Now()}
	e.avg.Store(-1)
	v, _ := l.endpoints.LoadOrStore(id, e)
	return v.(*endpointLatency) //nolint:forcetypeassert // as above
}

func (e *endpointLatency) observe(d time.Duration) {
	for {
		old := e.avg.Load()
		next := int64(d)
		if old >= 0 {
			next = old + (int64(d)-old)/5
		}
		if e.avg.CompareAndSwap(old, next) {
			return
		}
	}
}

// inflightAge is the mean age of the attempts in flight; false when there
// are none, or when one started or ended while it was read.
func (e *endpointLatency) inflightAge() (time.Duration, bool) {
	n := e.inflight.Load()
	sum := e.started.Load()
	if n <= 0 || e.inflight.Load() != n {
		return 0, false
	}
	return time.Since(e.since) - time.Duration(sum/n)*time.Microsecond, true
}

// Slow reports whether endpoint is slow: its recent attempts took
// SlowLatency on average, or those in flight have been in flight that
// long on average.
func (l *Picker) Slow(endpoint string) bool {
	if l == nil {
		return false
	}
	v, ok := l.endpoints.Load(endpoint)
	if !ok {
		return false
	}
	e := v.(*endpointLatency) //nolint:forcetypeassert // only *endpointLatency is stored
	slow := l.slowLatency()
	if time.Duration(e.avg.Load()) >= slow {
		return true
	}
	age, ok := e.inflightAge()
	return ok && age >= slow
}

func (l *Picker) slowLatency() time.Duration {
	if l.SlowLatency > 0 {
		return l.SlowLatency
	}
	return SlowLatencyDefault
}

func (l *Picker) burstPerSecond() int {
	if l.BurstPerSecond > 0 {
		return l.BurstPerSecond
	}
	return BurstPerSecondDefault
}

// Fire is what Assign knows of a fired execution.
type Fire struct {
	Tenant   string
	Slot     time.Time
	Endpoint string
}

// Assign decides the lanes of n fires, fire(i) being the i-th: bulk(i,
// true) puts fire i in the bulk lane — the fires of a tenant with a burst
// (BurstPerSecond fires or more in one second of slots among them) and
// those to a slow endpoint — and bulk(i, false) in the main lane. A nil
// *Picker calls neither.
func (l *Picker) Assign(n int, fire func(i int) Fire, bulk func(i int, bulk bool)) {
	if l == nil {
		return
	}
	type key struct {
		tenant string
		second int64
	}
	counts := make(map[key]int)
	for i := range n {
		f := fire(i)
		counts[key{f.Tenant, f.Slot.Unix()}]++
	}
	limit := l.burstPerSecond()
	for i := range n {
		f := fire(i)
		bulk(i, counts[key{f.Tenant, f.Slot.Unix()}] >= limit || l.Slow(f.Endpoint))
	}
}
