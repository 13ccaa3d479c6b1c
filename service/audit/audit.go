// Package audit is the audit log: every change made through the API is
// recorded (Record) in the change's transaction, with who made it (the
// Actor a request's context carries) and a summary of what changed
// (Fields, Created, Diff: secrets, header values and URL queries
// redacted), and read back newest first (Log.List). Package service
// records its changes through it.
package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/resource"
)

// Actions: what a change made through the API did.
const (
	Create       = "create"
	Update       = "update"
	Delete       = "delete"
	Pause        = "pause"
	Resume       = "resume"
	Trigger      = "trigger"
	Skip         = "skip"
	Backfill     = "backfill"
	Cancel       = "cancel"
	Retry        = "retry"
	RotateSecret = "rotate_secret"
	SetLimits    = "set_limits"
	// Test: a test request sent to an endpoint (it changes nothing).
	Test = "test"
	// Hold and Release: an execution held back from starting, and let go.
	Hold    = "hold"
	Release = "release"
)

// Audited resource types.
const (
	ResourceEndpoint  = "endpoint"
	ResourceTask      = "task"
	ResourceExecution = "execution"
	ResourceCalendar  = "calendar"
	ResourceBackfill  = "backfill"
	ResourceWorkflow  = "workflow"
)

// Redacted stands for a value the audit log must not hold.
const Redacted = "redacted"

// Actor is who makes a change through the API: the token's subject,
// whether that token is an operator's (acting on a tenant it does not
// belong to) rather than the tenant's own, and the request's id (its
// X-Request-Id).
type Actor struct {
	Subject   string
	Operator  bool
	RequestID string
}

type actorKey struct{}

// WithActor returns ctx carrying the actor of an API request. The service
// records an audit entry for each change made with such a context, in the
// change's transaction; changes made without one (ax's own transitions)
// are not audited.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns the actor ctx carries (WithActor), if any.
func ActorOf(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Record records a change made through the API: tenant's action on the
// resource, with changes (any JSON-encodable summary, nil for none; never
// a secret: build it with Fields or Diff, which redact them). q must be
// the transaction of the change, so that the record commits or rolls back
// with it. Without an actor in ctx (not an API request) it records
// nothing.
//
// A new write route gets its audit with one call of this inside the
// service method's transaction (Tx gives it one when the method has
// none).
func Record(ctx context.Context, q db.Querier, tenant, action, resourceType, resourceID string, changes any) error {
	rec, ok, err := NewRecord(ctx, tenant, action, resourceType, resourceID, changes)
	if !ok || err != nil {
		return err
	}
	return errs.Store(db.InsertAudit(ctx, q, rec), "record audit")
}

// NewRecord is the audit record of a change made for ctx's actor, for a
// caller that inserts it itself (with the change, in one statement), and
// false when ctx has none (not an API change: nothing is recorded).
func NewRecord(ctx context.Context, tenant, action, resourceType, resourceID string, changes any) (db.AuditRecord, bool, error) {
	a, ok := ActorOf(ctx)
	if !ok {
		return db.AuditRecord{}, false, nil
	}
	var raw []byte
	if changes != nil {
		var err error
		if raw, err = json.Marshal(changes); err != nil {
			return db.AuditRecord{}, false, err
		}
	}
	return db.AuditRecord{
		TenantID: tenant, ID: resource.NewID(), Subject: a.Subject, Operator: a.Operator, Action: action, ResourceType: resourceType,
		ResourceID: resourceID, RequestID: a.RequestID, Changes: raw,
	}, true, nil
}

// Tx runs fn, a change of one statement, in a transaction when ctx
// carries an actor (fn records the change's audit with it), and on its
// own otherwise (nothing is audited: the transaction would be for
// nothing).
func Tx(ctx context.Context, pool *db.Pool, fn func(db.Querier) error) error {
	if _, ok := ActorOf(ctx); !ok {
		return errs.Store(fn(db.Using(ctx, pool)), "change")
	}
	return errs.Store(db.InTx(ctx, pool, func(tx db.Tx) error { return fn(tx) }), "audited change")
}

// Fields summarises a resource's fields (a struct: its client input) for
// the audit log, by snake_case name: durations in milliseconds (name_ms),
// times in RFC 3339, byte payloads as their size and SHA-256, nested
// structs as objects; secrets redacted (value).
func Fields(v any) map[string]any {
	m, _ := value(reflect.ValueOf(v), "", true).(map[string]any)
	return m
}

// Created is a create's changes: the resource's fields as Fields has
// them, without those left at their zero value (null,
// "", 0, false, an empty list, map or object), which say nothing a reader
// needs and made a task's record twice its size — the audit row is most
// of the WAL a create writes.
func Created(v any) map[string]any {
	m := Fields(v)
	for k, val := range m {
		if val = pruneZero(val); val == nil {
			delete(m, k)
		} else {
			m[k] = val
		}
	}
	return m
}

// pruneZero returns v without its zero-valued members, or nil when
// nothing is left.
func pruneZero(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if x == "" {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		if reflect.ValueOf(x).IsZero() {
			return nil
		}
	case map[string]any:
		for k, val := range x {
			if val = pruneZero(val); val == nil {
				delete(x, k)
			} else {
				x[k] = val
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
		for i, val := range x { // elements keep their places
			if m, ok := val.(map[string]any); ok {
				if pruneZero(m) == nil {
					x[i] = map[string]any{}
				}
			}
		}
	}
	return v
}

// Diff returns the fields that differ between before and after (structs
// of one type) as {"field": {"old": …, "new": …}}, redacted like Fields.
// Values are compared before redaction: a changed header value shows as a
// change, with both values redacted.
func Diff(before, after any) map[string]any {
	rawOld, _ := value(reflect.ValueOf(before), "", false).(map[string]any)
	rawNew, _ := value(reflect.ValueOf(after), "", false).(map[string]any)
	oldOut, newOut := Fields(before), Fields(after)
	out := map[string]any{}
	for k, nv := range rawNew {
		if ov, ok := rawOld[k]; !ok || !jsonEqual(ov, nv) {
			out[k] = map[string]any{"old": oldOut[k], "new": newOut[k]}
		}
	}
	for k := range rawOld {
		if _, ok := rawNew[k]; !ok {
			out[k] = map[string]any{"old": oldOut[k], "new": nil}
		}
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// secretName matches the fields whose values are secrets.
func secretName(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "secret") || strings.Contains(n, "token") || strings.Contains(n, "password") ||
		strings.Contains(n, "signingkey") || strings.Contains(n, "privatekey")
}

// value converts v for the audit log. With redact, secret fields
// (secretName) become "redacted", as do header values (a field named
// Headers: they often carry credentials) and the query values of a URL
// (a field named URL).
func value(v reflect.Value, name string, redact bool) any {
	if !v.IsValid() {
		return nil
	}
	if redact && secretName(name) {
		if v.IsZero() {
			return nil
		}
		return Redacted
	}
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.Milliseconds()
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case *time.Time:
		if x == nil {
			return nil
		}
		return x.UTC().Format(time.RFC3339Nano)
	case []byte:
		return Bytes(x)
	case json.RawMessage: // a JSON value a client set (a workflow's input): as bytes
		return Bytes(x)
	case string:
		if redact && name == "URL" {
			return redactURL(x)
		}
		return x
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return value(v.Elem(), name, redact)
	case reflect.Struct:
		out := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				for k, val := range value(v.Field(i), f.Name, redact).(map[string]any) {
					out[k] = val
				}
				continue
			}
			if secretName(f.Name) && v.Field(i).IsZero() {
				continue // no secret set: nothing to say
			}
			key := snakeCase(f.Name)
			if f.Type == reflect.TypeFor[time.Duration]() {
				key += "_ms"
			}
			out[key] = value(v.Field(i), f.Name, redact)
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return map[string]any{}
		}
		out := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			k := it.Key().String()
			if redact && name == "Headers" {
				out[k] = Redacted
				continue
			}
			out[k] = value(it.Value(), k, redact)
		}
		return out
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil
		}
		out := make([]any, v.Len())
		for i := range v.Len() {
			out[i] = value(v.Index(i), name, redact)
		}
		return out
	}
	return v.Interface()
}

// Bytes summarises a payload by its size and SHA-256: enough to tell
// versions apart, without the content (which may hold credentials).
func Bytes(b []byte) any {
	if b == nil {
		return nil
	}
	sum := sha256.Sum256(b)
	return map[string]any{"bytes": len(b), "sha256": hex.EncodeToString(sum[:])}
}

// redactURL keeps a URL's scheme, host and path and redacts its query
// values, where webhook URLs often carry a token.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	u.User = nil
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{Redacted}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// snakeCase turns a Go field name into the API's snake_case
// (EndpointID → endpoint_id, DSTPolicy → dst_policy).
func snakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && !unicode.IsUpper(r[i-1])
			nextLower := i > 0 && i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Entry is one change made through the API, as Log.List reads it.
type Entry struct {
	ID      string
	At      time.Time
	Tenant  string
	Subject string
	// Operator: the change was made with an operator token (Subject is
	// the operator's), not one of the tenant's.
	Operator     bool
	Action       string
	ResourceType string
	ResourceID   string
	RequestID    string
	// Changes is the JSON summary of the change; nil for none.
	Changes json.RawMessage
}

// Filter narrows Log.List. Since and Until bound the record's time (Since
// inclusive, Until exclusive).
type Filter struct {
	ResourceType string
	ResourceID   string
	// Subject: only the changes made by this token subject.
	Subject      string
	Since, Until *time.Time
}

// Log reads the audit log.
type Log struct {
	pool *db.Pool
}

// NewLog returns a Log backed by pool.
func NewLog(pool *db.Pool) *Log { return &Log{pool: pool} }

// List returns a page of tenant's audit records, newest first.
func (s *Log) List(ctx context.Context, tenant string, f Filter, page resource.Page) ([]Entry, string, error) {
	var ve errs.ValidationError
	if len(f.ResourceType) > 64 {
		ve.Add("resource_type", "must be at most 64 characters")
	}
	if len(f.ResourceID) > 256 {
		ve.Add("resource_id", "must be at most 256 characters")
	}
	if len(f.Subject) > 256 {
		ve.Add("subject", "must be at most 256 characters")
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		ve.Add("until", "must be after since")
	}
	if err := ve.Err(); err != nil {
		return nil, "", err
	}
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListAudit(ctx, s.pool, tenant, db.AuditFilter{
		ResourceType: f.ResourceType, ResourceID: f.ResourceID, Subject: f.Subject, Since: f.Since, Until: f.Until,
		Before: page.After, Limit: page.Limit + 1,
	})
	if err != nil {
		return nil, "", errs.Store(err, "list audit records")
	}
	out, next := resource.PageOf(rows, page.Limit, func(r db.AuditRecord) Entry {
		return Entry{
			ID: r.ID, At: r.At.UTC(), Tenant: r.TenantID, Subject: r.Subject, Operator: r.Operator, Action: r.Action,
			ResourceType: r.ResourceType, ResourceID: r.ResourceID, RequestID: r.RequestID, Changes: r.Changes,
		}
	}, func(r Entry) string { return r.ID })
	return out, next, nil
}
