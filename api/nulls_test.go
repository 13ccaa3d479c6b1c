package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/openapi"
)

// TestNullOnlyWhereNullable: a JSON null is a value only where the
// document says the field is nullable (it then means "none" or "the
// default"). Anywhere else, in a PATCH as in a create, null is a 422
// naming the field: it used to be read as "absent", so that a PATCH
// {"endpoint_id": null} answered 200 and changed nothing. Every property
// of every PATCH body is tried (nested ones inside a valid value), and the
// document must agree with the server on each.
func TestNullOnlyWhereNullable(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Spec())
	require.NoError(t, err)
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	task := a.createTask(tok, ep, "t", map[string]any{"labels": map[string]string{"team": "a"}}).JSON["id"].(string)
	wf := a.createWorkflow(tok, "wf")
	cal := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/calendars", Token: tok,
		Body: map[string]any{"name": "c", "dates": []string{"2027-01-01"}},
	}).JSON["id"].(string)

	cron := map[string]any{"type": "cron", "cron": "0 2 * * *"}
	node := map[string]any{"key": "a", "endpoint_id": ep}
	// A valid value for each object whose own properties are tried.
	within := map[string]map[string]any{
		"schedule":   cron,
		"retry":      {"max_attempts": 3},
		"completion": {"mode": "callback", "timeout_ms": 60000},
		"sla":        {"finish_within_ms": 60000},
	}
	for _, c := range []struct{ path, schema string }{
		{"/v1/tasks/" + task, "TaskRequestPatch"},
		{"/v1/endpoints/" + ep, "EndpointRequestPatch"},
		{"/v1/workflows/" + wf, "WorkflowRequestPatch"},
		{"/v1/calendars/" + cal, "CalendarRequestPatch"},
	} {
		s := doc.Components.Schemas[c.schema].Value
		for name, prop := range s.Properties {
			nullable := prop.Value.Nullable
			bodies := map[string]map[string]any{name: {name: nil}}
			if inner, ok := within[name]; ok {
				for _, sub := range []string{"max_attempts", "timeout_ms", "mode", "cron", "timezone", "finish_within_ms"} {
					if _, ok := inner[sub]; ok || sub == "timezone" && name == "schedule" {
						v := map[string]any{}
						for k, x := range inner {
							v[k] = x
						}
						v[sub] = nil
						bodies[name+"."+sub] = map[string]any{name: v}
					}
				}
			}
			if name == "nodes" {
				n := map[string]any{"key": "a", "endpoint_id": ep, "depends_on": nil}
				bodies["nodes[0].depends_on"] = map[string]any{"nodes": []any{n}}
				bodies["nodes[1]"] = map[string]any{"nodes": []any{node, nil}}
			}
			if name == "labels" || name == "headers" {
				bodies[name+".k"] = map[string]any{name: map[string]any{"k": nil}}
			}
			for field, body := range bodies {
				enc, err := json.Marshal(body)
				require.NoError(t, err)
				what := fmt.Sprintf("PATCH %s %s", c.schema, enc)
				r := a.do(req{Method: http.MethodPatch, Path: c.path, Token: tok, Body: enc})
				docErr := specRequestError(http.MethodPatch, c.path, enc)
				if field == name && nullable {
					require.Equal(t, http.StatusOK, r.Status, "%s: nullable, so null is a value: %s", what, r.Raw)
					require.NoError(t, docErr, what)
					continue
				}
				if name == "payload" && field == name {
					continue // any JSON: null is a payload
				}
				require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s: %s", what, r.Raw)
				require.Contains(t, fieldErrors(r), field, "%s: %s", what, r.Raw)
				require.Error(t, docErr, "%s: the document accepts it", what)
			}
		}
	}
	// The task is as it was.
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + task, Token: tok})
	require.Equal(t, ep, got.JSON["endpoint_id"])

	// A create refuses null where the document does, too.
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{"name": "n", "endpoint_id": ep, "schedule": cron, "overlap_policy": nil},
	})
	require.Equal(t, []string{"overlap_policy"}, fieldErrors(r))
	a.createTask(tok, ep, "n", map[string]any{"priority": nil, "timeout_ms": nil, "sla": nil, "completion": nil, "payload": nil})
}
