package console_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shownID is how the console shows an id without a name: its last 8
// characters after an ellipsis, the full id on hover.
func shownID(id string) string {
	return `<code class="ident" title="` + id + `">…` + id[len(id)-8:] + `</code>`
}

// shownName is how the console shows an id with a name.
func shownName(id, name string) string {
	return `<span class="ident" title="` + id + `">` + name + `</span>`
}

// TestConsoleIdentsTellApart: UUIDv7 ids made in the same millisecond
// share their first 8 characters (the time); the console shows their
// tails, which differ, with the full id on hover, and names where there
// are names.
func TestConsoleIdentsTellApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	wf := e.rest(http.MethodPost, "/v1/workflows", tok, workflowDoc(ep))["id"].(string)
	var runs []string
	for range 3 {
		runs = append(runs, e.rest(http.MethodPost, "/v1/workflows/"+wf+"/trigger", tok, `{}`)["id"].(string))
	}
	p := e.get("/console/workflows/"+wf, tok)
	require.Equal(t, http.StatusOK, p.Status)
	seen := map[string]bool{}
	for _, r := range runs {
		assert.Contains(t, p.Body, `<a href="/console/workflow-runs/`+r+`">`+shownID(r)+`</a>`)
		seen[r[len(r)-8:]] = true
	}
	assert.Len(t, seen, len(runs), "the tails differ")

	p = e.get("/console/workflows", tok)
	assert.Contains(t, p.Body, shownID(wf), "the workflow's id under its name")
}
