package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// TestRenderEndpoint: POST /v1/tasks/{id}/render answers what a slot
// would send (a read: tasks:read suffices), another tenant's task is a
// 404 problem, a template that fails to render a 422 naming its field;
// creating a templated task whose template names unknown data is a 422
// naming each field.
func TestRenderEndpoint(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "render-a")
	ep := a.createEndpoint(tok, "render-ep")

	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{
			"name": "bad", "endpoint_id": ep, "payload_template": true,
			"payload":  map[string]any{"rows": "{{ .rows }}", "list": []any{1, "{{ .round"}},
			"schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
		},
	})
	require.ElementsMatch(t, []string{"payload.rows", "payload.list[1]"}, fieldErrors(r))

	task := a.createTask(tok, ep, "render-task", map[string]any{
		"payload_template": true,
		"payload":          map[string]any{"date": "{{ .business_date }}", "yesterday": "{{ date_add .business_date -1 }}", "round": "{{ .round }}"},
	})
	require.Equal(t, true, task.JSON["payload_template"])
	id := task.JSON["id"].(string)

	read := token(t, "render-a", api.ScopeTasksRead)
	got := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + id + "/render", Token: read,
		Body: `{"scheduled_for":"2026-11-01T16:30:00Z"}`,
	})
	require.Equal(t, map[string]any{"date": "2026-11-02", "yesterday": "2026-11-01", "round": 1.0}, got.JSON["body"],
		"the task's zone (Asia/Shanghai) decides the business date")
	require.Equal(t, "2026-11-01T16:30:00Z", got.JSON["scheduled_for"])
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/render", Token: read})

	other := token(t, "render-b")
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/render", Token: other, Body: `{}`})
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/00000000-0000-7000-8000-000000000000/render", Token: tok})
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + id + "/render", Token: tok,
		Body: `{"scheduled_for":"yesterday"}`,
	})
	require.Equal(t, []string{"scheduled_for"}, fieldErrors(r))

	a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"payload": map[string]any{"d": "{{ date_format .task_name \"yyyy\" }}"}},
	})
	r = a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/render", Token: tok})
	require.Equal(t, []string{"payload.d"}, fieldErrors(r))
}
