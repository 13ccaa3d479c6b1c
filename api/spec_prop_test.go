package api_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/openapi"
)

// propCasesPerOperation is how many requests TestSpecProperties sends to
// each operation: half generated to be valid against the document, half
// with one deliberate violation.
const propCasesPerOperation = 12

// TestSpecProperties generates requests from the OpenAPI document for every
// operation, with a seeded generator (the seed is logged; AX_PROP_SEED
// replays a run): valid ones (required fields, a random subset of the
// optional ones, values within the documented enums, ranges and formats,
// examples preferred) and invalid ones (an unknown field or query
// parameter, a required field missing, a wrong type, a value out of range,
// a body that is not an object). Each request goes through the test client,
// which holds the exchange to the document: the answer must be a documented
// status with a body of the documented schema, and a request the document
// refuses must be refused (4xx). On top of that no answer may be a 5xx.
func TestSpecProperties(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("AX_PROP_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (AX_PROP_SEED=%d replays it)", seed, seed)
	rnd := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	a := newAPI(t, nil)
	tok := token(t, "acme", api.AllScopes()...)
	op := operatorToken(t) // for the operators' routes, /v1/admin/

	type operation struct {
		method, path string
		op           *openapi3.Operation
	}
	var ops []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, operation{method, path, op})
		}
	}
	// Deletes last, so that the other operations find their fixtures.
	slices.SortFunc(ops, func(x, y operation) int {
		if dx, dy := x.method == http.MethodDelete, y.method == http.MethodDelete; dx != dy {
			if dx {
				return 1
			}
			return -1
		}
		return strings.Compare(x.method+x.path, y.method+y.path)
	})

	fx := newFixtures(a, tok)
	for _, o := range ops {
		for i := range propCasesPerOperation {
			g := &gen{rnd: rnd, fx: fx}
			invalid := i%2 == 1
			path := g.path(o.path)
			query := g.query(o.op.Parameters, invalid)
			r := req{Method: o.method, Path: path, Token: tok, Header: map[string]string{}}
			if strings.HasPrefix(o.path, "/v1/admin/") {
				r.Token = op
			}
			if q := query.Encode(); q != "" {
				r.Path += "?" + q
			}
			for _, p := range o.op.Parameters {
				if p.Value.In == openapi3.ParameterInHeader && rnd.IntN(2) == 0 {
					r.Header[p.Value.Name] = "prop-" + strconv.Itoa(rnd.IntN(1e6))
				}
			}
			if rb := o.op.RequestBody; rb != nil && rb.Value != nil {
				if media := rb.Value.Content.Get("application/json"); media != nil && (rb.Value.Required || rnd.IntN(3) > 0) {
					body := g.value(media.Schema, 0)
					if invalid {
						body = g.break_(media.Schema, body)
					}
					enc, err := json.Marshal(body)
					require.NoError(t, err)
					r.Body = enc
				}
			}
			out := a.do(r)
			require.Less(t, out.Status, 500, "%s %s (%s): %s", r.Method, r.Path, r.Body, out.Raw)
		}
	}
}

// fixtures are real resources of the tenant, so that generated paths name
// existing ones as often as unknown ones.
type fixtures struct {
	endpoint, task, execution, workflow, run, calendar, backfill, event string
}

func newFixtures(a *testAPI, tok string) fixtures {
	var f fixtures
	f.endpoint = a.createEndpoint(tok, "prop")
	f.task = a.createTask(tok, f.endpoint, "prop.fixture.task", nil).JSON["id"].(string)
	f.execution = a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + f.task + "/trigger", Token: tok}).JSON["id"].(string)
	f.workflow = a.createWorkflow(tok, "prop.fixture.flow")
	f.run = a.triggerWorkflow(tok, f.workflow)
	f.calendar = a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/calendars", Token: tok,
		Body: map[string]any{"name": "prop", "dates": []string{"2027-01-01"}},
	}).JSON["id"].(string)
	f.event = a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/events", Token: tok,
		Body: map[string]any{"name": "prop.fixture"},
	}).JSON["id"].(string)
	now := time.Now().UTC().Truncate(time.Hour)
	f.backfill = a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + f.task + "/backfill", Token: tok,
		Body: map[string]any{"from": now.Add(-72 * time.Hour).Format(time.RFC3339), "to": now.Format(time.RFC3339)},
	}).JSON["id"].(string)
	return f
}

// gen generates one request's parts.
type gen struct {
	rnd *rand.Rand
	fx  fixtures
}

const unknownID = "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e"

// path fills in path parameters: mostly a real resource of the right kind,
// sometimes an unknown id or garbage.
func (g *gen) path(tpl string) string {
	kind := strings.Split(strings.TrimPrefix(tpl, "/v1/"), "/")[0]
	id := map[string]string{
		"endpoints": g.fx.endpoint, "tasks": g.fx.task, "executions": g.fx.execution,
		"workflows": g.fx.workflow, "workflow-runs": g.fx.run, "calendars": g.fx.calendar, "backfills": g.fx.backfill,
		"events": g.fx.event,
	}[kind]
	switch g.rnd.IntN(6) {
	case 0:
		id = unknownID
	case 1:
		id = g.str(8)
	}
	key := []string{"a", "b", "zz"}[g.rnd.IntN(3)]
	tenant := []string{"acme", "other-tenant"}[g.rnd.IntN(2)]
	return strings.NewReplacer("{id}", url.PathEscape(id), "{key}", key, "{tenant}", tenant).Replace(tpl)
}

// query generates the query parameters; invalid adds one violation half
// of the time (the other half the body carries it).
func (g *gen) query(params openapi3.Parameters, invalid bool) url.Values {
	q := url.Values{}
	var names []string
	for _, p := range params {
		if p.Value.In != openapi3.ParameterInQuery {
			continue
		}
		names = append(names, p.Value.Name)
		if p.Value.Required || g.rnd.IntN(3) == 0 {
			q.Add(p.Value.Name, g.scalar(p.Value.Schema))
		}
	}
	if invalid && g.rnd.IntN(2) == 0 {
		switch {
		case len(names) == 0 || g.rnd.IntN(3) == 0:
			q.Set("zz_unknown", "1")
		default:
			n := names[g.rnd.IntN(len(names))]
			q.Set(n, []string{"", "-1", "99999999", "not-a-value"}[g.rnd.IntN(4)])
		}
	}
	return q
}

// scalar is a valid query parameter value for s.
func (g *gen) scalar(s *openapi3.SchemaRef) string {
	if s == nil || s.Value == nil {
		return g.str(5)
	}
	if s.Value.Type.Is("array") {
		return g.scalar(s.Value.Items)
	}
	v := g.value(s, 0)
	if v == nil {
		return "x"
	}
	return fmt.Sprint(v)
}

// value generates a JSON value valid against s.
func (g *gen) value(s *openapi3.SchemaRef, depth int) any {
	if s == nil || s.Value == nil {
		return g.anyJSON(depth)
	}
	v := s.Value
	for _, sub := range v.AllOf {
		return g.value(sub, depth)
	}
	if len(v.OneOf) > 0 { // a tagged union (Schedule): one of its variants
		return g.value(v.OneOf[g.rnd.IntN(len(v.OneOf))], depth)
	}
	if v.Nullable && g.rnd.IntN(8) == 0 {
		return nil
	}
	if len(v.Enum) > 0 {
		return v.Enum[g.rnd.IntN(len(v.Enum))]
	}
	if v.Example != nil && g.rnd.IntN(4) > 0 {
		return v.Example
	}
	switch {
	case v.Type.Is("string"):
		switch v.Format {
		case "date-time":
			return time.Now().UTC().Add(time.Duration(g.rnd.IntN(96)-24) * time.Hour).Truncate(time.Second).Format(time.RFC3339)
		case "date":
			return time.Now().UTC().AddDate(0, 0, g.rnd.IntN(400)).Format(time.DateOnly)
		}
		return g.str(1 + g.rnd.IntN(12))
	case v.Type.Is("integer"):
		lo, hi := -5.0, 1000.0
		if v.Min != nil {
			lo = *v.Min
		}
		if v.Max != nil {
			hi = *v.Max
		}
		if hi < lo {
			hi = lo
		}
		return int64(lo) + g.rnd.Int64N(int64(hi-lo)+1)
	case v.Type.Is("number"):
		lo, hi := 0.0, 1000.0
		if v.Min != nil {
			lo = *v.Min
		}
		if v.Max != nil {
			hi = *v.Max
		}
		return lo + g.rnd.Float64()*(hi-lo)
	case v.Type.Is("boolean"):
		return g.rnd.IntN(2) == 0
	case v.Type.Is("array"):
		out := []any{}
		for range g.rnd.IntN(3) {
			out = append(out, g.value(v.Items, depth+1))
		}
		return out
	case v.Type.Is("object") || len(v.Properties) > 0:
		out := map[string]any{}
		for name, p := range v.Properties {
			if slices.Contains(v.Required, name) || g.rnd.IntN(2) == 0 {
				out[name] = g.field(name, p, depth+1)
			}
		}
		if ap := v.AdditionalProperties.Schema; ap != nil {
			for range g.rnd.IntN(3) {
				out["k"+g.str(4)] = g.value(ap, depth+1)
			}
		}
		return out
	}
	return g.anyJSON(depth)
}

// field is value, with a real fixture for the properties that name one.
func (g *gen) field(name string, s *openapi3.SchemaRef, depth int) any {
	if g.rnd.IntN(4) > 0 {
		switch name {
		case "endpoint_id", "alert_endpoint_id":
			return g.fx.endpoint
		case "exclude_calendars":
			return []any{g.fx.calendar}
		}
	}
	return g.value(s, depth)
}

// anyJSON is an arbitrary JSON value, for the schemas that accept one.
func (g *gen) anyJSON(depth int) any {
	if depth > 3 {
		return g.str(3)
	}
	switch g.rnd.IntN(6) {
	case 0:
		return nil
	case 1:
		return g.rnd.IntN(100)
	case 2:
		return g.str(6)
	case 3:
		// An array's items are `{}` in the document, which OpenAPI 3.0
		// validators (kin-openapi) read as refusing null (3.0 has no "any
		// value or null" short of a type): the server takes null there
		// too, but the generator keeps to what the document admits.
		return []any{g.notNull(depth + 1), g.notNull(depth + 1)}
	case 4:
		return g.rnd.IntN(2) == 0
	}
	return map[string]any{g.str(3): g.anyJSON(depth + 1)}
}

// notNull is anyJSON but never null.
func (g *gen) notNull(depth int) any {
	for {
		if v := g.anyJSON(depth); v != nil {
			return v
		}
	}
}

// str is a random string of n characters, some of them non-ASCII.
func (g *gen) str(n int) string {
	const alphabet = "abcxyz019._-订单é "
	runes := []rune(alphabet)
	var b strings.Builder
	for range n {
		b.WriteRune(runes[g.rnd.IntN(len(runes))])
	}
	return b.String()
}

// break_ returns body with one violation of s.
func (g *gen) break_(s *openapi3.SchemaRef, body any) any {
	obj, ok := body.(map[string]any)
	if !ok || s == nil || s.Value == nil {
		return map[string]any{"zz_unknown": true}
	}
	v := s.Value
	switch g.rnd.IntN(5) {
	case 0:
		obj["zz_unknown"] = 1
	case 1:
		if len(v.Required) > 0 {
			delete(obj, v.Required[g.rnd.IntN(len(v.Required))])
		} else {
			obj["zz_unknown"] = 1
		}
	case 2: // a wrong type
		for name, p := range v.Properties {
			if p.Value != nil && p.Value.Type != nil {
				if p.Value.Type.Is("string") {
					obj[name] = 12345
				} else {
					obj[name] = "not-a-" + p.Value.Type.Slice()[0]
				}
				break
			}
		}
	case 3: // out of range
		for name, p := range v.Properties {
			if p.Value != nil && p.Value.Max != nil {
				obj[name] = *p.Value.Max + 1
				return obj
			}
		}
		obj["zz_unknown"] = "x"
	default:
		return []any{obj}
	}
	return obj
}
