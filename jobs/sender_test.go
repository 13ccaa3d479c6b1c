package jobs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// received is what a test receiver saw of one webhook.
type received struct {
	Method string
	Host   string
	Header http.Header
	Body   []byte
}

// newReceiver starts an httptest server that records each request and
// answers with respond (nil: 204).
func newReceiver(t *testing.T, respond http.HandlerFunc) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got <- received{Method: r.Method, Host: r.Host, Header: r.Header.Clone(), Body: body}
		if respond == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		respond(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func newTestSender(t *testing.T, cfg SenderConfig) *Sender {
	t.Helper()
	s := NewSender(cfg)
	t.Cleanup(s.Close)
	return s
}

// testRequest is a valid delivery to url signed with key.
func testRequest(url string, key []byte) Request {
	return Request{
		URL:          url,
		Body:         []byte(`{"b":1,  "a":2}`),
		Timeout:      5 * time.Second,
		ExecutionID:  "exec_01J9ZK3Q",
		TaskID:       "task_01J9ZK2A",
		ScheduledFor: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC),
		Attempt:      1,
		Keys:         [][]byte{key},
	}
}

func TestSendHeaders(t *testing.T) {
	t.Parallel()

	srv, got := newReceiver(t, nil)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true, UserAgent: "ax/1.2.3"})
	key := mustKey(t)
	req := testRequest(srv.URL+"/hooks/ax?x=1", key)
	req.Headers = map[string]string{"X-Env": "prod", "authorization": "Bearer t0k"}
	req.Attempt = 3

	before := time.Now().Unix()
	res := s.Send(t.Context(), req)
	after := time.Now().Unix()
	require.NoError(t, res.Err)
	require.Equal(t, http.StatusNoContent, res.StatusCode)

	r := <-got
	require.Equal(t, http.MethodPost, r.Method)
	ts, err := strconv.ParseInt(r.Header.Get("Webhook-Timestamp"), 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ts, before)
	require.LessOrEqual(t, ts, after)

	want := http.Header{
		"Content-Type":       {"application/json"},
		"Content-Length":     {strconv.Itoa(len(req.Body))},
		"Idempotency-Key":    {"exec_01J9ZK3Q"},
		"Webhook-Id":         {"exec_01J9ZK3Q"},
		"Webhook-Timestamp":  {strconv.FormatInt(ts, 10)},
		"Webhook-Signature":  {Sign(key, "exec_01J9ZK3Q", time.Unix(ts, 0), req.Body)},
		"X-Ax-Task-Id":       {"task_01J9ZK2A"},
		"X-Ax-Execution-Id":  {"exec_01J9ZK3Q"},
		"X-Ax-Scheduled-For": {"2026-03-01T02:00:00Z"},
		"X-Ax-Round":         {"1"},
		"X-Ax-Attempt":       {"3"},
		"User-Agent":         {"ax/1.2.3"},
		"X-Env":              {"prod"},
		"Authorization":      {"Bearer t0k"},
	}
	require.Equal(t, want, r.Header)
	require.True(t, verifySignatureHeader(r.Header.Get("Webhook-Signature"), key, r.Header.Get("Webhook-Id"), time.Unix(ts, 0), r.Body))
}

func TestSendMethodAndDefaults(t *testing.T) {
	t.Parallel()

	srv, got := newReceiver(t, nil)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	req := testRequest(srv.URL, mustKey(t))
	req.Method = http.MethodPut
	req.Timeout = 0 // the configured default applies
	res := s.Send(t.Context(), req)
	require.NoError(t, res.Err)

	r := <-got
	require.Equal(t, http.MethodPut, r.Method)
	require.Equal(t, UserAgentDefault, r.Header.Get("User-Agent"))
}

func TestSendScheduledForFormat(t *testing.T) {
	t.Parallel()

	shanghai := time.FixedZone("CST", 8*3600)
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC), "2026-03-01T02:00:00Z"},
		{time.Date(2026, 3, 1, 2, 0, 0, 500_000_000, time.UTC), "2026-03-01T02:00:00.5Z"},
		{time.Date(2026, 3, 1, 2, 0, 0, 123_456_789, time.UTC), "2026-03-01T02:00:00.123456789Z"},
		{time.Date(2026, 3, 1, 10, 0, 0, 0, shanghai), "2026-03-01T02:00:00Z"},
	}
	srv, got := newReceiver(t, nil)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	for _, tt := range tests {
		req := testRequest(srv.URL, mustKey(t))
		req.ScheduledFor = tt.in
		require.NoError(t, s.Send(t.Context(), req).Err)
		require.Equal(t, tt.want, (<-got).Header.Get("X-Ax-Scheduled-For"))
	}
}

// TestSendOnTheWire reads the raw request bytes: the body must be exactly
// the payload, with no re-encoding, and ax's headers must be present once.
func TestSendOnTheWire(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	raw := make(chan []byte, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		var head bytes.Buffer
		contentLength := 0
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
				contentLength, _ = strconv.Atoi(strings.TrimSpace(v))
			}
			if line == "\r\n" {
				break
			}
		}
		body := make([]byte, contentLength)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		raw <- append(head.Bytes(), body...)
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	}()

	body := []byte("{\"b\":1,  \"a\":2,\n\t\"s\":\"caf\u00e9 \\u00e9 \\/\"}\n")
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)
	req := testRequest("http://"+ln.Addr().String()+"/hook", key)
	req.Body = body
	req.Headers = map[string]string{"webhook-id": "forged", "X-Custom": "v"}
	res := s.Send(t.Context(), req)
	require.NoError(t, res.Err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "ok", res.Excerpt)

	wire := <-raw
	require.True(t, bytes.HasSuffix(wire, append([]byte("\r\n\r\n"), body...)), "the body is sent byte for byte")
	head := string(wire[:len(wire)-len(body)])
	require.True(t, strings.HasPrefix(head, "POST /hook HTTP/1.1\r\n"), head)
	for _, line := range []string{
		"Host: " + ln.Addr().String(),
		"Content-Type: application/json",
		"Content-Length: " + strconv.Itoa(len(body)),
		"Idempotency-Key: exec_01J9ZK3Q",
		"Webhook-Id: exec_01J9ZK3Q",
		"X-Ax-Task-Id: task_01J9ZK2A",
		"X-Ax-Execution-Id: exec_01J9ZK3Q",
		"X-Ax-Scheduled-For: 2026-03-01T02:00:00Z",
		"X-Ax-Round: 1",
		"X-Ax-Attempt: 1",
		"User-Agent: ax",
		"X-Custom: v",
	} {
		require.Equal(t, 1, strings.Count(head, "\r\n"+line+"\r\n"), "want exactly one %q in\n%s", line, head)
	}
	require.Equal(t, 1, strings.Count(strings.ToLower(head), "\r\nwebhook-id:"), head)
	require.NotContains(t, head, "forged")
	require.NotContains(t, strings.ToLower(head), "transfer-encoding")
}

func TestSendCustomHeadersCannotOverride(t *testing.T) {
	t.Parallel()

	srv, got := newReceiver(t, nil)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)
	req := testRequest(srv.URL, key)
	req.Headers = map[string]string{
		"Content-Type":       "text/plain",
		"content-type":       "text/html",
		"Idempotency-Key":    "evil",
		"webhook-id":         "evil",
		"WEBHOOK-TIMESTAMP":  "1",
		"Webhook-Signature":  "v1,Zm9yZ2Vk",
		"Webhook-Future":     "evil",
		"X-Ax-Task-Id":       "evil",
		"x-ax-execution-id":  "evil",
		"X-Ax-Scheduled-For": "evil",
		"X-Ax-Attempt":       "99",
		"X-Ax-Anything":      "evil",
		"User-Agent":         "evil",
		"Host":               "evil.example",
		"Content-Length":     "1",
		"Transfer-Encoding":  "chunked",
		"Connection":         "close",
		"Upgrade":            "h2c",
		"Expect":             "100-continue",
		"X-Env":              "prod",
		"Authorization":      "Bearer t0k",
	}
	res := s.Send(t.Context(), req)
	require.NoError(t, res.Err)
	require.Equal(t, http.StatusNoContent, res.StatusCode)

	r := <-got
	for name, values := range r.Header {
		for _, v := range values {
			require.NotContains(t, v, "evil", name)
		}
	}
	require.Equal(t, srv.Listener.Addr().String(), r.Host)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.Equal(t, "exec_01J9ZK3Q", r.Header.Get("Webhook-Id"))
	require.Equal(t, "1", r.Header.Get("X-Ax-Attempt"))
	require.Equal(t, "ax", r.Header.Get("User-Agent"))
	require.Empty(t, r.Header.Get("X-Ax-Anything"))
	require.Empty(t, r.Header.Get("Webhook-Future"))
	require.Empty(t, r.Header.Get("Upgrade"))
	require.Empty(t, r.Header.Get("Expect"))
	require.Equal(t, []byte(`{"b":1,  "a":2}`), r.Body)
	require.True(t, verifySignatureHeader(r.Header.Get("Webhook-Signature"), key, "exec_01J9ZK3Q",
		time.Unix(mustAtoi(t, r.Header.Get("Webhook-Timestamp")), 0), r.Body))
	require.Equal(t, "prod", r.Header.Get("X-Env"))
	require.Equal(t, "Bearer t0k", r.Header.Get("Authorization"))
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

func TestSendInvalidRequest(t *testing.T) {
	t.Parallel()

	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)

	tests := []struct {
		name   string
		modify func(*Request)
		hidden string // must not appear in the error
	}{
		{"ftp scheme", func(r *Request) { r.URL = strings.Replace(srv.URL, "http", "ftp", 1) }, ""},
		{"no scheme", func(r *Request) { r.URL = strings.TrimPrefix(srv.URL, "http://") }, ""},
		{"no host", func(r *Request) { r.URL = "http:///hook" }, ""},
		{"malformed", func(r *Request) { r.URL = "http://[::1/hook?token=s3cr3t" }, "s3cr3t"},
		{"credentials", func(r *Request) { r.URL = strings.Replace(srv.URL, "://", "://user:pa55@", 1) }, "pa55"},
		{"no execution id", func(r *Request) { r.ExecutionID = "" }, ""},
		{"no keys", func(r *Request) { r.Keys = nil }, ""},
		{"empty key", func(r *Request) { r.Keys = [][]byte{key, {}} }, ""},
		{"bad method", func(r *Request) { r.Method = "GET /x" }, ""},
		{"header injection", func(r *Request) { r.Headers = map[string]string{"X-A": "s3cr3t\r\nX-Injected: 1"} }, "s3cr3t"},
		{"header NUL", func(r *Request) { r.Headers = map[string]string{"X-A": "s3cr3t\x00"} }, "s3cr3t"},
		{"header name", func(r *Request) { r.Headers = map[string]string{"X A": "v"} }, ""},
		{"empty header name", func(r *Request) { r.Headers = map[string]string{"": "v"} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			req := testRequest(srv.URL, key)
			tt.modify(&req)
			res := s.Send(t.Context(), req)
			require.ErrorIs(t, res.Err, ErrInvalidRequest)
			require.Zero(t, res.StatusCode)
			if tt.hidden != "" {
				require.NotContains(t, res.Err.Error(), tt.hidden)
			}
			require.Equal(t, Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassInvalidRequest}, Classify(res, time.Now()))
		})
	}
	t.Cleanup(func() { require.Zero(t, hits.Load(), "no invalid request may reach the receiver") })
}

// TestSendClassification runs every status row through a real server.
func TestSendClassification(t *testing.T) {
	t.Parallel()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ra := r.URL.Query().Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		if loc := r.URL.Query().Get("location"); loc != "" {
			w.Header().Set("Location", loc)
		}
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)

	retry := func(class string) Class { return Class{Outcome: service.OutcomeRetry, ErrorClass: class} }
	permanent := func(class string) Class { return Class{Outcome: service.OutcomePermanent, ErrorClass: class} }
	withRetryAfter := func(c Class, d time.Duration) Class { c.RetryAfter = d; return c }
	tests := []struct {
		path string
		want Class
	}{
		{"/200", Class{Outcome: service.OutcomeSucceeded}},
		{"/201", Class{Outcome: service.OutcomeSucceeded}},
		{"/202", Class{Outcome: service.OutcomeSucceeded}},
		{"/204", Class{Outcome: service.OutcomeSucceeded}},
		{"/299", Class{Outcome: service.OutcomeSucceeded}},
		{"/301?location=/elsewhere", permanent(ErrorClassHTTP3xx)},
		{"/302?location=/elsewhere", permanent(ErrorClassHTTP3xx)},
		{"/303?location=/elsewhere", permanent(ErrorClassHTTP3xx)},
		{"/304", permanent(ErrorClassHTTP3xx)},
		{"/307?location=/elsewhere", permanent(ErrorClassHTTP3xx)},
		{"/308?location=/elsewhere", permanent(ErrorClassHTTP3xx)},
		{"/400", permanent(ErrorClassHTTP4xx)},
		{"/401", permanent(ErrorClassHTTP4xx)},
		{"/403", permanent(ErrorClassHTTP4xx)},
		{"/404", permanent(ErrorClassHTTP4xx)},
		{"/405", permanent(ErrorClassHTTP4xx)},
		{"/408", retry(ErrorClassHTTP4xx)},
		{"/409", permanent(ErrorClassHTTP4xx)},
		{"/410", Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassGone, DisableEndpoint: true}},
		{"/413", permanent(ErrorClassHTTP4xx)},
		{"/422", permanent(ErrorClassHTTP4xx)},
		{"/425", retry(ErrorClassHTTP4xx)},
		{"/429", retry(ErrorClassHTTP4xx)},
		{"/429?retry_after=120", withRetryAfter(retry(ErrorClassHTTP4xx), 120*time.Second)},
		{"/429?retry_after=abc", retry(ErrorClassHTTP4xx)},
		{"/429?retry_after=-1", retry(ErrorClassHTTP4xx)},
		{"/451", permanent(ErrorClassHTTP4xx)},
		{"/500", retry(ErrorClassHTTP5xx)},
		{"/500?retry_after=120", retry(ErrorClassHTTP5xx)},
		{"/501", permanent(ErrorClassHTTP5xx)},
		{"/502", retry(ErrorClassHTTP5xx)},
		{"/503", retry(ErrorClassHTTP5xx)},
		{"/503?retry_after=30", withRetryAfter(retry(ErrorClassHTTP5xx), 30*time.Second)},
		{"/504", retry(ErrorClassHTTP5xx)},
		{"/505", permanent(ErrorClassHTTP5xx)},
		{"/507", retry(ErrorClassHTTP5xx)},
		{"/511", retry(ErrorClassHTTP5xx)},
		{"/599", retry(ErrorClassHTTP5xx)},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()

			res := s.Send(t.Context(), testRequest(srv.URL+tt.path, key))
			require.NoError(t, res.Err)
			code, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(tt.path, "?", 2)[0], "/"))
			require.Equal(t, code, res.StatusCode)
			require.Equal(t, tt.want, Classify(res, time.Now()))
		})
	}
}

func TestSendRetryAfterHTTPDate(t *testing.T) {
	t.Parallel()

	at := time.Now().Add(90 * time.Second).UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", at.Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})

	res := s.Send(t.Context(), testRequest(srv.URL, mustKey(t)))
	require.NoError(t, res.Err)
	now := at.Add(-90 * time.Second).Truncate(time.Second)
	c := Classify(res, now)
	require.Equal(t, service.OutcomeRetry, c.Outcome)
	require.Equal(t, 90*time.Second, c.RetryAfter)
}

// newTarpit starts a receiver that holds every request until the client
// goes away or the test ends. With writeHeaders it answers 200 at once and
// then sends the body one byte at a time, forever.
func newTarpit(t *testing.T, writeHeaders bool) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets net/http notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		if writeHeaders {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("partial "))
			w.(http.Flusher).Flush()
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-done:
				return
			case <-tick.C:
				if writeHeaders {
					_, _ = w.Write([]byte("x"))
					w.(http.Flusher).Flush()
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: releases the handlers Close waits for
	return srv
}

func TestSendTimeout(t *testing.T) {
	t.Parallel()

	const timeout = 300 * time.Millisecond
	const margin = 2 * time.Second // generous: the race detector on 2 cores

	t.Run("no response", func(t *testing.T) {
		t.Parallel()

		srv := newTarpit(t, false)
		s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
		req := testRequest(srv.URL, mustKey(t))
		req.Timeout = timeout

		res := s.Send(t.Context(), req)
		require.Error(t, res.Err)
		require.NotErrorIs(t, res.Err, ErrCallerDeadline)
		require.Zero(t, res.StatusCode)
		require.GreaterOrEqual(t, res.Latency, timeout)
		require.Less(t, res.Latency, timeout+margin)
		require.Equal(t, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassTimeout}, Classify(res, time.Now()))
	})

	t.Run("endless body", func(t *testing.T) {
		t.Parallel()

		srv := newTarpit(t, true)
		s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
		req := testRequest(srv.URL, mustKey(t))
		req.Timeout = timeout

		// The receiver answered 200: that stands, the body is cut short.
		res := s.Send(t.Context(), req)
		require.NoError(t, res.Err)
		require.Equal(t, http.StatusOK, res.StatusCode)
		require.True(t, strings.HasPrefix(res.Excerpt, "partial "), res.Excerpt)
		require.GreaterOrEqual(t, res.Latency, timeout)
		require.Less(t, res.Latency, timeout+margin)
		require.Equal(t, service.OutcomeSucceeded, Classify(res, time.Now()).Outcome)
	})

	t.Run("caller deadline", func(t *testing.T) {
		t.Parallel()

		srv := newTarpit(t, false)
		s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
		req := testRequest(srv.URL, mustKey(t))
		req.Timeout = time.Minute

		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		res := s.Send(ctx, req)
		require.Less(t, res.Latency, timeout+margin)
		require.ErrorIs(t, res.Err, ErrCallerDeadline)
		require.Equal(t, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassJobTimeout}, Classify(res, time.Now()))
	})
}

func TestSendConnectionRefused(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)
	res := s.Send(t.Context(), testRequest("http://"+addr+"/hook", key))
	require.Error(t, res.Err)
	require.Equal(t, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassConnection}, Classify(res, time.Now()))
	requireNoSecrets(t, res.Err, key)
}

func TestSendConnectionReset(t *testing.T) {
	t.Parallel()

	// A receiver that reads the request and hangs up without answering.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, _ = io.Copy(io.Discard, conn)
			_ = conn.Close()
		}
	}()

	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	res := s.Send(t.Context(), testRequest("http://"+ln.Addr().String(), mustKey(t)))
	require.Error(t, res.Err)
	require.Equal(t, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassConnection}, Classify(res, time.Now()))
}

func TestSendDNSFailure(t *testing.T) {
	t.Parallel()

	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	res := s.Send(t.Context(), testRequest("http://ax-webhook-test.invalid/hook", mustKey(t)))
	require.Error(t, res.Err)
	require.Equal(t, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassDNS}, Classify(res, time.Now()))
}

func TestSendTLSCertificateError(t *testing.T) {
	t.Parallel()

	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})

	// httptest's certificate is not signed by a trusted authority.
	res := s.Send(t.Context(), testRequest(srv.URL, mustKey(t)))
	require.Error(t, res.Err)
	require.Equal(t, Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassTLS}, Classify(res, time.Now()))
}

func TestSendRedirectsNotFollowed(t *testing.T) {
	t.Parallel()

	// Where an attacker would point a redirect: it must not even be dialed.
	var targetHits, conns atomic.Int32
	metadata := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		targetHits.Add(1)
	}))
	t.Cleanup(metadata.Close)

	mux := http.NewServeMux()
	mux.HandleFunc("/target", func(w http.ResponseWriter, _ *http.Request) {
		targetHits.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/redirect/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		http.Redirect(w, r, "/target", code)
	})
	mux.HandleFunc("/metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, metadata.URL+"/latest/meta-data", http.StatusFound)
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)
	for _, code := range []int{301, 302, 303, 307, 308} {
		res := s.Send(t.Context(), testRequest(fmt.Sprintf("%s/redirect/%d", srv.URL, code), key))
		require.NoError(t, res.Err)
		require.Equal(t, code, res.StatusCode)
		require.Equal(t, "/target", res.Header.Get("Location"))
		require.Equal(t, Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassHTTP3xx}, Classify(res, time.Now()))
	}
	res := s.Send(t.Context(), testRequest(srv.URL+"/metadata", key))
	require.NoError(t, res.Err)
	require.Equal(t, http.StatusFound, res.StatusCode)
	require.Equal(t, ErrorClassHTTP3xx, Classify(res, time.Now()).ErrorClass)

	require.Zero(t, targetHits.Load(), "a redirect target was requested")
	require.Equal(t, int32(1), conns.Load(), "one kept-alive connection, no second hop")
}

func TestSendExcerpt(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name     string
		body     string
		maxBytes int64
		want     string
	}{
		{"short", "accepted", 0, "accepted"},
		{"default cap", strings.Repeat("a", 100<<10), 0, strings.Repeat("a", MaxResponseBytesDefault)},
		{"custom cap", strings.Repeat("b", 10<<10), 100, strings.Repeat("b", 100)},
		{"cut rune dropped", strings.Repeat("é", 10), 5, "éé"},
		{"invalid utf-8 replaced", "ok\xff\xfe!", 0, "ok\uFFFD!"},
		{"NUL removed", "a\x00b", 0, "ab"},
		{"empty", "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			s := newTestSender(t, SenderConfig{AllowPrivateTargets: true, MaxResponseBytes: tt.maxBytes})

			res := s.Send(t.Context(), testRequest(srv.URL, mustKey(t)))
			require.NoError(t, res.Err)
			require.Equal(t, tt.want, res.Excerpt)
			require.True(t, utf8.ValidString(res.Excerpt))
		})
	}
}

// TestSendReusesConnections checks that bodies are drained and closed:
// sequential deliveries to one receiver share one connection.
func TestSendReusesConnections(t *testing.T) {
	t.Parallel()

	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("z"), 20<<10)) // longer than the excerpt
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)

	for range 5 {
		res := s.Send(t.Context(), testRequest(srv.URL, key))
		require.NoError(t, res.Err)
		require.Len(t, res.Excerpt, MaxResponseBytesDefault)
	}
	require.Equal(t, int32(1), conns.Load())
}

func TestSendNoProxy(t *testing.T) {
	t.Parallel()

	s := newTestSender(t, SenderConfig{})
	require.Nil(t, s.transport.Proxy, "the proxy must never come from the environment")
	require.True(t, s.transport.ForceAttemptHTTP2)
}

func TestNewSenderRejectsInvalidConfig(t *testing.T) {
	t.Parallel()

	for _, cfg := range []SenderConfig{
		{MaxResponseBytes: -1},
		{MaxResponseBytes: ResponseReadMax + 1},
		{MaxIdleConnsPerHost: -1},
		{DialTimeout: -time.Second},
		{UserAgent: "ax\r\nX-Evil: 1"},
	} {
		require.Panics(t, func() { NewSender(cfg) }, "%+v", cfg)
	}
}

// TestSendSSRF delivers to loopback, private and metadata targets with the
// guard on: every one is refused at dial time, classified permanent, and
// the local receiver is never reached. Nothing leaves the machine: the
// guard refuses before connect(2).
func TestSendSSRF(t *testing.T) {
	t.Parallel()

	var hits atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	srv4 := httptest.NewServer(handler)
	t.Cleanup(srv4.Close)
	_, port4, err := net.SplitHostPort(srv4.Listener.Addr().String())
	require.NoError(t, err)
	srv6 := newIPv6Server(t, handler)
	_, port6, err := net.SplitHostPort(srv6.Listener.Addr().String())
	require.NoError(t, err)

	hosts := []struct {
		host string // URL host, without port
		port string
	}{
		{"127.0.0.1", port4},
		{"127.1", port4},
		{"2130706433", port4},
		{"0x7f000001", port4},
		{"[::1]", port6},
		{"[::ffff:127.0.0.1]", port4},
		{"0.0.0.0", port4},
		{"localhost", port4},
		{"10.0.0.1", "80"},
		{"172.16.0.1", "80"},
		{"192.168.1.1", "80"},
		{"169.254.169.254", "80"},
		{"100.100.100.200", "80"},
		{"[fd00::1]", "80"},
		{"[fd00:ec2::254]", "80"},
		{"[fe80::1]", "80"},
		{"[64:ff9b::7f00:1]", "80"},
		{"198.18.0.1", "80"},
		{"224.0.0.1", "80"},
	}
	s := newTestSender(t, SenderConfig{})
	key := mustKey(t)
	for _, tt := range hosts {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()

			res := s.Send(t.Context(), testRequest("http://"+tt.host+":"+tt.port+"/hook", key))
			require.ErrorIs(t, res.Err, ErrBlockedTarget)
			require.Zero(t, res.StatusCode)
			require.Equal(t, Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassBlockedTarget}, Classify(res, time.Now()))
			requireNoSecrets(t, res.Err, key)
		})
	}
	t.Cleanup(func() { require.Zero(t, hits.Load(), "a blocked target was reached") })
}

// TestSendBlockedTargetNamesTheSetting: the error a refused send records
// (an execution's last_error) tells a user whose receiver runs on
// 127.0.0.1 which server setting lets it through.
func TestSendBlockedTargetNamesTheSetting(t *testing.T) {
	t.Parallel()

	srv, _ := newReceiver(t, nil)
	s := newTestSender(t, SenderConfig{})
	res := s.Send(t.Context(), testRequest(srv.URL+"/hook", mustKey(t)))
	require.ErrorIs(t, res.Err, ErrBlockedTarget)
	require.ErrorContains(t, res.Err, "is not allowed: loopback")
	require.ErrorContains(t, res.Err, "AX_ALLOW_PRIVATE_TARGETS=true")
}

// TestSendAllowPrivateTargets reaches the loopback receivers the guard
// refuses by default.
func TestSendAllowPrivateTargets(t *testing.T) {
	t.Parallel()

	srv4, got4 := newReceiver(t, nil)
	_, port4, err := net.SplitHostPort(srv4.Listener.Addr().String())
	require.NoError(t, err)
	got6 := make(chan struct{}, 1)
	srv6 := newIPv6Server(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got6 <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	}))
	_, port6, err := net.SplitHostPort(srv6.Listener.Addr().String())
	require.NoError(t, err)

	s := newTestSender(t, SenderConfig{AllowPrivateTargets: true})
	key := mustKey(t)
	for _, url := range []string{
		"http://127.0.0.1:" + port4 + "/hook",
		"http://localhost:" + port4 + "/hook",
		"http://[::1]:" + port6 + "/hook",
	} {
		res := s.Send(t.Context(), testRequest(url, key))
		require.NoError(t, res.Err, url)
		require.Equal(t, http.StatusNoContent, res.StatusCode, url)
		require.Equal(t, service.OutcomeSucceeded, Classify(res, time.Now()).Outcome)
	}
	<-got4
	<-got4
	<-got6

	// Ambiguous numeric hosts stay refused: they are a spelling trick,
	// not a private-network question.
	res := s.Send(t.Context(), testRequest("http://127.1:"+port4+"/hook", key))
	require.ErrorIs(t, res.Err, ErrBlockedTarget)
}

// newIPv6Server starts an httptest server on [::1]. Loopback IPv6 is
// required: the SSRF tests must cover it.
func newIPv6Server(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	require.NoError(t, err, "IPv6 loopback (::1) is needed for the SSRF tests")
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// requireNoSecrets checks that an error shows neither the signing key nor
// a signature.
func requireNoSecrets(t *testing.T, err error, key []byte) {
	t.Helper()
	msg := err.Error()
	require.NotContains(t, msg, base64.StdEncoding.EncodeToString(key))
	require.NotContains(t, msg, base64.RawStdEncoding.EncodeToString(key)[:16])
	require.NotContains(t, msg, "v1,")
}

// TestEndpointURLCache: an endpoint URL is parsed once and reused; a bad
// one is rejected every time and never cached; the cache starts over past
// urlCacheMax entries.
func TestEndpointURLCache(t *testing.T) {
	t.Parallel()
	s := newTestSender(t, SenderConfig{})
	a, err := s.endpointURL("https://hooks.example.com/a?x=1")
	require.NoError(t, err)
	b, err := s.endpointURL("https://hooks.example.com/a?x=1")
	require.NoError(t, err)
	require.Same(t, a, b)
	for range 2 {
		_, err := s.endpointURL("https://user:pw@hooks.example.com/")
		require.ErrorIs(t, err, ErrInvalidRequest)
		_, err = s.endpointURL("ftp://hooks.example.com/")
		require.ErrorIs(t, err, ErrInvalidRequest)
	}
	_, cached := s.urls.Load("ftp://hooks.example.com/")
	require.False(t, cached)
	for i := range urlCacheMax + 1 {
		_, err := s.endpointURL(fmt.Sprintf("https://hooks.example.com/%d", i))
		require.NoError(t, err)
	}
	require.LessOrEqual(t, s.urlCount.Load(), int64(urlCacheMax))
	_, cached = s.urls.Load("https://hooks.example.com/a?x=1")
	require.False(t, cached, "the cache started over")
}
