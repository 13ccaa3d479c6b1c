package console_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConsoleUnionTask: a union task's page lists each member on its own
// line (its expression, zone, dialect and DST policy) and names the
// member of each next fire; the list says it in words.
func TestConsoleUnionTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tok := token(t, "acme")
	ep := e.createEndpoint(tok, "billing")
	task := e.rest(http.MethodPost, "/v1/tasks", tok, `{"name":"union","endpoint_id":"`+ep+`","schedule":{"type":"union","schedules":[
		{"type":"cron","cron":"30 2 * * *","timezone":"Europe/Paris","dst_policy":"once_per_local_time"},
		{"type":"interval","interval_seconds":3600}]}}`)
	id := task["id"].(string)

	p := e.get("/console/tasks", tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, "the union of 2 schedules")

	p = e.get("/console/tasks/"+id, tok)
	require.Equal(t, http.StatusOK, p.Status)
	assert.Contains(t, p.Body, `id="union-members"`)
	assert.Regexp(t, `<li data-member="0">every day at 02:30 \(Europe/Paris\) · <code>30 2 \* \* \*</code> · Europe/Paris · standard dialect · DST policy once_per_local_time</li>`, p.Body)
	assert.Regexp(t, `<li data-member="1">every hour · <code>every 3600 s</code> · UTC</li>`, p.Body)
	fires := regexp.MustCompile(`member (\d)</span>`).FindAllStringSubmatch(p.Body, -1)
	require.Len(t, fires, 10, "each next fire names its member")
	seen := map[string]bool{}
	for _, f := range fires {
		seen[f[1]] = true
	}
	assert.True(t, seen["1"], "the interval member's fires")
}
