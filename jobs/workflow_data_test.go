package jobs

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// The data of workflow runs through the real River workers and real
// receivers: a node's output from its JSON answer (response mode) or its
// completion (callback mode), none (said in its timeline) for an answer
// that is not JSON, empty or too large; a run's inputs.

// TestWorkflowNodeOutputs: each node's output is what its receiver
// answered, when that is a JSON value of at most 64 KiB, or what its
// completion said; the run and the executions return it.
func TestWorkflowNodeOutputs(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	h.sweeper(h.deliveries, metrics.New(nil))
	ex := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{})
	json200 := response{
		Status: http.StatusOK, Header: map[string]string{"Content-Type": "application/json"},
		Body: `{"rows": 7, "file": "a.csv"}`,
	}
	big := fmt.Sprintf(`{"blob": %q}`, strings.Repeat("x", service.OutputMax))
	recv := map[string]*script{
		"json":  newScript(t, json200),
		"text":  newScript(t, response{Status: http.StatusOK, Body: "ok"}),
		"big":   newScript(t, response{Status: http.StatusOK, Body: big}),
		"empty": newScript(t, response{Status: http.StatusNoContent}),
		"cb":    newScript(t, response{Status: http.StatusAccepted}),
	}
	report := newScript(t, json200)
	var nodes []service.WorkflowNodeInput
	for _, key := range []string{"json", "text", "big", "empty", "cb"} {
		n := service.WorkflowNodeInput{Key: key, EndpointID: h.endpoint(recv[key].srv.URL, nil).ID}
		if key == "cb" {
			n.Completion = service.Completion{Mode: service.CompletionCallback, Timeout: time.Minute}
		}
		nodes = append(nodes, n)
	}
	nodes = append(nodes, service.WorkflowNodeInput{
		Key: "report", EndpointID: h.endpoint(report.srv.URL, nil).ID,
		DependsOn: []string{"json", "text", "big", "empty", "cb"},
	})
	w, err := wf.Create(t.Context(), h.tenant, service.WorkflowInput{
		Name: h.name("wf"), MaxActiveRuns: 1, Nodes: nodes,
		Inputs: service.Inputs{"day": json.RawMessage(`"2026-12-01"`), "n": json.RawMessage(`1`)},
	})
	require.NoError(t, err)
	r, err := wf.TriggerWith(t.Context(), h.tenant, w.ID, service.WorkflowTrigger{Inputs: service.Inputs{"n": json.RawMessage(`2`)}})
	require.NoError(t, err)
	require.JSONEq(t, `2`, string(r.Inputs["n"]))
	require.JSONEq(t, `"2026-12-01"`, string(r.Inputs["day"]))

	for _, key := range []string{"json", "text", "big", "empty"} {
		recv[key].next(t)
	}
	hit := recv["cb"].next(t)
	cbID := hit.Header.Get("Idempotency-Key")
	_, grant := h.grantOf(hit)
	h.waitEvent(cbID, service.EventAccepted)
	_, err = h.deliveries.Complete(t.Context(), h.tenant, cbID, grant, service.CompletionInput{
		Status: service.ExecSucceeded, Output: json.RawMessage(`{"done": true}`),
	})
	require.NoError(t, err)
	report.next(t)
	run, _ := waitRun(t, h, wf, r.ID, service.RunSucceeded)
	require.JSONEq(t, `{"day": "2026-12-01", "n": 2}`, mustJSON(t, run.Inputs), "the run keeps its inputs")

	outputs, execs := map[string]string{}, map[string]string{}
	for _, n := range run.Nodes {
		outputs[n.Key], execs[n.Key] = string(n.Output), n.ExecutionID
	}
	require.JSONEq(t, `{"rows": 7, "file": "a.csv"}`, outputs["json"], "a JSON answer is the node's output")
	require.JSONEq(t, `{"done": true}`, outputs["cb"], "a completion's output is the node's output")
	require.JSONEq(t, `{"rows": 7, "file": "a.csv"}`, outputs["report"])
	for _, key := range []string{"text", "big", "empty"} {
		require.Empty(t, outputs[key], "node %s has no output", key)
	}

	// The executions return the same, and the timeline says why not.
	for key, want := range map[string]string{"json": `{"rows": 7, "file": "a.csv"}`, "cb": `{"done": true}`} {
		x, err := ex.Get(t.Context(), h.tenant, execs[key])
		require.NoError(t, err)
		require.JSONEq(t, want, string(x.Output), key)
		require.Zero(t, countEvents(h.events(execs[key]), service.EventNoOutput), key)
	}
	for key, why := range map[string]string{
		"text": "the response body is not JSON",
		"big":  "the response body is larger than 65536 bytes", "empty": "the response body is empty",
	} {
		x, err := ex.Get(t.Context(), h.tenant, execs[key])
		require.NoError(t, err)
		require.Equal(t, service.ExecSucceeded, x.State, "no output is no failure")
		require.Nil(t, x.Output, key)
		var got []string
		for _, ev := range h.events(execs[key]) {
			if ev.Type == service.EventNoOutput {
				got = append(got, *ev.Message)
			}
		}
		require.Equal(t, []string{why}, got, key)
	}

	// Another tenant sees none of it.
	outs, err := db.GetRunOutputs(t.Context(), h.pool, "other", r.ID)
	require.NoError(t, err)
	require.Empty(t, outs)
	_, err = ex.Get(t.Context(), "other", execs["json"])
	require.ErrorIs(t, err, service.ErrNotFound)
}

// TestPlainTaskHasNoOutput: a task's delivery (not a workflow node's)
// keeps only its response excerpt: a JSON answer is no output, and
// nothing is written for it.
func TestPlainTaskHasNoOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ex := service.NewExecutions(h.pool, h.enq, service.ExecutionsConfig{})
	recv := newScript(t, response{Status: http.StatusOK, Body: `{"rows": 7}`})
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, nil)
	id := h.fire(task, fireOpts{})
	h.waitState(id, service.ExecSucceeded)
	x, err := ex.Get(t.Context(), h.tenant, id)
	require.NoError(t, err)
	require.Nil(t, x.Output)
	require.Zero(t, countEvents(h.events(id), service.EventNoOutput))
	var n int
	require.NoError(t, h.pool.QueryRow(t.Context(), `SELECT count(*) FROM execution_outputs`).Scan(&n))
	require.Zero(t, n)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
