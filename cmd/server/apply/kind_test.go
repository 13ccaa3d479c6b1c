package apply

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	require.NoError(t, err)
	return v.(map[string]any)
}

// TestDiffTask: what counts as a difference between a document's task and
// the server's.
func TestDiffTask(t *testing.T) {
	t.Parallel()
	const have = `{"id": "x", "name": "t", "endpoint_id": "e1", "state": "paused", "next_run_at": null,
		"schedule": {"type": "cron", "cron": "0 2 * * *", "timezone": "UTC", "dialect": "standard", "dst_policy": "vixie",
			"start_at": "2026-12-31T16:00:00Z"},
		"retry": {"max_attempts": 5, "initial_backoff_ms": 1000, "max_backoff_ms": 600000},
		"completion": {"mode": "response"}, "priority": 2, "shards": 1, "labels": {"team": "a"},
		"misfire_policy": "fire_once", "overlap_policy": "allow", "payload": {"a": 1, "b": [1, 2]}, "missed_count": 4}`
	for _, tc := range []struct {
		name, want string
		fields     []string
	}{
		{"defaults left out, read-only fields ignored", `{"name": "t", "endpoint_id": "e1", "labels": {"team": "a"}, "payload": {"a": 1, "b": [1, 2]},
			"schedule": {"type": "cron", "cron": "0 2 * * *", "start_at": "2027-01-01T00:00:00+08:00"}}`, nil},
		{"defaults given", `{"name": "t", "endpoint_id": "e1", "labels": {"team": "a"}, "payload": {"a": 1, "b": [1, 2]}, "priority": 2,
			"retry": {"max_attempts": 5}, "completion": {"mode": "response"}, "overlap_policy": "ALLOW",
			"schedule": {"type": "cron", "cron": "0 2 * * *", "timezone": "UTC", "start_at": "2026-12-31T16:00:00Z"}}`, nil},
		{"a changed field", `{"name": "t", "endpoint_id": "e2", "labels": {"team": "a"}, "payload": {"a": 1, "b": [1, 2]},
			"schedule": {"type": "cron", "cron": "0 3 * * *", "start_at": "2026-12-31T16:00:00Z"}}`, []string{"endpoint_id", "schedule"}},
		{"payloads and labels are compared whole", `{"name": "t", "endpoint_id": "e1", "labels": {}, "payload": {"a": 1},
			"schedule": {"type": "cron", "cron": "0 2 * * *", "start_at": "2026-12-31T16:00:00Z"}}`, []string{"labels", "payload"}},
		{"a removed field is its default again", `{"name": "t", "endpoint_id": "e1", "labels": {"team": "a"}, "payload": {"a": 1, "b": [1, 2]},
			"schedule": {"type": "cron", "cron": "0 2 * * *"}, "sla": {"finish_within_ms": 60000}}`, []string{"schedule", "sla"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := diffRecord(decode(t, tc.want), decode(t, have), deref(schemas()["TaskRequest"]))
			require.Equal(t, tc.fields, got)
		})
	}
}

// TestExportForm: only the create body's fields, without their defaults,
// nested records included.
func TestExportForm(t *testing.T) {
	t.Parallel()
	have := decode(t, `{"id": "x", "name": "t", "endpoint_id": "e1", "state": "active", "alert_endpoint_id": "",
		"schedule": {"type": "interval", "interval_seconds": 60, "timezone": "UTC", "dialect": "standard", "dst_policy": "vixie"},
		"retry": {"max_attempts": 3, "initial_backoff_ms": 1000, "max_backoff_ms": 600000},
		"completion": {"mode": "response"}, "priority": 2, "labels": {}, "payload": null, "timeout_ms": 0}`)
	got := exportForm(have, deref(schemas()["TaskRequest"]))
	require.Equal(t, decode(t, `{"name": "t", "endpoint_id": "e1", "schedule": {"type": "interval", "interval_seconds": 60},
		"retry": {"max_attempts": 3}, "timeout_ms": 0}`), got)
}

// TestParse: documents as YAML and JSON, several in a file, references
// checked for shape only.
func TestParse(t *testing.T) {
	t.Parallel()
	docs, err := parse("f.yaml", []byte(`kind: Endpoint
name: e
spec: {url: "https://h.example.com"}
---
{"kind": "Task", "name": "t", "spec": {"endpoint": "e", "schedule": {"type": "interval", "interval_seconds": 60}, "payload": {"n": 1}}}
---
`))
	require.NoError(t, err)
	require.Len(t, docs, 2)
	require.Equal(t, "Task/t", docs[1].String())
	require.Equal(t, 2, docs[1].Index)
	require.Equal(t, map[string]any{"n": int64(1)}, docs[1].Spec["payload"])

	// Unquoted YAML dates reach the server as written, not as instants.
	docs, err = parse("c.yaml", []byte("kind: Calendar\nname: hol\nspec: {timezone: Asia/Shanghai, dates: [2026-12-25, 2027-01-01]}\n"))
	require.NoError(t, err)
	require.Equal(t, []any{"2026-12-25", "2027-01-01"}, docs[0].Spec["dates"])

	_, err = parse("f.yaml", []byte("kind: Task\nname: t\nspec: {endpoint: e, schedule: {type: interval, interval_seconds: 0.5}}\n"))
	require.ErrorContains(t, err, "f.yaml: document 1 (Task/t): spec.schedule.interval_seconds: must be an integer")
	require.Equal(t, "spec.nodes[2].endpoint", strings.Join([]string{"spec", docField("nodes[2].endpoint_id")}, "."))
}

// TestJSONSchema: the documents' schema names references by name and
// leaves the name out of the spec.
func TestJSONSchema(t *testing.T) {
	t.Parallel()
	b, err := JSONSchema()
	require.NoError(t, err)
	var s struct {
		OneOf []map[string]string `json:"oneOf"`
		Defs  map[string]struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		} `json:"$defs"`
	}
	require.NoError(t, json.Unmarshal(b, &s))
	require.Len(t, s.OneOf, 4)
	task := s.Defs["TaskSpec"]
	require.Equal(t, []string{"endpoint", "schedule"}, task.Required)
	require.Contains(t, task.Properties, "alert_endpoint")
	require.NotContains(t, task.Properties, "endpoint_id")
	require.NotContains(t, task.Properties, "name")
	require.Contains(t, s.Defs["WorkflowNode"].Properties, "endpoint")
}
