package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// scheduleOf is task id's schedule as GET /v1/tasks/{id} shows it.
func (e *env) scheduleOf(tok, id string) map[string]any {
	e.t.Helper()
	return e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")["schedule"].(map[string]any)
}

// TestConsoleEditEventSchedule: a cron task's form switches it to an
// event schedule (its event name); the preview, as a page and as JSON,
// says it fires on each matching event instead of listing slots; the
// task's page says so too; a bad event name is refused at its field.
func TestConsoleEditEventSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "nightly", ep, "0 9 * * *", "UTC")
	editPath := "/console/tasks/" + id + "/edit"

	form := e.taskForm(tok, id)
	form.Set("type", "event")
	form.Set("event", "files.ready")
	form.Set("preview", "1")
	p := e.post(editPath, tok, form)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<p id="preview-note" role="status">Fires on each matching event “files.ready”: an event schedule has no time slots.</p>`)
	assert.Equal(t, "cron", e.scheduleOf(tok, id)["type"], "a preview saves nothing")

	p = e.get("/console/tasks/"+id+"/preview?type=event&event=files.ready", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	var pre struct {
		Fires []any  `json:"fires"`
		Note  string `json:"note"`
		Words string `json:"words"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.Body), &pre))
	assert.Empty(t, pre.Fires)
	assert.Equal(t, "Fires on each matching event “files.ready”: an event schedule has no time slots.", pre.Note)
	assert.Equal(t, "on each event files.ready", pre.Words)

	form.Del("preview")
	p = e.post(editPath, tok, form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	sc := e.scheduleOf(tok, id)
	assert.Equal(t, "event", sc["type"])
	assert.Equal(t, "files.ready", sc["event"])
	assert.Nil(t, sc["cron"])
	assert.Contains(t, e.get("/console/tasks/"+id, tok).Body, `id="no-fires">Fires on each matching event “files.ready”`)

	// The form shows it again as it is, and edits its name.
	form = e.taskForm(tok, id)
	assert.Equal(t, "event", form.Get("type"))
	assert.Equal(t, "files.ready", form.Get("event"))
	form.Set("event", "files.done")
	require.Equal(t, http.StatusSeeOther, e.post(editPath, tok, form).Status)
	assert.Equal(t, "files.done", e.scheduleOf(tok, id)["event"])

	form.Set("event", "files ready!")
	p = e.post(editPath, tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="f-event"[^>]*aria-invalid="true" aria-describedby="err-schedule-event"`, p.Body)
	assert.Regexp(t, `id="err-schedule-event"><strong>Error:</strong> must be 1 to 200 characters`, p.Body)
	assert.Contains(t, p.Body, `value="files ready!"`, "the value as typed")
	p = e.get("/console/tasks/"+id+"/preview?type=event&event="+url.QueryEscape("files ready!"), tok)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, `"field":"schedule.event"`)
	assert.Equal(t, "files.done", e.scheduleOf(tok, id)["event"], "nothing saved")
}

// TestConsoleEditUnionSchedule: a union task's form holds its members as
// the API's JSON array; they are previewed and changed; a bad member is
// refused at the members' field, named by its index; a cron task is made
// a union. A read-only token's forged POST is refused.
func TestConsoleEditUnionSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.rest(http.MethodPost, "/v1/tasks", tok, `{"name":"union","endpoint_id":"`+ep+`","schedule":{"type":"union","schedules":[
		{"type":"cron","cron":"30 2 * * *","timezone":"Europe/Paris"},
		{"type":"interval","interval_seconds":3600}]}}`)["id"].(string)
	editPath := "/console/tasks/" + id + "/edit"

	p := e.get(editPath, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.NotContains(t, p.Body, `id="schedule-locked"`)
	assert.Equal(t, 5, strings.Count(regexp.MustCompile(`(?s)<ol id="preview-list">.*?</ol>`).FindString(p.Body), "<li"), "the union's next fires")
	form := e.taskForm(tok, id)
	assert.Equal(t, "union", form.Get("type"))
	var members []map[string]any
	require.NoError(t, json.Unmarshal([]byte(form.Get("members")), &members), form.Get("members"))
	require.Len(t, members, 2)
	assert.Equal(t, "30 2 * * *", members[0]["cron"])
	assert.Equal(t, "Europe/Paris", members[0]["timezone"])
	assert.InDelta(t, 3600, members[1]["interval_seconds"], 0)

	// Saved unchanged, it stays the same union.
	require.Equal(t, http.StatusSeeOther, e.post(editPath, tok, form).Status)
	assert.Len(t, e.scheduleOf(tok, id)["schedules"], 2)

	// A bad member: refused at the members' field, by index; the text kept.
	bad := `[{"type":"cron","cron":"61 * * * *"},{"type":"interval","interval_seconds":3600}]`
	form.Set("members", bad)
	p = e.post(editPath, tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="f-members"[^>]*aria-invalid="true" aria-describedby="err-schedule-schedules"`, p.Body)
	assert.Regexp(t, `id="err-schedule-schedules"><strong>Error:</strong> schedule.schedules\[0\].cron: [^<]*minute`, p.Body)
	assert.Contains(t, p.Body, htmlEscape(bad), "the members as typed")
	p = e.get("/console/tasks/"+id+"/preview?type=union&members="+url.QueryEscape(bad), tok)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, `"field":"schedule.schedules[0].cron"`)

	// The REST decoder's checks: an unknown field, a member type a union
	// does not take, text that is no JSON array.
	for members, want := range map[string]string{
		`[{"type":"cron","cron":"0 9 * * *","every":5},{"type":"interval","interval_seconds":60}]`:    `schedule.schedules[0].every: unknown field`,
		`[{"type":"once","run_at":"2030-01-01T00:00:00Z"},{"type":"interval","interval_seconds":60}]`: `schedule.schedules[0].type: `,
		`{"type":"cron"}`:  `must be an array`,
		`[{"type":"cron",`: `must be a JSON array of schedules (this is not valid JSON)`,
		`[{"type":"interval","interval_seconds":60}]`: `must hold 2 to 10 schedules, not 1`,
	} {
		form.Set("members", members)
		p = e.post(editPath, tok, form)
		require.Equal(t, http.StatusUnprocessableEntity, p.Status, members)
		assert.Regexp(t, `id="err-schedule-schedules"><strong>Error:</strong> [^<]*`+regexp.QuoteMeta(htmlEscape(want)), p.Body, members)
	}
	assert.Len(t, e.scheduleOf(tok, id)["schedules"], 2, "nothing saved")

	// Three members, previewed then saved.
	three := `[{"type":"cron","cron":"0 9 * * 1-5","timezone":"Asia/Tokyo"},{"type":"cron","cron":"0 12 * * *"},{"type":"interval","interval_seconds":7200}]`
	p = e.get("/console/tasks/"+id+"/preview?type=union&members="+url.QueryEscape(three), tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `"words":"the union of 3 schedules"`)
	form.Set("members", three)
	require.Equal(t, http.StatusSeeOther, e.post(editPath, tok, form).Status)
	got := e.scheduleOf(tok, id)["schedules"].([]any)
	require.Len(t, got, 3)
	assert.Equal(t, "Asia/Tokyo", got[0].(map[string]any)["timezone"])

	// A cron task made a union (its zone is the members').
	cronID := e.createTask(tok, "paris", ep, "0 9 * * *", "Europe/Paris")
	form = e.taskForm(tok, cronID)
	form.Set("type", "union")
	form.Set("members", three)
	p = e.post("/console/tasks/"+cronID+"/edit", tok, form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	sc := e.scheduleOf(tok, cronID)
	assert.Equal(t, "union", sc["type"])
	assert.Len(t, sc["schedules"], 3)

	// Read-only: no form, a forged POST refused, nothing changed.
	ro := token(t, "acme", api.ScopeTasksRead, api.ScopeEndpointsRead)
	assert.Equal(t, http.StatusForbidden, e.get(editPath, ro).Status)
	assert.Equal(t, http.StatusForbidden, e.get("/console/tasks/new", ro).Status)
	form.Set("members", bad)
	form.Del("csrf")
	p = e.post(editPath, ro, form)
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Contains(t, p.Body, "tasks:write")
	p = e.post("/console/tasks", ro, url.Values{"name": {"x"}, "endpoint_id": {ep}, "type": {"event"}, "event": {"files.ready"}})
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Len(t, e.scheduleOf(tok, id)["schedules"], 3, "nothing changed")
}

// TestConsoleNewTaskEventAndUnion: the new-task form creates a task of
// each new schedule type; a bad union is refused with its member's field.
func TestConsoleNewTaskEventAndUnion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	p := e.get("/console/tasks/new", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `name="type" value="union"`)
	assert.Contains(t, p.Body, `name="type" value="event"`)

	create := func(form url.Values) page {
		form.Set("endpoint_id", ep)
		form.Set("timezone", "UTC")
		form.Set("payload", "{}")
		return e.post("/console/tasks", tok, form)
	}
	p = create(url.Values{"name": {"on-files"}, "type": {"event"}, "event": {"files.ready"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	sc := e.scheduleOf(tok, strings.TrimPrefix(p.Location, "/console/tasks/"))
	assert.Equal(t, "event", sc["type"])
	assert.Equal(t, "files.ready", sc["event"])

	members := `[{"type":"cron","cron":"0 9 * * *","timezone":"Europe/Paris"},{"type":"interval","interval_seconds":3600}]`
	p = create(url.Values{"name": {"both"}, "type": {"union"}, "members": {members}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	sc = e.scheduleOf(tok, strings.TrimPrefix(p.Location, "/console/tasks/"))
	assert.Equal(t, "union", sc["type"])
	require.Len(t, sc["schedules"], 2)
	assert.Equal(t, "Europe/Paris", sc["schedules"].([]any)[0].(map[string]any)["timezone"])

	p = create(url.Values{"name": {"bad"}, "type": {"union"}, "members": {`[{"type":"cron","cron":"0 9 * * *"},{"type":"interval"}]`}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, "schedule.schedules[1].interval_seconds")
	assert.Contains(t, p.Body, htmlEscape(`{"type":"interval"}`), "the members as typed")
	p = create(url.Values{"name": {"bad"}, "type": {"event"}, "event": {""}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Contains(t, p.Body, "schedule.event")
}

// htmlEscape is s as html/template writes it in text.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", `"`, "&#34;", "'", "&#39;", "<", "&lt;", ">", "&gt;").Replace(s)
}
