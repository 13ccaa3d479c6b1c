package jobs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/axhq/ax/service/endpoint"
)

// ErrInvalidRequest means a delivery could not be built: a malformed URL, a
// scheme other than http/https, credentials in the URL, an invalid custom
// header, a missing execution id or signing key. Retrying cannot fix it.
var ErrInvalidRequest = errors.New("invalid webhook request")

// ErrCallerDeadline means the context Send was given reached its deadline
// (a job's timeout, AX_JOB_TIMEOUT) before the attempt's own timeout, with
// the receiver's answer still outstanding. Result.Err wraps it.
var ErrCallerDeadline = errors.New("the caller's deadline passed before the receiver answered")

// errAttemptTimeout ends an attempt's context when the attempt's own
// timeout (Request.Timeout) passes; it is a context.DeadlineExceeded.
var errAttemptTimeout = fmt.Errorf("the attempt's timeout passed: %w", context.DeadlineExceeded)

// Sender defaults. See SenderConfig.
const (
	UserAgentDefault              = "ax"
	MaxResponseBytesDefault       = 4 << 10
	MaxIdleConnsPerHostDefault    = 8
	DialTimeoutDefault            = 10 * time.Second
	TLSHandshakeTimeoutDefault    = 10 * time.Second
	ResponseHeaderTimeoutDefault  = 5 * time.Minute
	MaxResponseHeaderBytesDefault = 64 << 10
	TimeoutDefault                = 30 * time.Second

	// ResponseReadMax bounds how much of a response body is read (the
	// excerpt, then a drain so the connection can be reused). A longer
	// body is abandoned and its connection closed.
	ResponseReadMax = 64 << 10

	maxIdleConns    = 256
	idleConnTimeout = 90 * time.Second
)

// SenderConfig configures a Sender. Zero fields take the documented
// defaults (WithDefaults).
type SenderConfig struct {
	// AllowPrivateTargets lets webhooks reach loopback, private and other
	// special-purpose addresses (development, tests). Default false.
	AllowPrivateTargets bool
	// UserAgent is sent as User-Agent, e.g. "ax/1.4.0". Default "ax".
	UserAgent string
	// MaxResponseBytes caps the response excerpt kept in Result.Excerpt.
	// Default 4 KiB; at most ResponseReadMax.
	MaxResponseBytes int64
	// MaxIdleConnsPerHost is the keep-alive pool size per receiver host.
	// Default 8.
	MaxIdleConnsPerHost int
	// DialTimeout bounds connecting (after DNS). Default 10 s.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake. Default 10 s.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout is a backstop on waiting for response headers,
	// whatever the request's own timeout; keep it above the largest
	// endpoint timeout. Default 5 min.
	ResponseHeaderTimeout time.Duration
	// MaxResponseHeaderBytes bounds the response header size. Default 64 KiB.
	MaxResponseHeaderBytes int64
	// TimeoutDefault is the per-attempt timeout of a Request without one.
	// Default 30 s.
	TimeoutDefault time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c SenderConfig) WithDefaults() SenderConfig {
	setDefault(&c.UserAgent, UserAgentDefault)
	setDefault(&c.MaxResponseBytes, MaxResponseBytesDefault)
	setDefault(&c.MaxIdleConnsPerHost, MaxIdleConnsPerHostDefault)
	setDefault(&c.DialTimeout, DialTimeoutDefault)
	setDefault(&c.TLSHandshakeTimeout, TLSHandshakeTimeoutDefault)
	setDefault(&c.ResponseHeaderTimeout, ResponseHeaderTimeoutDefault)
	setDefault(&c.MaxResponseHeaderBytes, MaxResponseHeaderBytesDefault)
	setDefault(&c.TimeoutDefault, TimeoutDefault)
	return c
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

func (c SenderConfig) validate() error {
	switch {
	case c.MaxResponseBytes < 0 || c.MaxResponseBytes > ResponseReadMax:
		return fmt.Errorf("MaxResponseBytes %d: must be 0..%d", c.MaxResponseBytes, ResponseReadMax)
	case c.MaxIdleConnsPerHost < 0:
		return fmt.Errorf("MaxIdleConnsPerHost %d: must not be negative", c.MaxIdleConnsPerHost)
	case c.DialTimeout < 0, c.TLSHandshakeTimeout < 0, c.ResponseHeaderTimeout < 0, c.TimeoutDefault < 0:
		return errors.New("timeouts must not be negative")
	case c.MaxResponseHeaderBytes < 0:
		return fmt.Errorf("MaxResponseHeaderBytes %d: must not be negative", c.MaxResponseHeaderBytes)
	case strings.ContainsAny(c.UserAgent, "\r\n"):
		return errors.New("UserAgent must be a single line")
	}
	return nil
}

// Request is one delivery attempt.
type Request struct {
	// Method defaults to POST.
	Method string
	// URL is the endpoint URL: http or https, no credentials.
	URL string
	// Headers are the endpoint's custom headers. They are added first and
	// never override the headers ax sets (see Send).
	Headers map[string]string
	// Body is sent byte for byte, and signed as is.
	Body []byte
	// Timeout bounds the whole attempt; 0 means SenderConfig.TimeoutDefault.
	Timeout time.Duration

	ExecutionID  string    // Idempotency-Key, webhook-id, X-Ax-Execution-Id
	TaskID       string    // X-Ax-Task-Id, but for a workflow step's (WorkflowRunID set)
	ScheduledFor time.Time // X-Ax-Scheduled-For
	Round        int       // X-Ax-Round, 1 for a slot's first fire; 0: not sent (alerts)
	Attempt      int       // X-Ax-Attempt, 1 for the first
	// X-Ax-Workflow-Id, X-Ax-Workflow-Run-Id and X-Ax-Node, sent when
	// WorkflowRunID is set (a workflow node's execution) instead of
	// X-Ax-Task-Id: the step's task is the workflow's own, which the API
	// never shows.
	WorkflowID, WorkflowRunID, Node string
	// X-Ax-Shard-Index and X-Ax-Shard-Count, sent when ShardCount > 1.
	ShardIndex, ShardCount int
	// EventID is sent as X-Ax-Event-Id: the event that fired the
	// execution (trigger event).
	EventID string
	// AlertType, when set, makes the request an alert about execution
	// AlertAbout: it carries X-Ax-Alert-Type and X-Ax-Alert-Execution-Id
	// instead of X-Ax-Task-Id, X-Ax-Execution-Id and X-Ax-Scheduled-For,
	// so that a receiver keyed on a task's slot never takes it for a fire.
	AlertType  string
	AlertAbout string
	// CallbackToken, when set, is sent as X-Ax-Callback-Token (callback
	// completion mode). It is a credential: never log it.
	CallbackToken string
	// HeartbeatTimeout, with CallbackToken, is sent as
	// X-Ax-Heartbeat-Timeout-Ms, so the receiver can pace its heartbeats.
	HeartbeatTimeout time.Duration
	// ReadBody asks for the whole response body (Result.Body), up to
	// ResponseReadMax: a workflow node's in response mode, whose JSON
	// answer is its output. Other deliveries keep the excerpt only.
	ReadBody bool
	// Keys are the endpoint's signing keys (ParseSecret output), the
	// current one first; two during a rotation overlap. At least one.
	Keys [][]byte
	// Test makes the request an endpoint's test: it carries X-Ax-Test:
	// true and none of the headers that name an execution, a task or a
	// slot (ExecutionID is only its webhook-id and Idempotency-Key).
	Test bool
}

// Result is what came back from one attempt.
type Result struct {
	// StatusCode is 0 when no response was received (see Err).
	StatusCode int
	Header     http.Header
	// Excerpt is the start of the response body, at most
	// SenderConfig.MaxResponseBytes, valid UTF-8 without NUL bytes so it
	// can be stored as text. It may be shorter if reading the body failed
	// or timed out; that does not change the response's status.
	Excerpt string
	// Latency runs from sending the request to the end of reading the body.
	Latency time.Duration
	// Body is the whole response body when Request.ReadBody was set and
	// it was read in full; BodyTooLarge: it was longer than
	// ResponseReadMax (Body is nil); BodyErr: reading it failed (Body is
	// nil).
	Body         []byte
	BodyTooLarge bool
	BodyErr      error
	// Err is set when no response was received: an invalid request, a
	// blocked target, DNS, connect, TLS or timeout errors. It never
	// contains signing secrets or signatures.
	Err error
}

// Sender delivers webhooks over HTTP: it signs each request (Standard
// Webhooks), dials only addresses the SSRF guard allows, never follows
// redirects and bounds every step with a timeout. It is safe for
// concurrent use and reuses connections across calls. Plain-http
// endpoints go through ax's own HTTP/1.1 client (h1Pool), https ones
// through net/http's transport (HTTP/2 when the receiver offers it).
type Sender struct {
	cfg       SenderConfig
	guard     *Guard
	transport *http.Transport
	h1        *h1Pool
	// urls caches endpoint URLs, parsed and checked (every delivery to an
	// endpoint has the same URL); urlCount counts its entries.
	urls     sync.Map // string → *target
	urlCount atomic.Int64
	// macs sign (SignatureHeader) with HMAC states kept per key.
	macs macs
}

// target is an endpoint URL, parsed and checked (Sender.endpointURL).
type target struct {
	u *url.URL
	// plain: an http URL with an ASCII host, sent by h1Pool; the others
	// go through the transport.
	plain bool
	// addr is the host and port to dial; host the Host header;
	// requestURI the request line's target (plain targets).
	addr, host, requestURI string
}

// headerField is one request header: name in canonical form.
type headerField struct{ name, value string }

// urlCacheMax bounds Sender.urls; past it, the cache starts over.
const urlCacheMax = 10_000

// NewSender returns a Sender. It panics on an invalid configuration, which
// is a programming error.
func NewSender(cfg SenderConfig) *Sender {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		panic("jobs: invalid SenderConfig: " + err.Error())
	}
	guard := NewGuard(GuardConfig{AllowPrivate: cfg.AllowPrivateTargets})
	dialer := guard.Dialer(cfg.DialTimeout)
	transport := &http.Transport{
		// Never from the environment: through a proxy the guard would
		// only see the proxy's address.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           max(maxIdleConns, 2*cfg.MaxIdleConnsPerHost),
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
	}
	return &Sender{cfg: cfg, guard: guard, transport: transport, h1: newH1Pool(dialer, cfg)}
}

// Probe sends an endpoint's test request (endpoint.Probe): signed, through
// the SSRF guard, with X-Ax-Test: true and the endpoint's method, headers
// and timeout.
func (s *Sender) Probe(ctx context.Context, r endpoint.TestRequest) endpoint.TestResult {
	res := s.Send(ctx, Request{
		Method: r.Endpoint.Method, URL: r.Endpoint.URL, Headers: r.Endpoint.Headers, Body: r.Body,
		Timeout: r.Endpoint.Timeout, ExecutionID: r.ID, Keys: r.Keys, Test: true,
	})
	out := endpoint.TestResult{StatusCode: res.StatusCode, Duration: res.Latency, ResponseExcerpt: res.Excerpt}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	return out
}

// Close releases idle connections. The Sender stays usable.
func (s *Sender) Close() {
	s.transport.CloseIdleConnections()
	s.h1.closeIdle()
}

// Send makes one delivery attempt and reports what happened; it never
// returns an error separately: failures are in Result.Err.
//
// Headers, after the endpoint's custom headers: Content-Type:
// application/json, Idempotency-Key and webhook-id (the execution id),
// webhook-timestamp (this attempt, unix seconds), webhook-signature,
// X-Ax-Task-Id, X-Ax-Execution-Id, X-Ax-Scheduled-For (RFC 3339 UTC),
// X-Ax-Round, X-Ax-Attempt and User-Agent. Custom headers cannot set those, any other
// Webhook-* or X-Ax-* header, Host, or the hop-by-hop and framing headers.
//
// When ctx's deadline passes before the attempt's own timeout and no
// response came, Result.Err wraps ErrCallerDeadline; when ctx is cancelled
// it is the cancel's error, for the caller to tell (a shutdown, a cancel).
func (s *Sender) Send(parent context.Context, r Request) Result {
	start := time.Now()
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = s.cfg.TimeoutDefault
	}
	ctx, cancel := context.WithTimeoutCause(parent, timeout, errAttemptTimeout)
	defer cancel()

	t, method, fields, err := s.prepare(r, start)
	if err != nil {
		return Result{Err: err}
	}
	var resp *http.Response
	if t.plain {
		resp, err = s.h1.roundTrip(ctx, t, method, fields, r.Body) //nolint:bodyclose // readBody drains and closes it
	} else {
		var req *http.Request
		if req, err = httpRequest(ctx, t, method, fields, r.Body); err != nil {
			return Result{Err: err}
		}
		// The transport itself, not an http.Client: a 3xx is the
		// attempt's answer, never followed (the next hop would be a
		// target nobody registered), and the client's redirect and
		// cookie machinery cost CPU for nothing.
		resp, err = s.transport.RoundTrip(req) //nolint:bodyclose // readBody drains and closes it
	}
	if err != nil {
		if errors.Is(parent.Err(), context.DeadlineExceeded) && !errors.Is(context.Cause(ctx), errAttemptTimeout) {
			// The parent's deadline ended the attempt before its own
			// timeout did (its cause is then the parent's).
			err = fmt.Errorf("%w: %w", ErrCallerDeadline, err)
		}
		return Result{Err: err, Latency: time.Since(start)}
	}
	if r.ReadBody {
		res := s.readWholeBody(resp.Body)
		res.StatusCode, res.Header, res.Latency = resp.StatusCode, resp.Header, time.Since(start)
		return res
	}
	excerpt := s.readBody(resp.Body)
	return Result{
		StatusCode: resp.StatusCode,
		Header:     resp.Header,
		Excerpt:    excerpt,
		Latency:    time.Since(start),
	}
}

// endpointURL parses and checks an endpoint URL, once per URL.
func (s *Sender) endpointURL(raw string) (*target, error) {
	if t, ok := s.urls.Load(raw); ok {
		return t.(*target), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse errors quote the URL, which may carry tokens.
		return nil, fmt.Errorf("%w: malformed URL", ErrInvalidRequest)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: URL scheme must be http or https", ErrInvalidRequest)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%w: URL has no host", ErrInvalidRequest)
	case u.User != nil:
		return nil, fmt.Errorf("%w: URL must not contain credentials", ErrInvalidRequest)
	}
	t := &target{u: u, host: strings.TrimSuffix(u.Host, ":")}
	if u.Scheme == "http" && isASCII(u.Host) {
		// A host that is not ASCII needs its IDNA form, which the
		// transport computes.
		port := u.Port()
		if port == "" {
			port = "80"
		}
		t.plain, t.addr, t.requestURI = true, net.JoinHostPort(u.Hostname(), port), u.RequestURI()
	}
	if s.urlCount.Add(1) > urlCacheMax {
		s.urls.Clear()
		s.urlCount.Store(1)
	}
	s.urls.Store(raw, t)
	return t, nil
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// prepare checks r and builds its method and headers: the endpoint's
// custom headers first, then ax's, every name canonical.
func (s *Sender) prepare(r Request, now time.Time) (t *target, method string, fields []headerField, err error) {
	t, err = s.endpointURL(r.URL)
	if err != nil {
		return nil, "", nil, err
	}
	switch {
	case r.ExecutionID == "":
		return nil, "", nil, fmt.Errorf("%w: no execution id", ErrInvalidRequest)
	case len(r.Keys) == 0:
		return nil, "", nil, fmt.Errorf("%w: no signing key", ErrInvalidRequest)
	}
	for _, k := range r.Keys {
		if len(k) == 0 {
			return nil, "", nil, fmt.Errorf("%w: empty signing key", ErrInvalidRequest)
		}
	}
	if err := s.guard.CheckHost(t.u.Hostname()); err != nil {
		return nil, "", nil, err
	}
	method = r.Method
	if method == "" {
		method = http.MethodPost
	}
	if !validHeaderName(method) { // a method is a token too
		return nil, "", nil, fmt.Errorf("%w: invalid method", ErrInvalidRequest)
	}

	fields = make([]headerField, 0, len(r.Headers)+12) // a plain fire's 11; more grow it
	for name, value := range r.Headers {
		if !validHeaderName(name) {
			return nil, "", nil, fmt.Errorf("%w: custom header name %q is invalid", ErrInvalidRequest, name)
		}
		if !validHeaderValue(value) {
			// The value may be a credential: name the header only.
			return nil, "", nil, fmt.Errorf("%w: custom header %q has an invalid value", ErrInvalidRequest, name)
		}
		canonical := http.CanonicalHeaderKey(name)
		if reservedHeader(canonical) {
			continue
		}
		// Two spellings of one name: one value, as a header map keeps.
		if i := slices.IndexFunc(fields, func(f headerField) bool { return f.name == canonical }); i >= 0 {
			fields[i].value = value
			continue
		}
		fields = append(fields, headerField{canonical, value})
	}

	set := func(name, value string) { fields = append(fields, headerField{name, value}) }
	set("Content-Type", "application/json")
	set("Idempotency-Key", r.ExecutionID)
	set("Webhook-Id", r.ExecutionID)
	set("Webhook-Timestamp", strconv.FormatInt(now.Unix(), 10))
	set("Webhook-Signature", s.macs.signatureHeader(r.Keys, r.ExecutionID, now, r.Body))
	switch {
	case r.Test:
		set("X-Ax-Test", "true")
	case r.AlertType != "":
		set("X-Ax-Alert-Type", r.AlertType)
		set("X-Ax-Alert-Execution-Id", r.AlertAbout)
	default:
		set("X-Ax-Execution-Id", r.ExecutionID)
		set("X-Ax-Scheduled-For", r.ScheduledFor.UTC().Format(time.RFC3339Nano))
		set("X-Ax-Round", strconv.Itoa(max(r.Round, 1)))
		if r.WorkflowRunID != "" {
			set("X-Ax-Workflow-Id", r.WorkflowID)
			set("X-Ax-Workflow-Run-Id", r.WorkflowRunID)
			set("X-Ax-Node", r.Node)
		} else {
			set("X-Ax-Task-Id", r.TaskID)
		}
		if r.ShardCount > 1 {
			set("X-Ax-Shard-Index", strconv.Itoa(r.ShardIndex))
			set("X-Ax-Shard-Count", strconv.Itoa(r.ShardCount))
		}
		if r.EventID != "" {
			set("X-Ax-Event-Id", r.EventID)
		}
	}
	if !r.Test {
		set("X-Ax-Attempt", strconv.Itoa(r.Attempt))
	}
	if r.CallbackToken != "" {
		set("X-Ax-Callback-Token", r.CallbackToken)
		if r.HeartbeatTimeout > 0 {
			set("X-Ax-Heartbeat-Timeout-Ms", strconv.FormatInt(r.HeartbeatTimeout.Milliseconds(), 10))
		}
	}
	set("User-Agent", s.cfg.UserAgent)
	return t, method, fields, nil
}

// httpRequest builds the transport's request from prepare's output.
func httpRequest(ctx context.Context, t *target, method string, fields []headerField, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: invalid method", ErrInvalidRequest)
	}
	// A copy of the parsed URL: the transport does not change it, but
	// nothing here should rely on that.
	uc := *t.u
	req.URL, req.Host = &uc, t.host
	req.Header = make(http.Header, len(fields))
	// The values share one array: a slice each, capped, so that adding
	// to one never writes another's.
	vals := make([]string, len(fields))
	for i, f := range fields {
		vals[i] = f.value
		req.Header[f.name] = vals[i : i+1 : i+1]
	}
	return req, nil
}

// reservedHeader reports the canonical header names custom headers may not
// set: ax's own, Standard Webhooks', and those that control routing or
// message framing.
func reservedHeader(canonical string) bool {
	if strings.HasPrefix(canonical, "Webhook-") || strings.HasPrefix(canonical, "X-Ax-") {
		return true
	}
	switch canonical {
	case "Content-Type", "Idempotency-Key", "User-Agent",
		"Host", "Content-Length", "Transfer-Encoding", "Connection",
		"Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade", "Expect":
		return true
	}
	return false
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than horizontal tab,
// which would otherwise let a value inject headers.
func validHeaderValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// readBody keeps the first MaxResponseBytes of the body, then drains up to
// ResponseReadMax so that the connection can go back to the pool, and
// closes it. Read errors only shorten the excerpt.
func (s *Sender) readBody(body io.ReadCloser) string {
	defer body.Close()
	if body == http.NoBody { // a 204, or Content-Length: 0
		return ""
	}
	limited := io.LimitReader(body, ResponseReadMax)
	excerpt, _ := io.ReadAll(io.LimitReader(limited, s.cfg.MaxResponseBytes))
	_, _ = io.Copy(io.Discard, limited)
	return textExcerpt(excerpt)
}

// readWholeBody reads the body up to ResponseReadMax (Request.ReadBody),
// with its excerpt, and closes it. A longer body is abandoned (its
// connection closed), as readBody's drain does.
func (s *Sender) readWholeBody(body io.ReadCloser) Result {
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, ResponseReadMax+1))
	res := Result{Excerpt: textExcerpt(b[:min(int64(len(b)), s.cfg.MaxResponseBytes)])}
	switch {
	case err != nil:
		res.BodyErr = err
	case len(b) > ResponseReadMax:
		res.BodyTooLarge = true
	default:
		res.Body = b
	}
	return res
}

// textExcerpt makes b storable as Postgres text: it drops a rune cut off at
// the end, replaces invalid UTF-8 and removes NUL bytes.
func textExcerpt(b []byte) string {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				b = b[:len(b)-i]
			}
			break
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "")
}
