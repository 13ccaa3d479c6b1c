package jobs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// h1Pool is ax's HTTP/1.1 client for plain-http endpoints, the send path
// of most deliveries in a deployment where receivers sit behind a
// load balancer or in the same cluster. net/http's transport costs a
// delivery about 40 µs of CPU (a read and a write goroutine per
// connection, a channel hand-off each way, header maps and sorting);
// this client writes the request straight into the connection's buffer
// and parses the answer with net/http's own http.ReadResponse, on the
// caller's goroutine, for about 15 µs. https endpoints keep net/http's
// transport (TLS, HTTP/2).
//
// Its rules are the transport's, as Sender relies on them: connections
// are dialed through the SSRF guard's dialer; an attempt's context bounds
// everything (its deadline is the connection's, and a cancel sets a
// deadline in the past so that a blocked read or write returns at once);
// ResponseHeaderTimeout bounds the wait for the response's headers and
// MaxResponseHeaderBytes their size; a connection goes back to the pool
// only when its response was read to the end and neither side asked to
// close it; a request that fails on a kept-alive connection before any
// byte of an answer arrived (the receiver closed it while idle) is sent
// again once on a new connection, as net/http does for a request with
// an Idempotency-Key.
type h1Pool struct {
	dialer         *net.Dialer
	maxIdlePerHost int
	maxIdle        int
	maxHeaderBytes int64
	headerTimeout  time.Duration

	mu    sync.Mutex
	idle  map[string][]*h1Conn // by dial address, the most recently used last
	nIdle int
	swept time.Time // the last sweep of expired idle connections
}

// h1Conn is one connection of an h1Pool.
type h1Conn struct {
	nc  net.Conn
	lim limitedConn // what br reads through: bounds the response's headers
	br  *bufio.Reader
	bw  *bufio.Writer
	// addr is the pool's key for it.
	addr string
	// idleSince is when it went back to the pool.
	idleSince time.Time
	// canceled is set (before the deadline in the past) by an attempt's
	// cancel: a deadline set afterwards must not undo it.
	canceled atomic.Bool
}

// limitedConn reads from a connection while n allows, so that a response
// whose headers never end cannot grow the reader without bound. It counts
// what the reader's buffer takes in, so the bound holds to within one
// buffer (4 KiB) of body bytes read along with the headers.
type limitedConn struct {
	nc       net.Conn
	n        int64
	exceeded bool
}

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n <= 0 {
		l.exceeded = true
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.nc.Read(p)
	l.n -= int64(k)
	return k, err
}

var errHeaderTooLarge = errors.New("response headers too large")

// aLongTimeAgo is a deadline in the past: it ends a blocked read or write.
var aLongTimeAgo = time.Unix(1, 0)

const h1BufferSize = 4 << 10

func newH1Pool(dialer *net.Dialer, cfg SenderConfig) *h1Pool {
	return &h1Pool{
		dialer:         dialer,
		maxIdlePerHost: cfg.MaxIdleConnsPerHost,
		maxIdle:        max(maxIdleConns, 2*cfg.MaxIdleConnsPerHost),
		maxHeaderBytes: cfg.MaxResponseHeaderBytes,
		headerTimeout:  cfg.ResponseHeaderTimeout,
		idle:           make(map[string][]*h1Conn),
	}
}

// roundTrip sends one request to t and returns the response, whose body
// must be closed: closing it gives the connection back to the pool (read
// to the end) or closes it (anything else).
func (p *h1Pool) roundTrip(ctx context.Context, t *target, method string, fields []headerField, body []byte) (*http.Response, error) {
	for fresh := false; ; fresh = true {
		c, reused, err := p.conn(ctx, t.addr, fresh)
		if err != nil {
			return nil, err
		}
		resp, stale, err := p.exchange(ctx, c, t, method, fields, body, reused)
		if err == nil {
			return resp, nil
		}
		_ = c.nc.Close()
		if d, ok := ctx.Deadline(); ok && isTimeout(err) && !time.Now().Before(d) {
			// The connection's deadline is the context's: the read or
			// write may see it pass an instant before the context does.
			<-ctx.Done()
		}
		if ctx.Err() != nil {
			// The attempt's timeout or a cancel ended it: that is the
			// error, not the deadline it set on the connection.
			return nil, context.Cause(ctx)
		}
		if !stale || fresh {
			return nil, err
		}
	}
}

// conn returns an idle connection to addr, or a new one (always when
// fresh); reused reports which.
func (p *h1Pool) conn(ctx context.Context, addr string, fresh bool) (c *h1Conn, reused bool, err error) {
	if !fresh {
		if c := p.take(addr); c != nil {
			return c, true, nil
		}
	}
	nc, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		return nil, false, err
	}
	c = &h1Conn{nc: nc, addr: addr}
	c.lim.nc = nc
	c.br = bufio.NewReaderSize(&c.lim, h1BufferSize)
	c.bw = bufio.NewWriterSize(nc, h1BufferSize)
	return c, false, nil
}

// take pops addr's most recently used idle connection, closing those
// idle for longer than idleConnTimeout on the way.
func (p *h1Pool) take(addr string) *h1Conn {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	conns := p.idle[addr]
	for len(conns) > 0 {
		c := conns[len(conns)-1]
		conns[len(conns)-1] = nil
		conns = conns[:len(conns)-1]
		p.nIdle--
		if now.Sub(c.idleSince) < idleConnTimeout {
			p.idle[addr] = conns
			c.canceled.Store(false)
			return c
		}
		_ = c.nc.Close()
	}
	delete(p.idle, addr)
	return nil
}

// put gives c back to the pool, or closes it when the pool is full.
func (p *h1Pool) put(c *h1Conn) {
	now := time.Now()
	c.idleSince = now
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.swept) > idleConnTimeout/3 {
		p.sweep(now)
	}
	if conns := p.idle[c.addr]; len(conns) < p.maxIdlePerHost && p.nIdle < p.maxIdle {
		p.idle[c.addr] = append(conns, c)
		p.nIdle++
		return
	}
	_ = c.nc.Close()
}

// sweep closes the connections idle for longer than idleConnTimeout, so
// that a receiver no longer called does not keep them open. p.mu is held.
func (p *h1Pool) sweep(now time.Time) {
	p.swept = now
	for addr, conns := range p.idle {
		kept := conns[:0]
		for _, c := range conns {
			if now.Sub(c.idleSince) < idleConnTimeout {
				kept = append(kept, c)
				continue
			}
			_ = c.nc.Close()
			p.nIdle--
		}
		clear(conns[len(kept):])
		if len(kept) == 0 {
			delete(p.idle, addr)
		} else {
			p.idle[addr] = kept
		}
	}
}

// closeIdle closes every idle connection.
func (p *h1Pool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, conns := range p.idle {
		for _, c := range conns {
			_ = c.nc.Close()
		}
		delete(p.idle, addr)
	}
	p.nIdle = 0
}

// setDeadline sets c's read (or read and write) deadline unless a cancel
// has already set one in the past. The cancel sets its flag before its
// deadline: either this sees the flag and sets the past deadline again,
// or the cancel's deadline comes after this one.
func (c *h1Conn) setDeadline(t time.Time, readOnly bool) {
	if readOnly {
		_ = c.nc.SetReadDeadline(t)
	} else {
		_ = c.nc.SetDeadline(t)
	}
	if c.canceled.Load() {
		_ = c.nc.SetDeadline(aLongTimeAgo)
	}
}

// exchange writes the request on c and reads the response's headers.
// stale reports a failure that a new connection may not have: c was kept
// alive and no byte of an answer came.
func (p *h1Pool) exchange(ctx context.Context, c *h1Conn, t *target, method string, fields []headerField, body []byte, reused bool) (resp *http.Response, stale bool, err error) {
	deadline, _ := ctx.Deadline()
	c.setDeadline(deadline, false)
	stop := context.AfterFunc(ctx, func() {
		c.canceled.Store(true)
		_ = c.nc.SetDeadline(aLongTimeAgo)
	})
	defer func() {
		if err != nil {
			stop()
		}
	}()

	writeRequest(c.bw, t, method, fields, body)
	if err := c.bw.Flush(); err != nil {
		return nil, reused, err
	}

	headerDeadline := time.Now().Add(p.headerTimeout)
	shorter := deadline.IsZero() || headerDeadline.Before(deadline)
	if shorter {
		c.setDeadline(headerDeadline, true)
	}
	c.lim.n, c.lim.exceeded = p.maxHeaderBytes, false
	if _, err := c.br.Peek(1); err != nil {
		return nil, reused && c.br.Buffered() == 0 && connGone(err), err
	}
	var readReq *http.Request // nil: a response to a request other than HEAD
	if method == http.MethodHead {
		readReq = &http.Request{Method: method}
	}
	resp, err = http.ReadResponse(c.br, readReq)
	// An informational answer (100 Continue, 103 Early Hints) precedes
	// the response.
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode <= 199 && resp.StatusCode != http.StatusSwitchingProtocols {
		resp, err = http.ReadResponse(c.br, readReq)
	}
	c.lim.n = math.MaxInt64
	if err != nil {
		if c.lim.exceeded {
			err = fmt.Errorf("server response headers exceeded %d bytes; aborted", p.maxHeaderBytes)
		}
		return nil, false, err
	}
	if shorter {
		c.setDeadline(deadline, true)
	}
	reusable := !resp.Close && resp.StatusCode >= 200
	if resp.Body == http.NoBody {
		p.release(c, stop, reusable)
		return resp, false, nil
	}
	resp.Body = &h1Body{body: resp.Body, pool: p, conn: c, stop: stop, reusable: reusable}
	return resp, false, nil
}

// release ends an exchange: c goes back to the pool when reusable and no
// cancel touched it, else it is closed.
func (p *h1Pool) release(c *h1Conn, stop func() bool, reusable bool) {
	// Bytes after the response would be read as the next one's start.
	if stop() && reusable && c.br.Buffered() == 0 {
		p.put(c)
		return
	}
	_ = c.nc.Close()
}

// connGone reports the errors of a connection the receiver closed.
func connGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// h1Body is a response body of an h1Pool: Close releases its connection,
// to the pool when the body was read to its end.
type h1Body struct {
	body     io.ReadCloser
	pool     *h1Pool
	conn     *h1Conn
	stop     func() bool
	reusable bool
	eof      bool
	closed   bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close does not close the underlying body unless it was read to its
// end: net/http's would read the rest of it, however long.
func (b *h1Body) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.eof {
		_ = b.body.Close()
	}
	b.pool.release(b.conn, b.stop, b.reusable && b.eof)
	return nil
}

// writeRequest writes an HTTP/1.1 request: the request line, Host, the
// fields, Content-Length (as net/http sends it: for a body, or for an
// empty one to a method that expects one) and the body. The fields are
// valid already (Sender.prepare).
func writeRequest(w *bufio.Writer, t *target, method string, fields []headerField, body []byte) {
	_, _ = w.WriteString(method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(t.requestURI)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(t.host)
	_, _ = w.WriteString("\r\n")
	for _, f := range fields {
		_, _ = w.WriteString(f.name)
		_, _ = w.WriteString(": ")
		_, _ = w.WriteString(f.value)
		_, _ = w.WriteString("\r\n")
	}
	if len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		_, _ = w.WriteString("Content-Length: ")
		var n [20]byte
		_, _ = w.Write(strconv.AppendInt(n[:0], int64(len(body)), 10))
		_, _ = w.WriteString("\r\n")
	}
	_, _ = w.WriteString("\r\n")
	_, _ = w.Write(body)
}
