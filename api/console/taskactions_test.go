package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

var skipSlotRE = regexp.MustCompile(`<button type="submit" class="skip-slot" data-slot="([^"]+)"`)

// TestConsoleTaskSkip: each next fire has a Skip button; skipping one goes
// back to the task with a flash, the slot is marked skipped and a skipped
// execution is recorded; a time that is not a slot is refused on the page.
func TestConsoleTaskSkip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "t", ep, "*/5 * * * *", "UTC")

	p := e.get("/console/tasks/"+id, tok)
	require.Equal(t, http.StatusOK, p.Status)
	slots := skipSlotRE.FindAllStringSubmatch(p.Body, -1)
	require.Len(t, slots, 10, "a Skip button on each of the next fires")
	slot := slots[1][1]

	p = e.post("/console/tasks/"+id+"/skip", tok, url.Values{"scheduled_for": {slot}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/console/tasks/"+id+"?done=slot-skipped", p.Location)
	p = e.get(p.Location, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `id="flash"`)
	assert.Contains(t, p.Body, "The slot is skipped")
	assert.Contains(t, p.Body, `class="label skipped-slot"`)
	assert.NotContains(t, p.Body, `data-slot="`+slot+`"`, "a skipped slot has no Skip button")
	assert.Len(t, skipSlotRE.FindAllStringSubmatch(p.Body, -1), 10, "still the next 10 fires, the skipped slot marked among them")

	xs := e.rest(http.MethodGet, "/v1/executions?task_id="+id+"&state=skipped", tok, "")["items"].([]any)
	require.Len(t, xs, 1)
	assert.Equal(t, "skipped by request", xs[0].(map[string]any)["last_error"])

	// Not a slot of the schedule: 422, shown on the task page.
	p = e.post("/console/tasks/"+id+"/skip", tok, url.Values{"scheduled_for": {"2099-01-01T00:01:00Z"}})
	assert.Equal(t, http.StatusUnprocessableEntity, p.Status)
	assert.Contains(t, p.Body, `id="problem"`)
	assert.Contains(t, p.Body, "The slot was not skipped")
	assert.Contains(t, p.Body, "is not a slot of the task")
	p = e.post("/console/tasks/"+id+"/skip", tok, url.Values{"scheduled_for": {"yesterday"}})
	assert.Equal(t, http.StatusUnprocessableEntity, p.Status)
	assert.Contains(t, p.Body, "RFC 3339")
}

// TestConsoleTaskBackfill: a dry run shows how many slots a backfill would
// create and creates nothing; Start starts it and opens the backfills page
// with a flash, where it is listed; too many slots or a bad range is a 422
// shown on the task page with the form as typed.
func TestConsoleTaskBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "t", ep, "*/5 * * * *", "UTC")

	p := e.get("/console/tasks", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `href="/console/tasks/`+id+`#backfill" class="backfill-link"`, "the list links to the task's backfill form")
	p = e.get("/console/tasks/"+id, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `id="backfill-form"`)
	assert.Contains(t, p.Body, `id="backfill-dry-run"`)
	assert.Contains(t, p.Body, `id="backfill-start"`)
	assert.Contains(t, p.Body, "UTC")

	form := url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}, "rerun": {"missing"}, "max_concurrency": {"2"}, "dry_run": {"1"}}
	p = e.post("/console/tasks/"+id+"/backfill", tok, form)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<strong id="plan-total">12</strong>`)
	assert.Contains(t, p.Body, `<span id="plan-create">12</span>`)
	assert.Contains(t, p.Body, `value="2026-01-01T00:00"`, "the form keeps its values")
	assert.NotContains(t, e.get("/console/backfills", tok).Body, "/console/tasks/"+id, "a dry run creates nothing")

	form.Del("dry_run")
	p = e.post("/console/tasks/"+id+"/backfill", tok, form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/console/backfills?done=backfill-started", p.Location)
	p = e.get(p.Location, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "The backfill is started")
	assert.Contains(t, p.Body, `href="/console/tasks/`+id+`"`)
	assert.Contains(t, p.Body, `max="12"`)
	bs := e.rest(http.MethodGet, "/v1/backfills?task_id="+id, tok, "")["items"].([]any)
	require.Len(t, bs, 1)
	assert.EqualValues(t, 2, bs[0].(map[string]any)["max_concurrency"])

	// More than 10,000 slots: every 5 minutes for 60 days.
	p = e.post("/console/tasks/"+id+"/backfill", tok, url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-03-02T00:00"}, "rerun": {"all"}})
	assert.Equal(t, http.StatusUnprocessableEntity, p.Status)
	assert.Contains(t, p.Body, `id="backfill-problem"`)
	assert.Contains(t, p.Body, "more than 10000 slots")
	assert.Contains(t, p.Body, `value="2026-03-02T00:00"`)
	assert.Contains(t, p.Body, `<option value="all" selected>`)
	// A reversed range, a bad date, a bad concurrency.
	for _, f := range []url.Values{
		{"from": {"2026-01-02T00:00"}, "to": {"2026-01-01T00:00"}},
		{"from": {"soon"}, "to": {"2026-01-01T00:00"}},
		{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}, "max_concurrency": {"500"}},
		{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}, "rerun": {"some"}},
	} {
		p = e.post("/console/tasks/"+id+"/backfill", tok, f)
		assert.Equal(t, http.StatusUnprocessableEntity, p.Status, f.Encode())
		assert.Contains(t, p.Body, "The backfill was not started", f.Encode())
	}
	assert.Len(t, e.rest(http.MethodGet, "/v1/backfills?task_id="+id, tok, "")["items"].([]any), 1, "no refused backfill was created")
}

// TestConsoleTaskActionsScopes: without tasks:write no Skip button and no
// backfill form, and the changes are refused; without the CSRF token or
// from another site too; another tenant's task is a 404 page.
func TestConsoleTaskActionsScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rw := token(t, "acme")
	ep := e.createEndpoint(rw, "ep")
	id := e.createTask(rw, "t", ep, "*/5 * * * *", "UTC")
	slot := skipSlotRE.FindAllStringSubmatch(e.get("/console/tasks/"+id, rw).Body, -1)[0][1]
	skip := url.Values{"scheduled_for": {slot}}
	backfill := url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}}
	changes := map[string]url.Values{"/console/tasks/" + id + "/skip": skip, "/console/tasks/" + id + "/backfill": backfill}

	ro := token(t, "acme", api.ScopeTasksRead, api.ScopeExecutionsRead, api.ScopeEndpointsRead)
	p := e.get("/console/tasks/"+id, ro)
	require.Equal(t, http.StatusOK, p.Status)
	assert.NotContains(t, p.Body, "skip-slot")
	assert.NotContains(t, p.Body, "backfill-form")
	assert.NotContains(t, e.get("/console/tasks", ro).Body, "backfill-link")
	assert.Contains(t, p.Body, slot[:10], "the fires are listed")
	for path, f := range changes {
		p := e.post(path, ro, clone(f))
		assert.Equal(t, http.StatusForbidden, p.Status, path)
		assert.Contains(t, p.Body, "tasks:write", path)
	}

	for path, f := range changes {
		p := e.do(http.MethodPost, path, f, opts{Cookie: rw, Site: "same-origin"})
		assert.Equal(t, http.StatusForbidden, p.Status, path)
		assert.Contains(t, p.Body, "CSRF", path)
		g := clone(f)
		g.Set("csrf", e.csrf(rw))
		p = e.do(http.MethodPost, path, g, opts{Cookie: rw, Site: "cross-site"})
		assert.Equal(t, http.StatusForbidden, p.Status, path)
	}

	other := token(t, "globex")
	p = e.get("/console/tasks/"+id, other)
	assert.Equal(t, http.StatusNotFound, p.Status)
	assert.Contains(t, p.Body, "Not found")
	for path, f := range changes {
		p := e.post(path, other, clone(f))
		assert.Equal(t, http.StatusNotFound, p.Status, path)
		assert.NotContains(t, p.Body, id, path)
	}

	// Nothing changed.
	assert.Empty(t, e.rest(http.MethodGet, "/v1/executions?task_id="+id+"&state=skipped", rw, "")["items"])
	assert.Empty(t, e.rest(http.MethodGet, "/v1/backfills?task_id="+id, rw, "")["items"])
	assert.Contains(t, e.get("/console/tasks/"+id, rw).Body, `data-slot="`+slot+`"`)
}

// clone copies a form (post adds the session's CSRF token to it).
func clone(f url.Values) url.Values {
	out := url.Values{}
	for k, v := range f {
		out[k] = v
	}
	return out
}
