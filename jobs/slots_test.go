package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSendSlotsFairAcrossTenants: with every slot taken by tenant a and a
// queue of a's deliveries waiting, the next slot freed goes to tenant b's
// delivery that arrived after them; then a's wait their turn in order. A
// waiter that gives up leaves the queue, and a free slot is taken at once.
func TestSendSlotsFairAcrossTenants(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newSendSlots(2)
	require.True(t, s.acquire(ctx, "a", 0))
	require.True(t, s.acquire(ctx, "a", 0))

	got := make(chan string, 10)
	wait := func(tenant, name string) {
		go func() {
			if s.acquire(ctx, tenant, 0) {
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
	require.False(t, s.acquire(short, "c", 0))
	require.Zero(t, s.waiters("c"))

	s.release("a")
	require.Equal(t, "b1", <-got, "b holds none: its delivery goes first")
	s.release("a")
	require.Equal(t, "a1", <-got)
	s.release("b")
	require.Equal(t, "a2", <-got)
	s.release("a")
	require.Equal(t, "a3", <-got)
	s.release("a")
	s.release("a")
	require.True(t, s.acquire(ctx, "z", time.Millisecond), "a free slot is taken at once")
}

// waiters counts tenant's deliveries waiting for a slot.
func (s sendSlots) waiters(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting[tenant])
}
