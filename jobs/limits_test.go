package jobs

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/limits"
	"github.com/axhq/ax/service/metrics"
)

// gauge is a receiver that counts the requests in flight to it, keeps
// the most it saw, and the order and times requests arrived in.
type gauge struct {
	mu       sync.Mutex
	inflight int
	most     int
	arrivals []string // the webhook-id header: the execution's id
	at       []time.Time
	delay    time.Duration
}

func newGauge(t *testing.T, delay time.Duration) (*gauge, string) {
	t.Helper()
	g := &gauge{delay: delay}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.inflight++
		g.most = max(g.most, g.inflight)
		g.arrivals = append(g.arrivals, r.Header.Get("webhook-id"))
		g.at = append(g.at, time.Now())
		g.mu.Unlock()
		time.Sleep(g.delay)
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return g, srv.URL
}

func (g *gauge) snapshot() (most int, arrivals []string, at []time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most, append([]string(nil), g.arrivals...), append([]time.Time(nil), g.at...)
}

// limitedHarness is a harness whose deliveries pass the tenants' and
// endpoints' limits, with the dispatcher running; replicas more River
// clients, each with Deliveries and a Limits (dispatcher) of its own, on
// the same database.
func limitedHarness(t *testing.T, replicas int) (*harness, []*service.Limits) {
	t.Helper()
	return limitedHarnessOpts(t, replicas, harnessOpts{})
}

// limitedHarnessOpts is limitedHarness with opts (NoStart is implied).
func limitedHarnessOpts(t *testing.T, replicas int, opts harnessOpts) (*harness, []*service.Limits) {
	t.Helper()
	opts.NoStart = true
	h := newHarness(t, opts)
	var all []*service.Limits
	for i := range replicas {
		l := service.NewLimits(h.pool, service.LimitsConfig{Refresh: 100 * time.Millisecond, PermitTTL: time.Minute})
		require.NoError(t, l.Refresh(t.Context()))
		startLoops(t, LimitsLoops(l)...)
		deps := h.deps
		deps.Deliveries = service.NewDeliveries(h.pool, h.enq, service.DeliveriesConfig{Limits: l, Rand: func() float64 { return 1 }})
		deps.Metrics = metrics.New(nil)
		c, err := NewRiverClient(h.enq, h.river, deps)
		require.NoError(t, err)
		if i == 0 {
			h.client, h.deliveries, h.deps = c, deps.Deliveries, deps
		}
		h.start(c)
		all = append(all, l)
	}
	return h, all
}

// TestEndpointMaxConcurrencyAcrossReplicas: an endpoint with
// max_concurrency 3 never sees more than 3 requests at once from two
// replicas; every delivery still succeeds with one attempt, and each one
// held back has exactly one throttled event naming the limit.
func TestEndpointMaxConcurrencyAcrossReplicas(t *testing.T) {
	t.Parallel()
	h, _ := limitedHarness(t, 2)
	g, url := newGauge(t, 100*time.Millisecond)
	ep := h.endpoint(url, func(in *service.EndpointInput) { in.MaxConcurrency = ref(3) })
	// Held past the misfire threshold, a fire is a misfire (as a Quartz
	// trigger that found no free thread): fire_all lets every held one
	// through, however slow a loaded machine makes the wait.
	task := h.task(ep.ID, func(in *service.TaskInput) { in.MisfirePolicy = service.MisfireFireAll })
	ids := make([]string, 30)
	base := time.Now().Add(-time.Second).UTC()
	for i := range ids {
		ids[i] = h.fire(task, fireOpts{ScheduledFor: base.Add(time.Duration(i) * time.Millisecond)})
	}
	held := 0
	for _, id := range ids {
		e := h.waitState(id, service.ExecSucceeded)
		require.Equal(t, 1, e.Attempts, "a held delivery costs no attempt")
		throttled := 0
		for _, ev := range h.events(id) {
			if ev.Type == service.EventThrottled {
				throttled++
				require.Equal(t, limits.MaxConcurrency, ev.Data["limit"])
				require.Equal(t, ep.ID, ev.Data["endpoint_id"])
			}
		}
		require.LessOrEqual(t, throttled, 1, "one throttled event per held attempt")
		held += throttled
	}
	most, arrivals, _ := g.snapshot()
	require.Len(t, arrivals, len(ids))
	require.LessOrEqual(t, most, 3, "max_concurrency holds across replicas")
	require.Positive(t, held, "30 deliveries at once to a limit of 3 hold some back")
	// A permit is given back once its attempt's outcome is recorded, just
	// after the execution's state changes.
	require.Eventually(t, func() bool {
		n, err := db.GateInflight(t.Context(), h.pool, h.tenant, limits.EndpointGate(ep.ID))
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "every permit was given back")
}

// TestWokenDeliveryStartsBeforeThePoll: a held delivery granted its permit
// starts as soon as River can fetch it, not at the deliver queue's next
// poll: behind max_concurrency 1 every hand-off would otherwise wait for
// the poll, and an endpoint's throughput would fall short of its limit
// (the maxconc benchmark: 84 % of max_concurrency / response time with
// the 50 ms poll). Here the poll is 5 s: without a wake-up each hand-off
// waits 0–5 s (one in five under 1 s); with it, a hand-off takes the
// dispatcher's pass and a fetch. The first hand-off after the burst
// sometimes still waits for the poll (3 of about 20 runs; why is not
// known yet), so most, not all, must be quick.
func TestWokenDeliveryStartsBeforeThePoll(t *testing.T) {
	t.Parallel()
	h, _ := limitedHarnessOpts(t, 1, harnessOpts{River: RiverConfig{FetchPollInterval: 5 * time.Second}})
	g, url := newGauge(t, 100*time.Millisecond)
	ep := h.endpoint(url, func(in *service.EndpointInput) { in.MaxConcurrency = ref(1) })
	task := h.task(ep.ID, func(in *service.TaskInput) { in.MisfirePolicy = service.MisfireFireAll })
	// River's producers subscribe to their queues' notifications shortly
	// after the client starts; one sent before is lost (a running server
	// is long past that).
	time.Sleep(time.Second)
	const n = 8
	var ids []string
	for range n {
		ids = append(ids, h.fire(task, fireOpts{}))
	}
	for _, id := range ids {
		h.waitState(id, service.ExecSucceeded)
	}
	most, _, at := g.snapshot()
	require.Len(t, at, n)
	require.Equal(t, 1, most)
	slices.SortFunc(at, time.Time.Compare)
	quick := 0
	var gaps []string
	for i := 1; i < n; i++ {
		gap := at[i].Sub(at[i-1])
		gaps = append(gaps, gap.Round(time.Millisecond).String())
		if gap < time.Second {
			quick++
		}
	}
	require.GreaterOrEqual(t, quick, n-3, "hand-offs (request to request, 100 ms responses): %v", gaps)
}

// TestHeldDeliveriesStartInOrder: behind max_concurrency 1, held
// deliveries start in priority order, then by slot.
func TestHeldDeliveriesStartInOrder(t *testing.T) {
	t.Parallel()
	h, _ := limitedHarness(t, 1)
	g, url := newGauge(t, 700*time.Millisecond)
	ep := h.endpoint(url, func(in *service.EndpointInput) { in.MaxConcurrency = ref(1) })
	low := h.task(ep.ID, func(in *service.TaskInput) { in.Priority = 4 })
	high := h.task(ep.ID, func(in *service.TaskInput) { in.Priority = 1 })
	base := time.Now().Add(-time.Minute).UTC()
	var lows []string
	for i := range 6 {
		lows = append(lows, h.fire(low, fireOpts{ScheduledFor: base.Add(time.Duration(i) * time.Second), Trigger: service.TriggerManual}))
	}
	// Once the first is in flight and the rest held, a later fire of a
	// higher priority task goes ahead of them.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var n int
		assert.NoError(c, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM flow_holds WHERE tenant_id = $1`, h.tenant).Scan(&n))
		_, arrived, _ := g.snapshot()
		assert.Equal(c, 5, n, "held")
		assert.Len(c, arrived, 1, "in flight")
	}, 20*time.Second, 5*time.Millisecond, "the first in flight, the other five held")
	urgent := h.fire(high, fireOpts{ScheduledFor: base.Add(30 * time.Second), Trigger: service.TriggerManual})
	for _, id := range append(lows, urgent) {
		h.waitState(id, service.ExecSucceeded)
	}
	most, arrivals, _ := g.snapshot()
	require.Equal(t, 1, most)
	// The first to reach the free gate goes (the six were picked up at
	// once); the held ones start in order.
	require.Contains(t, lows, arrivals[0])
	require.Equal(t, urgent, arrivals[1], "priority 1 starts before the held priority 4 fires")
	var rest []string
	for _, id := range lows {
		if id != arrivals[0] {
			rest = append(rest, id)
		}
	}
	require.Equal(t, rest, arrivals[2:], "the others by slot")
}

// TestEndpointRateLimit: rate_limit_per_second 10 spreads 30 deliveries
// over about 3 s: no second holds more than the rate and its small burst.
func TestEndpointRateLimit(t *testing.T) {
	t.Parallel()
	h, _ := limitedHarness(t, 2)
	g, url := newGauge(t, 0)
	ep := h.endpoint(url, func(in *service.EndpointInput) { in.RateLimitPerSecond = ref(10.0) })
	task := h.task(ep.ID, nil)
	var ids []string
	for range 30 {
		ids = append(ids, h.fire(task, fireOpts{}))
	}
	for _, id := range ids {
		require.Equal(t, 1, h.waitState(id, service.ExecSucceeded).Attempts)
	}
	_, _, at := g.snapshot()
	require.Len(t, at, 30)
	first, last := at[0], at[0]
	for _, a := range at {
		if a.Before(first) {
			first = a
		}
		if a.After(last) {
			last = a
		}
	}
	// 30 at 10/s with a bucket of 1: the last starts about 2.9 s after
	// the first (never sooner than the rate allows; later on a slow
	// machine is fine).
	require.GreaterOrEqual(t, last.Sub(first), 2500*time.Millisecond, "the rate spreads the burst")
	for _, a := range at {
		n := 0
		for _, b := range at {
			if !b.Before(a) && b.Sub(a) < time.Second {
				n++
			}
		}
		// The rate's 10 per second, plus the bucket and a delivery
		// picked up late next to one on time.
		require.LessOrEqual(t, n, 12, "requests within a second of %s", a)
	}
}

// TestTenantMaxInflight: a tenant's max_inflight_deliveries holds across
// its endpoints, and another tenant is not held by it.
func TestTenantMaxInflight(t *testing.T) {
	t.Parallel()
	h, ls := limitedHarness(t, 2)
	g, url := newGauge(t, 100*time.Millisecond)
	_, err := ls[0].Set(t.Context(), h.tenant, service.TenantLimits{MaxInflightDeliveries: ref(2)})
	require.NoError(t, err)
	require.NoError(t, ls[1].Refresh(t.Context()))
	a, b := h.task(h.endpoint(url, nil).ID, nil), h.task(h.endpoint(url, nil).ID, nil)
	var ids []string
	for i := range 16 {
		task := a
		if i%2 == 1 {
			task = b
		}
		ids = append(ids, h.fire(task, fireOpts{}))
	}
	for _, id := range ids {
		require.Equal(t, 1, h.waitState(id, service.ExecSucceeded).Attempts)
	}
	most, _, _ := g.snapshot()
	require.LessOrEqual(t, most, 2, "the tenant's limit holds across its endpoints and replicas")
	var limit string
	for _, id := range ids {
		for _, ev := range h.events(id) {
			if ev.Type == service.EventThrottled {
				limit, _ = ev.Data["limit"].(string)
			}
		}
	}
	require.Equal(t, limits.MaxInflightDeliveries, limit)
}

func ref[T any](v T) *T { return &v }

// TestBulkLaneIsolation: a burst to a slow endpoint in the bulk lane
// takes none of the main lane's workers or send slots: another tenant's
// fires in the main lane are sent at once while the burst drains.
func TestBulkLaneIsolation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{River: RiverConfig{DeliverWorkers: 4, BulkWorkers: 4}})
	slow, slowURL := newGauge(t, 500*time.Millisecond)
	fast, fastURL := newGauge(t, 0)
	burst := h.task(h.endpoint(slowURL, nil).ID, nil)
	var bulk []string
	for range 24 {
		bulk = append(bulk, h.fire(burst, fireOpts{Queue: service.QueueDeliverBulk, Trigger: service.TriggerManual}))
	}
	// The burst fills its lane: 4 at a time for 3 s.
	require.Eventually(t, func() bool { m, _, _ := slow.snapshot(); return m == 4 }, 20*time.Second, 5*time.Millisecond)
	onTime := h.task(h.endpoint(fastURL, nil).ID, nil)
	start := time.Now()
	var mine []string
	for range 4 {
		mine = append(mine, h.fire(onTime, fireOpts{Trigger: service.TriggerManual}))
	}
	for _, id := range mine {
		h.waitState(id, service.ExecSucceeded)
	}
	tookMain := time.Since(start)
	_, burstArrivals, _ := slow.snapshot()
	require.Less(t, len(burstArrivals), len(bulk), "the main lane's fires did not wait for the burst (%s)", tookMain)
	for _, id := range bulk {
		h.waitState(id, service.ExecSucceeded)
	}
	most, _, _ := slow.snapshot()
	require.LessOrEqual(t, most, 4, "the bulk lane's own workers")
	_, arrivals, _ := fast.snapshot()
	require.Len(t, arrivals, 4)
}
