package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/axhq/ax/cmd/server/apply"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/openapi"
	"github.com/axhq/ax/openapi/client"
)

// axClient runs client commands against one in-process server, as a
// tenant.
type axClient struct {
	t      *testing.T
	base   string
	env    map[string]string // the client's: AX_URL, AX_TOKEN
	server map[string]string // the server's
}

// startClientServer starts a server and returns a client of tenant.
func startClientServer(t *testing.T) *axClient {
	t.Helper()
	env := map[string]string{
		"AX_DATABASE_URL": dbtest.URL(t), "AX_JWT_SECRET": testSecret, "AX_TENANT_API_RPS": "100000",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	base, _ := startServer(t, env)
	return &axClient{t: t, base: base, env: env, server: env}
}

// as is a client of another tenant of the same server.
func (c *axClient) as(tenant string) *axClient {
	c.t.Helper()
	out := new(syncBuffer)
	require.NoError(c.t, run(c.t.Context(), []string{"token", "--tenant", tenant}, envOf(c.server), out))
	env := map[string]string{"AX_URL": c.base, "AX_TOKEN": strings.TrimSpace(out.String())}
	return &axClient{t: c.t, base: c.base, env: env, server: c.server}
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
	require.NoError(c.t, err, "ax %v: %s%s", args, out, errOut)
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
	out = c.must("apply", "-f", dir, "--dry-run", "--diff")
	require.Contains(t, out, "Task/invoices.daily would update: retry, schedule\n"+
		`  retry: {"max_attempts":3} -> (the default)`+"\n"+
		`  schedule: {"cron":"0 2 * * *","exclude_calendars":["holidays"],"timezone":"Europe/Paris","type":"cron"}`+
		` -> {"cron":"30 2 * * *","exclude_calendars":["holidays"],"timezone":"Europe/Paris","type":"cron"}`+"\n")
	require.Equal(t, writes, c.writes())
	// --diff never shows a header's value (a credential, often).
	writeFiles(t, dir, map[string]string{"endpoints/billing.yaml": strings.Replace(endpointDoc, "X-Team: billing", "Authorization: Bearer hunter2", 1)})
	out = c.must("apply", "-f", dir, "--dry-run", "--diff")
	require.Contains(t, out, "Endpoint/billing would update: headers\n"+`  headers: {"X-Team":"…"} -> {"Authorization":"…"}`+"\n")
	require.NotContains(t, out, "hunter2")
	writeFiles(t, dir, map[string]string{"endpoints/billing.yaml": endpointDoc})
	out = c.must("apply", "-f", dir)
	require.Contains(t, out, "Task/invoices.daily updated: retry, schedule\n")
	require.Contains(t, out, "Task/reminders unchanged\n")
	task := c.api(http.MethodGet, "/v1/tasks?name=invoices.daily", nil, http.StatusOK)["items"].([]any)[0].(map[string]any)
	require.Equal(t, "30 2 * * *", task["schedule"].(map[string]any)["cron"])
	require.EqualValues(t, 5, task["retry"].(map[string]any)["max_attempts"], "a field left out is the default")
	writes = c.writes()
	require.Contains(t, c.must("apply", "-f", dir), "Task/invoices.daily unchanged\n")
	require.Equal(t, writes, c.writes())

	// A workflow's inputs: added, then removed from the file (back to none).
	writeFiles(t, dir, map[string]string{"workflows/month-end.yaml": strings.Replace(workflowDoc, "spec:\n", "spec:\n  inputs: {limit: 100}\n", 1)})
	require.Contains(t, c.must("apply", "-f", dir), "Workflow/month-end updated: inputs\n")
	writeFiles(t, dir, map[string]string{"workflows/month-end.yaml": workflowDoc})
	require.Contains(t, c.must("apply", "-f", dir), "Workflow/month-end updated: inputs\n")
	require.Contains(t, c.must("apply", "-f", dir), "Workflow/month-end unchanged\n")

	// Resources made by hand are never pruned; those apply made are, once
	// the files drop them.
	ep := c.api(http.MethodPost, "/v1/endpoints", map[string]any{"name": "by-hand", "url": "https://hooks.example.com/h"}, http.StatusCreated)
	c.api(http.MethodPost, "/v1/tasks", map[string]any{
		"name": "by-hand", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "interval", "interval_seconds": 60},
	}, http.StatusCreated)
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

	// Back in the files, as first applied (the same Idempotency-Keys, whose
	// answers the server keeps 24 h): created again.
	writeFiles(t, dir, map[string]string{"workflows/month-end.yaml": workflowDoc, "calendars/holidays.json": calendarDoc})
	out = c.must("apply", "-f", dir)
	require.Contains(t, out, "Calendar/holidays created\n")
	require.Contains(t, out, "Workflow/month-end created\n")
	require.ElementsMatch(t, []string{"month-end"}, c.names("workflows"))
	require.ElementsMatch(t, []string{"holidays", "by-hand"}, c.names("calendars"))
	require.NoError(t, os.Remove(filepath.Join(dir, "workflows/month-end.yaml")))
	require.NoError(t, os.Remove(filepath.Join(dir, "calendars/holidays.json")))
	c.must("apply", "-f", dir, "--prune")

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

// everyField sets every field of every create body (and of the records
// inside them) to something other than its default. roundTripCoverage
// checks it against the OpenAPI document: a field the API adds fails
// TestApplyExportRoundTrip until it is added here, and then the round
// trip shows whether apply and export carry it.
const everyField = `kind: Calendar
name: holidays
spec:
  dates: ["2027-01-01", "2027-12-25"]
  timezone: Europe/Paris
---
kind: Endpoint
name: billing
spec:
  enabled: false
  format: slack
  headers: {X-Team: billing}
  max_concurrency: 4
  method: PUT
  rate_limit_per_second: 2.5
  secret: ` + applySecret + `
  timeout_ms: 5000
  url: https://hooks.example.com/billing
---
kind: Endpoint
name: alerts
spec:
  url: https://hooks.example.com/alerts
---
kind: Task
name: every-field
spec:
  alert_after_failures: 4
  alert_endpoint: alerts
  completion: {mode: callback, timeout_ms: 3600000, heartbeat_timeout_ms: 60000}
  endpoint: billing
  labels: {team: billing}
  misfire_policy: fire_all
  overlap_policy: queue
  pause_after_failures: 3
  payload: {job: invoices, endpoint: not-a-reference, n: 1.5, day: "{{ .business_date }}"}
  payload_template: true
  priority: 1
  retry: {initial_backoff_ms: 2000, max_attempts: 7, max_backoff_ms: 900000}
  schedule:
    cron: "0 0 2 ? * MON-FRI"
    dialect: quartz
    dst_policy: once_per_local_time
    end_at: "2031-01-01T00:00:00Z"
    exclude_calendars: [holidays]
    start_at: "2026-01-01T00:00:00Z"
    timezone: Asia/Shanghai
    type: cron
  sla: {finish_within_ms: 60000}
  timeout_ms: 30000
---
kind: Task
name: interval
spec:
  endpoint: billing
  shards: 2
  schedule: {type: interval, interval_seconds: 90, timezone: Europe/Paris, exclude_calendars: [holidays], start_at: "2026-01-01T00:00:00Z", end_at: "2031-01-01T00:00:00Z"}
---
kind: Task
name: once
spec:
  endpoint: billing
  schedule: {type: once, run_at: "2030-06-01T00:00:00Z", timezone: Europe/Paris, exclude_calendars: [holidays], start_at: "2026-01-01T00:00:00Z", end_at: "2031-01-01T00:00:00Z"}
---
kind: Task
name: union
spec:
  endpoint: billing
  schedule:
    type: union
    exclude_calendars: [holidays]
    start_at: "2026-01-01T00:00:00Z"
    end_at: "2031-01-01T00:00:00Z"
    schedules:
      - {type: cron, cron: "0 9 * * MON-FRI", timezone: Europe/Paris, dst_policy: once_per_local_time, exclude_calendars: [holidays]}
      - {type: interval, interval_seconds: 3600, start_at: "2026-01-01T00:30:00Z"}
---
kind: Workflow
name: every-field
spec:
  alert_endpoint: alerts
  inputs: {business_date: "2026-12-01", limit: 100, tags: [a, b]}
  max_active_runs: 3
  misfire_policy: skip
  schedule: {type: cron, cron: "0 6 1 * *", timezone: Europe/Paris}
  sla: {finish_within_ms: 7200000}
  nodes:
    - key: extract
      endpoint: billing
    - completion: {mode: callback, timeout_ms: 600000}
      depends_on: [extract]
      endpoint: alerts
      key: report
      payload: [1, "two", "{{ .inputs.limit }}"]
      payload_template: true
      priority: 4
      run_if: '{{ eq .nodes.extract.status "succeeded" }}'
      retry: {max_attempts: 2}
      shards: 3
      timeout_ms: 20000
      trigger_rule: all_done
    - key: landed
      depends_on: [report]
      wait_for: {event: files.ready, key: "{{ .inputs.business_date }}", timeout_ms: 3600000}
`

// roundTripCoverage: the schemas whose every property everyField must
// set, and where in it each is set (kind/name, then a path; [] walks a
// list's items).
var roundTripCoverage = map[string][]string{
	"CalendarRequest":  {"Calendar/holidays"},
	"EndpointRequest":  {"Endpoint/billing"},
	"TaskRequest":      {"Task/every-field", "Task/interval"},
	"RetryPolicy":      {"Task/every-field retry"},
	"Completion":       {"Task/every-field completion"},
	"SLA":              {"Task/every-field sla"},
	"CronSchedule":     {"Task/every-field schedule"},
	"IntervalSchedule": {"Task/interval schedule"},
	"OnceSchedule":     {"Task/once schedule"},
	"UnionSchedule":    {"Task/union schedule"},
	"WorkflowRequest":  {"Workflow/every-field"},
	"WorkflowNode":     {"Workflow/every-field nodes[]"},
}

// onlyDefault are the properties that accept nothing but their default
// (so export leaves them out): a schedule type's fields of another type.
var onlyDefault = map[string]bool{
	"IntervalSchedule.dialect": true, "IntervalSchedule.dst_policy": true,
	"OnceSchedule.dialect": true, "OnceSchedule.dst_policy": true,
	// A union's zone is its members'; its own is UTC, the default.
	"UnionSchedule.dialect": true, "UnionSchedule.dst_policy": true, "UnionSchedule.timezone": true,
}

// docsOf decodes YAML documents by kind/name.
func docsOf(t *testing.T, text string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var d map[string]any
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return out
		} else {
			require.NoError(t, err)
		}
		out[d["kind"].(string)+"/"+d["name"].(string)] = d
	}
}

// TestApplyExportRoundTrip: every field of every kind survives apply then
// export unchanged (references by name, the secret never exported), and
// applying the export changes nothing.
func TestApplyExportRoundTrip(t *testing.T) {
	t.Parallel()
	want := docsOf(t, everyField)
	checkCoverage(t, want)

	c := startClientServer(t).as("acme")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"all.yaml": everyField})
	out := c.must("apply", "-f", dir)
	require.Equal(t, 8, strings.Count(out, " created\n"), out)

	exported := c.must("export")
	require.NotContains(t, exported, applySecret)
	require.NotContains(t, exported, "whsec_")
	require.NotContains(t, exported, "managed-by")
	delete(want["Endpoint/billing"]["spec"].(map[string]any), "secret")
	require.Equal(t, want, docsOf(t, exported))

	exportDir := t.TempDir()
	_, errOut, err := c.ax("", "export", "-o", exportDir)
	require.NoError(t, err)
	require.Contains(t, errOut, "8 files")
	for _, f := range []string{
		"endpoints/billing.yaml", "endpoints/alerts.yaml", "calendars/holidays.yaml", "tasks/every-field.yaml",
		"tasks/interval.yaml", "tasks/once.yaml", "tasks/union.yaml", "workflows/every-field.yaml",
	} {
		b, err := os.ReadFile(filepath.Join(exportDir, f))
		require.NoError(t, err, f)
		require.NotContains(t, string(b), "whsec_")
	}
	writes := c.writes()
	out = c.must("apply", "-f", exportDir, "--prune")
	require.Equal(t, 8, strings.Count(out, " unchanged\n"), out)
	require.Equal(t, writes, c.writes(), "applying an export writes nothing")
	out = c.must("apply", "-f", dir)
	require.Equal(t, 8, strings.Count(out, " unchanged\n"), out)
	require.Equal(t, writes, c.writes())
}

// checkCoverage fails when everyField leaves a property of a create body
// (or of a record in one) unset, as happens when the API gains a field.
func checkCoverage(t *testing.T, docs map[string]map[string]any) {
	t.Helper()
	var spec struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(openapi.Spec(), &spec))
	docName := map[string]string{"endpoint_id": "endpoint", "alert_endpoint_id": "alert_endpoint"}
	for name, places := range roundTripCoverage {
		s, ok := spec.Components.Schemas[name]
		require.True(t, ok, "the API has no schema %s any more", name)
		set := map[string]bool{"name": true} // a document's name
		for _, place := range places {
			docRef, path, _ := strings.Cut(place, " ")
			d, ok := docs[docRef]
			require.True(t, ok, docRef)
			objs := []any{d["spec"]}
			for p := range strings.FieldsSeq(strings.ReplaceAll(path, ".", " ")) {
				var next []any
				for _, o := range objs {
					v := o.(map[string]any)[strings.TrimSuffix(p, "[]")]
					if strings.HasSuffix(p, "[]") {
						next = append(next, v.([]any)...)
					} else {
						next = append(next, v)
					}
				}
				objs = next
			}
			for _, o := range objs {
				for k := range o.(map[string]any) {
					set[k] = true
				}
			}
		}
		for prop := range s.Properties {
			k := prop
			if n, ok := docName[prop]; ok {
				k = n
			}
			require.True(t, set[k] || onlyDefault[name+"."+prop], "%s.%s is set nowhere in everyField: add it (at %v) so the round trip covers it", name, prop, places)
		}
	}
}

// TestApplyRefusesBadDocuments: a bad document changes nothing, and the
// error names its file, its position and the field.
func TestApplyRefusesBadDocuments(t *testing.T) {
	t.Parallel()
	c := startClientServer(t).as("acme")
	good := "kind: Endpoint\nname: billing\nspec: {url: https://hooks.example.com/ax}\n---\n"
	task := func(spec string) string {
		return "kind: Task\nname: t\nspec: {endpoint: billing, schedule: {type: interval, interval_seconds: 60}" + spec + "}\n"
	}
	for _, tc := range []struct{ doc, want string }{
		{
			"kind: Task\nname: t\nspec: {endpoint: nope, schedule: {type: interval, interval_seconds: 60}}\n",
			`document 2 (Task/t): spec.endpoint: no endpoint named "nope" in the files or the tenant`,
		},
		{task(", schedul: {}"), "document 2 (Task/t): spec.schedul: is not a field of"},
		{task(", priority: high"), "document 2 (Task/t): spec.priority: must be an integer"},
		{task(", priority: 9"), "document 2 (Task/t): spec.priority: must be at most 4"},
		{task(", overlap_policy: sometimes"), "spec.overlap_policy: must be one of allow, skip, queue"},
		{task(", alert_endpoint: gone"), `spec.alert_endpoint: no endpoint named "gone"`},
		{task(", endpoint_id: 0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e"), "spec.endpoint_id: give the endpoint's name as endpoint: NAME"},
		{"kind: Task\nname: t\nspec: {endpoint: billing, schedule: {type: hourly}}\n", "spec.schedule.type: must be one of cron, event, interval, once"},
		{
			"kind: Task\nname: t\nspec: {endpoint: billing, schedule: {type: cron, cron: '* * * * *', exclude_calendars: [nope]}}\n",
			`spec.schedule.exclude_calendars[0]: no calendar named "nope"`,
		},
		{"kind: Task\nname: t\nspec: {schedule: {type: interval, interval_seconds: 60}}\n", "spec.endpoint: is required"},
		{"kind: Job\nname: t\nspec: {}\n", "document 2: kind: must be one of Calendar, Endpoint, Task, Workflow"},
		{"kind: Task\nspec: {}\n", "document 2: name: is required"},
		{"kind: Task\nname: t\nmetadata: {}\nspec: {}\n", "document 2: metadata: is not a field of a document"},
		{"kind: Task\nname: t\nspec: [\n", "document 2: not YAML or JSON"},
		{"kind: Endpoint\nname: billing\nspec: {url: https://hooks.example.com/ax}\n", "document 2 (Endpoint/billing): name: Endpoint/billing is also in"},
		{"kind: Workflow\nname: w\nspec: {nodes: [{key: a, endpoint: nope}]}\n", `spec.nodes[0].endpoint: no endpoint named "nope"`},
		{"kind: Endpoint\nname: e\nspec: {url: https://h.example.com, secret: not-a-secret}\n", "spec.secret: does not match"},
	} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"resources.yaml": good + tc.doc})
		_, _, err := c.ax("", "apply", "-f", dir)
		require.ErrorContains(t, err, filepath.Join(dir, "resources.yaml")+": document 2", tc.doc)
		require.ErrorContains(t, err, tc.want, tc.doc)
		require.ErrorContains(t, err, "nothing changed")
		require.NotContains(t, err.Error(), "not-a-secret")
	}
	require.Zero(t, c.writes(), "no bad file wrote anything")
	require.Empty(t, c.names("endpoints"))
}

// failingTransport passes requests on until its crash-th create (a
// POST); from then on a create's answer is lost after the server acted
// on it: once (then it recovers) or, with dead, for good, every request
// failing as a killed process's would.
type failingTransport struct {
	mu           sync.Mutex
	creates      int
	crash        int
	dead, failed bool
}

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	if f.dead && f.failed {
		f.mu.Unlock()
		return nil, errors.New("the process is gone")
	}
	lose := false
	if r.Method == http.MethodPost {
		f.creates++
		lose = f.creates == f.crash
	}
	f.mu.Unlock()
	res, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !lose {
		return res, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	f.mu.Lock()
	f.failed = true
	f.mu.Unlock()
	return nil, errors.New("connection reset by peer (simulated)")
}

// TestApplyCrashMidway: a create whose answer is lost is sent again with
// the same Idempotency-Key and creates nothing twice; an apply that dies
// midway is run again and creates only what is missing. Endpoint names
// are not unique in ax, so only the key keeps the lost create from
// making a second endpoint.
func TestApplyCrashMidway(t *testing.T) {
	t.Parallel()
	c := startClientServer(t).as("acme")
	var files strings.Builder
	for i := range 4 {
		fmt.Fprintf(&files, "kind: Endpoint\nname: e%d\nspec: {url: https://hooks.example.com/%d}\n---\n", i, i)
		fmt.Fprintf(&files, "kind: Task\nname: t%d\nspec: {endpoint: e%d, schedule: {type: interval, interval_seconds: 60}}\n---\n", i, i)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"all.yaml": files.String()})
	docs, err := apply.Load(dir, nil)
	require.NoError(t, err)
	applyWith := func(tr http.RoundTripper) (string, error) {
		api, err := client.New(c.base, c.env["AX_TOKEN"], client.WithHTTPClient(&http.Client{Transport: tr}))
		require.NoError(t, err)
		var out strings.Builder
		_, err = apply.Apply(t.Context(), api, docs, apply.Options{Workers: 1}, &out)
		return out.String(), err
	}

	// The answer to the second endpoint's create is lost once.
	out, err := applyWith(&failingTransport{crash: 2})
	require.NoError(t, err)
	require.Equal(t, 8, strings.Count(out, " created\n"), out)
	require.Equal(t, []string{"e0", "e1", "e2", "e3"}, sorted(c.names("endpoints")), "one endpoint per document")

	// A second tenant's apply dies after its third create.
	c2 := c.as("globex")
	c.env = c2.env
	out, err = applyWith(&failingTransport{crash: 3, dead: true})
	require.Error(t, err)
	require.Equal(t, 2, strings.Count(out, " created\n"), out)
	out, err = applyWith(http.DefaultTransport)
	require.NoError(t, err, out)
	require.Equal(t, 3, strings.Count(out, " unchanged\n"), "what the first run created, the lost answer's included: %s", out)
	require.Equal(t, 5, strings.Count(out, " created\n"), out)
	require.Equal(t, []string{"e0", "e1", "e2", "e3"}, sorted(c2.names("endpoints")))
	require.Equal(t, []string{"t0", "t1", "t2", "t3"}, sorted(c2.names("tasks")))
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// TestApplyTenantScoping: one tenant's apply, export and prune see and
// touch only its own resources.
func TestApplyTenantScoping(t *testing.T) {
	t.Parallel()
	srv := startClientServer(t)
	acme, globex := srv.as("acme"), srv.as("globex")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"e.yaml": endpointDoc, "t.yaml": tasksDoc, "c.json": calendarDoc})
	out := acme.must("apply", "-f", dir)
	require.Equal(t, 4, strings.Count(out, " created\n"), out)
	require.Equal(t, 4, strings.Count(globex.must("apply", "-f", dir), " created\n"), "the same names are another tenant's")
	require.Equal(t, globex.must("export"), acme.must("export"))

	// globex prunes everything; acme keeps its own.
	empty := t.TempDir()
	writeFiles(t, empty, map[string]string{"e.yaml": endpointDoc})
	out = globex.must("apply", "-f", empty, "--prune")
	require.Equal(t, 3, strings.Count(out, " deleted\n"), out)
	require.Empty(t, globex.names("tasks"))
	require.Len(t, acme.names("tasks"), 2)
	require.Equal(t, 4, strings.Count(acme.must("apply", "-f", dir), " unchanged\n"))
}

// TestImportCrontabApply: ax import-crontab's documents apply as they
// are, and again with no change.
func TestImportCrontabApply(t *testing.T) {
	t.Parallel()
	c := startClientServer(t).as("acme")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"crontab":     "CRON_TZ=Europe/Paris\n0 2 * * * /usr/local/bin/backup.sh\n@weekly /usr/local/bin/report\n",
		"runner.yaml": "kind: Endpoint\nname: runner\nspec: {url: http://runner.internal:8090}\n",
	})
	docs, _, err := c.ax("", "import-crontab", filepath.Join(dir, "crontab"), "--endpoint", "runner")
	require.NoError(t, err)
	c.must("apply", "-f", filepath.Join(dir, "runner.yaml"))
	out, errOut, err := c.ax(docs, "apply", "-f", "-")
	require.NoError(t, err, errOut)
	require.Equal(t, "Task/backup.sh created\nTask/report created\n", out)
	out, _, err = c.ax(docs, "apply", "-f", "-")
	require.NoError(t, err)
	require.Equal(t, "Task/backup.sh unchanged\nTask/report unchanged\n", out)
}

// TestDocumentSchema: openapi/apply.schema.json, as generated, accepts
// every document of everyField and refuses a misspelt field; it is the
// schema apply.JSONSchema builds now (go generate in openapi writes it).
func TestDocumentSchema(t *testing.T) {
	t.Parallel()
	file, err := os.ReadFile(filepath.Join("..", "..", "openapi", "apply.schema.json"))
	require.NoError(t, err)
	built, err := apply.JSONSchema()
	require.NoError(t, err)
	var a, b any
	require.NoError(t, json.Unmarshal(built, &a))
	require.NoError(t, json.Unmarshal(file, &b))
	require.True(t, reflect.DeepEqual(a, b), "openapi/apply.schema.json is stale: run go generate ./openapi")

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(file))
	require.NoError(t, err)
	comp := jsonschema.NewCompiler()
	require.NoError(t, comp.AddResource("apply.schema.json", doc))
	sch, err := comp.Compile("apply.schema.json")
	require.NoError(t, err)
	instance := func(d map[string]any) any {
		b, err := json.Marshal(d)
		require.NoError(t, err)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err)
		return v
	}
	for name, d := range docsOf(t, everyField) {
		require.NoError(t, sch.Validate(instance(d)), name)
	}
	bad := docsOf(t, "kind: Task\nname: t\nspec: {endpoint: e, schedule: {type: cron, cron: '* * * * *'}, schedul: {}}\n")["Task/t"]
	require.Error(t, sch.Validate(instance(bad)))
}

// meetTransport holds the first create of each of its users until all of
// them have sent one: they all planned before any of them wrote.
type meetTransport struct {
	all  *sync.WaitGroup
	once sync.Once
}

func (m *meetTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		m.once.Do(func() { m.all.Done(); m.all.Wait() })
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestApplyConcurrently: two applies of the same files at once, both
// having found nothing, create each resource once: their creates carry
// the same Idempotency-Keys (endpoint names are not unique in ax: nothing
// else keeps them from doubling).
func TestApplyConcurrently(t *testing.T) {
	t.Parallel()
	c := startClientServer(t).as("acme")
	var files strings.Builder
	for i := range 3 {
		fmt.Fprintf(&files, "kind: Endpoint\nname: e%d\nspec: {url: https://hooks.example.com/%d}\n---\n", i, i)
		fmt.Fprintf(&files, "kind: Task\nname: t%d\nspec: {endpoint: e%d, schedule: {type: interval, interval_seconds: 60}}\n---\n", i, i)
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"all.yaml": files.String()})
	docs, err := apply.Load(dir, nil)
	require.NoError(t, err)
	var all sync.WaitGroup
	all.Add(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			api, err := client.New(c.base, c.env["AX_TOKEN"], client.WithHTTPClient(&http.Client{Transport: &meetTransport{all: &all}}))
			if err == nil {
				_, err = apply.Apply(t.Context(), api, docs, apply.Options{Workers: 1}, io.Discard)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.Equal(t, []string{"e0", "e1", "e2"}, sorted(c.names("endpoints")))
	require.Equal(t, []string{"t0", "t1", "t2"}, sorted(c.names("tasks")))
}

// TestExampleRepository: the example repository in docs/ applies to a real
// server as it is, and a second apply changes nothing.
func TestExampleRepository(t *testing.T) {
	t.Parallel()
	c := startClientServer(t).as("example")
	dir := filepath.Join("..", "..", "docs", "examples", "schedules")
	out, errOut, err := c.ax("", "apply", "-f", dir)
	require.NoError(t, err, "%s%s", out, errOut)
	require.Contains(t, errOut, "8 created, 0 updated, 0 unchanged, 0 deleted", out)
	out, errOut, err = c.ax("", "apply", "-f", dir)
	require.NoError(t, err, errOut)
	require.Contains(t, errOut, "0 created, 0 updated, 8 unchanged, 0 deleted", out)
}
