package console_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleShortIDsTellApart: ids are UUIDv7, whose first eight digits
// are the top of a millisecond timestamp (the same for a minute), so the
// console's short form of an id is its last eight digits (random): two
// executions made together are told apart in the task page's list.
func TestConsoleShortIDsTellApart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "ep")
	task := e.createTask(tok, "nightly", ep, "30 2 * * *", "UTC")
	a := e.rest(http.MethodPost, "/v1/tasks/"+task+"/trigger", tok, `{}`)["id"].(string)
	b := e.rest(http.MethodPost, "/v1/tasks/"+task+"/trigger", tok, `{}`)["id"].(string)

	p := e.get("/console/tasks/"+task, tok)
	require.Equal(t, http.StatusOK, p.Status, p.Body)
	labels := map[string]string{}
	for _, m := range regexp.MustCompile(`<a href="/console/executions/(`+idRE.String()+`)"><code>([^<]+)</code></a>`).
		FindAllStringSubmatch(p.Body, -1) {
		labels[m[1]] = m[2]
	}
	require.Len(t, labels, 2, p.Body)
	assert.Equal(t, a[len(a)-8:], labels[a])
	assert.Equal(t, b[len(b)-8:], labels[b])
	assert.NotEqual(t, labels[a], labels[b], "the two executions read differently")

	x := e.get("/console/executions/"+a, tok)
	require.Equal(t, http.StatusOK, x.Status, x.Body)
	assert.Contains(t, x.Body, "<title>Execution "+a[len(a)-8:])
}
