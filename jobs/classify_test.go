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

	"github.com/axhq/ax/service"
)

func TestClassifyErrors(t *testing.T) {
	t.Parallel()

	urlErr := func(err error) error { return &url.Error{Op: "Post", URL: "https://hooks.example.com/", Err: err} }
	dialErr := func(err error) error { return urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: err}) }

	tests := []struct {
		name    string
		err     error
		outcome service.OutcomeKind
		class   string
	}{
		{"blocked", dialErr(&BlockedTargetError{Target: "127.0.0.1", Reason: "loopback"}), service.OutcomePermanent, ErrorClassBlockedTarget},
		{"invalid request", fmt.Errorf("%w: no signing key", ErrInvalidRequest), service.OutcomePermanent, ErrorClassInvalidRequest},
		{"deadline", urlErr(context.DeadlineExceeded), service.OutcomeRetry, ErrorClassTimeout},
		{"net timeout", dialErr(os.ErrDeadlineExceeded), service.OutcomeRetry, ErrorClassTimeout},
		{"job deadline", fmt.Errorf("%w: %w", ErrCallerDeadline, urlErr(context.DeadlineExceeded)), service.OutcomeRetry, ErrorClassJobTimeout},
		{"canceled", urlErr(context.Canceled), service.OutcomeRetry, ErrorClassCanceled},
		{"refused", dialErr(os.NewSyscallError("connect", syscall.ECONNREFUSED)), service.OutcomeRetry, ErrorClassConnection},
		{"reset", urlErr(os.NewSyscallError("read", syscall.ECONNRESET)), service.OutcomeRetry, ErrorClassConnection},
		{"EOF", urlErr(io.EOF), service.OutcomeRetry, ErrorClassConnection},
		{"unexpected EOF", urlErr(io.ErrUnexpectedEOF), service.OutcomeRetry, ErrorClassConnection},
		{"unreachable", dialErr(os.NewSyscallError("connect", syscall.ENETUNREACH)), service.OutcomeRetry, ErrorClassConnection},
		{"dns not found", dialErr(&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}), service.OutcomeRetry, ErrorClassDNS},
		{"dns timeout", dialErr(&net.DNSError{Err: "i/o timeout", Name: "x.example", IsTimeout: true}), service.OutcomeRetry, ErrorClassDNS},
		{"unknown authority", urlErr(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), service.OutcomePermanent, ErrorClassTLS},
		{"hostname mismatch", urlErr(x509.HostnameError{Host: "x"}), service.OutcomePermanent, ErrorClassTLS},
		{"expired", urlErr(x509.CertificateInvalidError{Reason: x509.Expired}), service.OutcomePermanent, ErrorClassTLS},
		{"tls alert", urlErr(tls.AlertError(40)), service.OutcomeRetry, ErrorClassTLS},
		{"not tls", urlErr(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), service.OutcomeRetry, ErrorClassTLS},
		{"unforeseen", urlErr(errors.New("something odd")), service.OutcomeRetry, ErrorClassConnection},
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
		{"429 delta", Result{StatusCode: 429, Header: header("120")}, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP4xx, RetryAfter: 120 * time.Second}},
		{"503 date", Result{StatusCode: 503, Header: header("Sun, 01 Mar 2026 12:01:30 GMT")}, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP5xx, RetryAfter: 90 * time.Second}},
		{"429 garbage", Result{StatusCode: 429, Header: header("abc")}, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP4xx}},
		{"429 none", Result{StatusCode: 429}, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP4xx}},
		{"500 ignores retry-after", Result{StatusCode: 500, Header: header("120")}, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP5xx}},
		{"502 ignores retry-after", Result{StatusCode: 502, Header: header("120")}, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP5xx}},
		{"410", Result{StatusCode: 410, Header: header("120")}, Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassGone, DisableEndpoint: true}},
		{"101", Result{StatusCode: 101}, Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassHTTPOther}},
		{"600", Result{StatusCode: 600}, Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassHTTPOther}},
		{"599", Result{StatusCode: 599}, Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP5xx}},
		{"299", Result{StatusCode: 299}, Class{Outcome: service.OutcomeSucceeded}},
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
