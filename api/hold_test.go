package api_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecutionHoldAndRelease: a pending execution is held (held true, a
// held event, an audit record) and released (a released event, a new
// deliver job due at once, or at its slot when that is ahead, the old job
// cancelled); holding anything but a pending execution that is not held,
// and releasing one that is not held, are conflicts; a held execution can
// be cancelled but not retried; the held filter lists held executions
// only; another tenant's execution is a 404.
func TestExecutionHoldAndRelease(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	task := a.createTask(tok, a.createEndpoint(tok, "e"), "t", nil).JSON["id"].(string)
	post := func(status int, id, action string) resp {
		t.Helper()
		return a.must(status, req{Method: http.MethodPost, Path: "/v1/executions/" + id + "/" + action, Token: tok})
	}
	list := func(query string) []string {
		t.Helper()
		return ids(a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?" + query, Token: tok}))
	}

	x := a.trigger(tok, task, nil).JSON["id"].(string)
	other := a.trigger(tok, task, nil).JSON["id"].(string)
	require.Equal(t, false, a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + x, Token: tok}).JSON["held"])
	r := post(http.StatusOK, x, "hold")
	require.Equal(t, "pending", r.JSON["state"])
	require.Equal(t, true, r.JSON["held"])
	require.Equal(t, []string{"fired", "held"}, eventTypes(r))
	require.Contains(t, post(http.StatusConflict, x, "hold").JSON["detail"], "held already")
	require.Equal(t, []string{x}, list("held=true"))
	require.Equal(t, []string{x}, list("held=true&state=pending"))
	require.ElementsMatch(t, []string{x, other}, list("held=false"))
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/executions?held=true&state=running", Token: tok})
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/executions?held=yes", Token: tok})
	items := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?task_id=" + task, Token: tok}).JSON["items"].([]any)
	for _, it := range items {
		m := it.(map[string]any)
		require.Equal(t, m["id"] == x, m["held"], "held in the list for %s", m["id"])
	}
	rr := post(http.StatusConflict, x, "retry")
	require.Contains(t, rr.JSON["detail"], "held")

	// Another tenant's execution does not exist for this one.
	for _, action := range []string{"hold", "release"} {
		a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/executions/" + other + "/" + action, Token: token(t, "other")})
	}
	post(http.StatusNotFound, "01a228b6-0000-7000-8000-000000000000", "hold")
	post(http.StatusNotFound, "nope", "release")
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/executions/" + other + "/hold", Token: token(t, "acme", "executions:read"),
	})

	// Release: a new deliver job, due now (its slot has passed); the job it
	// had is cancelled.
	r = post(http.StatusAccepted, x, "release")
	require.Equal(t, "pending", r.JSON["state"])
	require.Equal(t, false, r.JSON["held"])
	require.Equal(t, []string{"fired", "held", "released"}, eventTypes(r))
	jobs := a.jobs(x)
	require.Len(t, jobs, 2)
	require.Equal(t, "cancelled", jobs[0].State)
	require.Equal(t, "available", jobs[1].State)
	require.False(t, jobs[1].Scheduled)
	require.Contains(t, post(http.StatusConflict, x, "release").JSON["detail"], "not held")
	require.Empty(t, list("held=true"))

	// A slot still ahead: the new job is due then.
	ahead := a.execution(execOpts{Tenant: "acme", TaskID: task, ScheduledFor: time.Now().Add(time.Hour)})
	post(http.StatusOK, ahead, "hold")
	post(http.StatusAccepted, ahead, "release")
	jobs = a.jobs(ahead)
	require.Len(t, jobs, 1)
	require.True(t, jobs[0].Scheduled, "due at its slot")

	// Cancel works on a held execution, which is then no longer held.
	post(http.StatusOK, other, "hold")
	r = post(http.StatusOK, other, "cancel")
	require.Equal(t, "cancelled", r.JSON["state"])
	require.Equal(t, false, r.JSON["held"])
	require.Equal(t, []string{"fired", "held", "cancelled"}, eventTypes(r))
	post(http.StatusConflict, other, "release")

	// Only a pending execution can be held.
	for _, state := range []string{"running", "retrying", "succeeded", "failed", "cancelled", "skipped"} {
		id := a.execution(execOpts{Tenant: "acme", TaskID: task, State: state})
		require.Contains(t, post(http.StatusConflict, id, "hold").JSON["detail"], state)
		post(http.StatusConflict, id, "release")
	}

	entries := a.auditEntries(tok, url.Values{"resource_type": {"execution"}, "resource_id": {x}})
	require.Len(t, entries, 2)
	require.Equal(t, "release", entries[0]["action"])
	require.Equal(t, map[string]any{"held": map[string]any{"old": true, "new": false}}, entries[0]["changes"])
	require.Equal(t, "hold", entries[1]["action"])
	require.Equal(t, map[string]any{"held": map[string]any{"old": false, "new": true}}, entries[1]["changes"])
}
