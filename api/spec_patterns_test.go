package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/openapi"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/dag"
	"github.com/axhq/ax/service/lifecycle"
)

// specString is one documented form of a request string: at path (a map's
// values under "x-bound", its keys under "x-key"), a pattern and/or a
// format.
type specString struct {
	path            []string
	pattern, format string
}

// field is the name the server gives the string in a 422 (nodes[0].key,
// dates[0]; a map's entry is named by its key, so only the map is).
func (s specString) field() string {
	path := s.path
	if last := path[len(path)-1]; last == "x-bound" || last == "x-key" {
		path = path[:len(path)-1]
	}
	return specBound{path: path}.field()
}

// specStrings lists the patterns and formats of s's strings, following
// body as specBounds does.
func specStrings(s *openapi3.SchemaRef, body any, path []string, out *[]specString) {
	if s == nil || s.Value == nil {
		return
	}
	v := s.Value
	if len(v.AllOf) == 1 {
		specStrings(v.AllOf[0], body, path, out)
		return
	}
	if len(v.OneOf) > 0 {
		obj, _ := body.(map[string]any)
		if d := v.Discriminator; d != nil && obj != nil {
			if m, ok := d.Mapping[fmt.Sprint(obj[d.PropertyName])]; ok {
				for _, o := range v.OneOf {
					if o.Ref == m.Ref {
						specStrings(o, body, path, out)
					}
				}
			}
		}
		return
	}
	if v.Type.Is("string") && (v.Pattern != "" || v.Format != "" && v.Format != "date-time") {
		*out = append(*out, specString{path: slices.Clone(path), pattern: v.Pattern, format: v.Format})
	}
	if names, ok := v.Extensions["x-propertyNames"].(map[string]any); ok {
		*out = append(*out, specString{path: append(slices.Clone(path), "x-key"), pattern: names["pattern"].(string)})
	}
	obj, _ := body.(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(v.Properties)) {
		specStrings(v.Properties[name], obj[name], append(slices.Clone(path), name), out)
	}
	if v.Type.Is("array") {
		specStrings(v.Items, nil, append(slices.Clone(path), "0"), out)
	}
	if ap := v.AdditionalProperties.Schema; ap != nil {
		specStrings(ap, nil, append(slices.Clone(path), "x-bound"), out)
	}
}

// stringProbes are, for each documented form (operation path and field
// path), values the server accepts and values it refuses for their form:
// the document must say the same of each. The world's endpoint id stands
// for "@endpoint".
var stringProbes = map[string]struct{ ok, bad []string }{
	"/v1/endpoints name": {[]string{"billing", " a name with spaces ", "订单"}, []string{"   ", "a\tb", "a\x7fb"}},
	"/v1/endpoints url": {
		[]string{"https://hooks.example.com/ax?x=1&y=@", "HTTP://h.example.com:8080/p@q", "http://[::1]:9/x"},
		[]string{
			"ftp://x.example.com/", "https://u:p@x.example.com/", "https://x.example.com/#f", "https://x.example.com/a b",
			"//x.example.com/", "x.example.com", "https://",
		},
	},
	"/v1/endpoints secret": {
		[]string{"whsec_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0=", "whsec_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9"},
		[]string{"whsec_short", "sk_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0=", "whsec_ji6MJU x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0="},
	},
	"/v1/endpoints headers.x-key":   {[]string{"X-Env", "x_custom.1"}, []string{"Bad Header", "X:Y", "Ü"}},
	"/v1/endpoints headers.x-bound": {[]string{"v a l u e", "ü"}, []string{"a\nb", "a\rb"}},
	"/v1/endpoints/{id}/rotate-secret secret": {
		[]string{"whsec_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0="},
		[]string{"whsec_", "whsec_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0=x"},
	},
	"/v1/tasks name":              {[]string{"order.reconcile.daily", "订单.对账.每日", "0-x_y"}, []string{"Order", "-x", "a b", "a/b", ".x"}},
	"/v1/tasks endpoint_id":       {[]string{"@endpoint"}, []string{"not-an-id", "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5", "{0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e}"}},
	"/v1/tasks alert_endpoint_id": {[]string{"", "@endpoint"}, []string{"x", "0192f0c17c1e7d2a9a511f0e2b3c4d5e"}},
	"/v1/tasks labels.x-key":      {[]string{"team", "app.kubernetes.io/name", "A1"}, []string{"-a", "a b", "a:b", "a=b", "ключ"}},
	"/v1/tasks labels.x-bound":    {[]string{"billing", "a b:c=d/é"}, []string{"a\x01b", "a\nb"}},
	"/v1/tasks schedule.timezone": {
		[]string{"Asia/Shanghai", "Etc/GMT+8", "America/Argentina/Buenos_Aires", "", "UTC"},
		[]string{"Asia Shanghai", "../etc/passwd", "Asia//Shanghai", "Europe/Berlin/", "Europe/Berlin\u00e9"},
	},
	"/v1/tasks schedule.exclude_calendars.0":     {nil, []string{"nope", "0192f0c1-7c1e-7d2a-9a51"}},
	"/v1/workflows schedule.timezone":            {[]string{"Europe/Berlin"}, []string{"Europe Berlin"}},
	"/v1/workflows schedule.exclude_calendars.0": {nil, []string{"nope"}},
	"/v1/workflows name":                         {[]string{"billing.daily", "订单"}, []string{"Billing", "_x", "a b"}},
	"/v1/workflows alert_endpoint_id":            {[]string{"", "@endpoint"}, []string{"nope"}},
	"/v1/workflows nodes.0.key":                  {[]string{"extract", "a.b_c-d"}, []string{"Extract", "_a", "a b", "ключ"}},
	"/v1/workflows nodes.0.endpoint_id":          {[]string{"@endpoint"}, []string{"nope"}},
	"/v1/workflows nodes.0.depends_on.0":         {nil, []string{"Extract", "a b"}},
	"/v1/calendars name":                         {[]string{"cn-holidays", " padded ", "节假日 2027", "a\x7f"}, []string{"  ", "a\tb", "a\x01"}},
	"/v1/calendars timezone":                     {[]string{"Asia/Shanghai", ""}, []string{"Asia Shanghai", "/UTC"}},
	"/v1/calendars dates.0":                      {[]string{"2027-01-01", "2028-02-29"}, []string{"2027-1-1", "2027/01/01", "27-01-01", "2027-02-30", "2027-13-01"}},
	"/v1/tasks/{id}/trigger dedup_key":           {[]string{"invoice 42 订单 ✓"}, []string{"a\tb", "a\u2028b", "a\x7f"}},
}

// patternOps are the operations whose documented string forms are checked.
var patternOps = []struct{ method, path string }{
	{http.MethodPost, "/v1/endpoints"},
	{http.MethodPost, "/v1/endpoints/{id}/rotate-secret"},
	{http.MethodPost, "/v1/calendars"},
	{http.MethodPost, "/v1/tasks"},
	{http.MethodPost, "/v1/workflows"},
	{http.MethodPost, "/v1/tasks/{id}/trigger"},
}

// TestSpecPatternsAreTheServers walks the request body schema of the
// operations that take strings of a documented form (a pattern, a format,
// the pattern of a map's keys) and, for each, sends the example body with
// values the server accepts, which the document must accept, and values
// the server refuses for their form, which the document must refuse too,
// the server with a 422 naming the field. Every documented form needs its
// probes in stringProbes, so a pattern cannot be added without them; and
// the patterns that package service and dag own are theirs, character for
// character.
func TestSpecPatternsAreTheServers(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	a := newAPI(t, nil)
	n := 0
	checked := map[string]bool{}
	for _, o := range patternOps {
		schema := doc.Paths.Find(o.path).GetOperation(o.method).RequestBody.Value.Content.Get("application/json").Schema
		n++
		probe := newExampleWorld(t, a, doc, fmt.Sprintf("patterns-%d", n))
		var forms []specString
		specStrings(schema, probe.body(o.method, o.path, 0), nil, &forms)
		for _, f := range forms {
			key := o.path + " " + strings.Join(f.path, ".")
			if checked[key] {
				continue
			}
			checked[key] = true
			probes, ok := stringProbes[key]
			if !ok {
				t.Errorf("%s (pattern %q, format %q): no probes in stringProbes", key, f.pattern, f.format)
				continue
			}
			for _, bad := range []bool{false, true} {
				values := probes.ok
				if bad {
					values = probes.bad
				}
				for _, val := range values {
					n++
					w := newExampleWorld(t, a, doc, fmt.Sprintf("patterns-%d", n))
					if val == "@endpoint" {
						val = w.ids["endpoint_id"]
					}
					path := w.path(o.path)
					body := w.body(o.method, o.path, 0)
					setString(body, f.path, val)
					enc, err := json.Marshal(body)
					require.NoError(t, err)
					docErr := specRequestError(o.method, path, enc)
					if f.path[len(f.path)-1] == "x-key" && !regexp.MustCompile(f.pattern).MatchString(val) {
						// OpenAPI 3.0 validators know no propertyNames:
						// the extension's pattern is the document's word.
						docErr = fmt.Errorf("key %q does not match %s", val, f.pattern)
					}
					r := a.do(req{Method: o.method, Path: path, Token: w.tok, Body: enc})
					what := fmt.Sprintf("%s %s, %s = %q", o.method, o.path, strings.Join(f.path, "."), val)
					if !bad {
						if docErr != nil {
							t.Errorf("%s: the document refuses it: %v", what, docErr)
						}
						if r.Status < 200 || r.Status > 299 {
							t.Errorf("%s: the server refuses it (%d): %s", what, r.Status, r.Raw)
						}
						continue
					}
					if docErr == nil {
						t.Errorf("%s: the document accepts it", what)
					}
					named := slices.ContainsFunc(fieldErrors(r), func(fe string) bool {
						// The field, an entry of it, or the array an item is in.
						return strings.HasPrefix(fe, f.field()) || strings.HasPrefix(f.field(), fe+"[")
					})
					if r.Status != http.StatusUnprocessableEntity || !named {
						t.Errorf("%s: want a 422 naming %s, got %d: %s", what, f.field(), r.Status, r.Raw)
					}
				}
			}
		}
	}
	for key := range stringProbes {
		if !checked[key] {
			t.Errorf("stringProbes has %s, which the document does not constrain", key)
		}
	}

	// The patterns whose rule has a home of its own are that rule.
	prop := func(schema, name string) *openapi3.Schema {
		return doc.Components.Schemas[schema].Value.Properties[name].Value
	}
	names := func(s *openapi3.Schema) string {
		return s.Extensions["x-propertyNames"].(map[string]any)["pattern"].(string)
	}
	require.Equal(t, service.NamePattern, prop("TaskRequest", "name").Pattern)
	require.Equal(t, service.NamePattern, prop("WorkflowRequest", "name").Pattern)
	require.Equal(t, dag.KeyPattern, prop("WorkflowNode", "key").Pattern)
	require.Equal(t, dag.KeyPattern, prop("WorkflowNode", "depends_on").Items.Value.Pattern)
	require.Equal(t, service.LabelKeyPattern, names(prop("TaskRequest", "labels")))
	require.Equal(t, service.HeaderNamePattern, names(prop("EndpointRequest", "headers")))
}

// setString sets the string at path in body: a map's key (x-key) or value
// (x-bound) replaces the map with one entry, an array item the array with
// one item.
func setString(body map[string]any, path []string, v string) {
	last := path[len(path)-1]
	switch {
	case last == "x-key":
		setPath(body, path[:len(path)-1], map[string]any{v: "v"})
	case last == "x-bound":
		setPath(body, path[:len(path)-1], map[string]any{"k": v})
	case last == "0" && len(path) >= 2:
		if arr, ok := getPath(body, path[:len(path)-1]).([]any); ok && len(arr) > 0 {
			if _, isObject := arr[0].(map[string]any); isObject {
				setPath(body, path, v) // never: objects have their own paths
				return
			}
		}
		setPath(body, path[:len(path)-1], []any{v})
	default:
		setPath(body, path, v)
	}
}

// TestSpecStatesAreTheLifecycles: every state the document lists (a
// resource's state, the executions' state filter) is a state of package
// lifecycle, the one home of the states, and all of them.
func TestSpecStatesAreTheLifecycles(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	enum := func(s *openapi3.Schema) []string {
		var out []string
		for _, e := range s.Enum {
			out = append(out, e.(string))
		}
		slices.Sort(out)
		return out
	}
	sorted := func(states ...[]string) []string {
		out := slices.Concat(states...)
		slices.Sort(out)
		return slices.Compact(out)
	}
	state := func(schema string) []string {
		return enum(doc.Components.Schemas[schema].Value.Properties["state"].Value)
	}
	executions := lifecycle.Executions.States().States()
	require.Equal(t, sorted(executions), state("Execution"))
	var filter *openapi3.Schema
	for _, p := range doc.Paths.Find("/v1/executions").Get.Parameters {
		if p.Value.Name == "state" {
			filter = p.Value.Schema.Value
		}
	}
	require.NotNil(t, filter, "GET /v1/executions takes state")
	require.Equal(t, sorted(executions), enum(filter), "GET /v1/executions?state=")
	require.Equal(t, sorted(lifecycle.TaskStates.States()), state("Task"))
	require.Equal(t, sorted(lifecycle.WorkflowStates.States()), state("Workflow"))
	require.Equal(t, sorted(lifecycle.BackfillStates.States()), state("Backfill"))
	require.Equal(t, sorted(lifecycle.Runs.States().States()), state("WorkflowRun"))
	// A node that fired shows its execution's state; a wait_for node
	// awaiting its event shows running.
	nodes := slices.DeleteFunc(lifecycle.Nodes.States().States(), func(s string) bool {
		return s == lifecycle.NodeFired || s == lifecycle.NodeAwaiting
	})
	require.Equal(t, sorted(nodes, executions), state("WorkflowRunNode"))
}
