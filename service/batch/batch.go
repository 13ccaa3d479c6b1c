// Package batch groups concurrent calls into one database statement
// (Batcher): natural batching, without a timer or a goroutine of its own.
package batch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Batcher groups concurrent calls into one database statement ("natural
// batching"): a call joins the pending list and, when fewer than
// maxFlushers are flushing, flushes: it takes everything pending (up to
// maxBatch at a time) and runs it as one statement, again and again. An
// idle system therefore runs a call at once, alone; a busy one turns a
// hundred deliveries' round trips into one statement without any timer or
// background goroutine. A flusher whose own call is done hands its role to
// the oldest waiting call rather than working for others indefinitely.
//
// A call whose context has ended before its statement is formed is not
// run (it returns the context's error); once formed, the statement runs
// under the flusher's context without its cancellation, bounded by
// timeout, and every call it carries waits for the outcome: the
// statement may commit, and the caller must learn it.
type Batcher[Req, Res any] struct {
	maxBatch    int
	maxFlushers int
	run         func(ctx context.Context, reqs []Req) ([]Res, error)

	mu       sync.Mutex
	pending  []*call[Req, Res]
	flushers int // flushing goroutines, plus roles handed over and not yet taken
}

type call[Req, Res any] struct {
	ctx context.Context
	req Req
	res Res
	err error
	// done: res and err are set. lead: a flusher role is handed to this
	// call's goroutine (only while the call is pending, so before done).
	done, lead atomic.Bool
	// wake receives a token after done or lead is set: the caller waits
	// on one channel, not a select over two (a select locks both, and
	// its cost was most of the Batcher's per call).
	wake chan struct{}
}

// signal wakes c's goroutine after done or lead was set; a token already
// waiting will do.
func (c *call[Req, Res]) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// finish sets c's outcome and wakes its goroutine.
func (c *call[Req, Res]) finish(res Res, err error) {
	c.res, c.err = res, err
	c.done.Store(true)
	c.signal()
}

// timeout bounds one batched statement.
const timeout = 30 * time.Second

// New returns a Batcher that runs at most maxBatch calls in one run, with
// at most maxFlushers runs at once.
func New[Req, Res any](maxBatch, maxFlushers int, run func(context.Context, []Req) ([]Res, error)) *Batcher[Req, Res] {
	return &Batcher[Req, Res]{maxBatch: maxBatch, maxFlushers: maxFlushers, run: run}
}

// do runs req in the next batch and returns its result. run must return
// one result per request, in order, or an error that applies to all.
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	if err := ctx.Err(); err != nil {
		var zero Res
		return zero, err
	}
	c := &call[Req, Res]{ctx: ctx, req: req, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	flush := b.flushers < b.maxFlushers
	if flush {
		b.flushers++
	}
	b.mu.Unlock()
	if flush {
		b.flush(context.WithoutCancel(ctx), c)
	}
	for {
		// done before lead: a role is handed over only while the call is
		// pending, before it is done, so a done call's role (handed just
		// before someone else's statement carried it) is seen here, and
		// is still ours to pass on.
		done := c.done.Load()
		if c.lead.Swap(false) {
			b.flush(context.WithoutCancel(ctx), c)
			continue
		}
		if done {
			return c.res, c.err
		}
		<-c.wake
	}
}

// flush runs batches until nothing is pending or, once own is done, hands
// the role to the oldest waiting call.
func (b *Batcher[Req, Res]) flush(ctx context.Context, own *call[Req, Res]) {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.flushers--
			b.mu.Unlock()
			return
		}
		if own.done.Load() {
			if next := b.pending[0]; next.lead.CompareAndSwap(false, true) {
				b.mu.Unlock()
				next.signal()
				return
			}
			// it holds a role already: keep this one
		}
		n := min(len(b.pending), b.maxBatch)
		calls := make([]*call[Req, Res], n)
		copy(calls, b.pending)
		rest := copy(b.pending, b.pending[n:])
		clear(b.pending[rest:])
		b.pending = b.pending[:rest]
		b.mu.Unlock()

		live := calls[:0:0]
		for _, c := range calls {
			if err := c.ctx.Err(); err != nil {
				var zero Res
				c.finish(zero, err)
				continue
			}
			live = append(live, c)
		}
		if len(live) == 0 {
			continue
		}
		reqs := make([]Req, len(live))
		for i, c := range live {
			reqs[i] = c.req
		}
		res, err := b.runSafely(ctx, reqs)
		for i, c := range live {
			if err != nil {
				var zero Res
				c.finish(zero, err)
			} else {
				c.finish(res[i], nil)
			}
		}
	}
}

// runSafely runs one batch under timeout; a panic becomes every
// call's error rather than leaving the callers waiting forever.
func (b *Batcher[Req, Res]) runSafely(ctx context.Context, reqs []Req) (res []Res, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
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
