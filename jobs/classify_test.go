package jobs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClassifyErrors(t *testing.T) {
	t.Parallel()

	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "https://hooks.example.com/", Err: err} }
	dialErr := func(err error) error { return urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: err}) }

	tests := []struct {
		name    string
		err     error
		outcome Outcome
		class   string
	}{
		{"blocked", dialErr(&BlockedTargetError{Target: "127.0.0.1", Reason: "loopback"}), OutcomePermanent, ErrorClassBlockedTarget},
		{"invalid request", fmt.Errorf("%w: no signing key", ErrInvalidRequest), OutcomePermanent, ErrorClassInvalidRequest},
		{"deadline", urlErr(context.DeadlineExceeded), OutcomeRetry, ErrorClassTimeout},
		{"net timeout", dialErr(os.ErrDeadlineExceeded), OutcomeRetry, ErrorClassTimeout},
		{"canceled", urlErr(context.Canceled), OutcomeRetry, ErrorClassCanceled},
		{"refused", dialErr(os.NewSyscallError("connect", syscall.ECONNREFUSED)), OutcomeRetry, ErrorClassConnection},
		{"reset", urlErr(os.NewSyscallError("read", syscall.ECONNRESET)), OutcomeRetry, ErrorClassConnection},
		{"EOF", urlErr(io.EOF), OutcomeRetry, ErrorClassConnection},
		{"unexpected EOF", urlErr(io.ErrUnexpectedEOF), OutcomeRetry, ErrorClassConnection},
		{"unreachable", dialErr(os.NewSyscallError("connect", syscall.ENETUNREACH)), OutcomeRetry, ErrorClassConnection},
		{"dns not found", dialErr(&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}), OutcomeRetry, ErrorClassDNS},
		{"dns timeout", dialErr(&net.DNSError{Err: "i/o timeout", Name: "x.example", IsTimeout: true}), OutcomeRetry, ErrorClassDNS},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), OutcomePermanent, ErrorClassTLS},
		{"hostname mismatch", urlErr(x509.HostnameError{Host: "x"}), OutcomePermanent, ErrorClassTLS},
		{"expired", urlErr(x509.CertificateInvalidError{Reason: x509.Expired}), OutcomePermanent, ErrorClassTLS},
		{"tls alert", urlErr(tls.AlertError(40)), OutcomeRetry, ErrorClassTLS},
		{"not tls", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), OutcomeRetry, ErrorClassTLS},
		{"unforeseen", urlErr(errors.New("something odd")), OutcomeRetry, ErrorClassConnection},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			c := Classify(Result{Err: tt.err}, time.Now())
			require.Equal(t, tt.outcome, c.Outcome)
			require.Equal(t, tt.class, c.ErrorClass)
			require.False(t, c.DisableEndpoint)
			require.Zero(t, c.RetryAfter)
		})
	}
}

func TestClassifyStatus(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	header := func(retryAfter string) http.Header { return http.Header{"Retry-After": {retryAfter}} }

	tests := []struct {
		name string
		res  Result
		want Class
	}{
		{"429 delta", Result{StatusCode: 429, Header: header("120")}, Class{Outcome: OutcomeRetry, ErrorClass: ErrorClassHTTP4xx, RetryAfter: 120 * time.Second}},
		{"503 date", Result{StatusCode: 503, Header: header("Sun, 01 Mar 2026 12:01:30 GMT")}, Class{Outcome: OutcomeRetry, ErrorClass: ErrorClassHTTP5xx, RetryAfter: 90 * time.Second}},
		{"429 garbage", Result{StatusCode: 429, Header: header("abc")}, Class{Outcome: OutcomeRetry, ErrorClass: ErrorClassHTTP4xx}},
		{"429 none", Result{StatusCode: 429}, Class{Outcome: OutcomeRetry, ErrorClass: ErrorClassHTTP4xx}},
		{"500 ignores retry-after", Result{StatusCode: 500, Header: header("120")}, Class{Outcome: OutcomeRetry, ErrorClass: ErrorClassHTTP5xx}},
		{"502 ignores retry-after", Result{StatusCode: 502, Header: header("120")}, Class{Outcome: OutcomeRetry, ErrorClass: ErrorClassHTTP5xx}},
		{"410", Result{StatusCode: 410, Header: header("120")}, Class{Outcome: OutcomePermanent, ErrorClass: ErrorClassGone, DisableEndpoint: true}},
		{"101", Result{StatusCode: 101}, Class{Outcome: OutcomePermanent, ErrorClass: ErrorClassHTTPOther}},
		{"600", Result{StatusCode: 600}, Class{Outcome: OutcomePermanent, ErrorClass: ErrorClassHTTPOther}},
		{"599", Result{StatusCode: 599}, Class{Outcome: OutcomeRetry, ErrorClass: ErrorClassHTTP5xx}},
		{"299", Result{StatusCode: 299}, Class{Outcome: OutcomeSuccess}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Classify(tt.res, now))
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"120", 120 * time.Second, true},
		{" 120 ", 120 * time.Second, true},
		{"0", 0, true},
		{"9999999", 9999999 * time.Second, true},
		{"99999999999999999999999", math.MaxInt64, true},
		{"Sun, 01 Mar 2026 12:01:30 GMT", 90 * time.Second, true},  // IMF-fixdate
		{"Sunday, 01-Mar-26 12:01:30 GMT", 90 * time.Second, true}, // RFC 850
		{"Sun Mar  1 12:01:30 2026", 90 * time.Second, true},       // asctime
		{"Sun, 01 Mar 2026 12:00:00 GMT", 0, true},
		{"Sun, 01 Mar 2026 11:59:59 GMT", 0, false}, // in the past
		{"", 0, false},
		{"abc", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"120s", 0, false},
		{"2026-03-01T12:01:30Z", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()

			got, ok := ParseRetryAfter(tt.in, now)
			require.Equal(t, tt.ok, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()

	const (
		initial = time.Second
		maxWait = time.Minute
	)
	fixed := func(f float64) func() float64 { return func() float64 { return f } }

	tests := []struct {
		name    string
		attempt int
		rnd     float64
		want    time.Duration
	}{
		{"first retry, low", 1, 0, 500 * time.Millisecond},
		{"first retry, high", 1, 0.999999999, time.Second - time.Nanosecond/2},
		{"first retry, mid", 1, 0.5, 750 * time.Millisecond},
		{"second retry, low", 2, 0, time.Second},
		{"third retry, low", 3, 0, 2 * time.Second},
		{"fourth retry, high", 4, 1, 8 * time.Second},
		{"capped, low", 10, 0, 30 * time.Second},
		{"capped, high", 10, 1, time.Minute},
		{"huge attempt", math.MaxInt, 1, time.Minute},
		{"zero attempt is the first", 0, 0, 500 * time.Millisecond},
		{"rnd above range clamps", 1, 7, time.Second},
		{"rnd below range clamps", 1, -3, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.InDelta(t, float64(tt.want), float64(Backoff(tt.attempt, initial, maxWait, fixed(tt.rnd))), 1)
		})
	}

	t.Run("edge policies", func(t *testing.T) {
		t.Parallel()
		require.Zero(t, Backoff(3, 0, time.Minute, fixed(0.5)))
		require.Equal(t, time.Second, Backoff(5, time.Second, 0, fixed(1)), "max below initial is raised to it")
		big := time.Duration(math.MaxInt64)
		require.Equal(t, big, Backoff(200, time.Hour, big, fixed(1)), "no overflow near the top")
	})
}

func TestBackoffJitter(t *testing.T) {
	t.Parallel()

	// With the real random source every value stays in [d/2, d] and the
	// values spread out.
	seen := make(map[time.Duration]bool)
	for range 200 {
		for attempt := 1; attempt <= 12; attempt++ {
			d := Backoff(attempt, time.Second, 5*time.Minute, nil)
			base := min(time.Second<<(attempt-1), 5*time.Minute)
			require.GreaterOrEqual(t, d, base/2)
			require.LessOrEqual(t, d, base)
			if attempt == 3 {
				seen[d] = true
			}
		}
	}
	require.Greater(t, len(seen), 150, "jitter should spread delays")
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()

	mid := func() float64 { return 0.5 }
	tests := []struct {
		name    string
		class   Class
		attempt int
		want    time.Duration
	}{
		{"retry-after honoured", Class{Outcome: OutcomeRetry, RetryAfter: 120 * time.Second}, 1, 120 * time.Second},
		{"retry-after shorter than backoff wins", Class{Outcome: OutcomeRetry, RetryAfter: 2 * time.Second}, 8, 2 * time.Second},
		{"retry-after capped", Class{Outcome: OutcomeRetry, RetryAfter: 9999999 * time.Second}, 1, 10 * time.Minute},
		{"no retry-after: backoff", Class{Outcome: OutcomeRetry}, 3, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, RetryDelay(tt.class, tt.attempt, time.Second, 10*time.Minute, mid))
		})
	}
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()

	require.Equal(t, "success", OutcomeSuccess.String())
	require.Equal(t, "retry", OutcomeRetry.String())
	require.Equal(t, "permanent", OutcomePermanent.String())
	require.Equal(t, "Outcome(0)", Outcome(0).String())
}
