package batch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pendingLen is the number of calls waiting for a flusher.
func (b *Batcher[Req, Res]) pendingLen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

func TestBatcherGroupsConcurrentCalls(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	b := New(50, 1, func(_ context.Context, reqs []int) ([]int, error) {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		if first {
			<-gate // hold the first statement until the others queue up
		}
		out := make([]int, len(reqs))
		for i, r := range reqs {
			out[i] = r * 2
		}
		return out, nil
	})
	ctx := context.Background()
	results := make([]int, 121)
	var wg sync.WaitGroup
	wg.Go(func() {
		r, err := b.Do(ctx, 0)
		assert.NoError(t, err)
		results[0] = r
	})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 }, 5*time.Second, time.Millisecond)
	for i := 1; i <= 120; i++ {
		wg.Go(func() {
			r, err := b.Do(ctx, i)
			assert.NoError(t, err)
			results[i] = r
		})
	}
	require.Eventually(t, func() bool { return b.pendingLen() == 120 }, 5*time.Second, time.Millisecond)
	close(gate)
	wg.Wait()
	for i, r := range results {
		require.Equal(t, 2*i, r, "call %d got another call's result", i)
	}
	// One flusher: the first call alone, then the 120 waiting ones in
	// batches of at most 50.
	require.Equal(t, []int{1, 50, 50, 20}, sizes)
	require.Zero(t, b.pendingLen())
	b.mu.Lock()
	require.Zero(t, b.flushers, "the flusher gave its slot back")
	b.mu.Unlock()
}

func TestBatcherFailuresReachEveryCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	failing := New(10, 2, func(context.Context, []int) ([]int, error) { return nil, boom })
	_, err := failing.Do(ctx, 1)
	require.ErrorIs(t, err, boom)

	panicking := New(10, 2, func(context.Context, []int) ([]int, error) { panic("bad") })
	_, err = panicking.Do(ctx, 1)
	require.ErrorContains(t, err, "panicked: bad")

	short := New(10, 2, func(context.Context, []int) ([]int, error) { return []int{}, nil })
	_, err = short.Do(ctx, 1)
	require.ErrorContains(t, err, "0 results for 1 requests")
	for _, b := range []*Batcher[int, int]{failing, panicking, short} {
		require.Zero(t, b.pendingLen())
	}
}

// A caller whose context ends still learns the outcome of the statement
// that carried it, which runs without that cancellation.
func TestBatcherOutlivesTheCallersContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	b := New(10, 1, func(rctx context.Context, reqs []int) ([]int, error) {
		cancel()
		time.Sleep(10 * time.Millisecond)
		if rctx.Err() != nil {
			return nil, rctx.Err()
		}
		_, hasDeadline := rctx.Deadline()
		require.True(t, hasDeadline, "a batch is bounded by timeout")
		return reqs, nil
	})
	r, err := b.Do(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, 7, r)
}

// A flusher whose own call is done hands the role on instead of running
// other callers' statements indefinitely.
func TestBatcherFlusherLeavesOnceItsCallIsDone(t *testing.T) {
	t.Parallel()
	first, rest := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var seen []int
	b := New(1, 1, func(_ context.Context, reqs []int) ([]int, error) {
		mu.Lock()
		seen = append(seen, reqs...)
		mu.Unlock()
		if reqs[0] == 0 {
			<-first
		} else {
			<-rest
		}
		return reqs, nil
	})
	ctx := context.Background()
	returned := make(chan int, 4)
	var wg sync.WaitGroup
	wg.Go(func() { r, _ := b.Do(ctx, 0); returned <- r })
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 }, 5*time.Second, time.Millisecond)
	for i := 1; i <= 3; i++ {
		wg.Go(func() { r, _ := b.Do(ctx, i); returned <- r })
	}
	require.Eventually(t, func() bool { return b.pendingLen() == 3 }, 5*time.Second, time.Millisecond)
	close(first)
	require.Equal(t, 0, <-returned, "the first call returns while the others' statements are still running")
	close(rest)
	wg.Wait()
	close(returned)
	var got []int
	for r := range returned {
		got = append(got, r)
	}
	require.ElementsMatch(t, []int{1, 2, 3}, got)
	b.mu.Lock()
	require.Zero(t, b.flushers)
	b.mu.Unlock()
}

// A call whose context ends while it waits for a statement is not run.
func TestBatcherDropsCallsCancelledBeforeTheirStatement(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var mu sync.Mutex
	var seen []int
	b := New(10, 1, func(_ context.Context, reqs []int) ([]int, error) {
		mu.Lock()
		seen = append(seen, reqs...)
		mu.Unlock()
		if reqs[0] == 0 {
			<-gate
		}
		return reqs, nil
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := b.Do(context.Background(), 0)
		assert.NoError(t, err)
	})
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() {
		_, err := b.Do(ctx, 1)
		assert.ErrorIs(t, err, context.Canceled)
	})
	var (
		r2   int
		err2 error
	)
	wg.Go(func() { r2, err2 = b.Do(context.Background(), 2) })
	require.Eventually(t, func() bool { return b.pendingLen() == 2 }, 5*time.Second, time.Millisecond)
	cancel()
	close(gate)
	wg.Wait()
	require.NoError(t, err2)
	require.Equal(t, 2, r2)
	require.Equal(t, []int{0, 2}, seen, "the cancelled call never reached the database")

	_, err := b.Do(ctx, 3)
	require.ErrorIs(t, err, context.Canceled, "an ended context does not even join")
}

// TestBatcherLingers: a busy Batcher (its flusher has just run a
// statement) that finds a few calls pending waits once for more before
// running them; a lone call on an idle one runs at once.
func TestBatcherLingers(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	const linger = 300 * time.Millisecond
	b := New(50, 1, func(_ context.Context, reqs []int) ([]int, error) {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		if first {
			<-gate
		}
		return reqs, nil
	}).Linger(2, 10, linger)
	ctx := context.Background()
	var wg sync.WaitGroup
	do := func(i int) {
		wg.Go(func() {
			r, err := b.Do(ctx, i)
			if assert.NoError(t, err) {
				assert.Equal(t, i, r)
			}
		})
	}
	do(0) // alone: its statement runs at once, held at the gate
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 }, 5*time.Second, time.Millisecond)
	do(1)
	do(2)
	require.Eventually(t, func() bool { return b.pendingLen() == 2 }, 5*time.Second, time.Millisecond)
	close(gate)
	// The role passes to call 1, which finds two pending (from 2, under
	// 10) after a statement: it waits, and these join.
	do(3)
	do(4)
	wg.Wait()
	require.Equal(t, []int{1, 4}, sizes)

	// Idle: a lone call does not wait.
	start := time.Now()
	_, err := b.Do(ctx, 5)
	require.NoError(t, err)
	require.Less(t, time.Since(start), linger, "a lone call on an idle batcher lingered")
	require.Equal(t, []int{1, 4, 1}, sizes)
}
