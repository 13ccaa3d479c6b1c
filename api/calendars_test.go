package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCalendarInUse: deleting a calendar that schedules use is a 409 that
// names up to 10 of them by name, tasks and workflows, with how many there
// are, as deleting an endpoint in use does; once none uses it, it goes.
func TestCalendarInUse(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	cal := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/calendars", Token: tok,
		Body: map[string]any{"name": "holidays", "dates": []string{"2027-01-01"}},
	}).JSON["id"].(string)
	sched := map[string]any{"type": "cron", "cron": "0 2 * * *", "exclude_calendars": []string{cal}}
	first := a.createTask(tok, ep, "t00", map[string]any{"schedule": sched}).JSON["id"].(string)
	wf := a.createWorkflow(tok, "etl")
	a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/workflows/" + wf, Token: tok, Body: map[string]any{"schedule": sched}})

	r := a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/calendars/" + cal, Token: tok})
	detail := r.JSON["detail"].(string)
	require.Contains(t, detail, "1 task and 1 workflow")
	require.Contains(t, detail, "task t00 ("+first+")")
	require.Contains(t, detail, "workflow etl ("+wf+")")
	require.NotContains(t, detail, "more")

	for i := 1; i < 12; i++ {
		a.createTask(tok, ep, fmt.Sprintf("t%02d", i), map[string]any{"schedule": sched})
	}
	detail = a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/calendars/" + cal, Token: tok}).JSON["detail"].(string)
	require.Contains(t, detail, "12 tasks and 1 workflow")
	require.Equal(t, 10, strings.Count(detail, "task t"), "ten named: %s", detail)
	require.Contains(t, detail, "and 3 more")
	require.Contains(t, detail, "schedule.exclude_calendars")
}
