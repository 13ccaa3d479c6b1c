package console_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// TestConsoleDeleteCalendar: a calendar's page deletes it in two steps
// that need no script (Delete… shows the confirmation, whose form
// deletes); a calendar a task excludes is refused with the service's
// reason, naming the task, and is kept; once unused it is deleted. A
// read-only token sees neither step and its forged POST is a 403.
func TestConsoleDeleteCalendar(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	calID := e.rest(http.MethodPost, "/v1/calendars", tok, `{"name":"holidays","timezone":"UTC","dates":["2027-01-01"]}`)["id"].(string)
	ep := e.createEndpoint(tok, "ep")
	task := e.rest(http.MethodPost, "/v1/tasks", tok, `{"name":"daily","endpoint_id":"`+ep+`","schedule":{"type":"cron","cron":"0 9 * * *","exclude_calendars":["`+calID+`"]}}`)["id"].(string)
	calPath := "/console/calendars/" + calID

	p := e.get(calPath, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `href="`+calPath+`?delete=1#delete" id="delete-calendar-start"`)
	assert.NotContains(t, p.Body, `id="delete-calendar-form"`, "the first step only links to the confirmation")

	p = e.get(calPath+"?delete=1", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<form method="post" action="`+calPath+`/delete" class="actions" id="delete-calendar-form">`)
	assert.Contains(t, p.Body, "It is refused while a task or workflow excludes it (1 task(s) and 0 workflow(s) do now).")

	// In use: refused as DELETE /v1/calendars/{id} is, with its reason.
	p = e.post(calPath+"/delete", tok, nil)
	require.Equal(t, http.StatusConflict, p.Status, p.Body)
	assert.Contains(t, p.Body, `id="delete-problem"`)
	assert.Contains(t, p.Body, "The calendar was not deleted")
	assert.Contains(t, p.Body, "the calendar is used by 1 task: task daily ("+task+")")
	assert.Equal(t, "holidays", e.rest(http.MethodGet, "/v1/calendars/"+calID, tok, "")["name"], "kept")

	// Unused: deleted, and the list says so.
	e.rest(http.MethodPatch, "/v1/tasks/"+task, tok, `{"schedule":{"type":"cron","cron":"0 9 * * *"}}`)
	p = e.post(calPath+"/delete", tok, nil)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/console/calendars?done=deleted", p.Location)
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, `id="flash">The calendar is deleted.`)
	assert.NotContains(t, p.Body, calID)
	assert.Equal(t, http.StatusNotFound, e.get(calPath, tok).Status)
	assert.Equal(t, http.StatusNotFound, e.post(calPath+"/delete", tok, nil).Status, "deleted already")

	// A read-only token: no step shown, a forged POST refused.
	other := e.rest(http.MethodPost, "/v1/calendars", tok, `{"name":"freeze","timezone":"UTC","dates":[]}`)["id"].(string)
	ro := token(t, "acme", api.ScopeTasksRead)
	for _, path := range []string{"/console/calendars/" + other, "/console/calendars/" + other + "?delete=1"} {
		p = e.get(path, ro)
		require.Equal(t, http.StatusOK, p.Status, path)
		assert.NotContains(t, p.Body, "delete-calendar", path)
	}
	p = e.post("/console/calendars/"+other+"/delete", ro, url.Values{})
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Contains(t, p.Body, "tasks:write")
	assert.Equal(t, "freeze", e.rest(http.MethodGet, "/v1/calendars/"+other, tok, "")["name"], "nothing deleted")
	// Another tenant's calendar is not found.
	assert.Equal(t, http.StatusNotFound, e.post("/console/calendars/"+other+"/delete", token(t, "globex"), nil).Status)
}
