package jobs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSendSlotsFairAcrossTenants: with every slot taken by tenant a and a
// queue of a's deliveries waiting, the next slot freed goes to tenant b's
// delivery that arrived after them; then a's wait their turn in order. A
// waiter that gives up leaves the queue, and a free slot is taken at once.
// (Without a reserve: turns alone.)
func TestSendSlotsFairAcrossTenants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newSendSlots(2, 0)
	s.reserve = 0
	require.True(t, s.acquire(ctx, "a", "", 0))
	require.True(t, s.acquire(ctx, "a", "", 0))

	got := make(chan string, 10)
	wait := func(tenant, name string) {
		go func() {
			if s.acquire(ctx, tenant, "", 0) {
				got <- name
			}
		}()
	}
	for i, name := range []string{"a1", "a2", "a3"} {
		wait("a", name)
		// One at a time, so that they wait in this order.
		require.Eventually(t, func() bool { return s.waiters("a") == i+1 }, 5*time.Second, time.Millisecond)
	}
	wait("b", "b1")
	require.Eventually(t, func() bool { return s.waiters("b") == 1 }, 5*time.Second, time.Millisecond)

	// A waiter that gives up leaves the queue.
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.False(t, s.acquire(short, "c", "", 0))
	require.Zero(t, s.waiters("c"))

	s.release("a", "")
	require.Equal(t, "b1", <-got, "b holds none: its delivery goes first")
	s.release("a", "")
	require.Equal(t, "a1", <-got)
	s.release("b", "")
	require.Equal(t, "a2", <-got)
	s.release("a", "")
	require.Equal(t, "a3", <-got)
	s.release("a", "")
	s.release("a", "")
	require.True(t, s.acquire(ctx, "z", "", time.Millisecond), "a free slot is taken at once")
}

// TestSendSlotsHungTenant: a lane of 8 slots (a tenant's share 4, an
// endpoint's 2, a reserve of 2). Tenant a alone takes all 8 for one
// endpoint whose sends hang: a lone tenant gets the whole lane. Its next
// delivery waits; but a's delivery to another endpoint, and then tenant
// b's, start at once on the reserve, past a's waiting one; once the
// reserve is used, the next waits. A slot b gives back is not a's: a's
// waiter gets one only once the lane is back under its 8.
func TestSendSlotsHungTenant(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newSendSlots(8, 50)
	now := func(tenant, endpoint string) bool { return s.acquire(ctx, tenant, endpoint, time.Nanosecond) }
	for range 8 {
		require.True(t, now("a", "hung"), "alone, a gets every slot")
	}
	require.False(t, now("a", "hung"), "a's ninth waits")

	got := make(chan string, 1)
	go func() {
		if s.acquire(ctx, "a", "hung", 0) {
			got <- "a-hung"
		}
	}()
	require.Eventually(t, func() bool { return s.waiters("a") == 1 }, 5*time.Second, time.Millisecond)
	require.True(t, now("a", "fast"), "a's other endpoint: the reserve, past a's waiting delivery")
	require.True(t, now("b", "b1"), "b: the reserve")
	require.False(t, now("c", "c1"), "the reserve is used up")
	require.Equal(t, 10, s.inUse())

	s.release("b", "b1")
	require.Equal(t, 1, s.waiters("a"), "a slot of the reserve: not for a")
	s.release("a", "hung")
	require.Equal(t, 1, s.waiters("a"), "the lane holds its 8")
	s.release("a", "hung")
	require.Equal(t, "a-hung", <-got, "under its 8: a's turn")
	require.Equal(t, 8, s.inUse())
	require.True(t, now("b", "b1"), "and b still has the reserve")
}

// TestSendSlotsEndpointWithinTenant: a lone tenant's endpoint past its
// share does not hold up the tenant's other endpoints (the reserve), but
// a tenant past its own share gets no reserve for any of its endpoints.
func TestSendSlotsEndpointWithinTenant(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newSendSlots(8, 50)
	now := func(tenant, endpoint string) bool { return s.acquire(ctx, tenant, endpoint, time.Nanosecond) }
	for i := range 8 {
		require.True(t, now("a", fmt.Sprintf("e%d", i%4)), "four endpoints of a, each within its share")
	}
	require.False(t, now("a", "e9"), "a holds its share through endpoints within theirs: no reserve")
	require.True(t, now("b", "b1"), "b: the reserve, lent against a's excess")
	require.Equal(t, 9, s.inUse())
}

// TestSendSlotsInvariants drives a lane with random acquires, releases
// and give-ups, and checks after each step, against a model of what is
// held: the lane never holds more than its slots and reserve, nor more
// than its slots plus what others hold beyond their shares; no waiter
// that could take a slot is left waiting; every waiter ends.
func TestSendSlotsInvariants(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 1 + rng.IntN(12)
		s := newSendSlots(n, 10+rng.IntN(91))
		type held struct{ tenant, endpoint string }
		var (
			mu    sync.Mutex
			holds []held
			wg    sync.WaitGroup
		)
		keys := []held{{"a", "a1"}, {"a", "a2"}, {"a", ""}, {"b", "b1"}, {"b", "b2"}, {"c", "c1"}}
		for step := range 300 {
			switch op := rng.IntN(3); {
			case op < 2: // acquire, maybe waiting, maybe giving up
				k := keys[rng.IntN(len(keys))]
				giveUp := time.Duration(1+rng.IntN(4)) * time.Millisecond
				wg.Go(func() {
					if s.acquire(t.Context(), k.tenant, k.endpoint, giveUp) {
						mu.Lock()
						holds = append(holds, k)
						mu.Unlock()
					}
				})
				if rng.IntN(2) == 0 {
					wg.Wait()
				}
			default:
				mu.Lock()
				if len(holds) > 0 {
					i := rng.IntN(len(holds))
					k := holds[i]
					holds = append(holds[:i], holds[i+1:]...)
					s.release(k.tenant, k.endpoint)
				}
				mu.Unlock()
			}
			mu.Lock()
			s.mu.Lock()
			require.LessOrEqual(t, s.used, s.n+s.reserve, "seed %d step %d", seed, step)
			require.LessOrEqual(t, s.used, max(s.n, s.n+min(s.reserve, s.lent)), "seed %d step %d", seed, step)
			require.GreaterOrEqual(t, s.used, len(holds))
			lent := 0
			for name, ts := range s.tenants {
				lent += ts.lent(s.tenantShare)
				byEndpoint := map[string]int{}
				for _, w := range ts.waiters {
					require.False(t, s.eligible(w.key), "seed %d step %d: %s waits for a slot it may take", seed, step, name)
					byEndpoint[w.key.endpoint]++
				}
				require.Equal(t, byEndpoint, nonNil(ts.waitingTo), "seed %d step %d: %s's waiters by endpoint", seed, step, name)
			}
			require.Equal(t, lent, s.lent)
			s.mu.Unlock()
			mu.Unlock()
		}
		wg.Wait()
		for _, k := range holds {
			s.release(k.tenant, k.endpoint)
		}
		require.Zero(t, s.inUse(), "seed %d", seed)
		require.Empty(t, s.tenants, "seed %d", seed)
		require.Empty(t, s.endpoints, "seed %d", seed)
		require.Zero(t, s.lent, "seed %d", seed)
	}
}

// BenchmarkSendSlots: a delivery's acquire and release of a free slot (the
// hot path), one goroutine and all at once, over 100 tenants with 10
// endpoints each.
func BenchmarkSendSlots(b *testing.B) {
	keys := make([][2]string, 1000)
	for i := range keys {
		keys[i] = [2]string{fmt.Sprintf("tenant-%d", i/10), fmt.Sprintf("endpoint-%d", i)}
	}
	b.Run("serial", func(b *testing.B) {
		s := newSendSlots(400, 0)
		ctx := b.Context()
		i := 0
		for b.Loop() {
			k := keys[i%len(keys)]
			i++
			s.acquire(ctx, k[0], k[1], time.Second)
			s.release(k[0], k[1])
		}
	})
	b.Run("parallel", func(b *testing.B) {
		s := newSendSlots(400, 0)
		ctx := b.Context()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(len(keys))
			for pb.Next() {
				k := keys[i%len(keys)]
				i++
				if s.acquire(ctx, k[0], k[1], time.Second) {
					s.release(k[0], k[1])
				}
			}
		})
	})
}

// BenchmarkSendSlotsBacklog: a slot given back while a lane is full and
// 1,600 deliveries to its one endpoint wait (a backlog: four batches' worth
// of members per slot), the slot going to the first waiter, who queues
// again once served. The reserve is open (the endpoint holds more than
// its share) but none of the waiters may use it.
func BenchmarkSendSlotsBacklog(b *testing.B) {
	s := newSendSlots(400, 0)
	ctx := b.Context()
	for range 400 {
		require.True(b, s.acquire(ctx, "a", "e", 0))
	}
	k := slotKey{"a", "e"}
	queue := func() *slotWaiter {
		s.mu.Lock()
		defer s.mu.Unlock()
		w := s.enqueue(k)
		s.dispatch()
		return w
	}
	ws := make([]*slotWaiter, 0, 1600)
	for range 1600 {
		ws = append(ws, queue())
	}
	for b.Loop() {
		s.release("a", "e")
		<-ws[0].granted
		ws = append(ws[1:], queue())
	}
}

// nonNil is m, or an empty map for nil.
func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

// waiters counts tenant's deliveries waiting for a slot.
func (s sendSlots) waiters(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tenants[tenant]; t != nil {
		return len(t.waiters)
	}
	return 0
}

// inUse counts the slots held.
func (s sendSlots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
