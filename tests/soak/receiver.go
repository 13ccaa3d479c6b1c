package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// receiverMode is how the webhook receiver answers; the nemesis changes it.
type receiverMode int32

const (
	modeNormal    receiverMode = iota // 200 after 0–20 ms
	modeSlow                          // 1–7 s before answering (the endpoint's timeout is 5 s)
	modeStorm                         // 500/503 to every request
	modeReset                         // half the connections closed without an answer
	modeDuplicate                     // processed, then the connection closed: the answer is lost
)

func (m receiverMode) String() string {
	return [...]string{"normal", "slow", "5xx-storm", "resets", "lost-answers"}[m]
}

// request is one webhook request as the receiver saw it.
type request struct {
	at        time.Time
	key       string // Idempotency-Key
	webhookID string // webhook-id
	execID    string // X-Ax-Execution-Id
	taskID    string // X-Ax-Task-Id
	sched     string // X-Ax-Scheduled-For
	attempt   int    // X-Ax-Attempt
	answered  int    // the status sent, 0 when the connection was closed instead
	path      string
}

// receiver is the webhook endpoint: it logs every request it reads, then
// answers according to its mode. On /hook/retry it answers 500 to the
// first two attempts of every execution, whatever the mode.
type receiver struct {
	srv  *http.Server
	ln   net.Listener
	url  string
	mode atomic.Int32

	mu  sync.Mutex
	log []request
}

func startReceiver(ctx context.Context) (*receiver, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{ln: ln, url: "http://" + ln.Addr().String()}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

func (r *receiver) setMode(m receiverMode) { r.mode.Store(int32(m)) }

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.log...)
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20))
	rec := request{
		at: time.Now(), key: req.Header.Get("Idempotency-Key"), webhookID: req.Header.Get("webhook-id"),
		execID: req.Header.Get("X-Ax-Execution-Id"), taskID: req.Header.Get("X-Ax-Task-Id"),
		sched: req.Header.Get("X-Ax-Scheduled-For"), path: req.URL.Path,
	}
	rec.attempt, _ = strconv.Atoi(req.Header.Get("X-Ax-Attempt"))
	status := http.StatusOK
	closeConn := false
	var delay time.Duration
	switch receiverMode(r.mode.Load()) {
	case modeNormal:
		delay = time.Duration(rand.IntN(20)) * time.Millisecond //nolint:gosec // fault injection, not security
	case modeSlow:
		delay = time.Second + time.Duration(rand.IntN(6000))*time.Millisecond //nolint:gosec // fault injection
	case modeStorm:
		status = []int{http.StatusInternalServerError, http.StatusServiceUnavailable}[rand.IntN(2)] //nolint:gosec // fault injection
	case modeReset:
		closeConn = rand.IntN(2) == 0 //nolint:gosec // fault injection
	case modeDuplicate:
		closeConn = true
	}
	if req.URL.Path == "/hook/retry" && rec.attempt <= 2 && !closeConn {
		status = http.StatusInternalServerError
	}
	if closeConn {
		r.record(rec)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, not an orderly close
				}
				_ = conn.Close()
				return
			}
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-req.Context().Done():
			r.record(rec)
			return
		}
	}
	rec.answered = status
	r.record(rec)
	w.WriteHeader(status)
}

func (r *receiver) record(rec request) {
	r.mu.Lock()
	r.log = append(r.log, rec)
	r.mu.Unlock()
}
