package service

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// batcher groups concurrent calls into one database statement ("natural
// batching"): a call joins the pending list and, when fewer than
// maxFlushers are flushing, flushes itself, taking everything pending (up
// to maxBatch at a time) until the list is empty. An idle system therefore
// runs a call at once, alone; a busy one turns a hundred deliveries'
// round trips into one statement without any timer or background
// goroutine.
//
// A call always waits for the statement that carries it, even when its own
// context ends: the statement may already have committed, and the caller
// must learn the outcome. The statement runs under the flusher's context
// without its cancellation, bounded by batchTimeout.
type batcher[Req, Res any] struct {
	maxBatch    int
	maxFlushers int
	run         func(ctx context.Context, reqs []Req) ([]Res, error)

	mu       sync.Mutex
	pending  []*batchCall[Req, Res]
	flushers int
}

type batchCall[Req, Res any] struct {
	req  Req
	res  Res
	err  error
	done chan struct{}
}

// batchTimeout bounds one batched statement.
const batchTimeout = 30 * time.Second

func newBatcher[Req, Res any](maxBatch, maxFlushers int, run func(context.Context, []Req) ([]Res, error)) *batcher[Req, Res] {
	return &batcher[Req, Res]{maxBatch: maxBatch, maxFlushers: maxFlushers, run: run}
}

// do runs req in the next batch and returns its result. run must return
// one result per request, in order, or an error that applies to all.
func (b *batcher[Req, Res]) do(ctx context.Context, req Req) (Res, error) {
	c := &batchCall[Req, Res]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	flush := b.flushers < b.maxFlushers
	if flush {
		b.flushers++
	}
	b.mu.Unlock()
	if flush {
		b.flush(context.WithoutCancel(ctx))
	}
	<-c.done
	return c.res, c.err
}

func (b *batcher[Req, Res]) flush(ctx context.Context) {
	for {
		b.mu.Lock()
		n := min(len(b.pending), b.maxBatch)
		if n == 0 {
			b.flushers--
			b.mu.Unlock()
			return
		}
		calls := make([]*batchCall[Req, Res], n)
		copy(calls, b.pending)
		rest := copy(b.pending, b.pending[n:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		b.mu.Unlock()

		reqs := make([]Req, n)
		for i, c := range calls {
			reqs[i] = c.req
		}
		res, err := b.runSafely(ctx, reqs)
		for i, c := range calls {
			if err != nil {
				c.err = err
			} else {
				c.res = res[i]
			}
			close(c.done)
		}
	}
}

// runSafely runs one batch under batchTimeout; a panic becomes every
// call's error rather than leaving the callers waiting forever.
func (b *batcher[Req, Res]) runSafely(ctx context.Context, reqs []Req) (res []Res, err error) {
	ctx, cancel := context.WithTimeout(ctx, batchTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("batched statement panicked: %v", p)
		}
	}()
	res, err = b.run(ctx, reqs)
	if err == nil && len(res) != len(reqs) {
		err = fmt.Errorf("batched statement returned %d results for %d requests", len(res), len(reqs))
	}
	return res, err
}
