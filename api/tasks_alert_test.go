package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTaskAlertAfterFailures: alert_after_failures defaults to 1, is kept
// by create and PATCH, goes back to 1 with null, and is 422 outside
// 1..1000 on create and on PATCH (which then changes nothing).
func TestTaskAlertAfterFailures(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")

	plain := a.createTask(tok, ep, "plain", nil)
	require.EqualValues(t, 1, plain.JSON["alert_after_failures"], "the default: every failure alerts")

	id := a.createTask(tok, ep, "patient", map[string]any{"alert_after_failures": 3}).JSON["id"].(string)
	get := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id, Token: tok})
	require.EqualValues(t, 3, get.JSON["alert_after_failures"])

	patch := func(v any) resp {
		return a.must(http.StatusOK, req{
			Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
			Body: map[string]any{"alert_after_failures": v},
		})
	}
	require.EqualValues(t, 1000, patch(1000).JSON["alert_after_failures"])
	require.EqualValues(t, 1, patch(nil).JSON["alert_after_failures"], "null: the default")
	require.EqualValues(t, 5, patch(5).JSON["alert_after_failures"])
	other := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"priority": 1},
	})
	require.EqualValues(t, 5, other.JSON["alert_after_failures"], "a PATCH of another field keeps it")

	for _, bad := range []any{0, -1, 1001} {
		r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: map[string]any{
			"name": "refused", "endpoint_id": ep, "schedule": map[string]any{"type": "cron", "cron": "0 * * * *"},
			"alert_after_failures": bad,
		}})
		require.Contains(t, fieldErrors(r), "alert_after_failures", "create with %v: %s", bad, r.Raw)
		r = a.must(http.StatusUnprocessableEntity, req{
			Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
			Body: map[string]any{"alert_after_failures": bad},
		})
		require.Contains(t, fieldErrors(r), "alert_after_failures", "patch with %v: %s", bad, r.Raw)
	}
	get = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id, Token: tok})
	require.EqualValues(t, 5, get.JSON["alert_after_failures"])
}
