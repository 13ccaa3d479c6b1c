package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// delivery is one webhook request as the receiver saw it. Headers are kept
// raw and parsed after the run, so the handler does as little as possible.
type delivery struct {
	at      time.Time // arrival, taken first thing in the handler
	sched   string    // X-Ax-Scheduled-For
	exec    string    // X-Ax-Execution-Id
	task    string    // X-Ax-Task-Id
	attempt string    // X-Ax-Attempt
	run     string    // X-Ax-Workflow-Run-Id (a workflow step)
	node    string    // X-Ax-Node
	shard   string    // X-Ax-Shard-Index (a sharded fire)
}

// Receiver implementations (-receiver). The receiver shares the two cores
// with ax and PostgreSQL, where a real one would run elsewhere, so by
// default it is fasthttp's server, which costs about two thirds of what
// net/http's does per request (the README's benchmark section gives both)
// and leaves that much more of the machine to what is measured. Both answer
// the same.
const (
	receiverFast    = "fasthttp"
	receiverNetHTTP = "net/http"
)

// receiver is a webhook endpoint on 127.0.0.1 that records every request
// and answers 204 at once, keeping connections alive.
type receiver struct {
	ln    net.Listener
	url   string
	conns atomic.Int64 // TCP connections accepted
	stop  func(context.Context) error

	mu     sync.Mutex
	blocks []*recordBlock
	n      int // requests recorded
}

// The receiver's record of requests is kept in blocks of recordBlockLen
// requests, each with its header bytes in an arena of its own, and holds
// no pointer the collector would scan. A slice of deliveries grown by
// append copied itself under the receiver's lock at 262,144 and 524,288
// requests (70 MB, every handler waiting), and its millions of small
// strings were marked at every collection of the bench's heap: at 10,000
// requests a second, episodes of 150–400 ms of measured lateness at the
// same instants of every sustained-10k run whatever ax did.
const (
	recordBlockLen   = 1 << 14
	recordBlockBytes = recordBlockLen * 192 // about the headers of a fire
	recordHeaders    = 7                    // the fields of a delivery after at
)

// recordBlock is recordBlockLen requests (the last block: fewer), each
// one's arrival and the lengths of its headers, whose bytes follow one
// another in bytes; request i is in block i / recordBlockLen.
type recordBlock struct {
	recs  []record
	bytes []byte
}

// record is one request: arrival in Unix nanoseconds, its headers at
// off in its block's bytes.
type record struct {
	at   int64
	off  uint32
	lens [recordHeaders]uint16
}

func startReceiver(ctx context.Context, kind string) (*receiver, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{ln: ln, url: "http://" + ln.Addr().String() + "/hook"}
	switch kind {
	case receiverFast:
		srv := &fasthttp.Server{
			Handler:            r.serveFast,
			ReadTimeout:        5 * time.Minute, // also the keep-alive idle limit
			MaxRequestBodySize: 1 << 20,
			ConnState: func(_ net.Conn, s fasthttp.ConnState) {
				if s == fasthttp.StateNew {
					r.conns.Add(1)
				}
			},
		}
		go func() { _ = srv.Serve(ln) }()
		r.stop = srv.ShutdownWithContext
	case receiverNetHTTP:
		srv := &http.Server{
			Handler:           http.HandlerFunc(r.serveNetHTTP),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       5 * time.Minute,
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					r.conns.Add(1)
				}
			},
		}
		go func() { _ = srv.Serve(ln) }()
		r.stop = srv.Shutdown
	default:
		_ = ln.Close()
		return nil, fmt.Errorf("receiver %q: want %s or %s", kind, receiverFast, receiverNetHTTP)
	}
	return r, nil
}

func (r *receiver) serveFast(c *fasthttp.RequestCtx) {
	at := time.Now()
	h := &c.Request.Header
	r.recordRaw(at, &[recordHeaders][]byte{
		h.Peek("X-Ax-Scheduled-For"), h.Peek("X-Ax-Execution-Id"), h.Peek("X-Ax-Task-Id"), h.Peek("X-Ax-Attempt"),
		h.Peek("X-Ax-Workflow-Run-Id"), h.Peek("X-Ax-Node"), h.Peek("X-Ax-Shard-Index"),
	})
	c.SetStatusCode(http.StatusNoContent)
}

func (r *receiver) serveNetHTTP(w http.ResponseWriter, req *http.Request) {
	d := delivery{at: time.Now()}
	h := req.Header
	d.sched = h.Get("X-Ax-Scheduled-For")
	d.exec = h.Get("X-Ax-Execution-Id")
	d.task = h.Get("X-Ax-Task-Id")
	d.attempt = h.Get("X-Ax-Attempt")
	d.run = h.Get("X-Ax-Workflow-Run-Id")
	d.node = h.Get("X-Ax-Node")
	d.shard = h.Get("X-Ax-Shard-Index")
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	r.record(d)
	w.WriteHeader(http.StatusNoContent)
}

// record records a delivery.
func (r *receiver) record(d delivery) {
	r.recordRaw(d.at, &[recordHeaders][]byte{
		[]byte(d.sched), []byte(d.exec), []byte(d.task), []byte(d.attempt), []byte(d.run), []byte(d.node), []byte(d.shard),
	})
}

// recordRaw records a request that arrived at at with the headers h, in
// delivery's order (a header longer than 64 KiB is cut: ax's are short).
func (r *receiver) recordRaw(at time.Time, h *[recordHeaders][]byte) {
	for i := range h {
		h[i] = h[i][:min(len(h[i]), 1<<16-1)]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var b *recordBlock
	if k := len(r.blocks); k > 0 {
		b = r.blocks[k-1]
	}
	if b == nil || len(b.recs) == cap(b.recs) { // the arena grows if a block's headers are longer
		b = &recordBlock{recs: make([]record, 0, recordBlockLen), bytes: make([]byte, 0, recordBlockBytes)}
		r.blocks = append(r.blocks, b)
	}
	rec := record{at: at.UnixNano(), off: uint32(len(b.bytes))} // within the block's arena, under 4 GiB
	for i, v := range h {
		rec.lens[i] = uint16(len(v)) // cut above
		b.bytes = append(b.bytes, v...)
	}
	b.recs = append(b.recs, rec)
	r.n++
}

// delivery returns the i-th request of the block.
func (b *recordBlock) delivery(i int) delivery {
	rec := b.recs[i]
	var v [recordHeaders]string
	off := int(rec.off)
	for k, n := range rec.lens {
		v[k] = string(b.bytes[off : off+int(n)])
		off += int(n)
	}
	return delivery{at: time.Unix(0, rec.at), sched: v[0], exec: v[1], task: v[2], attempt: v[3], run: v[4], node: v[5], shard: v[6]}
}

// count returns how many requests arrived so far.
func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// since returns the requests that arrived after the first from.
func (r *receiver) since(from int) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from >= r.n {
		return nil
	}
	out := make([]delivery, 0, r.n-from)
	for i := from; i < r.n; i++ {
		out = append(out, r.blocks[i/recordBlockLen].delivery(i%recordBlockLen))
	}
	return out
}

// snapshot returns every request so far.
func (r *receiver) snapshot() []delivery { return r.since(0) }

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.stop(ctx)
}
