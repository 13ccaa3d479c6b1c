// Package batch groups concurrent calls into one database statement
// (Batcher): natural batching, without a timer or a goroutine of its own.
package batch

import (
	"context"
	"fmt"
	"sync"
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
	// lingerFrom, lingerTo and linger: see Linger.
	lingerFrom, lingerTo int
	linger               time.Duration

	mu       sync.Mutex
	pending  []*call[Req, Res]
	flushers int // flushing goroutines, plus roles handed over and not yet taken
}

type call[Req, Res any] struct {
	ctx  context.Context
	req  Req
	res  Res
	err  error
	done chan struct{}
	// lead, when signalled, hands this call's goroutine a flusher role.
	lead chan struct{}
}

// timeout bounds one batched statement.
const timeout = 30 * time.Second

// New returns a Batcher that runs at most maxBatch calls in one run, with
// at most maxFlushers runs at once.
func New[Req, Res any](maxBatch, maxFlushers int, run func(context.Context, []Req) ([]Res, error)) *Batcher[Req, Res] {
	return &Batcher[Req, Res]{maxBatch: maxBatch, maxFlushers: maxFlushers, run: run}
}

// Linger makes a busy Batcher gather: a flusher that finds from or more
// but fewer than to calls pending, when it has just run a statement or
// another flusher is running one, waits d once before taking them.
// Natural batching alone makes each statement carry what arrived during
// the last one; when calls arrive evenly and the statement is quick, that
// is a few rows, and the statement's fixed cost (its executor, its
// commit) is paid for each few. Fewer than from pending means the calls
// are sparse: waiting would only delay them. An idle Batcher is not
// affected: a lone call runs at once. It returns b; call it before the
// first Do.
func (b *Batcher[Req, Res]) Linger(from, to int, d time.Duration) *Batcher[Req, Res] {
	b.lingerFrom, b.lingerTo, b.linger = from, to, d
	return b
}

// do runs req in the next batch and returns its result. run must return
// one result per request, in order, or an error that applies to all.
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	if err := ctx.Err(); err != nil {
		var zero Res
		return zero, err
	}
	c := &call[Req, Res]{ctx: ctx, req: req, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	flush := b.flushers < b.maxFlushers
	if flush {
		b.flushers++
	}
	b.mu.Unlock()
	if flush {
		b.flush(context.WithoutCancel(ctx), c, false)
	}
	for {
		select {
		case <-c.lead:
			b.flush(context.WithoutCancel(ctx), c, true)
		case <-c.done:
			// A role handed over just before the call was carried by
			// someone else's statement is still ours to pass on.
			select {
			case <-c.lead:
				b.flush(context.WithoutCancel(ctx), c, true)
			default:
			}
			return c.res, c.err
		}
	}
}

// flush runs batches until nothing is pending or, once own is done, hands
// the role to the oldest waiting call. handed: the role was handed over by
// a flusher that ran a statement (the Batcher is busy).
func (b *Batcher[Req, Res]) flush(ctx context.Context, own *call[Req, Res], handed bool) {
	ran, lingered := handed, false
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.flushers--
			b.mu.Unlock()
			return
		}
		select {
		case <-own.done:
			select {
			case b.pending[0].lead <- struct{}{}:
				b.mu.Unlock()
				return
			default: // it holds a role already: keep this one
			}
		default:
		}
		if b.linger > 0 && !lingered && len(b.pending) >= b.lingerFrom && len(b.pending) < b.lingerTo && (ran || b.flushers > 1) {
			b.mu.Unlock()
			time.Sleep(b.linger)
			lingered = true
			continue
		}
		lingered = false
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
				c.err = err
				close(c.done)
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
		ran = true
		for i, c := range live {
			if err != nil {
				c.err = err
			} else {
				c.res = res[i]
			}
			close(c.done)
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
