package console_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// taskForm is the edit form as the page fills it for a task: every
// field's current value, as a browser would submit it unchanged.
func (e *env) taskForm(tok, id string) url.Values {
	e.t.Helper()
	p := e.get("/console/tasks/"+id+"/edit", tok)
	require.Equal(e.t, http.StatusOK, p.Status, p.Body)
	form := url.Values{}
	for _, m := range regexp.MustCompile(`<input(?: type="[a-z-]+")?(?: [a-z]+="[^"]*")*? id="f-[a-z_]+" name="([a-z_]+)" value="([^"]*)"`).FindAllStringSubmatch(p.Body, -1) {
		form.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`(?s)<textarea id="f-[a-z_]+" name="([a-z_]+)"[^>]*>(.*?)</textarea>`).FindAllStringSubmatch(p.Body, -1) {
		form.Set(m[1], htmlUnescape(m[2]))
	}
	for _, m := range regexp.MustCompile(`(?s)<select id="f-[a-z_]+" name="([a-z_]+)".*?</select>`).FindAllStringSubmatch(p.Body, -1) {
		if s := regexp.MustCompile(`<option value="([^"]*)" selected>`).FindStringSubmatch(m[0]); s != nil {
			form.Set(m[1], s[1])
		}
	}
	if t := regexp.MustCompile(`name="type" value="([a-z]+)" checked`).FindStringSubmatch(p.Body); t != nil {
		form.Set("type", t[1])
	}
	return form
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&lt;", "<", "&gt;", ">", "&#39;", "'", "&amp;", "&").Replace(s)
}

// TestConsoleEditTask: the edit form holds every field the PATCH takes;
// saving changes them through the service (the REST API reads them back,
// the audit log has the update); the preview shows the next fires of the
// schedule as typed without saving it, as a page (no script) and as JSON
// (the form's script).
func TestConsoleEditTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	alerts := e.createEndpoint(tok, "alerts")
	id := e.createTask(tok, "nightly", ep, "0 9 * * *", "UTC")

	form := e.taskForm(tok, id)
	assert.Equal(t, "0 9 * * *", form.Get("cron"))
	assert.Equal(t, "cron", form.Get("type"))
	assert.Equal(t, `{"n":1}`, form.Get("payload"))
	assert.Equal(t, ep, form.Get("endpoint_id"))
	assert.Equal(t, "5", form.Get("max_attempts"))
	page := e.get("/console/tasks/"+id+"/edit", tok)
	assert.Equal(t, 5, strings.Count(regexp.MustCompile(`(?s)<ol id="preview-list">.*?</ol>`).FindString(page.Body), "<li"),
		"the page previews the next fires")
	assert.Contains(t, page.Body, `T09:00:00Z`)
	assert.Contains(t, page.Body, `/static/edit.js`)

	// The preview as JSON: the schedule as typed, nothing saved.
	p := e.get("/console/tasks/"+id+"/preview?type=cron&cron="+url.QueryEscape("30 18 * * *")+"&timezone=Asia/Tokyo", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	var pv struct {
		Fires []struct {
			At    time.Time `json:"at"`
			Local string    `json:"local"`
		} `json:"fires"`
		Words  string `json:"words"`
		Errors []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal([]byte(p.Body), &pv))
	require.Len(t, pv.Fires, 5)
	for _, f := range pv.Fires {
		assert.Equal(t, "09:30", f.At.UTC().Format("15:04"), "18:30 in Tokyo is 09:30 UTC")
		assert.Contains(t, f.Local, "18:30:00 JST")
	}
	assert.Contains(t, pv.Words, "18:30")
	p = e.get("/console/tasks/"+id+"/preview?type=cron&cron=61+*+*+*+*", tok)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	require.NoError(t, json.Unmarshal([]byte(p.Body), &pv))
	require.NotEmpty(t, pv.Errors)
	assert.Equal(t, "schedule.cron", pv.Errors[0].Field)
	assert.Equal(t, "0 9 * * *", e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")["schedule"].(map[string]any)["cron"], "nothing saved")

	// "Preview without saving" (no script): the page with the preview, nothing saved.
	form.Set("cron", "15 7 * * *")
	form.Set("preview", "1")
	p = e.post("/console/tasks/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, "T07:15:00Z")
	assert.NotContains(t, p.Body, "T09:00:00Z")
	assert.Equal(t, "0 9 * * *", e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")["schedule"].(map[string]any)["cron"], "nothing saved")
	form.Del("preview")

	// Save every kind of field.
	form.Set("cron", "30 18 * * 1-5")
	form.Set("timezone", "Europe/Paris")
	form.Set("dst_policy", "once_per_local_time")
	form.Set("payload", `{"report": "weekly"}`)
	form.Set("payload_template", "true")
	form.Set("priority", "1")
	form.Set("timeout_ms", "20000")
	form.Set("max_attempts", "3")
	form.Set("initial_backoff_ms", "2000")
	form.Set("max_backoff_ms", "60000")
	form.Set("overlap_policy", "skip")
	form.Set("misfire_policy", "skip")
	form.Set("labels", "team=billing\nenv: prod\n")
	form.Set("alert_endpoint_id", alerts)
	form.Set("pause_after_failures", "4")
	form.Set("completion_mode", "callback")
	form.Set("completion_timeout_ms", "3600000")
	form.Set("heartbeat_timeout_ms", "60000")
	form.Set("sla_finish_within_ms", "7200000")
	p = e.post("/console/tasks/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	assert.Equal(t, "/console/tasks/"+id+"?done=saved", p.Location)
	assert.Contains(t, e.get(p.Location, tok).Body, "The task is saved.")

	got := e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")
	sched := got["schedule"].(map[string]any)
	assert.Equal(t, "30 18 * * 1-5", sched["cron"])
	assert.Equal(t, "Europe/Paris", sched["timezone"])
	assert.Equal(t, "once_per_local_time", sched["dst_policy"])
	assert.Equal(t, map[string]any{"report": "weekly"}, got["payload"])
	assert.Equal(t, true, got["payload_template"])
	assert.InDelta(t, 1, got["priority"], 0)
	assert.InDelta(t, 20000, got["timeout_ms"], 0)
	assert.Equal(t, map[string]any{"max_attempts": 3.0, "initial_backoff_ms": 2000.0, "max_backoff_ms": 60000.0}, got["retry"])
	assert.Equal(t, "skip", got["overlap_policy"])
	assert.Equal(t, "skip", got["misfire_policy"])
	assert.Equal(t, map[string]any{"team": "billing", "env": "prod"}, got["labels"])
	assert.Equal(t, alerts, got["alert_endpoint_id"])
	assert.InDelta(t, 4, got["pause_after_failures"], 0)
	assert.Equal(t, map[string]any{"mode": "callback", "timeout_ms": 3600000.0, "heartbeat_timeout_ms": 60000.0}, got["completion"])
	assert.Equal(t, map[string]any{"finish_within_ms": 7200000.0}, got["sla"])

	// The form shows the saved values back.
	again := e.taskForm(tok, id)
	assert.Equal(t, "30 18 * * 1-5", again.Get("cron"))
	assert.Equal(t, "env=prod\nteam=billing\n", again.Get("labels"))
	assert.Equal(t, "callback", again.Get("completion_mode"))

	// An interval schedule, then a once schedule.
	again.Set("type", "interval")
	again.Set("interval", "90")
	require.Equal(t, http.StatusSeeOther, e.post("/console/tasks/"+id+"/edit", tok, again).Status)
	sched = e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")["schedule"].(map[string]any)
	assert.Equal(t, "interval", sched["type"])
	assert.InDelta(t, 90, sched["interval_seconds"], 0)
	again.Set("type", "once")
	runAt := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Second)
	again.Set("run_at", runAt.Format("2006-01-02T15:04:05"))
	require.Equal(t, http.StatusSeeOther, e.post("/console/tasks/"+id+"/edit", tok, again).Status)
	sched = e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")["schedule"].(map[string]any)
	assert.Equal(t, "once", sched["type"])
	assert.Equal(t, runAt.Format(time.RFC3339), sched["run_at"])

	// The audit log has the updates, by the token's subject.
	recs := e.rest(http.MethodGet, "/v1/audit?resource_type=task&resource_id="+id, tok, "")["items"].([]any)
	require.Len(t, recs, 4, "create and three updates")
	assert.Equal(t, "update", recs[0].(map[string]any)["action"])
	assert.Equal(t, "alice", recs[0].(map[string]any)["subject"])
}

// TestConsoleEditTaskRefused: a refusal (422) shows the form again with
// the values as typed and each reason next to its own field, the input
// marked invalid and pointing at its message; nothing is saved.
func TestConsoleEditTaskRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "nightly", ep, "0 9 * * *", "UTC")
	// The form's own checks (as the REST API's decoding): a priority out of
	// range, a label line that is no label.
	form := e.taskForm(tok, id)
	form.Set("priority", "9")
	form.Set("labels", "team=billing\nnot a label\n")
	p := e.post("/console/tasks/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	fieldShown := func(p page, field, input string) {
		t.Helper()
		assert.Regexp(t, `id="`+input+`"[^>]*aria-invalid="true" aria-describedby="err-`+field+`"`, p.Body, field)
		assert.Regexp(t, `id="err-`+field+`"><strong>Error:</strong> \S`, p.Body, field)
	}
	fieldShown(p, "priority", "f-priority")
	fieldShown(p, "labels", "f-labels")
	assert.Contains(t, p.Body, "The task was not saved")
	assert.Contains(t, p.Body, ">team=billing\nnot a label\n</textarea>", "the value as typed")

	// The service's rules: the cron expression, the backoffs.
	form = e.taskForm(tok, id)
	form.Set("cron", "61 * * * *")
	form.Set("max_backoff_ms", "50")
	p = e.post("/console/tasks/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	fieldShown(p, "schedule-cron", "f-cron")
	fieldShown(p, "retry-max_backoff_ms", "f-max_backoff_ms")
	assert.Regexp(t, `id="err-schedule-cron"><strong>Error:</strong> [^<]*minute`, p.Body)
	assert.Contains(t, p.Body, `value="61 * * * *"`, "the value as typed")
	assert.Contains(t, p.Body, "No preview: the schedule has errors.")
	assert.Equal(t, "0 9 * * *", e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")["schedule"].(map[string]any)["cron"])

	// A service rule (not a form one): shards with overlap skip.
	form = e.taskForm(tok, id)
	form.Set("shards", "3")
	form.Set("overlap_policy", "skip")
	p = e.post("/console/tasks/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="err-shards"><strong>Error:</strong> more than one shard needs overlap_policy allow`, p.Body)

	// Invalid JSON in the payload.
	form = e.taskForm(tok, id)
	form.Set("payload", `{"a":`)
	p = e.post("/console/tasks/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="f-payload"[^>]*aria-invalid="true"`, p.Body)

	// Another tenant's task is a 404, for the page, the preview and the save.
	other := token(t, "globex")
	form.Del("csrf")
	assert.Equal(t, http.StatusNotFound, e.get("/console/tasks/"+id+"/edit", other).Status)
	assert.Equal(t, http.StatusNotFound, e.get("/console/tasks/"+id+"/preview?type=cron&cron=*+*+*+*+*", other).Status)
	assert.Equal(t, http.StatusNotFound, e.post("/console/tasks/"+id+"/edit", other, form).Status)
}

// TestConsoleEditEndpoint: the endpoint form changes URL, method, headers
// (values never shown; "(unchanged)" keeps one), timeout, limits, the
// alerts' format and enabled; a refusal is shown at its field.
func TestConsoleEditEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	id := e.rest(http.MethodPost, "/v1/endpoints", tok,
		`{"name":"billing","url":"https://example.com/a","headers":{"Authorization":"Bearer s3cret","X-Env":"prod"}}`)["id"].(string)
	p := e.get("/console/endpoints/"+id+"/edit", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.NotContains(t, p.Body, "s3cret", "header values are never shown")
	assert.Contains(t, p.Body, "Authorization: (unchanged)")
	assert.Contains(t, e.get("/console/endpoints", tok).Body, `href="/console/endpoints/`+id+`/edit"`)

	form := url.Values{
		"name": {"billing"}, "url": {"https://example.com/b"}, "method": {"PUT"},
		"headers": {"Authorization: (unchanged)\nX-Team: pay\n"}, "timeout_ms": {"5000"},
		"max_concurrency": {"3"}, "rate_limit_per_second": {"2.5"},
	}
	p = e.post("/console/endpoints/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	got := e.rest(http.MethodGet, "/v1/endpoints/"+id, tok, "")
	assert.Equal(t, "https://example.com/b", got["url"])
	assert.Equal(t, "PUT", got["method"])
	assert.Equal(t, map[string]any{"Authorization": "Bearer s3cret", "X-Team": "pay"}, got["headers"], "kept, added, removed")
	assert.InDelta(t, 5000, got["timeout_ms"], 0)
	assert.InDelta(t, 3, got["max_concurrency"], 0)
	assert.InDelta(t, 2.5, got["rate_limit_per_second"], 0)
	assert.Equal(t, false, got["enabled"], "the box was not ticked")
	assert.Equal(t, "ax", got["format"], "the form's default, as the API's")

	p = e.get("/console/endpoints/"+id+"/edit", tok)
	assert.Contains(t, p.Body, `<option value="ax" selected>`)
	form.Set("format", "slack")
	require.Equal(t, http.StatusSeeOther, e.post("/console/endpoints/"+id+"/edit", tok, form).Status)
	assert.Equal(t, "slack", e.rest(http.MethodGet, "/v1/endpoints/"+id, tok, "")["format"])
	assert.Contains(t, e.get("/console/endpoints/"+id+"/edit", tok).Body, `<option value="slack" selected>`)
	form.Set("format", "teams")
	p = e.post("/console/endpoints/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="f-format"[^>]*aria-invalid="true" aria-describedby="err-format"`, p.Body)
	assert.Contains(t, p.Body, `<option value="teams" selected>teams</option>`, "the value as typed")
	form.Set("format", "slack")

	form.Set("url", "ftp://example.com/c")
	form.Set("max_concurrency", "0")
	form.Set("enabled", "true")
	p = e.post("/console/endpoints/"+id+"/edit", tok, form)
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="f-url"[^>]*aria-invalid="true" aria-describedby="err-url"`, p.Body)
	assert.Regexp(t, `id="err-url"><strong>Error:</strong> must be an absolute http or https URL`, p.Body)
	assert.Regexp(t, `id="err-max_concurrency"><strong>Error:</strong> must be a whole number from 1`, p.Body)
	assert.Contains(t, p.Body, `value="ftp://example.com/c"`)
	assert.Equal(t, "https://example.com/b", e.rest(http.MethodGet, "/v1/endpoints/"+id, tok, "")["url"], "nothing saved")
}

// TestConsoleAuditPage: the audit log page lists the tenant's changes,
// newest first, filtered by resource type, resource id and subject, a
// page at a time.
func TestConsoleAuditPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	bob, err := api.IssueToken([]byte(testSecret), "acme", "bob", api.TenantScopes(), time.Hour, "", "")
	require.NoError(t, err)
	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "t", ep, "@daily", "UTC")
	require.Equal(t, http.StatusSeeOther, e.post("/console/tasks/"+id+"/pause", bob, nil).Status)
	require.Equal(t, http.StatusSeeOther, e.post("/console/tasks/"+id+"/resume", bob, nil).Status)
	e.rest(http.MethodPost, "/v1/tasks/"+id+"/pause", tok, "")
	token(t, "globex")
	e.createEndpoint(token(t, "globex"), "theirs")

	rows := func(p page) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<tr data-action="([a-z_]+)" data-resource-type="([a-z_]+)">`).FindAllStringSubmatch(p.Body, -1) {
			out = append(out, m[2]+":"+m[1])
		}
		return out
	}
	p := e.get("/console/audit", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Equal(t, []string{"task:pause", "task:resume", "task:pause", "task:create", "endpoint:create"}, rows(p), "newest first, this tenant's only")
	assert.Contains(t, p.Body, `href="/console/tasks/`+id+`"`)

	p = e.get("/console/audit?subject=bob", tok)
	assert.Equal(t, []string{"task:resume", "task:pause"}, rows(p))
	assert.Contains(t, p.Body, `value="bob"`)
	p = e.get("/console/audit?resource_type=endpoint", tok)
	assert.Equal(t, []string{"endpoint:create"}, rows(p))
	p = e.get("/console/audit?resource_type=task&resource_id="+id+"&subject=alice", tok)
	assert.Equal(t, []string{"task:pause", "task:create"}, rows(p))
	p = e.get("/console/audit?subject=nobody", tok)
	assert.Empty(t, rows(p))
	assert.Contains(t, p.Body, "No changes match these filters.")

	// Paging: two at a time, the filter kept.
	p = e.get("/console/audit?resource_type=task&limit=2", tok)
	assert.Equal(t, []string{"task:pause", "task:resume"}, rows(p))
	next := regexp.MustCompile(`href="([^"]+)" id="audit-next"`).FindStringSubmatch(p.Body)
	require.NotNil(t, next, p.Body)
	p = e.get(htmlUnescape(next[1]), tok)
	assert.Equal(t, []string{"task:pause", "task:create"}, rows(p))
	assert.NotContains(t, p.Body, `id="audit-next"`, "the last page")

	// The page needs audit:read (or admin), as GET /v1/audit.
	assert.Equal(t, http.StatusForbidden, e.get("/console/audit", token(t, "acme", api.ScopeTasksRead)).Status)
	assert.Equal(t, http.StatusOK, e.get("/console/audit", token(t, "acme", api.ScopeAuditRead)).Status)
	assert.NotContains(t, e.get("/console/tasks", token(t, "acme", api.ScopeTasksRead)).Body, `href="/console/audit"`)
}

// TestConsoleCalendars: calendars are listed with their users; one is
// created and its dates changed from the console (a bad date is shown at
// the dates field); a task's form excludes it, and the calendar's page
// then names the task.
func TestConsoleCalendars(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	p := e.get("/console/calendars", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, "No calendars yet")

	p = e.post("/console/calendars", tok, url.Values{"name": {"holidays"}, "timezone": {"Europe/Paris"}, "dates": {"2027-01-01\n2027-13-01"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="err-dates"><strong>Error:</strong> dates\[1\]: &#34;2027-13-01&#34; is not a date`, p.Body)
	assert.Regexp(t, `id="f-dates"[^>]*aria-invalid="true"`, p.Body)

	p = e.post("/console/calendars", tok, url.Values{"name": {"holidays"}, "timezone": {"Europe/Paris"}, "dates": {"2027-12-25\n2027-01-01"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	calID := strings.TrimSuffix(strings.TrimPrefix(p.Location, "/console/calendars/"), "?done=created")
	p = e.get(p.Location, tok)
	assert.Contains(t, p.Body, "2027-01-01, 2027-12-25")
	assert.Contains(t, p.Body, "no task or workflow excludes it yet")

	ep := e.createEndpoint(tok, "ep")
	id := e.createTask(tok, "daily", ep, "0 9 * * *", "UTC")
	form := e.taskForm(tok, id)
	assert.Contains(t, e.get("/console/tasks/"+id+"/edit", tok).Body, `name="exclude_calendars" value="`+calID+`"`)
	form.Add("exclude_calendars", calID)
	require.Equal(t, http.StatusSeeOther, e.post("/console/tasks/"+id+"/edit", tok, form).Status)
	assert.Equal(t, []any{calID}, e.rest(http.MethodGet, "/v1/tasks/"+id, tok, "")["schedule"].(map[string]any)["exclude_calendars"])
	assert.Contains(t, e.get("/console/tasks/"+id+"/edit", tok).Body, `value="`+calID+`" checked`)

	p = e.get("/console/calendars/"+calID, tok)
	assert.Contains(t, p.Body, `href="/console/tasks/`+id+`">daily</a>`)
	assert.Contains(t, e.get("/console/calendars", tok).Body, "1 task(s), 0 workflow(s)")

	p = e.post("/console/calendars/"+calID, tok, url.Values{"name": {"holidays"}, "timezone": {"Europe/Paris"}, "dates": {"2027-05-01, 2027-01-01"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	assert.Equal(t, []any{"2027-01-01", "2027-05-01"}, e.rest(http.MethodGet, "/v1/calendars/"+calID, tok, "")["dates"])
	p = e.post("/console/calendars/"+calID, tok, url.Values{"name": {""}, "timezone": {"Mars/Olympus"}, "dates": {""}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="err-name"><strong>Error:</strong>`, p.Body)
	assert.Regexp(t, `id="err-timezone"><strong>Error:</strong>`, p.Body)

	ro := token(t, "acme", api.ScopeTasksRead)
	p = e.get("/console/calendars/"+calID, ro)
	require.Equal(t, http.StatusOK, p.Status)
	assert.NotContains(t, p.Body, `id="calendar-form"`)
	assert.NotContains(t, e.get("/console/calendars", ro).Body, `id="new-calendar"`)
	assert.Equal(t, http.StatusForbidden, e.post("/console/calendars/"+calID, ro, url.Values{"name": {"x"}}).Status)
	assert.Equal(t, http.StatusNotFound, e.get("/console/calendars/"+calID, token(t, "globex")).Status)
}

// TestConsoleLimits: any token sees the limits that apply and the usage;
// admin sees the tenant's own values; only where the REST PUT would take
// the token (AX_ADMIN_IS_OPERATOR and admin) is there a form, whose
// refusals are shown at their fields. A forged POST otherwise is a 403.
func TestConsoleLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme", api.ScopeTasksRead, api.ScopeTasksWrite, api.ScopeEndpointsWrite)
	ep := e.createEndpoint(token(t, "acme"), "ep")
	e.createTask(tok, "one", ep, "@daily", "UTC")
	p := e.get("/console/limits", tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Regexp(t, `(?s)id="limit-max_tasks".*?<td>no limit</td>\s*<td>1</td>`, p.Body)
	assert.NotContains(t, p.Body, `id="limits-form"`)
	assert.Contains(t, p.Body, `id="limits-readonly"`)

	admin := token(t, "acme", api.ScopeAdmin)
	p = e.get("/console/limits", admin)
	assert.Contains(t, p.Body, "Your tenant's own")
	assert.NotContains(t, p.Body, `id="limits-form"`, "the REST PUT needs an operator")
	assert.Equal(t, http.StatusForbidden, e.post("/console/limits", admin, url.Values{"max_tasks": {"5"}}).Status)
	assert.Equal(t, http.StatusForbidden, e.post("/console/limits", tok, url.Values{"max_tasks": {"5"}}).Status)

	// With the deprecated rule, admin sets its own tenant's limits.
	e2 := newEnvWith(t, envOpts{adminIsOperator: true})
	p = e2.get("/console/limits", admin)
	require.Contains(t, p.Body, `id="limits-form"`)
	p = e2.post("/console/limits", admin, url.Values{"max_tasks": {"-1"}, "api_requests_per_second": {"fast"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="err-api_requests_per_second"><strong>Error:</strong> must be a number`, p.Body)
	assert.Contains(t, p.Body, `value="fast"`)
	p = e2.post("/console/limits", admin, url.Values{"max_tasks": {"-1"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.Status, p.Body)
	assert.Regexp(t, `id="err-max_tasks"><strong>Error:</strong> must be a whole number from 0`, p.Body)
	p = e2.post("/console/limits", admin, url.Values{"max_tasks": {"7"}, "api_requests_per_second": {"50"}})
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	p = e2.get(p.Location, admin)
	assert.Regexp(t, `(?s)id="limit-max_tasks".*?<td>7</td>`, p.Body)
	assert.Contains(t, p.Body, `name="max_tasks" value="7"`)
	assert.Contains(t, p.Body, "The limits are saved")
}

// TestConsoleEditReadOnly: a token without the write scopes sees no edit
// links or forms on the new pages, the edit pages are refused, and a
// forged POST (same origin, the session's own CSRF token) is refused with
// 403 and changes nothing.
func TestConsoleEditReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rw := token(t, "acme")
	ep := e.createEndpoint(rw, "ep")
	id := e.createTask(rw, "t", ep, "0 9 * * *", "UTC")
	form := e.taskForm(rw, id)
	assert.Contains(t, e.get("/console/tasks/"+id, rw).Body, `id="edit-task"`)

	ro := token(t, "acme", api.ScopeTasksRead, api.ScopeEndpointsRead, api.ScopeExecutionsRead, api.ScopeAuditRead)
	for _, path := range []string{"/console/tasks/" + id, "/console/endpoints", "/console/calendars", "/console/audit", "/console/limits"} {
		p := e.get(path, ro)
		require.Equal(t, http.StatusOK, p.Status, path)
		forms := regexp.MustCompile(`<form method="post" action="([^"]+)"`).FindAllStringSubmatch(p.Body, -1)
		require.Len(t, forms, 1, "%s: only the sign-out form", path)
		assert.NotContains(t, p.Body, "/edit", path)
	}
	assert.Equal(t, http.StatusForbidden, e.get("/console/tasks/"+id+"/edit", ro).Status)
	assert.Equal(t, http.StatusForbidden, e.get("/console/endpoints/"+ep+"/edit", ro).Status)
	assert.Equal(t, http.StatusOK, e.get("/console/tasks/"+id+"/preview?type=cron&cron=*+*+*+*+*", ro).Status, "a preview reads only")

	form.Set("cron", "*/2 * * * *")
	p := e.post("/console/tasks/"+id+"/edit", ro, form)
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Contains(t, p.Body, "tasks:write")
	p = e.post("/console/endpoints/"+ep+"/edit", ro, url.Values{"name": {"x"}, "url": {"https://example.com/x"}})
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Equal(t, http.StatusForbidden, e.post("/console/calendars", ro, url.Values{"name": {"x"}}).Status)
	// Without the CSRF token, even the writer's session is refused.
	p = e.do(http.MethodPost, "/console/tasks/"+id+"/edit", form, opts{Cookie: rw, Site: "same-origin"})
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Equal(t, "0 9 * * *", e.rest(http.MethodGet, "/v1/tasks/"+id, rw, "")["schedule"].(map[string]any)["cron"], "nothing changed")
	assert.Equal(t, "ep", e.rest(http.MethodGet, "/v1/endpoints/"+ep, rw, "")["name"])
}
