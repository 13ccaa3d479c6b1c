package jobs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/axhq/ax/service"
)

// Error classes recorded on failed attempts. They are stable strings: they
// are stored in execution events and shown to tenants.
const (
	ErrorClassHTTP3xx        = "http_3xx"
	ErrorClassHTTP4xx        = "http_4xx"
	ErrorClassHTTP5xx        = "http_5xx"
	ErrorClassHTTPOther      = "http_other"  // a status outside 200..599
	ErrorClassGone           = "gone"        // 410: the endpoint is gone for good
	ErrorClassTimeout        = "timeout"     // the endpoint's (or task's) timeout passed
	ErrorClassJobTimeout     = "job_timeout" // the job's timeout (AX_JOB_TIMEOUT) passed first
	ErrorClassConnection     = "connection"
	ErrorClassDNS            = "dns"
	ErrorClassTLS            = "tls"
	ErrorClassBlockedTarget  = "blocked_target"
	ErrorClassInvalidRequest = "invalid_request"
	ErrorClassCanceled       = "canceled" // the caller's context ended, e.g. shutdown
)

// Class is the classification of one delivery attempt.
type Class struct {
	// Outcome is what the attempt means for the execution (service's
	// outcome kinds: Finish decides from it).
	Outcome service.OutcomeKind
	// ErrorClass is one of the ErrorClass constants; empty on success.
	ErrorClass string
	// DisableEndpoint is set on 410 Gone: the receiver asks never to be
	// called again.
	DisableEndpoint bool
	// RetryAfter is the delay the receiver asked for with Retry-After on a
	// 429 or 503; 0 means none (or "now"). The task's max backoff caps it
	// (service.RetryPolicy.Delay).
	RetryAfter time.Duration
}

// Classify decides what a Result means:
//
//   - 2xx: success.
//   - 408, 425, 429 and 5xx except 501 and 505: retry. 501 Not Implemented
//     and 505 HTTP Version Not Supported describe what the receiver can
//     do, not its health, so retrying repeats the same answer: permanent.
//   - 410: permanent, and the endpoint should be disabled.
//   - every other 4xx, every 3xx (redirects are never followed) and any
//     status outside 200..599: permanent.
//   - blocked targets, invalid requests and TLS certificate errors:
//     permanent.
//   - timeouts (the attempt's own, or the job's cutting it first: its
//     own class), DNS errors, other TLS failures, refused or reset
//     connections, unexpected EOF and any other transport error: retry.
//
// Retry-After is read only on 429 and 503, the statuses that define it as
// a back-off hint; now is the reference for its HTTP-date form.
func Classify(res Result, now time.Time) Class {
	if res.Err != nil {
		return classifyErr(res.Err)
	}
	code := res.StatusCode
	var c Class
	switch {
	case code >= 200 && code <= 299:
		return Class{Outcome: service.OutcomeSucceeded}
	case code == http.StatusGone:
		return Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassGone, DisableEndpoint: true}
	case code >= 300 && code <= 399:
		return Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassHTTP3xx}
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests:
		c = Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP4xx}
	case code >= 400 && code <= 499:
		return Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassHTTP4xx}
	case code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported:
		return Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassHTTP5xx}
	case code >= 500 && code <= 599:
		c = Class{Outcome: service.OutcomeRetry, ErrorClass: ErrorClassHTTP5xx}
	default:
		return Class{Outcome: service.OutcomePermanent, ErrorClass: ErrorClassHTTPOther}
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		if d, ok := ParseRetryAfter(res.Header.Get("Retry-After"), now); ok {
			c.RetryAfter = d
		}
	}
	return c
}

// classifyErr classifies a transport error (no response was received).
func classifyErr(err error) Class {
	permanent := func(class string) Class { return Class{Outcome: service.OutcomePermanent, ErrorClass: class} }
	retry := func(class string) Class { return Class{Outcome: service.OutcomeRetry, ErrorClass: class} }

	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return permanent(ErrorClassInvalidRequest)
	case errors.Is(err, ErrBlockedTarget):
		return permanent(ErrorClassBlockedTarget)
	case errors.As(err, &dnsErr):
		return retry(ErrorClassDNS)
	case isCertificateError(err):
		return permanent(ErrorClassTLS)
	case errors.Is(err, ErrCallerDeadline):
		return retry(ErrorClassJobTimeout)
	case isTimeout(err):
		return retry(ErrorClassTimeout)
	case errors.Is(err, context.Canceled):
		return retry(ErrorClassCanceled)
	case isTLSError(err):
		return retry(ErrorClassTLS)
	default:
		// Refused, reset, EOF, unreachable and anything unforeseen:
		// retrying a transport failure is the safe default.
		return retry(ErrorClassConnection)
	}
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// isCertificateError reports a failed certificate verification: an
// untrusted, expired or mismatched certificate stays so until the receiver
// fixes it.
func isCertificateError(err error) bool {
	var (
		verifyErr   *tls.CertificateVerificationError
		unknownErr  x509.UnknownAuthorityError
		hostErr     x509.HostnameError
		invalidErr  x509.CertificateInvalidError
		insecureErr x509.InsecureAlgorithmError
	)
	return errors.As(err, &verifyErr) || errors.As(err, &unknownErr) || errors.As(err, &hostErr) ||
		errors.As(err, &invalidErr) || errors.As(err, &insecureErr)
}

// isTLSError reports other TLS failures (alerts, a non-TLS server), which
// may be transient.
func isTLSError(err error) bool {
	var (
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
	)
	return errors.As(err, &recordErr) || errors.As(err, &alertErr)
}

// ParseRetryAfter parses a Retry-After value, either delta-seconds ("120")
// or an HTTP-date ("Wed, 21 Oct 2015 07:28:00 GMT"), into a delay from now.
// It reports false for an empty, malformed or negative value and for a date
// in the past. Absurdly large values saturate instead of overflowing.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64, true // too many digits: out of range, not malformed
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, false
	}
	return d, true
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
