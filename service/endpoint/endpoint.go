// Package endpoint manages the webhook targets (Endpoints): their
// validation, their signing secrets and rotation, and the keys that sign
// a delivery to one (Endpoint.SigningKeys).
package endpoint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/limits"
	"github.com/axhq/ax/service/resource"
	"github.com/axhq/ax/service/signing"
)

// Endpoint limits and defaults.
const (
	TimeoutDefault = 10 * time.Second
	TimeoutMin     = 100 * time.Millisecond
	TimeoutMax     = 300 * time.Second
	// SecretOverlap is how long a rotated-out secret keeps signing.
	SecretOverlap  = 24 * time.Hour
	urlMaxLen      = 2048
	nameMaxLen     = 128
	headersMax     = 32
	headerValueMax = 1024
)

// Alert formats: how the alerts sent to an endpoint are shaped.
const (
	// FormatAx: ax's signed JSON body.
	FormatAx = "ax"
	// FormatSlack: a Slack incoming-webhook body ({"text": …}).
	FormatSlack = "slack"
)

// Endpoint is a webhook target.
type Endpoint struct {
	ID      string
	Name    string
	URL     string
	Method  string
	Headers map[string]string
	// Secret is the current signing secret (whsec_…). PreviousSecret, until
	// PreviousSecretExpiresAt, also signs (rotation overlap).
	Secret                  string
	PreviousSecret          string
	PreviousSecretExpiresAt *time.Time
	Timeout                 time.Duration
	Enabled                 bool
	// DisabledReason says why ax disabled the endpoint (e.g. a 410 Gone).
	DisabledReason string
	DisabledAt     *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Format shapes the alerts sent to the endpoint: FormatAx or
	// FormatSlack.
	Format string
	// MaxConcurrency and RateLimitPerSecond limit the deliveries to it
	// across every replica (nil: none).
	MaxConcurrency     *int
	RateLimitPerSecond *float64
}

// Input is what a client may set on an endpoint.
type Input struct {
	Name    string
	URL     string
	Method  string // "" means POST
	Headers map[string]string
	Secret  string // "" means generate one (on create) or keep (on update)
	Timeout time.Duration
	Enabled bool
	// Format: FormatAx ("" too) or FormatSlack.
	Format string
	// MaxConcurrency: requests in flight to it at once; RateLimitPerSecond:
	// requests started per second. Nil: no limit.
	MaxConcurrency     *int
	RateLimitPerSecond *float64
}

// Input returns the client-settable fields of e, the starting point of a
// partial update.
func (e Endpoint) Input() Input {
	return Input{
		Name: e.Name, URL: e.URL, Method: e.Method, Headers: e.Headers, Timeout: e.Timeout, Enabled: e.Enabled,
		Format: e.Format, MaxConcurrency: e.MaxConcurrency, RateLimitPerSecond: e.RateLimitPerSecond,
	}
}

// Endpoints manages webhook endpoints.
type Endpoints struct {
	pool *db.Pool
	now  func() time.Time
}

// New returns an Endpoints backed by pool.
func New(pool *db.Pool) *Endpoints {
	return &Endpoints{pool: pool, now: time.Now}
}

// Create validates in and stores a new endpoint, generating its secret
// unless one is given. With a context that carries a transaction
// (db.WithTx: a request with an Idempotency-Key) the insert joins it.
func (s *Endpoints) Create(ctx context.Context, tenant string, in Input) (Endpoint, error) {
	in = in.withDefaults()
	if err := in.validate(); err != nil {
		return Endpoint{}, err
	}
	if in.Secret == "" {
		secret, err := signing.GenerateSecret()
		if err != nil {
			return Endpoint{}, err
		}
		in.Secret = secret
	}
	var out Endpoint
	err := audit.Tx(ctx, s.pool, func(q db.Querier) error {
		row, err := db.InsertEndpoint(ctx, q, db.Endpoint{
			TenantID: tenant, ID: resource.NewID(), Name: in.Name, URL: in.URL, Method: in.Method, Headers: in.Headers,
			Secret: in.Secret, TimeoutMS: int(in.Timeout / time.Millisecond), Enabled: in.Enabled, Format: in.Format,
			MaxConcurrency: int32Ptr(in.MaxConcurrency), RateLimitPerSecond: in.RateLimitPerSecond,
		})
		if err != nil {
			return errs.Store(err, "create endpoint")
		}
		out = endpointFromRow(row)
		return audit.Record(ctx, q, tenant, audit.Create, audit.ResourceEndpoint, out.ID, audit.Created(in)) // secret: redacted
	})
	if err != nil {
		return Endpoint{}, err
	}
	return out, nil
}

// Get returns one endpoint.
func (s *Endpoints) Get(ctx context.Context, tenant, id string) (Endpoint, error) {
	if !resource.ValidID(id) {
		return Endpoint{}, errs.ErrNotFound
	}
	row, err := db.GetEndpoint(ctx, s.pool, tenant, id, false)
	if err != nil {
		return Endpoint{}, errs.Store(err, "load endpoint")
	}
	return endpointFromRow(row), nil
}

// List returns a page of endpoints, newest first.
func (s *Endpoints) List(ctx context.Context, tenant string, page resource.Page) ([]Endpoint, string, error) {
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListEndpoints(ctx, s.pool, tenant, page.After, page.Limit+1)
	if err != nil {
		return nil, "", errs.Store(err, "list endpoints")
	}
	out, next := resource.PageOf(rows, page.Limit, endpointFromRow, func(e Endpoint) string { return e.ID })
	return out, next, nil
}

// Update applies change to the endpoint's current input under a row lock,
// validates the result and stores it. Re-enabling an endpoint that ax
// disabled clears the reason.
func (s *Endpoints) Update(ctx context.Context, tenant, id string, change func(*Input) error) (Endpoint, error) {
	return s.update(ctx, tenant, id, audit.Update, change)
}

// update is Update, audited as action.
func (s *Endpoints) update(ctx context.Context, tenant, id, action string, change func(*Input) error) (Endpoint, error) {
	if !resource.ValidID(id) {
		return Endpoint{}, errs.ErrNotFound
	}
	var out Endpoint
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, err := db.GetEndpoint(ctx, tx, tenant, id, true)
		if err != nil {
			return errs.Store(err, "load endpoint")
		}
		cur := endpointFromRow(row)
		in := cur.Input()
		if err := change(&in); err != nil {
			return err
		}
		in = in.withDefaults()
		if err := in.validate(); err != nil {
			return err
		}
		row.Name, row.URL, row.Method, row.Headers = in.Name, in.URL, in.Method, in.Headers
		row.TimeoutMS = int(in.Timeout / time.Millisecond)
		row.MaxConcurrency, row.RateLimitPerSecond = int32Ptr(in.MaxConcurrency), in.RateLimitPerSecond
		if in.Secret != "" && in.Secret != row.Secret {
			s.rotate(&row, in.Secret)
		}
		if in.Enabled && !row.Enabled {
			row.DisabledReason, row.DisabledAt = nil, nil
		}
		row.Enabled = in.Enabled
		row.Format = in.Format
		if row, err = db.UpdateEndpoint(ctx, tx, row); err != nil {
			return errs.Store(err, "update endpoint")
		}
		out = endpointFromRow(row)
		changes := audit.Diff(cur.Input(), out.Input())
		if out.Secret != cur.Secret {
			changes["secret"] = map[string]any{"old": audit.Redacted, "new": audit.Redacted}
		}
		return audit.Record(ctx, tx, tenant, action, audit.ResourceEndpoint, out.ID, changes)
	})
	return out, errs.Store(err, "update endpoint")
}

// RotateSecret replaces the signing secret with secret (or a generated one
// when empty). The old secret keeps signing for SecretOverlap, so receivers
// can switch keys without dropping a delivery.
func (s *Endpoints) RotateSecret(ctx context.Context, tenant, id, secret string) (Endpoint, error) {
	if secret != "" {
		if _, err := signing.ParseSecret(secret); err != nil {
			return Endpoint{}, errs.Field("secret", err.Error())
		}
	} else {
		var err error
		if secret, err = signing.GenerateSecret(); err != nil {
			return Endpoint{}, err
		}
	}
	return s.update(ctx, tenant, id, audit.RotateSecret, func(in *Input) error {
		in.Secret = secret
		return nil
	})
}

func (s *Endpoints) rotate(row *db.Endpoint, secret string) {
	prev := row.Secret
	until := s.now().Add(SecretOverlap)
	row.PreviousSecret, row.PreviousSecretExpiresAt = &prev, &until
	row.Secret = secret
}

// Delete deletes an endpoint. An endpoint still used by a task (as its
// target or its alert endpoint) cannot be deleted: errs.ErrConflict.
func (s *Endpoints) Delete(ctx context.Context, tenant, id string) error {
	if !resource.ValidID(id) {
		return errs.ErrNotFound
	}
	err := audit.Tx(ctx, s.pool, func(q db.Querier) error {
		ok, err := db.DeleteEndpoint(ctx, q, tenant, id)
		if err != nil {
			inUse := errs.Conflictf("the endpoint is used by tasks; delete or re-point them first")
			return errs.Store(err, "delete endpoint",
				errs.OnConstraint(db.ConstraintTaskEndpoint, inUse), errs.OnConstraint(db.ConstraintTaskAlertEndpoint, inUse))
		}
		if !ok {
			return errs.ErrNotFound
		}
		return audit.Record(ctx, q, tenant, audit.Delete, audit.ResourceEndpoint, strings.ToLower(id), nil)
	})
	if errors.Is(err, errs.ErrConflict) && !errors.Is(err, errs.ErrTryAgain) {
		return s.inUseConflict(ctx, tenant, id)
	}
	return err
}

// endpointUsersShown bounds how many tasks an in-use conflict names.
const endpointUsersShown = 10

// inUseConflict names (up to endpointUsersShown of) the tasks that use an
// endpoint, with their count, so the caller knows what to re-point.
func (s *Endpoints) inUseConflict(ctx context.Context, tenant, id string) error {
	users, total, err := db.EndpointUsers(ctx, s.pool, tenant, id, endpointUsersShown)
	if err != nil {
		return errs.Store(err, "list the endpoint's tasks")
	}
	if total == 0 { // re-pointed meanwhile; deleting again may succeed
		return errs.Conflictf("the endpoint was used by tasks a moment ago; try again")
	}
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = fmt.Sprintf("%s (%s)", u.Name, u.ID)
	}
	more := ""
	if total > int64(len(users)) {
		more = fmt.Sprintf(" and %d more", total-int64(len(users)))
	}
	noun := "tasks"
	if total == 1 {
		noun = "task"
	}
	return errs.Conflictf("the endpoint is used by %d %s (as target or alert endpoint): %s%s; delete or re-point them first",
		total, noun, strings.Join(names, ", "), more)
}

// SigningKeys returns the keys that sign a delivery at time now: the
// current secret first, then the previous one during the rotation overlap.
func (e Endpoint) SigningKeys(now time.Time) ([][]byte, error) { return e.SigningKeysFrom(now, nil) }

// SigningKeysFrom is SigningKeys with the secrets read by secrets (nil:
// each read afresh). The keys may be shared: never change one.
func (e Endpoint) SigningKeysFrom(now time.Time, secrets *signing.Keys) ([][]byte, error) {
	cur, err := secrets.Parse(e.Secret)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: stored secret: %w", e.ID, err)
	}
	keys := [][]byte{cur}
	if e.PreviousSecret != "" && e.PreviousSecretExpiresAt != nil && now.Before(*e.PreviousSecretExpiresAt) {
		if prev, err := secrets.Parse(e.PreviousSecret); err == nil {
			keys = append(keys, prev)
		}
	}
	return keys, nil
}

func (in Input) withDefaults() Input {
	if in.Method == "" {
		in.Method = http.MethodPost
	}
	in.Method = strings.ToUpper(in.Method)
	if in.Timeout == 0 {
		in.Timeout = TimeoutDefault
	}
	if in.Headers == nil {
		in.Headers = map[string]string{}
	}
	return in
}

// HeaderNamePattern is the form of an endpoint header's name: an HTTP
// token (RFC 9110) of at most 64 characters.
const HeaderNamePattern = "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$"

var headerNamePattern = regexp.MustCompile(HeaderNamePattern)

// reservedHeaders are set by ax on every delivery and cannot be configured.
var reservedHeaders = []string{
	"content-type", "content-length", "host", "transfer-encoding", "connection", "user-agent",
	"idempotency-key", "te", "trailer", "upgrade", "keep-alive", "proxy-connection",
}

func (in Input) validate() error {
	var ve errs.ValidationError
	validateName(&ve, "name", in.Name)
	validateURL(&ve, "url", in.URL)
	switch in.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		ve.Add("method", "must be POST, PUT or PATCH")
	}
	if len(in.Headers) > headersMax {
		ve.Add("headers", fmt.Sprintf("at most %d headers", headersMax))
	}
	for k, v := range in.Headers {
		lk := strings.ToLower(k)
		switch {
		case !headerNamePattern.MatchString(k):
			ve.Add("headers."+k, "not a valid header name")
		case slices.Contains(reservedHeaders, lk) || strings.HasPrefix(lk, "webhook-") || strings.HasPrefix(lk, "x-ax-"):
			ve.Add("headers."+k, "is set by ax and cannot be configured")
		case len(v) > headerValueMax || strings.ContainsAny(v, "\r\n\x00"):
			ve.Add("headers."+k, fmt.Sprintf("value must be at most %d characters without line breaks", headerValueMax))
		}
	}
	CheckTimeout(&ve, "timeout_ms", in.Timeout)
	if in.Format != "" && in.Format != FormatAx && in.Format != FormatSlack {
		ve.Add("format", "must be ax or slack")
	}
	if in.MaxConcurrency != nil && (*in.MaxConcurrency < 1 || *in.MaxConcurrency > 100_000) {
		ve.Add(limits.MaxConcurrency, "must be a whole number from 1 to 100000, or null for no limit")
	}
	if r := in.RateLimitPerSecond; r != nil && (!(*r >= 0.001) || *r > 100_000) {
		ve.Add(limits.RateLimitPerSecond, "must be a number from 0.001 to 100000, or null for no limit")
	}
	if in.Secret != "" {
		if _, err := signing.ParseSecret(in.Secret); err != nil {
			ve.Add("secret", err.Error())
		}
	}
	return ve.Err()
}

func validateName(ve *errs.ValidationError, field, name string) {
	switch {
	case strings.TrimSpace(name) == "":
		ve.Add(field, "is required")
	case len(name) > nameMaxLen:
		ve.Add(field, fmt.Sprintf("must be at most %d characters", nameMaxLen))
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		ve.Add(field, "must not contain control characters")
	}
}

func validateURL(ve *errs.ValidationError, field, raw string) {
	if raw == "" {
		ve.Add(field, "is required")
		return
	}
	if len(raw) > urlMaxLen {
		ve.Add(field, fmt.Sprintf("must be at most %d characters", urlMaxLen))
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		ve.Add(field, "is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		ve.Add(field, "must be an absolute http or https URL")
	case u.Host == "" || u.Hostname() == "":
		ve.Add(field, "must include a host")
	case !validPort(u.Port()):
		ve.Add(field, "has a port outside 1..65535")
	case u.User != nil:
		ve.Add(field, "must not contain credentials (user:password@); use headers instead")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		ve.Add(field, "must not contain a fragment")
	case strings.ContainsAny(raw, " \t\r\n"):
		ve.Add(field, "must not contain whitespace")
	}
}

// validPort reports whether a URL's port (digits, or "" for the scheme's
// default) is a TCP port.
func validPort(p string) bool {
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// CheckTimeout adds a field error to ve when d, a delivery's timeout (an
// endpoint's or a task's), is out of TimeoutMin..TimeoutMax.
func CheckTimeout(ve *errs.ValidationError, field string, d time.Duration) {
	if d < TimeoutMin || d > TimeoutMax {
		ve.Add(field, fmt.Sprintf("must be between %d and %d", TimeoutMin.Milliseconds(), TimeoutMax.Milliseconds()))
	}
}

func endpointFromRow(r db.Endpoint) Endpoint {
	e := Endpoint{
		ID: r.ID, Name: r.Name, URL: r.URL, Method: r.Method, Headers: r.Headers, Secret: r.Secret,
		PreviousSecretExpiresAt: r.PreviousSecretExpiresAt, Timeout: time.Duration(r.TimeoutMS) * time.Millisecond,
		Enabled: r.Enabled, DisabledAt: r.DisabledAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Format: r.Format,
	}
	if r.PreviousSecret != nil {
		e.PreviousSecret = *r.PreviousSecret
	}
	if r.DisabledReason != nil {
		e.DisabledReason = *r.DisabledReason
	}
	if e.Headers == nil {
		e.Headers = map[string]string{}
	}
	if r.MaxConcurrency != nil {
		n := int(*r.MaxConcurrency)
		e.MaxConcurrency = &n
	}
	e.RateLimitPerSecond = r.RateLimitPerSecond
	return e
}

// int32Ptr converts a validated *int for the database.
func int32Ptr(p *int) *int32 {
	if p == nil {
		return nil
	}
	v := int32(min(*p, math.MaxInt32)) // capped
	return &v
}
