package jobs

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// countingServer is an httptest server that counts the connections it
// accepted.
func countingServer(t *testing.T, h http.HandlerFunc, configure func(*http.Server)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// rawServer answers each request on a connection with what answer
// returns for it (the i-th request of that connection, from 0), after
// reading the request's head and body.
func rawServer(t *testing.T, answer func(i int) string) (addr string, conns *atomic.Int32) {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(conn)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(conn, answer(i)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), conns
}

// TestSendStaleConnection: a receiver that closes kept-alive connections
// while they are idle (Node's default after 5 s) costs nothing: the
// request that finds its connection closed is sent again on a new one.
func TestSendStaleConnection(t *testing.T) {
	t.Parallel()

	var hits atomic.Int32
	srv, conns := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}, func(s *http.Server) { s.IdleTimeout = 50 * time.Millisecond })
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)

	for i := range 3 {
		res := s.Send(t.Context(), testRequest(srv.URL, key))
		require.NoError(t, res.Err, "send %d", i)
		require.Equal(t, http.StatusNoContent, res.StatusCode)
		time.Sleep(200 * time.Millisecond) // the receiver closes the connection
	}
	require.Equal(t, int32(3), hits.Load(), "each delivery reached the receiver once")
	require.Equal(t, int32(3), conns.Load())
}

// TestSendConnectionRules: a connection is kept only when its response
// was read to its end, neither side asked to close it and nothing
// followed the response.
func TestSendConnectionRules(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name    string
		answer  string
		excerpt string
		conns   int32 // after three deliveries
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 1},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n3\r\n!!!\r\n0\r\n\r\n", "ok!!!", 1},
		{"no body", "HTTP/1.1 204 No Content\r\n\r\n", "", 1},
		{"early hints first", "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 1},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "ok", 3},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "ok", 3},
		{"bytes after the response", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Nope\r\n\r\n", "ok", 3},
		{"body past the drain", "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("z", 70000), strings.Repeat("z", MaxResponseBytesDefault), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr, conns := rawServer(t, func(int) string { return tt.answer })
			s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
			key := mustKey(t)
			for i := range 3 {
				res := s.Send(t.Context(), testRequest("http://"+addr+"/hook", key))
				require.NoError(t, res.Err, "send %d", i)
				require.Equal(t, tt.excerpt, res.Excerpt)
				if strings.HasPrefix(tt.answer, "HTTP/1.1 204") {
					require.Equal(t, http.StatusNoContent, res.StatusCode)
				} else {
					require.Equal(t, http.StatusOK, res.StatusCode)
				}
			}
			require.Eventually(t, func() bool { return conns.Load() == tt.conns }, 5*time.Second, 10*time.Millisecond,
				"want %d connections, got %d", tt.conns, conns.Load())
		})
	}
}

// TestSendResponseHeaderLimit: headers past MaxResponseHeaderBytes end
// the attempt (a connection error: retried) instead of growing ax's
// memory.
func TestSendResponseHeaderLimit(t *testing.T) {
	t.Parallel()

	huge := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 200<<10) + "\r\nContent-Length: 0\r\n\r\n"
	addr, _ := rawServer(t, func(int) string { return huge })
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true, MaxResponseHeaderBytes: 16 << 10})
	res := s.Send(t.Context(), testRequest("http://"+addr+"/hook", mustKey(t)))
	require.ErrorContains(t, res.Err, "server response headers exceeded 16384 bytes")
	require.Equal(t, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassConnection}, Classify(res, time.Now()))
}

// TestSendResponseHeaderTimeout: ResponseHeaderTimeout bounds the wait for
// headers even when the attempt's own timeout is longer.
func TestSendResponseHeaderTimeout(t *testing.T) {
	t.Parallel()

	srv := newTarpit(t, false)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true, ResponseHeaderTimeout: 300 * time.Millisecond})
	req := testRequest(srv.URL, mustKey(t))
	req.Timeout = time.Minute
	res := s.Send(t.Context(), req)
	require.Less(t, res.Latency, 10*time.Second)
	require.Equal(t, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassTimeout}, Classify(res, time.Now()))
}

// TestSendCanceled: cancelling the caller's context (an API cancel, a
// shutdown) ends a waiting attempt at once, with the cancel as its error,
// and its connection is not reused.
func TestSendCanceled(t *testing.T) {
	t.Parallel()

	for _, stage := range []string{"headers", "body"} {
		t.Run(stage, func(t *testing.T) {
			t.Parallel()
			srv := newTarpit(t, stage == "body")
			s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
			req := testRequest(srv.URL, mustKey(t))
			req.Timeout = time.Minute
			cause := errors.New("shutting down")
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(300*time.Millisecond, func() { cancel(cause) })

			res := s.Send(ctx, req)
			require.Less(t, res.Latency, 10*time.Second)
			if stage == "headers" {
				require.ErrorIs(t, res.Err, cause)
				require.Zero(t, res.StatusCode)
				return
			}
			// The answer stands; its body was cut short.
			require.NoError(t, res.Err)
			require.Equal(t, http.StatusOK, res.StatusCode)
			require.True(t, strings.HasPrefix(res.Excerpt, "partial "), res.Excerpt)
		})
	}
}

// TestSendAfterCancelReusesNothingBroken: a cancelled attempt's connection
// is closed, and the next attempt to the same receiver gets a working one.
func TestSendAfterCancelReusesNothingBroken(t *testing.T) {
	t.Parallel()

	var slow atomic.Bool
	slow.Store(true)
	release := make(chan struct{})
	srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets net/http notice the hang-up
		if slow.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}, nil)
	t.Cleanup(func() { close(release) }) // runs before the server's Close, which waits for the handler
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	res := s.Send(ctx, testRequest(srv.URL, key))
	require.ErrorIs(t, res.Err, ErrCallerDeadline)

	slow.Store(false)
	for range 3 {
		res := s.Send(t.Context(), testRequest(srv.URL, key))
		require.NoError(t, res.Err)
		require.Equal(t, http.StatusNoContent, res.StatusCode)
	}
	require.Equal(t, int32(2), conns.Load(), "the cancelled connection, then one kept")
}

// TestSendIdleConnections: at most MaxIdleConnsPerHost connections stay
// open per receiver after a burst, and Close closes them.
func TestSendIdleConnections(t *testing.T) {
	t.Parallel()

	gate := make(chan struct{})
	var open atomic.Int32
	srv, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		<-gate
		w.WriteHeader(http.StatusNoContent)
	}, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, state http.ConnState) {
			switch state {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		}
	})
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true, MaxIdleConnsPerHost: 2})
	key := mustKey(t)
	const n = 6
	done := make(chan Result, n)
	for range n {
		go func() { done <- s.Send(t.Context(), testRequest(srv.URL, key)) }()
	}
	require.Eventually(t, func() bool { return open.Load() == n }, 5*time.Second, 5*time.Millisecond)
	close(gate)
	for range n {
		require.NoError(t, (<-done).Err)
	}
	require.Eventually(t, func() bool { return open.Load() == 2 }, 5*time.Second, 5*time.Millisecond,
		"two kept, got %d open", open.Load())
	s.Close()
	require.Eventually(t, func() bool { return open.Load() == 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestSendPlainAndTLSTargets: http URLs go through ax's HTTP/1.1 client,
// https ones (and hosts that need their IDNA form) through net/http's.
func TestSendPlainAndTLSTargets(t *testing.T) {
	t.Parallel()

	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	for _, tt := range []struct {
		url, addr, host, requestURI string
		plain                       bool
	}{
		{"http://example.com/hook?a=1", "example.com:80", "example.com", "/hook?a=1", true},
		{"http://example.com", "example.com:80", "example.com", "/", true},
		{"http://10.0.0.1:8080/a%20b#frag", "10.0.0.1:8080", "10.0.0.1:8080", "/a%20b", true},
		{"http://[::1]:9000/x", "[::1]:9000", "[::1]:9000", "/x", true},
		{"http://example.com:/x", "example.com:80", "example.com", "/x", true},
		{"https://example.com/hook", "", "example.com", "", false},
		{"http://bücher.example/hook", "", "bücher.example", "", false},
	} {
		got, err := s.endpointURL(tt.url)
		require.NoError(t, err, tt.url)
		require.Equal(t, tt.plain, got.plain, tt.url)
		require.Equal(t, tt.addr, got.addr, tt.url)
		require.Equal(t, tt.host, got.host, tt.url)
		require.Equal(t, tt.requestURI, got.requestURI, tt.url)
	}
}

// TestSendMethodsOnTheWire: Content-Length is sent as net/http sends it:
// for a body, and for an empty one to a method that expects a body.
func TestSendMethodsOnTheWire(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		method string
		body   string
		want   string // the Content-Length header, "" for none
	}{
		{http.MethodPost, "", "0"},
		{http.MethodPut, "{}", "2"},
		{http.MethodPatch, "", "0"},
		{http.MethodDelete, "", ""},
	} {
		srv, got := newReceiver(t, nil)
		s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
		req := testRequest(srv.URL, mustKey(t))
		req.Method, req.Body = tt.method, []byte(tt.body)
		res := s.Send(t.Context(), req)
		require.NoError(t, res.Err)
		r := <-got
		require.Equal(t, tt.method, r.Method)
		require.Equal(t, tt.want, r.Header.Get("Content-Length"), tt.method)
		require.Equal(t, tt.body, string(r.Body))
	}
}
