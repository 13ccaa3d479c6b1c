package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// delivery is one webhook request as the receiver saw it. Headers are kept
// raw and parsed after the run, so the handler does as little as possible.
type delivery struct {
	at      time.Time // arrival, taken first thing in the handler
	sched   string    // X-Ax-Scheduled-For
	exec    string    // X-Ax-Execution-Id
	task    string    // X-Ax-Task-Id
	attempt string    // X-Ax-Attempt
}

// receiver is a webhook endpoint on 127.0.0.1 that records every request
// and answers 204 at once, keeping connections alive.
type receiver struct {
	ln    net.Listener
	srv   *http.Server
	url   string
	conns atomic.Int64 // TCP connections accepted

	mu  sync.Mutex
	got []delivery
}

func startReceiver(ctx context.Context) (*receiver, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{ln: ln, url: "http://" + ln.Addr().String() + "/hook", got: make([]delivery, 0, 1<<16)}
	r.srv = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				r.conns.Add(1)
			}
		},
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	d := delivery{at: time.Now()}
	h := req.Header
	d.sched = h.Get("X-Ax-Scheduled-For")
	d.exec = h.Get("X-Ax-Execution-Id")
	d.task = h.Get("X-Ax-Task-Id")
	d.attempt = h.Get("X-Ax-Attempt")
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	r.got = append(r.got, d)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// count returns how many requests arrived so far.
func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
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
	_ = r.srv.Shutdown(ctx)
}
