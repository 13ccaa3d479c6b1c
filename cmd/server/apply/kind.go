package apply

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/axhq/ax/openapi/client"
)

// kind is one resource type documents may hold.
type kind struct {
	name     string // the document's kind
	create   string // the create body's schema
	resource string // the audit log's resource_type
	dir      string // export's directory
	phase    int    // what others refer to comes first
}

var kinds = []*kind{
	{name: "Calendar", create: "CalendarRequest", resource: "calendar", dir: "calendars", phase: 0},
	{name: "Endpoint", create: "EndpointRequest", resource: "endpoint", dir: "endpoints", phase: 0},
	{name: "Task", create: "TaskRequest", resource: "task", dir: "tasks", phase: 1},
	{name: "Workflow", create: "WorkflowRequest", resource: "workflow", dir: "workflows", phase: 1},
}

func kindOf(name string) *kind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	return nil
}

// A ref is a field that names another resource: documents give its name
// (doc), the API its id (api).
type ref struct {
	doc, api string
	kind     string
	list     bool
}

var refs = []ref{
	{doc: "endpoint", api: "endpoint_id", kind: "Endpoint"},
	{doc: "alert_endpoint", api: "alert_endpoint_id", kind: "Endpoint"},
	{doc: "exclude_calendars", api: "exclude_calendars", kind: "Calendar", list: true},
}

// ManagedLabel marks the tasks apply created, which --prune may delete;
// export leaves it out. Endpoints, calendars and workflows carry no
// labels: apply knows its own from the audit log (requestIDPrefix).
const (
	ManagedLabel = "ax.dev/managed-by"
	managedValue = "apply"
	// requestIDPrefix starts the X-Request-Id of apply's creates, which
	// the audit log records with each create.
	requestIDPrefix = "ax-apply-"
)

// defaults are the values the server gives a field a body leaves out, by
// schema: a document without the field means this value (so removing a
// field from a file puts the default back), and export leaves out a field
// that holds it. nil: none (null, "", {} or [] on the server); a map for
// a record: that record with its own defaults. A field without an entry
// is compared only when a document gives it.
var defaults = map[string]map[string]any{
	"EndpointRequest": {
		"method": "POST", "format": "ax", "headers": map[string]any{}, "timeout_ms": int64(10000),
		"max_concurrency": nil, "rate_limit_per_second": nil,
	},
	"CalendarRequest": {"dates": []any{}, "timezone": "UTC"},
	"TaskRequest": {
		"alert_endpoint_id": nil, "completion": map[string]any{"mode": "response"}, "labels": map[string]any{},
		"alert_after_failures": int64(1), "misfire_policy": "fire_once", "overlap_policy": "allow", "pause_after_failures": int64(0),
		"payload": nil, "payload_template": false,
		"priority": int64(2), "retry": map[string]any{}, "shards": int64(1), "sla": nil, "timeout_ms": nil,
	},
	"WorkflowRequest": {
		"alert_endpoint_id": nil, "inputs": map[string]any{}, "max_active_runs": int64(1), "misfire_policy": "fire_once", "schedule": nil,
		"sla": nil,
	},
	"WorkflowNode": {
		"completion": map[string]any{"mode": "response"}, "depends_on": []any{}, "payload": nil, "payload_template": false,
		"priority": int64(2), "run_if": nil,
		"retry": map[string]any{}, "shards": int64(1), "timeout_ms": nil, "trigger_rule": "all_success",
	},
	"RetryPolicy":      {"max_attempts": int64(5), "initial_backoff_ms": int64(1000), "max_backoff_ms": int64(600000)},
	"CronSchedule":     scheduleDefaults,
	"IntervalSchedule": scheduleDefaults,
	"OnceSchedule":     scheduleDefaults,
	"UnionSchedule":    scheduleDefaults,
}

var scheduleDefaults = map[string]any{
	"timezone": "UTC", "dialect": "standard", "dst_policy": "vixie", "exclude_calendars": []any{}, "start_at": nil, "end_at": nil,
}

// schemaName is the component name of a dereferenced schema.
func schemaName(s schema) string {
	name, _ := s["x-name"].(string)
	return name
}

// lookup finds a resource's id by kind and name.
type lookup func(kind, name string) (string, bool)

// toAPI turns a document's spec into the API's body: references by name
// become ids; any other field passes through as it is.
func (k *kind) toAPI(spec map[string]any, find lookup) (map[string]any, *FieldError) {
	return refsToAPI(spec, deref(schemas()[k.create]), find, "")
}

func refsToAPI(v map[string]any, s schema, find lookup, path string) (map[string]any, *FieldError) {
	out := make(map[string]any, len(v))
	for _, key := range sortedKeys(v) {
		val := v[key]
		if r, ok := refByDoc(key); ok && prop(s, r.api) != nil {
			id, fe := resolveRef(r, val, find, join(path, key))
			if fe != nil {
				return nil, fe
			}
			out[r.api] = id
			continue
		}
		if r, ok := refByAPI(key); ok && prop(s, key) != nil {
			return nil, &FieldError{Field: join(path, key), Message: "give the " + strings.ToLower(r.kind) + "'s name as " + r.doc + ": NAME (ids differ between tenants)"}
		}
		out[key] = val
		p := pick(prop(s, key), val)
		switch x := val.(type) {
		case map[string]any:
			if isRecord(p) {
				m, fe := refsToAPI(x, p, find, join(path, key))
				if fe != nil {
					return nil, fe
				}
				out[key] = m
			}
		case []any:
			items, _ := p["items"].(schema)
			if items = deref(items); !recordItems(items) {
				continue
			}
			list := make([]any, len(x))
			for i, e := range x {
				list[i] = e
				if em, ok := e.(map[string]any); ok && isRecord(pick(items, e)) {
					m, fe := refsToAPI(em, pick(items, e), find, join(path, key)+"["+itoa(i)+"]")
					if fe != nil {
						return nil, fe
					}
					list[i] = m
				}
			}
			out[key] = list
		}
	}
	return out, nil
}

func resolveRef(r ref, val any, find lookup, path string) (any, *FieldError) {
	one := func(v any, path string) (string, *FieldError) {
		name, ok := v.(string)
		if !ok {
			return "", &FieldError{Field: path, Message: "must be the name of a " + strings.ToLower(r.kind)}
		}
		if name == "" && !r.list {
			return "", nil
		}
		id, ok := find(r.kind, name)
		if !ok {
			return "", &FieldError{Field: path, Message: "no " + strings.ToLower(r.kind) + " named " + quote(name) + " in the files or the tenant"}
		}
		return id, nil
	}
	if !r.list {
		if val == nil {
			return nil, nil
		}
		return one(val, path)
	}
	if val == nil {
		return nil, nil
	}
	names, ok := val.([]any)
	if !ok {
		return nil, &FieldError{Field: path, Message: "must be a list of " + strings.ToLower(r.kind) + " names"}
	}
	ids := make([]any, len(names))
	for i, n := range names {
		id, fe := one(n, path+"["+itoa(i)+"]")
		if fe != nil {
			return nil, fe
		}
		ids[i] = id
	}
	return ids, nil
}

// toDoc is toAPI's inverse, for export: ids become names.
func refsToDoc(v map[string]any, s schema, nameOf func(kind, id string) string) map[string]any {
	out := make(map[string]any, len(v))
	for key, val := range v {
		if r, ok := refOfAPI(key); ok && prop(s, key) != nil {
			switch x := val.(type) {
			case string:
				out[r.doc] = nameOf(r.kind, x)
			case []any:
				names := make([]any, len(x))
				for i, id := range x {
					s, _ := id.(string)
					names[i] = nameOf(r.kind, s)
				}
				out[r.doc] = names
			}
			continue
		}
		out[key] = val
		p := pick(prop(s, key), val)
		switch x := val.(type) {
		case map[string]any:
			if isRecord(p) {
				out[key] = refsToDoc(x, p, nameOf)
			}
		case []any:
			items, _ := p["items"].(schema)
			if items = deref(items); recordItems(items) {
				list := make([]any, len(x))
				for i, e := range x {
					list[i] = e
					if em, ok := e.(map[string]any); ok && isRecord(pick(items, e)) {
						list[i] = refsToDoc(em, pick(items, e), nameOf)
					}
				}
				out[key] = list
			}
		}
	}
	return out
}

func refByDoc(key string) (ref, bool) {
	for _, r := range refs {
		if r.doc == key {
			return r, true
		}
	}
	return ref{}, false
}

// refOfAPI is the ref of an API field.
func refOfAPI(key string) (ref, bool) {
	for _, r := range refs {
		if r.api == key {
			return r, true
		}
	}
	return ref{}, false
}

// refByAPI is the ref of an API field that documents name otherwise.
func refByAPI(key string) (ref, bool) {
	for _, r := range refs {
		if r.api == key && r.api != r.doc {
			return r, true
		}
	}
	return ref{}, false
}

// isEmpty: null, "", {} or [] — what the API answers for a field that is
// not set.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// same reports whether the server's value have is what want asks for:
// a record's fields the document leaves out count as their defaults, a
// field the server adds (and the document does not name) does not count;
// maps (labels, headers) and free-form JSON (payloads) must be equal.
func same(want, have any, s schema) bool {
	s = pick(s, want)
	if w, ok := want.(map[string]any); ok && isRecord(s) {
		h, _ := have.(map[string]any)
		if h == nil && len(w) == 0 {
			return isEmpty(have) || sameRecord(w, map[string]any{}, s)
		}
		return sameRecord(w, h, s)
	}
	if isEmpty(want) {
		return isEmpty(have)
	}
	if freeForm(s) {
		return reflect.DeepEqual(want, have)
	}
	switch w := want.(type) {
	case map[string]any:
		h, _ := have.(map[string]any)
		if len(w) != len(h) {
			return false
		}
		vals, _ := s["additionalProperties"].(schema)
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !same(wv, hv, vals) {
				return false
			}
		}
		return true
	case []any:
		h, _ := have.([]any)
		if len(w) != len(h) {
			return false
		}
		items, _ := s["items"].(schema)
		for i := range w {
			if !same(w[i], h[i], items) {
				return false
			}
		}
		return true
	case string:
		h, ok := have.(string)
		if !ok {
			return false
		}
		if s["format"] == "date-time" {
			wt, err1 := time.Parse(time.RFC3339Nano, w)
			ht, err2 := time.Parse(time.RFC3339Nano, h)
			if err1 == nil && err2 == nil {
				return wt.Equal(ht)
			}
		}
		if _, ok := s["enum"]; ok {
			return strings.EqualFold(w, h)
		}
		return w == h
	case int64, float64:
		wf, _ := number(w)
		hf, ok := number(have)
		return ok && wf == hf
	}
	return reflect.DeepEqual(want, have)
}

// sameRecord compares a record field by field: want's fields, and the
// ones with a default it leaves out.
func sameRecord(w, h map[string]any, s schema) bool {
	return len(diffRecord(w, h, s)) == 0
}

// diffRecord lists the fields of a record that differ.
func diffRecord(w, h map[string]any, s schema) []string {
	defs := defaults[schemaName(s)]
	var fields []string
	for _, k := range union(w, defs) {
		wv, given := w[k]
		if !given {
			wv = fill(defs[k], prop(s, k))
		}
		p := prop(s, k)
		if same(wv, h[k], p) {
			continue
		}
		// The server may leave out a field that holds its default.
		if d, ok := defs[k]; ok && isEmpty(h[k]) && same(wv, fill(d, p), p) {
			continue
		}
		fields = append(fields, k)
	}
	slices.Sort(fields)
	return fields
}

// fill is a default as a value: a record's default with its own
// defaults filled in.
func fill(d any, s schema) any {
	m, ok := d.(map[string]any)
	if !ok {
		return d
	}
	s = pick(s, m)
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range defaults[schemaName(s)] {
		if _, ok := out[k]; !ok && !isEmpty(v) {
			out[k] = fill(v, prop(s, k))
		}
	}
	return out
}

// exportForm is a server resource as a spec: the create body's fields
// only, without those holding their defaults.
func exportForm(have map[string]any, s schema) map[string]any {
	defs := defaults[schemaName(s)]
	out := map[string]any{}
	for k, v := range have {
		p := prop(s, k)
		if p == nil || isEmpty(v) {
			continue
		}
		if d, ok := defs[k]; ok && same(fill(d, p), v, p) {
			continue
		}
		out[k] = exportValue(v, p)
	}
	return out
}

func exportValue(v any, s schema) any {
	s = pick(s, v)
	switch x := v.(type) {
	case map[string]any:
		if isRecord(s) {
			return exportForm(x, s)
		}
	case []any:
		items, _ := s["items"].(schema)
		if items = deref(items); recordItems(items) {
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = exportValue(e, items)
			}
			return out
		}
	}
	return v
}

func union(a, b map[string]any) []string {
	keys := sortedKeys(a)
	for _, k := range sortedKeys(b) {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// The API calls of each kind, on the generated client's raw-body methods:
// bodies stay JSON objects, so a field the API adds passes through.

type call func() (*http.Response, []byte, error)

func (k *kind) list(ctx context.Context, c *client.ClientWithResponses, cursor *string) call {
	limit := 500
	return func() (*http.Response, []byte, error) {
		switch k.name {
		case "Calendar":
			r, err := c.ListCalendarsWithResponse(ctx, &client.ListCalendarsParams{Limit: &limit, Cursor: cursor})
			return raw(r, err)
		case "Endpoint":
			r, err := c.ListEndpointsWithResponse(ctx, &client.ListEndpointsParams{Limit: &limit, Cursor: cursor})
			return raw(r, err)
		case "Task":
			r, err := c.ListTasksWithResponse(ctx, &client.ListTasksParams{Limit: &limit, Cursor: cursor})
			return raw(r, err)
		default:
			r, err := c.ListWorkflowsWithResponse(ctx, &client.ListWorkflowsParams{Limit: &limit, Cursor: cursor})
			return raw(r, err)
		}
	}
}

func (k *kind) createCall(ctx context.Context, c *client.ClientWithResponses, key string, body []byte, ed client.RequestEditorFn) call {
	return func() (*http.Response, []byte, error) {
		rd := bytes.NewReader(body)
		switch k.name {
		case "Calendar":
			r, err := c.CreateCalendarWithBodyWithResponse(ctx, &client.CreateCalendarParams{IdempotencyKey: &key}, jsonType, rd, ed)
			return raw(r, err)
		case "Endpoint":
			r, err := c.CreateEndpointWithBodyWithResponse(ctx, &client.CreateEndpointParams{IdempotencyKey: &key}, jsonType, rd, ed)
			return raw(r, err)
		case "Task":
			r, err := c.CreateTaskWithBodyWithResponse(ctx, &client.CreateTaskParams{IdempotencyKey: &key}, jsonType, rd, ed)
			return raw(r, err)
		default:
			r, err := c.CreateWorkflowWithBodyWithResponse(ctx, &client.CreateWorkflowParams{IdempotencyKey: &key}, jsonType, rd, ed)
			return raw(r, err)
		}
	}
}

func (k *kind) patchCall(ctx context.Context, c *client.ClientWithResponses, id string, body []byte) call {
	return func() (*http.Response, []byte, error) {
		rd := bytes.NewReader(body)
		switch k.name {
		case "Calendar":
			r, err := c.PatchCalendarWithBodyWithResponse(ctx, id, jsonType, rd)
			return raw(r, err)
		case "Endpoint":
			r, err := c.PatchEndpointWithBodyWithResponse(ctx, id, jsonType, rd)
			return raw(r, err)
		case "Task":
			r, err := c.PatchTaskWithBodyWithResponse(ctx, id, jsonType, rd)
			return raw(r, err)
		default:
			r, err := c.PatchWorkflowWithBodyWithResponse(ctx, id, jsonType, rd)
			return raw(r, err)
		}
	}
}

func (k *kind) getCall(ctx context.Context, c *client.ClientWithResponses, id string) call {
	return func() (*http.Response, []byte, error) {
		switch k.name {
		case "Calendar":
			r, err := c.GetCalendarWithResponse(ctx, id)
			return raw(r, err)
		case "Endpoint":
			r, err := c.GetEndpointWithResponse(ctx, id)
			return raw(r, err)
		case "Task":
			r, err := c.GetTaskWithResponse(ctx, id)
			return raw(r, err)
		default:
			r, err := c.GetWorkflowWithResponse(ctx, id)
			return raw(r, err)
		}
	}
}

func (k *kind) deleteCall(ctx context.Context, c *client.ClientWithResponses, id string) call {
	return func() (*http.Response, []byte, error) {
		switch k.name {
		case "Calendar":
			r, err := c.DeleteCalendarWithResponse(ctx, id)
			return raw(r, err)
		case "Endpoint":
			r, err := c.DeleteEndpointWithResponse(ctx, id)
			return raw(r, err)
		case "Task":
			r, err := c.DeleteTaskWithResponse(ctx, id)
			return raw(r, err)
		default:
			r, err := c.DeleteWorkflowWithResponse(ctx, id)
			return raw(r, err)
		}
	}
}

const jsonType = "application/json"

// A rawResponse is any generated …Response.
type rawResponse interface{ StatusCode() int }

// Body is a generated …Response's body when its status is a 2xx, and
// otherwise its problem (a *client.ProblemError); or err.
func Body[R rawResponse](r R, err error) ([]byte, error) {
	res, body, err := raw(r, err) //nolint:bodyclose // the generated client has read and closed it
	if err != nil {
		return nil, err
	}
	return body, client.Check(res, body)
}

// raw is a generated …Response's HTTP answer and body (every one has
// the fields HTTPResponse and Body), or err.
func raw[R rawResponse](r R, err error) (*http.Response, []byte, error) {
	if err != nil {
		return nil, nil, err
	}
	v := reflect.ValueOf(r).Elem()
	res, _ := v.FieldByName("HTTPResponse").Interface().(*http.Response)
	body, _ := v.FieldByName("Body").Interface().([]byte)
	return res, body, nil
}
