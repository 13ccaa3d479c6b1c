package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
)

// scheduledWorkflowDoc is workflowDoc with a schedule: every 5 minutes.
func scheduledWorkflowDoc(ep string) string {
	return strings.Replace(workflowDoc(ep), `{"name":"etl",`, `{"name":"etl","schedule":{"type":"cron","cron":"*/5 * * * *","timezone":"UTC"},`, 1)
}

// TestConsoleWorkflowBackfill: a workflow's page has a Backfill form (with
// workflows:write); a dry run shows how many runs it would start and
// creates nothing; Start starts it and opens the backfills page, which
// lists it with the workflow's name and its progress; a reversed range or
// too many slots is a 422 shown on the workflow page with the form as
// typed; a workflow without a schedule has no form and its backfill is
// refused on the page.
func TestConsoleWorkflowBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, scheduledWorkflowDoc(ep))["id"].(string)
	path := "/console/workflows/" + wf + "/backfill"

	p := e.get("/console/workflows/"+wf, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<form method="post" action="`+path+`#backfill" class="card stack" id="backfill-form">`)
	assert.Contains(t, p.Body, `id="backfill-dry-run"`)
	assert.Contains(t, p.Body, `id="backfill-start"`)
	assert.Contains(t, p.Body, "UTC")

	form := url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}, "rerun": {"missing"}, "max_concurrency": {"3"}, "dry_run": {"1"}}
	p = e.post(path, tok, form)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	assert.Contains(t, p.Body, `<strong id="plan-total">12</strong>`)
	assert.Contains(t, p.Body, `<span id="plan-create">12</span>`)
	assert.Contains(t, p.Body, "Nothing was created.")
	assert.Contains(t, p.Body, `value="2026-01-01T01:00"`, "the form keeps its values")
	assert.Contains(t, p.Body, `<svg`, "the rest of the workflow page is there")
	assert.Empty(t, e.rest(http.MethodGet, "/v1/backfills?workflow_id="+wf, tok, "")["items"], "a dry run creates nothing")

	form.Del("dry_run")
	p = e.post(path, tok, form)
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/console/backfills?done=backfill-started", p.Location)
	p = e.get(p.Location, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "The backfill is started")
	assert.Contains(t, p.Body, `<tr class="backfill-workflow">`)
	assert.Contains(t, p.Body, `workflow <a href="/console/workflows/`+wf+`">`+shownName(wf, "etl")+`</a>`)
	assert.Contains(t, p.Body, `max="12"`)
	assert.Contains(t, p.Body, " runs created")
	bs := e.rest(http.MethodGet, "/v1/backfills?workflow_id="+wf, tok, "")["items"].([]any)
	require.Len(t, bs, 1)
	b := bs[0].(map[string]any)
	assert.EqualValues(t, 3, b["max_concurrency"])
	assert.EqualValues(t, 12, b["total"])
	assert.Contains(t, p.Body, shownID(b["id"].(string)))
	audit := e.rest(http.MethodGet, "/v1/audit?resource_type=workflow&resource_id="+wf, tok, "")["items"].([]any)
	require.NotEmpty(t, audit)
	assert.Equal(t, "backfill", audit[0].(map[string]any)["action"], "audited with the token's subject")
	assert.Equal(t, "alice", audit[0].(map[string]any)["subject"])

	// More than 10,000 slots: every 5 minutes for 60 days.
	p = e.post(path, tok, url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-03-02T00:00"}, "rerun": {"all"}})
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
	} {
		p = e.post(path, tok, f)
		assert.Equal(t, http.StatusUnprocessableEntity, p.Status, f.Encode())
		assert.Contains(t, p.Body, "The backfill was not started", f.Encode())
		assert.Contains(t, p.Body, `id="backfill-form"`, "the form is there again")
	}
	p = e.post(path, tok, url.Values{"from": {"2026-01-02T00:00"}, "to": {"2026-01-01T00:00"}})
	assert.Contains(t, p.Body, "must be after from")
	assert.Len(t, e.rest(http.MethodGet, "/v1/backfills?workflow_id="+wf, tok, "")["items"].([]any), 1, "no refused backfill was created")

	// Without the CSRF token, or from another site: refused.
	p = e.do(http.MethodPost, path, url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}}, opts{Cookie: tok, Site: "same-origin"})
	assert.Equal(t, http.StatusForbidden, p.Status)
	p = e.do(http.MethodPost, path, url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}, "csrf": {e.csrf(tok)}},
		opts{Cookie: tok, Site: "cross-site"})
	assert.Equal(t, http.StatusForbidden, p.Status)

	// A workflow without a schedule has no slots: no form, and a post is
	// refused on its page.
	adhoc := e.rest(http.MethodPost, "/v1/workflows", tok, strings.Replace(workflowDoc(ep), `"etl"`, `"adhoc"`, 1))["id"].(string)
	p = e.get("/console/workflows/"+adhoc, tok)
	assert.Contains(t, p.Body, `id="backfill-none"`)
	assert.NotContains(t, p.Body, `id="backfill-form"`)
	p = e.post("/console/workflows/"+adhoc+"/backfill", tok, url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}})
	assert.Equal(t, http.StatusUnprocessableEntity, p.Status)
	assert.Contains(t, p.Body, "has no schedule")

	// Another tenant's workflow is not found.
	assert.Equal(t, http.StatusNotFound, e.post(path, token(t, "globex"), url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}}).Status)
}

// TestConsoleWorkflowBackfillScopes: without workflows:write there is no
// form and a post is refused; with workflows:write but without tasks:read
// (the backfills page's scope) a started backfill comes back to the
// workflow page with a message.
func TestConsoleWorkflowBackfillScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, scheduledWorkflowDoc(ep))["id"].(string)
	path := "/console/workflows/" + wf + "/backfill"
	form := func() url.Values { return url.Values{"from": {"2026-01-01T00:00"}, "to": {"2026-01-01T01:00"}} }

	ro := token(t, "acme", api.ScopeWorkflowsRead)
	p := e.get("/console/workflows/"+wf, ro)
	require.Equal(t, http.StatusOK, p.Status)
	assert.NotContains(t, p.Body, `id="backfill-form"`)
	assert.NotContains(t, p.Body, `id="backfill"`)
	p = e.post(path, ro, form())
	assert.Equal(t, http.StatusForbidden, p.Status)
	assert.Contains(t, p.Body, "workflows:write")

	wOnly := token(t, "acme", api.ScopeWorkflowsRead, api.ScopeWorkflowsWrite)
	p = e.post(path, wOnly, form())
	require.Equal(t, http.StatusSeeOther, p.Status, p.Body)
	require.Equal(t, "/console/workflows/"+wf+"?done=backfill-started", p.Location)
	p = e.get(p.Location, wOnly)
	assert.Contains(t, p.Body, `id="flash">The backfill is started`)
	assert.Len(t, e.rest(http.MethodGet, "/v1/backfills?workflow_id="+wf, tok, "")["items"].([]any), 1)

	// The backfills page, for a token that reads tasks but not workflows:
	// the workflow's backfill is listed, without its name or link.
	tOnly := token(t, "acme", api.ScopeTasksRead)
	p = e.get("/console/backfills", tOnly)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `workflow `+shownID(wf))
	assert.NotContains(t, p.Body, `/console/workflows/`+wf)
}
