package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// axClient runs client commands against one in-process server, as a
// tenant.
type axClient struct {
	t    *testing.T
	base string
	env  map[string]string
}

// startClientServer starts a server and returns a client of tenant.
func startClientServer(t *testing.T) *axClient {
	t.Helper()
	env := map[string]string{"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": testSecret, "AX_TENANT_API_RPS": "100000"}
	base, _ := startServer(t, env)
	return &axClient{t: t, base: base, env: env}
}

// as is a client of another tenant of the same server.
func (c *axClient) as(tenant string) *axClient {
	c.t.Helper()
	out := new(syncBuffer)
	require.NoError(c.t, run(c.t.Context(), []string{"token", "--tenant", tenant}, envOf(c.env), out))
	env := map[string]string{"AX_URL": c.base, "AX_TOKEN": strings.TrimSpace(out.String())}
	return &axClient{t: c.t, base: c.base, env: env}
}

// ax runs a command with stdin and returns its stdout and stderr.
func (c *axClient) ax(stdin string, args ...string) (string, string, error) {
	c.t.Helper()
	var out, errOut syncBuffer
	root := newRoot(c.t.Context(), envOf(c.env), strings.NewReader(stdin), &out, &errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(c.t.Context())
	return out.String(), errOut.String(), err
}

// must runs a command that must succeed and returns its stdout.
func (c *axClient) must(args ...string) string {
	c.t.Helper()
	out, errOut, err := c.ax("", args...)
	require.NoError(c.t, err, "ax %v: %s", args, errOut)
	return out
}

// api calls the API directly (GET with a nil body) and decodes the answer.
func (c *axClient) api(method, path string, body any, want int) map[string]any {
	c.t.Helper()
	code, m := request(c.t, method, c.base+path, c.env["AX_TOKEN"], body)
	require.Equal(c.t, want, code, "%s %s: %v", method, path, m)
	return m
}

// writes counts the tenant's audit records: every API write makes one.
func (c *axClient) writes() int {
	c.t.Helper()
	n := 0
	cursor := ""
	for {
		m := c.api(http.MethodGet, "/v1/audit?limit=500"+cursor, nil, http.StatusOK)
		items, _ := m["items"].([]any)
		n += len(items)
		next, _ := m["next_cursor"].(string)
		if next == "" {
			return n
		}
		cursor = "&cursor=" + next
	}
}

// names lists the names of the tenant's resources of a collection.
func (c *axClient) names(collection string) []string {
	c.t.Helper()
	m := c.api(http.MethodGet, "/v1/"+collection+"?limit=500", nil, http.StatusOK)
	var out []string
	for _, it := range m["items"].([]any) {
		out = append(out, it.(map[string]any)["name"].(string))
	}
	return out
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
}

const (
	applySecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	endpointDoc = `kind: Endpoint
name: billing
spec:
  url: https://hooks.example.com/ax
  secret: ` + applySecret + `
  headers: {X-Team: billing}
`
	calendarDoc = `{"kind": "Calendar", "name": "holidays", "spec": {"timezone": "Europe/Paris", "dates": ["2027-12-25", "2027-01-01"]}}`
	tasksDoc    = `kind: Task
name: invoices.daily
spec:
  endpoint: billing
  schedule: {type: cron, cron: "0 2 * * *", timezone: Europe/Paris, exclude_calendars: [holidays]}
  payload: {job: invoices}
  retry: {max_attempts: 3}
  labels: {team: billing}
---
kind: Task
name: reminders
spec:
  endpoint: billing
  schedule: {type: interval, interval_seconds: 3600}
`
	workflowDoc = `kind: Workflow
name: month-end
spec:
  schedule: {type: cron, cron: "0 6 1 * *"}
  nodes:
    - {key: extract, endpoint: billing}
    - {key: report, endpoint: billing, depends_on: [extract], payload: {kind: report}}
`
)

// TestApplyLifecycle: a dry run changes nothing; apply creates, a second
// apply makes no write and says so, an edit updates the field it changes,
// --prune deletes only what apply created and the files dropped; the
// secret is never printed.
func TestApplyLifecycle(t *testing.T) {
	t.Parallel()
	c := startClientServer(t).as("acme")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"endpoints/billing.yaml": endpointDoc, "calendars/holidays.json": calendarDoc,
		"tasks/billing.yaml": tasksDoc, "workflows/month-end.yaml": workflowDoc,
	})

	out := c.must("apply", "-f", dir, "--dry-run")
	require.Equal(t, `Calendar/holidays would create
Endpoint/billing would create
Task/invoices.daily would create
Task/reminders would create
Workflow/month-end would create
`, out)
	require.Zero(t, c.writes(), "a dry run writes nothing")

	out, errOut, err := c.ax("", "apply", "-f", dir)
	require.NoError(t, err, errOut)
	require.Equal(t, "Calendar/holidays created\nEndpoint/billing created\nTask/invoices.daily created\nTask/reminders created\nWorkflow/month-end created\n", out)
	require.Contains(t, errOut, "5 created, 0 updated, 0 unchanged, 0 deleted")
	require.NotContains(t, out+errOut, applySecret)
	writes := c.writes()

	out, errOut, err = c.ax("", "apply", "-f", dir)
	require.NoError(t, err, errOut)
	require.Equal(t, "Calendar/holidays unchanged\nEndpoint/billing unchanged\nTask/invoices.daily unchanged\nTask/reminders unchanged\nWorkflow/month-end unchanged\n", out)
	require.Contains(t, errOut, "0 created, 0 updated, 5 unchanged, 0 deleted")
	require.Equal(t, writes, c.writes(), "a second apply of the same files writes nothing")

	// An edit: a changed field, a removed field (back to its default).
	writeFiles(t, dir, map[string]string{"tasks/billing.yaml": strings.NewReplacer(`"0 2 * * *"`, `"30 2 * * *"`,
		"  retry: {max_attempts: 3}\n", "").Replace(tasksDoc)})
	out = c.must("apply", "-f", dir, "--dry-run")
	require.Contains(t, out, "Task/invoices.daily would update: retry, schedule\n")
	require.Equal(t, writes, c.writes())
	out = c.must("apply", "-f", dir)
	require.Contains(t, out, "Task/invoices.daily updated: retry, schedule\n")
	require.Contains(t, out, "Task/reminders unchanged\n")
	task := c.api(http.MethodGet, "/v1/tasks?name=invoices.daily", nil, http.StatusOK)["items"].([]any)[0].(map[string]any)
	require.Equal(t, "30 2 * * *", task["schedule"].(map[string]any)["cron"])
	require.EqualValues(t, 5, task["retry"].(map[string]any)["max_attempts"], "a field left out is the default")
	writes = c.writes()
	require.Contains(t, c.must("apply", "-f", dir), "Task/invoices.daily unchanged\n")
	require.Equal(t, writes, c.writes())

	// Resources made by hand are never pruned; those apply made are, once
	// the files drop them.
	ep := c.api(http.MethodPost, "/v1/endpoints", map[string]any{"name": "by-hand", "url": "https://hooks.example.com/h"}, http.StatusCreated)
	c.api(http.MethodPost, "/v1/tasks", map[string]any{"name": "by-hand", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "interval", "interval_seconds": 60}}, http.StatusCreated)
	c.api(http.MethodPost, "/v1/calendars", map[string]any{"name": "by-hand"}, http.StatusCreated)
	require.NoError(t, os.Remove(filepath.Join(dir, "workflows/month-end.yaml")))
	require.NoError(t, os.Remove(filepath.Join(dir, "calendars/holidays.json")))
	writeFiles(t, dir, map[string]string{"tasks/billing.yaml": strings.SplitN(tasksDoc, "---\n", 2)[1]})
	out = c.must("apply", "-f", dir, "--prune", "--dry-run")
	require.Equal(t, "Endpoint/billing unchanged\nTask/reminders unchanged\nWorkflow/month-end would delete\nTask/invoices.daily would delete\nCalendar/holidays would delete\n", out)
	out = c.must("apply", "-f", dir)
	require.NotContains(t, out, "delete", "without --prune nothing is deleted")
	out = c.must("apply", "-f", dir, "--prune")
	require.Equal(t, "Endpoint/billing unchanged\nTask/reminders unchanged\nWorkflow/month-end deleted\nTask/invoices.daily deleted\nCalendar/holidays deleted\n", out)
	require.ElementsMatch(t, []string{"reminders", "by-hand"}, c.names("tasks"))
	require.ElementsMatch(t, []string{"billing", "by-hand"}, c.names("endpoints"))
	require.ElementsMatch(t, []string{"by-hand"}, c.names("calendars"))
	require.Empty(t, c.names("workflows"))

	// A task apply did not create and now names is updated, but not marked.
	writeFiles(t, dir, map[string]string{"tasks/by-hand.yaml": "{kind: Task, name: by-hand, spec: {endpoint: by-hand, schedule: {type: interval, interval_seconds: 120}}}"})
	require.Contains(t, c.must("apply", "-f", dir, "--prune"), "Task/by-hand updated: schedule\n")
	require.NoError(t, os.Remove(filepath.Join(dir, "tasks/by-hand.yaml")))
	require.NotContains(t, c.must("apply", "-f", dir, "--prune"), "by-hand")
	require.ElementsMatch(t, []string{"reminders", "by-hand"}, c.names("tasks"))
}

// request sends a JSON request and decodes the answer.
func request(t *testing.T, method, url, token string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}
