package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/openapi"
	"github.com/axhq/ax/service/signing"
)

// This file holds the document's request schemas to the server in three
// ways: a schedule is one of three shapes (TestSpecScheduleShapes), every
// documented range is the server's (TestSpecRangesAreTheServers), and every
// example is a request the server accepts (TestSpecExamplesAreAccepted).

// specRequestError is the document's verdict on a request: nil when the
// document accepts it.
func specRequestError(method, path string, body []byte) error {
	router, err := specRouter()
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(context.Background(), method, "http://ax.test"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer x")
	route, params, err := router.FindRoute(hr)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: hr, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

// TestSpecScheduleShapes: the document refuses a schedule without its
// type's field, or with another type's, as the server does, and accepts the
// three shapes the server accepts.
func TestSpecScheduleShapes(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	soon := time.Now().UTC().Add(time.Hour).Truncate(time.Second).Format(time.RFC3339)
	for i, c := range []struct {
		schedule map[string]any
		ok       bool
		field    string // the field the server names when it refuses
	}{
		{map[string]any{"type": "cron", "cron": "0 0 2 * * ?", "dialect": "quartz", "dst_policy": "once_per_local_time"}, true, ""},
		{map[string]any{"type": "interval", "interval_seconds": 60}, true, ""},
		{map[string]any{"type": "once", "run_at": soon}, true, ""},
		{map[string]any{"type": "cron"}, false, "schedule.cron"},
		{map[string]any{"type": "cron", "cron": ""}, false, "schedule.cron"},
		{map[string]any{"type": "cron", "cron": "0 2 * * *", "interval_seconds": 60}, false, "schedule.interval_seconds"},
		{map[string]any{"type": "cron", "cron": "0 2 * * *", "run_at": soon}, false, "schedule.run_at"},
		{map[string]any{"type": "interval"}, false, "schedule.interval_seconds"},
		{map[string]any{"type": "interval", "cron": "0 2 * * *", "interval_seconds": 60}, false, "schedule.cron"},
		{map[string]any{"type": "interval", "interval_seconds": 60, "run_at": soon}, false, "schedule.run_at"},
		{map[string]any{"type": "interval", "interval_seconds": 60, "dialect": "quartz"}, false, "schedule.dialect"},
		{map[string]any{"type": "interval", "interval_seconds": 60, "dst_policy": "once_per_local_time"}, false, "schedule.dst_policy"},
		{map[string]any{"type": "once"}, false, "schedule.run_at"},
		{map[string]any{"type": "once", "run_at": soon, "cron": "0 2 * * *"}, false, "schedule.cron"},
		{map[string]any{"type": "once", "run_at": soon, "interval_seconds": 60}, false, "schedule.interval_seconds"},
		{map[string]any{"type": "weekly", "cron": "0 2 * * *"}, false, "schedule.type"},
		{map[string]any{"cron": "0 2 * * *"}, false, "schedule.type"},
	} {
		body, err := json.Marshal(map[string]any{"name": "shape." + strconv.Itoa(i), "endpoint_id": ep, "schedule": c.schedule})
		require.NoError(t, err)
		docErr := specRequestError(http.MethodPost, "/v1/tasks", body)
		r := a.do(req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: body})
		if c.ok {
			require.NoError(t, docErr, "%s: the document refuses it", body)
			require.Equal(t, http.StatusCreated, r.Status, "%s: %s", body, r.Raw)
			continue
		}
		require.Error(t, docErr, "%s: the document accepts it", body)
		requireProblem(t, r, http.StatusUnprocessableEntity)
		require.Contains(t, fieldErrors(r), c.field, "%s: %s", body, r.Raw)
	}
}

// exampleBuilder makes request bodies out of the document's examples.
type exampleBuilder struct {
	doc *openapi3.T
	// pick chooses the variant of every oneOf (modulo its length).
	pick int
	// ids fills the properties that name a resource of the tenant.
	ids map[string]string
	// seen records the component schemas the bodies used.
	seen map[string]bool
}

// schemaName is the component name s refers to ("" when inline).
func schemaName(s *openapi3.SchemaRef) string {
	name, _ := strings.CutPrefix(s.Ref, "#/components/schemas/")
	return name
}

// hasExample reports whether s or a schema inside it has an example.
func hasExample(s *openapi3.SchemaRef, depth int) bool {
	if s == nil || s.Value == nil || depth > 8 {
		return false
	}
	v := s.Value
	if v.Example != nil {
		return true
	}
	for _, p := range v.Properties {
		if hasExample(p, depth+1) {
			return true
		}
	}
	for _, o := range slices.Concat(v.OneOf, v.AllOf) {
		if hasExample(o, depth+1) {
			return true
		}
	}
	return hasExample(v.Items, depth+1)
}

// value is the example of s: its own example, else its properties'
// examples (and the required ones), else for a required field a plain
// value of its type (a date-time an hour from now). nil: nothing to say.
func (b *exampleBuilder) value(name string, s *openapi3.SchemaRef, required bool) any {
	if s == nil || s.Value == nil {
		return nil
	}
	if n := schemaName(s); n != "" {
		b.seen[n] = true
	}
	v := s.Value
	if id, ok := b.ids[name]; ok && (v.Example != nil || required) {
		return id
	}
	if v.Example != nil {
		return v.Example
	}
	if len(v.AllOf) == 1 { // a $ref with a description of its own
		return b.value(name, v.AllOf[0], required)
	}
	if len(v.OneOf) > 0 {
		return b.value(name, v.OneOf[b.pick%len(v.OneOf)], required)
	}
	switch {
	case len(v.Properties) > 0:
		out := map[string]any{}
		for prop, ps := range v.Properties {
			req := slices.Contains(v.Required, prop)
			if !req && !hasExample(ps, 0) {
				continue
			}
			if x := b.value(prop, ps, req); x != nil {
				out[prop] = x
			}
		}
		return out
	case v.Type.Is("array"):
		if item := b.value(name, v.Items, required); item != nil {
			list := []any{item}
			for uint64(len(list)) < v.MinItems { // a union's schedules: at least 2
				list = append(list, b.value(name, v.Items, required))
			}
			return list
		}
	case !required:
	case v.Type.Is("string") && v.Format == "date-time":
		return time.Now().UTC().Add(time.Hour).Truncate(time.Second).Format(time.RFC3339)
	case v.Type.Is("string"):
		return "x"
	case v.Type.Is("integer"), v.Type.Is("number"):
		if v.Min != nil {
			return *v.Min
		}
		return 1
	case v.Type.Is("boolean"):
		return false
	}
	return nil
}

// exampleWorld is a tenant of its own with the resources the examples
// refer to, made from the examples themselves.
type exampleWorld struct {
	t      *testing.T
	a      *testAPI
	doc    *openapi3.T
	tenant string
	tok    string
	// op is an operator token, for the operators' routes (/v1/admin/).
	op    string
	ids   map[string]string
	seen  map[string]bool
	cache map[string]string
}

func newExampleWorld(t *testing.T, a *testAPI, doc *openapi3.T, tenant string) *exampleWorld {
	t.Helper()
	w := &exampleWorld{
		t: t, a: a, doc: doc, tenant: tenant, tok: token(t, tenant, api.AllScopes()...), op: operatorToken(t),
		ids: map[string]string{}, seen: map[string]bool{}, cache: map[string]string{},
	}
	w.ids["endpoint_id"] = w.a.createEndpoint(w.tok, "prerequisite")
	return w
}

// tokenFor is the token that may call path: the operator's for the
// operators' routes, the tenant's otherwise.
func (w *exampleWorld) tokenFor(path string) string {
	if strings.HasPrefix(path, "/v1/admin/") {
		return w.op
	}
	return w.tok
}

// body is the example body of method path, with variant pick of its
// oneOfs and the world's resources in its id fields.
func (w *exampleWorld) body(method, path string, pick int) map[string]any {
	op := w.doc.Paths.Find(path).GetOperation(method)
	require.NotNil(w.t, op, "%s %s", method, path)
	b := &exampleBuilder{doc: w.doc, pick: pick, ids: w.ids, seen: w.seen}
	body, _ := b.value("", op.RequestBody.Value.Content.Get("application/json").Schema, true).(map[string]any)
	require.NotNil(w.t, body, "%s %s: no example body", method, path)
	return body
}

// create POSTs the example body of path and returns the new resource's id
// (once per world).
func (w *exampleWorld) create(path string) string {
	if id, ok := w.cache[path]; ok {
		return id
	}
	r := w.a.must(http.StatusCreated, req{Method: http.MethodPost, Path: path, Token: w.tok, Body: w.body(http.MethodPost, path, 0)})
	w.cache[path] = r.JSON["id"].(string)
	return w.cache[path]
}

// path fills in a path template with the world's resources.
func (w *exampleWorld) path(tpl string) string {
	return strings.NewReplacer("{tenant}", w.tenant).Replace(strings.Replace(tpl, "{id}", w.resource(tpl), 1))
}

// resource is the id a path's {id} names.
func (w *exampleWorld) resource(tpl string) string {
	if !strings.Contains(tpl, "{id}") {
		return ""
	}
	switch strings.Split(tpl, "/")[2] {
	case "tasks":
		return w.create("/v1/tasks")
	case "workflows":
		return w.create("/v1/workflows")
	case "calendars":
		return w.create("/v1/calendars")
	case "endpoints":
		return w.ids["endpoint_id"]
	}
	w.t.Fatalf("%s: no resource for its {id}", tpl)
	return ""
}

// exampleOps are the operations whose example bodies are sent: every
// create, and every other write whose prerequisites a test can make.
// POST /v1/executions/{id}/complete and /heartbeat are left out: they need
// an execution running in callback mode.
var exampleOps = []struct{ method, path string }{
	{http.MethodPost, "/v1/endpoints"},
	{http.MethodPost, "/v1/calendars"},
	{http.MethodPost, "/v1/tasks"},
	{http.MethodPost, "/v1/workflows"},
	{http.MethodPost, "/v1/tasks/{id}/trigger"},
	{http.MethodPost, "/v1/tasks/{id}/backfill"},
	{http.MethodPost, "/v1/tasks/{id}/skip"},
	{http.MethodPost, "/v1/workflows/{id}/trigger"},
	{http.MethodPost, "/v1/workflows/{id}/backfill"},
	{http.MethodPost, "/v1/endpoints/{id}/rotate-secret"},
	{http.MethodPost, "/v1/executions/retry"},
	{http.MethodPost, "/v1/events"},
	{http.MethodPatch, "/v1/endpoints/{id}"},
	{http.MethodPatch, "/v1/calendars/{id}"},
	{http.MethodPatch, "/v1/tasks/{id}"},
	{http.MethodPatch, "/v1/workflows/{id}"},
	{http.MethodPut, "/v1/admin/tenants/{tenant}/limits"},
}

// exampleVariants is how many variants a body's oneOfs have (1: none).
func exampleVariants(doc *openapi3.T, method, path string) int {
	n := 1
	var walk func(s *openapi3.SchemaRef, depth int)
	walk = func(s *openapi3.SchemaRef, depth int) {
		if s == nil || s.Value == nil || depth > 8 {
			return
		}
		n = max(n, len(s.Value.OneOf))
		for _, p := range s.Value.Properties {
			walk(p, depth+1)
		}
		for _, o := range slices.Concat(s.Value.OneOf, s.Value.AllOf) {
			walk(o, depth+1)
		}
		walk(s.Value.Items, depth+1)
	}
	walk(doc.Paths.Find(path).GetOperation(method).RequestBody.Value.Content.Get("application/json").Schema, 0)
	return n
}

// TestSpecExamplesAreAccepted sends the example body of every write
// operation it can make the prerequisites of (built from the examples of
// the request schema's properties, once per variant of its oneOfs, with
// the ids of real resources, themselves made from the examples), and
// requires a 2xx: the document's examples are requests the server takes.
// It fails, too, on a request schema with examples that no such body used.
func TestSpecExamplesAreAccepted(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	a := newAPI(t, nil)
	seen := map[string]bool{}
	for i, o := range exampleOps {
		for pick := range exampleVariants(doc, o.method, o.path) {
			w := newExampleWorld(t, a, doc, fmt.Sprintf("examples-%d-%d", i, pick))
			path := w.path(o.path)
			body := w.body(o.method, o.path, pick)
			enc, err := json.Marshal(body)
			require.NoError(t, err)
			require.NoError(t, specRequestError(o.method, path, enc), "%s %s: the document refuses its own example %s", o.method, o.path, enc)
			r := a.do(req{Method: o.method, Path: path, Token: w.tokenFor(path), Body: enc})
			if r.Status < 200 || r.Status > 299 {
				t.Errorf("%s %s: the server refuses the document's example (%d):\nbody: %s\nanswer: %s", o.method, o.path, r.Status, enc, r.Raw)
			}
			maps.Copy(seen, w.seen)
		}
	}
	// Every request schema that has examples was in a body.
	used := map[string]bool{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.RequestBody != nil {
				markSchemas(op.RequestBody.Value.Content.Get("application/json").Schema, used, 0)
			}
		}
	}
	notSent := map[string]string{
		"CompleteRequest":  "needs an execution running in callback mode",
		"HeartbeatRequest": "needs an execution running in callback mode",
	}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		s := doc.Components.Schemas[name]
		if !seen[name] && notSent[name] == "" && hasExample(s, 0) {
			t.Errorf("request schema %s has examples, but no operation of exampleOps sent them", name)
		}
	}
}

// markSchemas records the component schemas s uses.
func markSchemas(s *openapi3.SchemaRef, seen map[string]bool, depth int) {
	if s == nil || s.Value == nil || depth > 8 {
		return
	}
	if n := schemaName(s); n != "" {
		seen[n] = true
	}
	for _, p := range s.Value.Properties {
		markSchemas(p, seen, depth+1)
	}
	for _, o := range slices.Concat(s.Value.OneOf, s.Value.AllOf) {
		markSchemas(o, seen, depth+1)
	}
	markSchemas(s.Value.Items, seen, depth+1)
	markSchemas(s.Value.AdditionalProperties.Schema, seen, depth+1)
}

// specBound is one documented range: at path, kind is minimum, maximum,
// minLength, maxLength, minItems, maxItems or maxProperties.
type specBound struct {
	path      []string
	kind      string
	limit     float64
	integer   bool
	exclusive bool
}

func (b specBound) String() string { return strings.Join(b.path, ".") + " " + b.kind }

// field is the name the server gives path in a 422: a.b, nodes[0].key.
func (b specBound) field() string {
	var s strings.Builder
	for i, p := range b.path {
		if _, err := strconv.Atoi(p); err == nil {
			s.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			s.WriteString(".")
		}
		s.WriteString(p)
	}
	return s.String()
}

// specBounds lists the ranges of s, following body: in a oneOf the
// variant body's discriminator names, in an array its first item.
func specBounds(s *openapi3.SchemaRef, body any, path []string, out *[]specBound) {
	if s == nil || s.Value == nil {
		return
	}
	v := s.Value
	if len(v.AllOf) == 1 {
		specBounds(v.AllOf[0], body, path, out)
		return
	}
	if len(v.OneOf) > 0 {
		obj, _ := body.(map[string]any)
		if d := v.Discriminator; d != nil && obj != nil {
			if m, ok := d.Mapping[fmt.Sprint(obj[d.PropertyName])]; ok {
				for _, o := range v.OneOf {
					if o.Ref == m.Ref {
						specBounds(o, body, path, out)
					}
				}
			}
		}
		return
	}
	add := func(kind string, limit float64) {
		*out = append(*out, specBound{
			path: slices.Clone(path), kind: kind, limit: limit, integer: v.Type.Is("integer"),
			exclusive: kind == "minimum" && v.ExclusiveMin.IsTrue(),
		})
	}
	if len(path) > 0 {
		if v.Min != nil {
			add("minimum", *v.Min)
		}
		if v.Max != nil {
			add("maximum", *v.Max)
		}
		if v.MinLength > 0 {
			add("minLength", float64(v.MinLength))
		}
		if v.MaxLength != nil {
			add("maxLength", float64(*v.MaxLength))
		}
		if v.MinItems > 0 {
			add("minItems", float64(v.MinItems))
		}
		if v.MaxItems != nil {
			add("maxItems", float64(*v.MaxItems))
		}
		if v.MaxProps != nil {
			add("maxProperties", float64(*v.MaxProps))
		}
	}
	obj, _ := body.(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(v.Properties)) {
		specBounds(v.Properties[name], obj[name], append(slices.Clone(path), name), out)
	}
	if arr, ok := body.([]any); ok && len(arr) > 0 {
		specBounds(v.Items, arr[0], append(slices.Clone(path), "0"), out)
	}
	if ap := v.AdditionalProperties.Schema; ap != nil {
		// A map's values: under a key that is a valid label and header name.
		specBounds(ap, nil, append(slices.Clone(path), "x-bound"), out)
	}
}

// setPath sets the value at path in body (objects on the way are made).
func setPath(body map[string]any, path []string, v any) {
	var cur any = body
	for i, p := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = v
				return
			}
			if c[p] == nil {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			n, _ := strconv.Atoi(p)
			if last {
				c[n] = v
				return
			}
			cur = c[n]
		}
	}
}

// getPath is the value at path in body (nil when absent).
func getPath(body any, path []string) any {
	for _, p := range path {
		switch c := body.(type) {
		case map[string]any:
			body = c[p]
		case []any:
			n, _ := strconv.Atoi(p)
			if n >= len(c) {
				return nil
			}
			body = c[n]
		default:
			return nil
		}
	}
	return body
}

func deepCopy(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	enc, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(enc, &out))
	return out
}

// boundValue is a value of n units (characters, items, properties) for the
// field at path, valid in every other respect; false when there is none
// (no URL has one character).
func (w *exampleWorld) boundValue(b specBound, base map[string]any, n int) (any, bool) {
	last := b.path[len(b.path)-1]
	switch b.kind {
	case "minLength", "maxLength":
		switch last {
		case "url":
			const prefix = "https://hooks.example.com/"
			if n <= len(prefix) {
				return strings.Repeat("a", n), n == 0
			}
			return prefix + strings.Repeat("a", n-len(prefix)), true
		case "cron": // the server measures the expression before it trims it
			const cron = "0 2 * * *"
			if n < len(cron) {
				return "", n == 0
			}
			return cron + strings.Repeat(" ", n-len(cron)), true
		case "timezone":
			return strings.Repeat("a", n), false // no zone name is that long
		case "secret": // whsec_ and the base64 of a key, when n has one
			const prefix = "whsec_"
			for size := signing.SecretBytesMin; size <= signing.SecretBytesMax; size++ {
				if len(prefix)+base64.StdEncoding.EncodedLen(size) == n {
					return prefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, size)), true
				}
			}
			return prefix + strings.Repeat("A", max(n-len(prefix), 0)), false
		}
		return strings.Repeat("a", n), true
	case "minItems", "maxItems":
		out := []any{}
		for i := range n {
			switch last {
			case "dates":
				out = append(out, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i).Format(time.DateOnly))
			case "exclude_calendars":
				r := w.a.must(http.StatusCreated, req{
					Method: http.MethodPost, Path: "/v1/calendars", Token: w.tok,
					Body: map[string]any{"name": fmt.Sprintf("excluded.%d.%d", n, i), "dates": []string{"2027-01-01"}},
				})
				out = append(out, r.JSON["id"])
			case "nodes":
				node := deepCopy(w.t, getPath(base, append(slices.Clone(b.path), "0")).(map[string]any))
				node["key"] = fmt.Sprintf("n%d", i)
				out = append(out, node)
			default:
				return nil, false
			}
		}
		return out, true
	case "maxProperties":
		out := map[string]any{}
		for i := range n {
			switch last {
			case "labels":
				out[fmt.Sprintf("l%d", i)] = "v"
			case "headers":
				out[fmt.Sprintf("X-Custom-%d", i)] = "v"
			default:
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

// boundCases are the value at the bound (accepted; nil when none can be
// sent) and the one beyond it (refused).
func (w *exampleWorld) boundCases(b specBound, base map[string]any) (at, beyond any, atOK bool) {
	switch b.kind {
	case "maximum":
		return b.limit, b.limit + 1, true
	case "minimum":
		below := b.limit - 1
		if !b.integer && b.limit > 0 {
			below = b.limit / 2
		}
		if b.exclusive {
			return nil, b.limit, false
		}
		return b.limit, below, true
	case "minLength", "minItems":
		at, atOK := w.boundValue(b, base, int(b.limit))
		beyond, _ = w.boundValue(b, base, int(b.limit)-1)
		return at, beyond, atOK
	}
	at, atOK = w.boundValue(b, base, int(b.limit))
	beyond, _ = w.boundValue(b, base, int(b.limit)+1)
	return at, beyond, atOK
}

// boundContext makes room in the base body for a bound whose value other
// fields constrain, keyed by the last two elements of its path and its
// kind: a callback timeout of 0 needs mode response; a heartbeat timeout
// and an initial backoff at their maximum need the timeout and the
// maximum backoff as large.
var boundContext = map[string]func(parent map[string]any){
	"wait_for.event minLength":    waitForNode,
	"wait_for.event maxLength":    waitForNode,
	"wait_for.key maxLength":      waitForNode,
	"wait_for.timeout_ms minimum": waitForNode,
	"wait_for.timeout_ms maximum": waitForNode,
	"completion.timeout_ms minimum": func(p map[string]any) {
		p["completion"] = map[string]any{"mode": "response"}
	},
	"completion.heartbeat_timeout_ms maximum": func(p map[string]any) {
		p["completion"].(map[string]any)["timeout_ms"] = 604800000
	},
	"retry.initial_backoff_ms maximum": func(p map[string]any) {
		p["retry"].(map[string]any)["max_backoff_ms"] = 604800000
	},
}

// rangeOps are the operations whose ranges are checked: every create,
// with the tenant's limits.
var rangeOps = []struct{ method, path string }{
	{http.MethodPost, "/v1/endpoints"},
	{http.MethodPost, "/v1/calendars"},
	{http.MethodPost, "/v1/tasks"},
	{http.MethodPost, "/v1/workflows"},
	{http.MethodPost, "/v1/tasks/{id}/trigger"},
	{http.MethodPost, "/v1/tasks/{id}/backfill"},
	{http.MethodPost, "/v1/workflows/{id}/trigger"},
	{http.MethodPost, "/v1/workflows/{id}/backfill"},
	{http.MethodPut, "/v1/admin/tenants/{tenant}/limits"},
}

// TestSpecRangesAreTheServers walks the request body schema of every
// create (and of the tenant limits) and, for each documented minimum,
// maximum, minLength, maxLength, minItems, maxItems and maxProperties,
// sends the example body with the value at the bound, which both the
// document and the server must accept, and with the value just beyond it,
// which both must refuse, the server with a 422 naming the field. Each
// request runs in a tenant of its own, so that names and quotas never
// collide.
func TestSpecRangesAreTheServers(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	a := newAPI(t, nil)
	n, checked := 0, map[string]bool{}
	for _, o := range rangeOps {
		schema := doc.Paths.Find(o.path).GetOperation(o.method).RequestBody.Value.Content.Get("application/json").Schema
		for pick := range exampleVariants(doc, o.method, o.path) {
			n++
			probe := newExampleWorld(t, a, doc, fmt.Sprintf("ranges-%d", n))
			var bounds []specBound
			specBounds(schema, probe.body(o.method, o.path, pick), nil, &bounds)
			for _, b := range bounds {
				key := o.method + " " + o.path + " " + b.String()
				if checked[key] {
					continue
				}
				checked[key] = true
				for _, atBound := range []bool{true, false} {
					n++
					w := newExampleWorld(t, a, doc, fmt.Sprintf("ranges-%d", n))
					path := w.path(o.path)
					body := w.body(o.method, o.path, pick)
					parentPath := b.path[:len(b.path)-1]
					if len(b.path) >= 2 {
						if fix := boundContext[strings.Join(b.path[len(b.path)-2:], ".")+" "+b.kind]; fix != nil {
							parent := body
							if len(parentPath) > 1 {
								parent, _ = getPath(body, parentPath[:len(parentPath)-1]).(map[string]any)
							}
							fix(parent)
						}
					}
					at, beyond, atOK := w.boundCases(b, body)
					if atBound && !atOK {
						continue // no value of that size can be valid (a URL of one character)
					}
					v := beyond
					if atBound {
						v = at
					}
					setPath(body, b.path, v)
					enc, err := json.Marshal(body)
					require.NoError(t, err)
					docErr := specRequestError(o.method, path, enc)
					r := a.do(req{Method: o.method, Path: path, Token: w.tokenFor(path), Body: enc})
					what := fmt.Sprintf("%s %s, %s %v, %s", o.method, o.path, b, b.limit, map[bool]string{true: "at it", false: "beyond it"}[atBound])
					if atBound {
						if docErr != nil {
							t.Errorf("%s: the document refuses it: %v", what, docErr)
						}
						if r.Status < 200 || r.Status > 299 {
							t.Errorf("%s: the server refuses it (%d): %s\nbody: %.400s", what, r.Status, r.Raw, enc)
						}
						continue
					}
					if docErr == nil {
						t.Errorf("%s: the document accepts it", what)
					}
					if r.Status != http.StatusUnprocessableEntity || r.Header.Get("Content-Type") != "application/problem+json" ||
						!slices.Contains(fieldErrors(r), b.field()) {
						t.Errorf("%s: want a 422 problem naming %s, got %d: %s", what, b.field(), r.Status, r.Raw)
					}
				}
			}
		}
	}
	t.Logf("%d ranges, %d requests", len(checked), n)
	require.Greater(t, len(checked), 40, "the walk found the documented ranges")
}

// waitForNode makes the example node p a wait_for node: wait_for instead
// of endpoint_id, and none of the delivery fields.
func waitForNode(p map[string]any) {
	for _, f := range []string{"endpoint_id", "payload", "payload_template", "priority", "timeout_ms", "retry", "shards", "completion"} {
		delete(p, f)
	}
	p["wait_for"] = map[string]any{"event": "files.ready", "timeout_ms": 3600000}
}
