package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// TestEventsAPI: POST /v1/events answers 202 with what the event fired
// (an event task's execution, a workflow's run); GET lists and reads
// events; an event task's preview has no fires and says why; the scopes
// are events:write and events:read (admin has both); a payload over
// 64 KiB and a bad name are 422s naming the field.
func TestEventsAPI(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	task := a.createTask(tok, ep, "on-files", map[string]any{
		"schedule": map[string]any{"type": "event", "event": "files.ready"},
	}).JSON
	require.Nil(t, task["next_run_at"])
	require.Equal(t, "files.ready", task["schedule"].(map[string]any)["event"])
	preview := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + task["id"].(string) + "/preview", Token: tok}).JSON
	require.Equal(t, "files.ready", preview["event"])
	require.Empty(t, preview["items"])
	wf := a.createWorkflow(tok, "etl")
	a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/workflows/" + wf, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "event", "event": "files.ready"}},
	})

	body := map[string]any{"name": "files.ready", "key": "2026-12-03", "payload": map[string]any{"file": "a.csv"}, "dedup_key": "x"}
	posted := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/events", Token: tok, Body: body}).JSON
	require.Equal(t, map[string]any{"tasks": 1.0, "workflows": 1.0, "waits": 0.0}, posted["matched"])
	again := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/events", Token: tok, Body: body}).JSON
	require.Equal(t, posted, again, "the same dedup_key answers the first answer")

	id := posted["id"].(string)
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/events/" + id, Token: tok}).JSON
	require.Equal(t, "2026-12-03", got["key"])
	require.Equal(t, map[string]any{"file": "a.csv"}, got["payload"])
	matches := got["matches"].([]any)
	require.Len(t, matches, 2)
	kinds := []string{matches[0].(map[string]any)["type"].(string), matches[1].(map[string]any)["type"].(string)}
	require.ElementsMatch(t, []string{"task", "workflow"}, kinds)
	for _, m := range matches {
		m := m.(map[string]any)
		switch m["type"] {
		case "task":
			x := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + m["execution_id"].(string), Token: tok}).JSON
			require.Equal(t, "event", x["trigger"])
			require.Equal(t, id, x["event_id"])
		case "workflow":
			r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/workflow-runs/" + m["run_id"].(string), Token: tok}).JSON
			require.Equal(t, "event", r["trigger"])
		}
	}
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/events?name=files.ready&limit=10", Token: tok}).JSON
	require.Len(t, list["items"], 1)
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/events/" + id, Token: token(t, "other")})

	// Scopes.
	reader := token(t, "acme", api.ScopeEventsRead)
	a.must(http.StatusForbidden, req{Method: http.MethodPost, Path: "/v1/events", Token: reader, Body: map[string]any{"name": "x"}})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/events", Token: reader})
	writer := token(t, "acme", api.ScopeEventsWrite)
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/events", Token: writer})
	a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/events", Token: writer, Body: map[string]any{"name": "x"}})
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/events", Token: token(t, "acme", api.ScopeTasksWrite),
		Body: map[string]any{"name": "x"},
	})
	admin := token(t, "acme", api.ScopeAdmin)
	a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/events", Token: admin, Body: map[string]any{"name": "x"}})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/events", Token: admin})

	// Validation.
	big := `{"name": "x", "payload": "` + strings.Repeat("a", 64<<10) + `"}`
	r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/events", Token: tok, Body: big})
	require.Equal(t, []string{"payload"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/events", Token: tok,
		Body: map[string]any{"name": "files ready"},
	})
	require.Equal(t, []string{"name"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: map[string]any{
		"name": "bad", "endpoint_id": ep, "schedule": map[string]any{"type": "event", "event": "a b"},
	}})
	require.Equal(t, []string{"schedule.event"}, fieldErrors(r))
}

// TestEventsAreRateLimited: posting events spends the tenant's
// api_requests_per_second like any call: past it, a 429 that fired
// nothing.
func TestEventsAreRateLimited(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok}) // creates the tenant
	a.must(http.StatusOK, req{
		Method: http.MethodPut, Path: "/v1/admin/tenants/acme/limits", Token: operatorToken(t),
		Body: map[string]any{"api_requests_per_second": 2},
	})
	accepted, limited := 0, 0
	for range 20 {
		r := a.do(req{Method: http.MethodPost, Path: "/v1/events", Token: tok, Body: map[string]any{"name": "burst"}})
		switch r.Status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("POST /v1/events: %d %s", r.Status, r.Raw)
		}
	}
	require.Positive(t, limited, "20 posts at once exceed 2 per second")
	var stored int
	require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT count(*) FROM posted_events WHERE tenant_id = 'acme'`).Scan(&stored))
	require.Equal(t, accepted, stored, "a refused post stored no event")
}
