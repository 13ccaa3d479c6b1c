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

	mu  sync.Mutex
	got []delivery
}

func startReceiver(ctx context.Context, kind string) (*receiver, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{ln: ln, url: "http://" + ln.Addr().String() + "/hook", got: make([]delivery, 0, 1<<16)}
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
	d := delivery{at: time.Now()}
	h := &c.Request.Header
	d.sched = string(h.Peek("X-Ax-Scheduled-For"))
	d.exec = string(h.Peek("X-Ax-Execution-Id"))
	d.task = string(h.Peek("X-Ax-Task-Id"))
	d.attempt = string(h.Peek("X-Ax-Attempt"))
	d.run = string(h.Peek("X-Ax-Workflow-Run-Id"))
	d.node = string(h.Peek("X-Ax-Node"))
	d.shard = string(h.Peek("X-Ax-Shard-Index"))
	r.record(d)
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

func (r *receiver) record(d delivery) {
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
}

// count returns how many requests arrived so far.
func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// since returns a copy of the requests that arrived after the first from.
func (r *receiver) since(from int) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from >= len(r.got) {
		return nil
	}
	return append([]delivery(nil), r.got[from:]...)
}

// snapshot returns a copy of every request so far.
func (r *receiver) snapshot() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.stop(ctx)
}
