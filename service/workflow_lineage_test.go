package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// lineageOf returns each node's lineage in run, as JSON ("" for none).
func (f *wfFixture) lineageOf(t *testing.T, tenant, runID string) map[string]string {
	t.Helper()
	r, err := f.wf.GetRun(context.Background(), tenant, runID)
	require.NoError(t, err)
	out := map[string]string{}
	for _, n := range r.Nodes {
		out[n.Key] = ""
		if n.RenderedFrom != nil {
			b, err := json.Marshal(n.RenderedFrom)
			require.NoError(t, err)
			out[n.Key] = string(b)
		}
	}
	return out
}

// lineageWorkflow is extract → transform → load: extract sends its
// payload as is; transform's payload reads an input and extract's output;
// load's run_if reads an input and its payload transform's output (and
// extract's status).
func (f *wfFixture) lineageWorkflow(t *testing.T) service.Workflow {
	t.Helper()
	transform := f.node("transform", "extract")
	transform.PayloadTemplate = true
	transform.Payload = []byte(`{"day": "{{ .inputs.date }}", "rows": "{{ .nodes.extract.output.rows }}", "at": "{{ .business_date }}"}`)
	load := f.node("load", "transform")
	load.RunIf = `{{ ne .inputs.mode "dry" }}`
	load.PayloadTemplate = true
	load.Payload = []byte(`{"n": "{{ .nodes.transform.output.n }}", "from": "{{ .nodes.extract.status }}"}`)
	w, err := f.wf.Create(context.Background(), f.tenant, service.WorkflowInput{
		Name: "lineage", MaxActiveRuns: 10, Inputs: inputsOf("date", `"2026-12-01"`, "mode", `"full"`),
		Nodes: []service.WorkflowNodeInput{f.node("extract"), transform, load},
	})
	require.NoError(t, err)
	return w
}

// TestWorkflowRunLineage: each templated node keeps what it was rendered
// from — the inputs its templates name and the upstream outputs they read,
// as they were when it rendered — and an untemplated node keeps nothing.
// A node its run_if skipped keeps what its run_if read (its payload never
// rendered).
func TestWorkflowRunLineage(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.lineageWorkflow(t)

	r, err := f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("date", `"2026-12-03"`)})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"extract": "", "transform": "", "load": ""}, f.lineageOf(t, f.tenant, r.ID))

	f.deliverWith(t, r.ID, "extract", service.Outcome{Output: json.RawMessage(`{"rows": [1, 2, 3], "file": "x.csv"}`)})
	got := f.lineageOf(t, f.tenant, r.ID)
	require.Empty(t, got["extract"], "an untemplated node has no lineage")
	require.JSONEq(t, `{"inputs": ["date"], "nodes": {"extract": {"status": "succeeded", "output": {"rows": [1, 2, 3], "file": "x.csv"}}}}`, got["transform"])
	require.Empty(t, got["load"], "not rendered yet")
	d := f.deliverWith(t, r.ID, "transform", service.Outcome{Output: json.RawMessage(`{"n": 5}`)})
	require.JSONEq(t, `{"day": "2026-12-03", "rows": [1, 2, 3], "at": "`+r.ScheduledFor.Format("2006-01-02")+`"}`, string(d.Payload))

	got = f.lineageOf(t, f.tenant, r.ID)
	require.Empty(t, got["extract"])
	require.JSONEq(t, `{"inputs": ["date"], "nodes": {"extract": {"status": "succeeded", "output": {"rows": [1, 2, 3], "file": "x.csv"}}}}`, got["transform"])
	require.JSONEq(t, `{"inputs": ["mode"], "nodes": {"extract": {"status": "succeeded", "output": {"rows": [1, 2, 3], "file": "x.csv"}}, "transform": {"status": "succeeded", "output": {"n": 5}}}}`, got["load"])
	f.deliverWith(t, r.ID, "load", service.Outcome{})
	run, err := f.wf.GetRun(ctx, f.tenant, r.ID)
	require.NoError(t, err)
	require.Equal(t, service.RunSucceeded, run.State)

	// A dry run: load's run_if skips it; its lineage is its run_if's.
	dry, err := f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("mode", `"dry"`)})
	require.NoError(t, err)
	f.deliverWith(t, dry.ID, "extract", service.Outcome{Output: json.RawMessage(`{"rows": []}`)})
	f.deliverWith(t, dry.ID, "transform", service.Outcome{})
	states, state := f.nodes(t, dry.ID)
	require.Equal(t, service.RunSucceeded, state)
	require.Equal(t, service.NodeSkipped, states["load"])
	got = f.lineageOf(t, f.tenant, dry.ID)
	require.JSONEq(t, `{"inputs": ["date"], "nodes": {"extract": {"status": "succeeded", "output": {"rows": []}}}}`, got["transform"])
	require.JSONEq(t, `{"inputs": ["mode"], "nodes": {}}`, got["load"])
}

// TestWorkflowRunLineageTenantIsolation: another tenant reads neither the
// run nor its lineage, even with the same workflow shape of its own.
func TestWorkflowRunLineageTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.lineageWorkflow(t)
	r := f.trigger(t, w)
	f.deliverWith(t, r.ID, "extract", service.Outcome{Output: json.RawMessage(`{"rows": [9], "secret": "s3"}`)})
	require.JSONEq(t, `{"inputs": ["date"], "nodes": {"extract": {"status": "succeeded", "output": {"rows": [9], "secret": "s3"}}}}`, f.lineageOf(t, f.tenant, r.ID)["transform"])

	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "other"))
	_, err := f.wf.GetRun(ctx, "other", r.ID)
	require.ErrorIs(t, err, service.ErrNotFound)
	// The other tenant's own run of a workflow like it sees its own data only.
	other := &wfFixture{fixture: &fixture{pool: f.pool, delivery: f.delivery, enq: f.enq, tenant: "other"}, wf: f.wf, del: f.del, ex: f.ex}
	ep, err := service.NewEndpoints(f.pool).Create(ctx, "other", service.EndpointInput{Name: "e", URL: "https://example.com/hook"})
	require.NoError(t, err)
	other.endpoint = ep.ID
	f.exec(t, `UPDATE endpoints SET enabled = true`)
	ow := other.lineageWorkflow(t)
	or := other.trigger(t, ow)
	other.deliverWith(t, or.ID, "extract", service.Outcome{Output: json.RawMessage(`{"rows": [1]}`)})
	require.JSONEq(t, `{"inputs": ["date"], "nodes": {"extract": {"status": "succeeded", "output": {"rows": [1]}}}}`, other.lineageOf(t, "other", or.ID)["transform"])
	require.JSONEq(t, `{"inputs": ["date"], "nodes": {"extract": {"status": "succeeded", "output": {"rows": [9], "secret": "s3"}}}}`, f.lineageOf(t, f.tenant, r.ID)["transform"])
}

// TestWorkflowRunLineageBounded: a node reading upstream outputs larger
// together than service.RenderedFromMax keeps those that fit and names the
// others in omitted, with their states.
func TestWorkflowRunLineageBounded(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	join := f.node("join", "a", "b", "c")
	join.PayloadTemplate = true
	join.Payload = []byte(`{"a": "{{ .nodes.a.status }}", "b": "{{ .nodes.b.status }}", "c": "{{ .nodes.c.status }}"}`)
	w := f.create(t, "bounded", f.node("a"), f.node("b"), f.node("c"), join)
	r := f.trigger(t, w)
	big := func(ch string) json.RawMessage {
		return json.RawMessage(`{"blob": "` + strings.Repeat(ch, service.OutputMax-1000) + `"}`)
	}
	for _, k := range []string{"a", "b", "c"} {
		f.deliverWith(t, r.ID, k, service.Outcome{Output: big(k)})
	}
	run, err := f.wf.GetRun(context.Background(), f.tenant, r.ID)
	require.NoError(t, err)
	rf := run.Nodes[3].RenderedFrom
	require.NotNil(t, rf)
	require.Equal(t, []string{"c"}, rf.Omitted)
	require.Len(t, rf.Nodes, 3)
	require.Equal(t, service.RenderedNode{Status: service.ExecSucceeded}, rf.Nodes["c"])
	require.JSONEq(t, string(big("a")), string(rf.Nodes["a"].Output), "a's output kept whole")
	require.JSONEq(t, string(big("b")), string(rf.Nodes["b"].Output), "b's output kept whole")
	b, err := json.Marshal(rf)
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), service.RenderedFromMax)
}
