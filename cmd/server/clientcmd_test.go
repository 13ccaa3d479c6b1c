package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClientCommands: ax tasks, executions and workflows as a table or
// the API's JSON; an error is the API's problem and a non-zero exit.
func TestClientCommands(t *testing.T) {
	t.Parallel()
	c := startClientServer(t).as("acme")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"e.yaml": endpointDoc, "t.yaml": tasksDoc, "c.json": calendarDoc, "w.yaml": workflowDoc})
	c.must("apply", "-f", dir)

	out := c.must("tasks", "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^NAME\s+STATE\s+SCHEDULE.TYPE`, lines[0])
	require.Regexp(t, `(?m)^invoices.daily\s+active\s+cron\s+0 2 \* \* \*`, out)
	require.Regexp(t, `(?m)^reminders\s+active\s+interval\s+-\s`, out)
	var list struct{ Items []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(c.must("tasks", "list", "-o", "json", "--name", "rem")), &list))
	require.Len(t, list.Items, 1)
	require.Equal(t, "reminders", list.Items[0]["name"])

	var task map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.must("tasks", "get", "reminders", "-o", "json")), &task))
	require.Equal(t, "reminders", task["name"])
	require.Equal(t, "task reminders paused\n", c.must("tasks", "pause", "reminders"))
	require.Equal(t, "paused", c.api(http.MethodGet, "/v1/tasks/"+task["id"].(string), nil, http.StatusOK)["state"])
	require.Equal(t, "task reminders resumed\n", c.must("tasks", "resume", task["id"].(string)))
	require.Equal(t, "active", c.api(http.MethodGet, "/v1/tasks/"+task["id"].(string), nil, http.StatusOK)["state"])

	// Executions: one that fails at once, one that hangs until cancelled.
	release := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(recv.Close)
	t.Cleanup(func() { close(release) })
	local := t.TempDir()
	writeFiles(t, local, map[string]string{"local.yaml": fmt.Sprintf(`kind: Endpoint
name: local
spec: {url: %q}
---
kind: Task
name: fails
spec: {endpoint: local, schedule: {type: interval, interval_seconds: 86400}, retry: {max_attempts: 1}, payload: {path: fail}}
---
kind: Endpoint
name: local-hang
spec: {url: %q, timeout_ms: 300000}
---
kind: Task
name: hangs
spec: {endpoint: local-hang, schedule: {type: interval, interval_seconds: 86400}, timeout_ms: 300000}
`, recv.URL+"/fail", recv.URL+"/hang")})
	c.must("apply", "-f", local)
	state := func(id string) string { // in Eventually's conditions: reports nothing itself
		out, _, err := c.ax("", "executions", "get", id, "-o", "json")
		var e struct{ State string }
		if err != nil || json.Unmarshal([]byte(out), &e) != nil {
			return ""
		}
		return e.State
	}
	var exec map[string]any
	require.NoError(t, json.Unmarshal([]byte(c.must("tasks", "trigger", "fails", "-o", "json")), &exec))
	failed := exec["id"].(string)
	require.Eventually(t, func() bool { return state(failed) == "failed" }, 30*time.Second, 50*time.Millisecond)
	require.Contains(t, c.must("executions", "list", "--task", "fails", "--state", "failed"), failed)
	require.NotContains(t, c.must("executions", "list", "--task", "hangs"), failed)
	require.Regexp(t, `^ID\s+STATE\s+TRIGGER\s+SCHEDULED_FOR\s+ATTEMPTS\s+LAST_STATUS_CODE\s+ERROR_CLASS\n$`,
		c.must("executions", "list", "--task", "fails", "--state", "succeeded"))
	require.Contains(t, c.must("executions", "get", failed), failed)
	var retried string
	require.Eventually(t, func() bool { // "still finishing" (409) until its delivery job has ended
		out, _, err := c.ax("", "executions", "retry", failed)
		retried = out
		return err == nil
	}, 30*time.Second, 50*time.Millisecond)
	require.Contains(t, retried, failed)

	require.NoError(t, json.Unmarshal([]byte(c.must("tasks", "trigger", "hangs", "-o", "json")), &exec))
	hanging := exec["id"].(string)
	require.Eventually(t, func() bool { return state(hanging) == "running" }, 30*time.Second, 50*time.Millisecond)
	_, _, err := c.ax("", "executions", "retry", hanging)
	require.ErrorContains(t, err, "409", "a running execution is not retried")
	require.Contains(t, c.must("executions", "cancel", hanging), hanging)
	require.Eventually(t, func() bool { return state(hanging) == "cancelled" }, 30*time.Second, 50*time.Millisecond)
	c.must("apply", "-f", dir, "--prune")

	_, _, err = c.ax("", "executions", "get", "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e")
	require.ErrorContains(t, err, "404 Not Found")
	_, _, err = c.ax("", "tasks", "get", "nope")
	require.ErrorContains(t, err, `no task named "nope"`)
	_, _, err = c.ax("", "tasks", "list", "-o", "yaml")
	require.ErrorContains(t, err, "give table or json")

	require.Regexp(t, `(?m)^month-end\s+active\s+1\s+0 6 1 \* \*`, c.must("workflows", "list"))
	require.Contains(t, c.must("workflows", "get", "month-end", "-o", "json"), `"key": "extract"`)
	require.Regexp(t, `(?m)^ID\s+STATE\s+TRIGGER`, c.must("workflows", "trigger", "month-end"))

	require.Equal(t, "task reminders deleted\n", c.must("tasks", "delete", "reminders"))
	require.Equal(t, []string{"invoices.daily"}, c.names("tasks"))

	// Where the API is, and who asks: flags, or the environment.
	bare := &axClient{t: t, env: map[string]string{}}
	_, _, err = bare.ax("", "tasks", "list")
	require.ErrorContains(t, err, "set AX_URL or give --url")
	_, _, err = bare.ax("", "tasks", "list", "--url", c.base)
	require.ErrorContains(t, err, "set AX_TOKEN or give --token")
	out, _, err = bare.ax("", "tasks", "list", "--url", c.base, "--token", c.env["AX_TOKEN"])
	require.NoError(t, err)
	require.Contains(t, out, "invoices.daily")
	_, _, err = bare.ax("", "tasks", "list", "--url", c.base, "--token", "nope")
	require.ErrorContains(t, err, "401")
}

// TestClientHelp: every client command has --help; completion scripts
// come with the command tree.
func TestClientHelp(t *testing.T) {
	t.Parallel()
	c := &axClient{t: t, env: map[string]string{}}
	for args, want := range map[string]string{
		"apply --help":                     "-f, --file",
		"export --help":                    "-o, --output",
		"tasks --help":                     "pause",
		"tasks list --help":                "--label",
		"tasks trigger --help":             "NAME|ID",
		"executions --help":                "retry",
		"executions list --help":           "--state",
		"workflows trigger --help":         "--url",
		"completion bash":                  "bash completion",
		"completion zsh":                   "compdef",
		"completion fish":                  "complete -c ax",
		"help apply":                       "ax.dev/managed-by",
		"apply --bogus":                    "unknown flag: --bogus",
		"apply":                            "-f PATH is required",
		"tasks list --url ftp://x -o json": "not an http(s) URL",
	} {
		out, _, err := c.ax("", strings.Fields(args)...)
		if err != nil {
			out = err.Error()
		}
		require.Contains(t, out, want, args)
	}
}
