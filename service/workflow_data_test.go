package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/schedule"
)

// requireFields asserts that err is a *ValidationError naming exactly
// fields.
func requireFields(t *testing.T, err error, fields ...string) {
	t.Helper()
	var ve *service.ValidationError
	require.ErrorAs(t, err, &ve)
	var got []string
	for _, f := range ve.Fields {
		got = append(got, f.Field)
	}
	require.ElementsMatch(t, fields, got, "%v", err)
}

func inputsOf(kv ...string) service.Inputs {
	out := service.Inputs{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = json.RawMessage(kv[i+1])
	}
	return out
}

// requireInputs compares inputs as JSON documents.
func requireInputs(t *testing.T, want, got service.Inputs) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}

// TestWorkflowInputs: a run's inputs are the workflow's defaults
// overridden by its trigger; an undeclared name is a 422 naming it; a
// scheduled run gets the defaults; a change of the inputs is a new
// version, and runs keep the inputs they started with.
func TestWorkflowInputs(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	defaults := inputsOf("business_date", `"2026-12-01"`, "limit", `10`, "opts", `{"dry": false}`)
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "with-inputs", MaxActiveRuns: 100,
		Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *", Timezone: "UTC"},
		Nodes:    []service.WorkflowNodeInput{f.node("a")}, Inputs: defaults,
	})
	require.NoError(t, err)
	requireInputs(t, defaults, w.Inputs)
	got, err := f.wf.Get(ctx, f.tenant, w.ID)
	require.NoError(t, err)
	requireInputs(t, defaults, got.Inputs)

	// A trigger without inputs: the defaults.
	r := f.trigger(t, w)
	requireInputs(t, defaults, r.Inputs)

	// Overrides replace the named inputs only.
	r2, err := f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("limit", `5`, "opts", `null`)})
	require.NoError(t, err)
	want := inputsOf("business_date", `"2026-12-01"`, "limit", `5`, "opts", `null`)
	requireInputs(t, want, r2.Inputs)
	back, err := f.wf.GetRun(ctx, f.tenant, r2.ID)
	require.NoError(t, err)
	requireInputs(t, want, back.Inputs)
	runs, _, err := f.wf.ListRuns(ctx, f.tenant, w.ID, service.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, runs, 2)
	for _, run := range runs {
		if run.ID == r2.ID {
			requireInputs(t, want, run.Inputs)
		} else {
			requireInputs(t, defaults, run.Inputs)
		}
	}

	// An undeclared name: 422 naming it, and no run.
	before := f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID)
	_, err = f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("limit", `1`, "foo", `1`)})
	requireFields(t, err, "inputs.foo")
	require.Contains(t, err.Error(), "business_date, limit, opts", "the error lists the declared inputs")
	// Past the size bound: 422 on inputs.
	_, err = f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{
		Inputs: inputsOf("business_date", `"`+strings.Repeat("x", service.InputsMax)+`"`),
	})
	requireFields(t, err, "inputs")
	require.Equal(t, before, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1`, w.ID))

	// Scheduled runs get the defaults.
	_, err = f.scheduler(service.SchedulerConfig{LookAhead: 2 * time.Hour}).Tick(ctx)
	require.NoError(t, err)
	require.Positive(t, f.count(t, `SELECT count(*) FROM workflow_runs WHERE workflow_id = $1 AND trigger = 'schedule'`, w.ID))
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflow_runs r JOIN workflow_versions v ON v.workflow_id = r.workflow_id
		AND v.version = r.version WHERE r.workflow_id = $1 AND r.trigger = 'schedule' AND r.inputs <> v.inputs`, w.ID))

	// A change of the inputs is a new version; earlier runs keep theirs,
	// new runs get the new defaults; a change of anything else is not.
	changed := inputsOf("business_date", `"2026-12-02"`, "limit", `10`)
	w2, err := f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error {
		in.Inputs = changed
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, w.Version+1, w2.Version)
	requireInputs(t, changed, w2.Inputs)
	back, err = f.wf.GetRun(ctx, f.tenant, r2.ID)
	require.NoError(t, err)
	requireInputs(t, want, back.Inputs)
	r3 := f.trigger(t, w2)
	requireInputs(t, changed, r3.Inputs)
	_, err = f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("opts", `{}`)})
	requireFields(t, err, "inputs.opts") // opts is no longer declared
	w3, err := f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error {
		in.MaxActiveRuns = 50
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, w2.Version, w3.Version, "the inputs did not change: no new version")
}

// TestWorkflowInputsValidation: names usable in a template, values that
// are JSON, and the bounds.
func TestWorkflowInputsValidation(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	create := func(in service.Inputs) error {
		_, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{Name: "v", Nodes: []service.WorkflowNodeInput{f.node("a")}, Inputs: in})
		return err
	}
	requireFields(t, create(inputsOf("1st", `1`, "has-dash", `1`, "ok_name", `1`)), "inputs.1st", "inputs.has-dash")
	requireFields(t, create(inputsOf("bad", `{"a":`)), "inputs.bad")
	requireFields(t, create(inputsOf("nul", `"a\u0000b"`)), "inputs.nul")
	requireFields(t, create(inputsOf("big", `"`+strings.Repeat("x", service.InputsMax)+`"`)), "inputs")
	many := service.Inputs{}
	for i := range service.InputNamesMax + 1 {
		many[fmt.Sprintf("n%d", i)] = json.RawMessage(`1`)
	}
	requireFields(t, create(many), "inputs")
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflows`))
}

// TestWorkflowBackfillInputs: a workflow backfill's inputs override the
// defaults of each of its runs; an undeclared name is a 422; a task
// backfill takes none.
func TestWorkflowBackfillInputs(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	bf := service.NewBackfills(f.pool, f.enq, f.tasks)
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "bf-inputs", MaxActiveRuns: 10,
		Schedule: &schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *", Timezone: "UTC"},
		Nodes:    []service.WorkflowNodeInput{f.node("a")}, Inputs: inputsOf("mode", `"daily"`, "limit", `10`),
	})
	require.NoError(t, err)
	from := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	to := from.Add(3 * time.Hour)

	_, _, err = bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{From: from, To: to, Inputs: inputsOf("foo", `1`)})
	requireFields(t, err, "inputs.foo")
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "t", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *", Timezone: "UTC"},
	})
	require.NoError(t, err)
	_, _, err = bf.Create(ctx, f.tenant, task.ID, service.BackfillInput{From: from, To: to, Inputs: inputsOf("mode", `1`)})
	requireFields(t, err, "inputs")

	b, _, err := bf.CreateForWorkflow(ctx, f.tenant, w.ID, service.BackfillInput{
		From: from, To: to,
		Inputs: inputsOf("mode", `"backfill"`),
	})
	require.NoError(t, err)
	requireInputs(t, inputsOf("mode", `"backfill"`), b.Inputs)
	got, err := bf.Get(ctx, f.tenant, b.ID)
	require.NoError(t, err)
	requireInputs(t, inputsOf("mode", `"backfill"`), got.Inputs)
	_, err = bf.Pump(ctx)
	require.NoError(t, err)
	ids := f.backfillRuns(t, b.ID, "true")
	require.Len(t, ids, 3)
	for _, id := range ids {
		r, err := f.wf.GetRun(ctx, f.tenant, id)
		require.NoError(t, err)
		requireInputs(t, inputsOf("mode", `"backfill"`, "limit", `10`), r.Inputs)
	}
}

// TestWorkflowDataTenantIsolation: another tenant sees neither the run,
// its inputs nor its nodes' outputs, and cannot trigger the workflow.
func TestWorkflowDataTenantIsolation(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "other"))
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "mine", MaxActiveRuns: 10,
		Nodes: []service.WorkflowNodeInput{f.node("a")}, Inputs: inputsOf("secret", `"s3"`),
	})
	require.NoError(t, err)
	r, err := f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("secret", `"s4"`)})
	require.NoError(t, err)
	d := f.deliverWith(t, r.ID, "a", service.Outcome{Output: json.RawMessage(`{"rows":3}`)})
	mine, err := f.ex.Get(ctx, f.tenant, d.ExecutionID)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows":3}`, string(mine.Output))

	_, err = f.wf.GetRun(ctx, "other", r.ID)
	require.ErrorIs(t, err, service.ErrNotFound)
	_, err = f.ex.Get(ctx, "other", d.ExecutionID)
	require.ErrorIs(t, err, service.ErrNotFound)
	_, err = f.wf.TriggerWith(ctx, "other", w.ID, service.WorkflowTrigger{Inputs: inputsOf("secret", `"x"`)})
	require.ErrorIs(t, err, service.ErrNotFound)
	_, _, err = f.wf.ListRuns(ctx, "other", w.ID, service.Page{Limit: 10})
	require.ErrorIs(t, err, service.ErrNotFound)
}

// TestWorkflowNodeOutputRecorded: a node's success with an output keeps
// it (the run and the execution return it); a success without one says
// why in the node's timeline.
func TestWorkflowNodeOutputRecorded(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.create(t, "outputs", f.node("a"), f.node("b", "a"))
	r := f.trigger(t, w)
	f.deliverWith(t, r.ID, "a", service.Outcome{Output: json.RawMessage(`[1,2,3]`)})
	f.deliverWith(t, r.ID, "b", service.Outcome{NoOutput: "the response body is not JSON"})
	run, err := f.wf.GetRun(ctx, f.tenant, r.ID)
	require.NoError(t, err)
	require.Equal(t, service.RunSucceeded, run.State)
	outputs := map[string]string{}
	for _, n := range run.Nodes {
		outputs[n.Key] = string(n.Output)
	}
	require.Equal(t, map[string]string{"a": "[1, 2, 3]", "b": ""}, outputs)
	b, err := f.ex.Get(ctx, f.tenant, f.execsOf(t, r.ID, "b")[0])
	require.NoError(t, err)
	require.Nil(t, b.Output)
	var reasons []string
	for _, ev := range b.Events {
		if ev.Type == service.EventNoOutput {
			reasons = append(reasons, ev.Message)
		}
	}
	require.Equal(t, []string{"the response body is not JSON"}, reasons)
}

// deliverWith makes one successful attempt of a node's execution (shard
// 0) with out's output fields, as the deliver worker does.
func (f *wfFixture) deliverWith(t *testing.T, runID, key string, out service.Outcome) service.Delivery {
	t.Helper()
	ctx := context.Background()
	id := f.execsOf(t, runID, key)[0]
	lease := f.count(t, `SELECT lease_attempt + 1 FROM executions WHERE id = $1`, id)
	d, err := f.del.Begin(ctx, f.tenant, id, lease)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action, "node %s: %s", key, d.Reason)
	out.Kind, out.StatusCode, out.WorkflowRun = service.OutcomeSucceeded, 200, true
	_, err = f.del.Finish(ctx, f.tenant, id, d.Lease, out)
	require.NoError(t, err)
	return d
}

// TestWorkflowInputsAudit: the audit log records a change of the inputs
// and a trigger's overrides, each value as its size and hash (as a
// payload is: a value may be a credential), never the value.
func TestWorkflowInputsAudit(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{Subject: "alice", RequestID: "req-1"})
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "audited", MaxActiveRuns: 10,
		Nodes: []service.WorkflowNodeInput{f.node("a")}, Inputs: inputsOf("region", `"s3cr3t"`),
	})
	require.NoError(t, err)
	_, err = f.wf.Update(ctx, f.tenant, w.ID, func(in *service.WorkflowInput) error {
		in.Inputs = inputsOf("region", `"n3w"`)
		return nil
	})
	require.NoError(t, err)
	_, err = f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("region", `"0ther"`)})
	require.NoError(t, err)
	rows, err := f.pool.Query(ctx, `SELECT action, changes::text FROM audit_log WHERE resource_id = $1 ORDER BY at, id`, w.ID)
	require.NoError(t, err)
	changes := map[string]string{}
	for rows.Next() {
		var action, c string
		require.NoError(t, rows.Scan(&action, &c))
		changes[action] = c
	}
	require.NoError(t, rows.Err())
	require.Len(t, changes, 3)
	for action, c := range changes {
		require.Contains(t, c, `"inputs"`, action)
		require.Contains(t, c, `"sha256"`, action)
		for _, secret := range []string{"s3cr3t", "n3w", "0ther"} {
			require.NotContains(t, c, secret, action)
		}
	}
}

// TestUpstreamOutputVisibleWhenDownstreamFires: the output of a node (its
// JSON answer, or its completion's) is stored before its success fires
// the nodes downstream, in the same transaction, so the transaction that
// creates their executions reads it (what node templates render from).
// A trigger of this test's own database records what the insert of each
// downstream execution sees.
func TestUpstreamOutputVisibleWhenDownstreamFires(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	f.exec(t, `CREATE TABLE seen (node text, outputs text)`)
	f.exec(t, `CREATE FUNCTION record_seen() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO seen SELECT NEW.node, string_agg(o.node || '=' || coalesce(o.output::text, '-'), ',' ORDER BY o.node)
			FROM (SELECT e.node, coalesce(x.output, (SELECT c.output FROM callback_attempts c WHERE c.execution_id = e.id
				ORDER BY c.attempt DESC LIMIT 1)) AS output
				FROM executions e LEFT JOIN execution_outputs x ON x.execution_id = e.id
				WHERE e.workflow_run_id = NEW.workflow_run_id AND e.node <> NEW.node) o;
			RETURN NEW;
		END $$`)
	f.exec(t, `CREATE TRIGGER record_seen AFTER INSERT ON executions FOR EACH ROW WHEN (NEW.node IN ('b', 'c'))
		EXECUTE FUNCTION record_seen()`)

	cb := f.node("b", "a")
	cb.Completion = service.Completion{Mode: service.CompletionCallback, Timeout: time.Minute}
	w := f.create(t, "visible", f.node("a"), cb, f.node("c", "b"))
	r := f.trigger(t, w)
	f.deliverWith(t, r.ID, "a", service.Outcome{Output: json.RawMessage(`{"rows": 7}`)})

	// b in callback mode: sent, accepted, completed with an output.
	id := f.execsOf(t, r.ID, "b")[0]
	d, err := f.del.Begin(ctx, f.tenant, id, f.count(t, `SELECT lease_attempt + 1 FROM executions WHERE id = $1`, id))
	require.NoError(t, err)
	_, err = f.del.PrepareCallback(ctx, d)
	require.NoError(t, err)
	_, err = f.del.Accept(ctx, d, 202, time.Millisecond)
	require.NoError(t, err)
	_, err = f.del.Complete(ctx, f.tenant, id, nil, service.CompletionInput{
		Status: service.ExecSucceeded,
		Output: json.RawMessage(`{"file": "x.csv"}`),
	})
	require.NoError(t, err)

	rows, err := f.pool.Query(ctx, `SELECT node, outputs FROM seen ORDER BY node`)
	require.NoError(t, err)
	seen := map[string]string{}
	for rows.Next() {
		var node, outputs string
		require.NoError(t, rows.Scan(&node, &outputs))
		seen[node] = outputs
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{
		"b": `a={"rows": 7}`,
		"c": `a={"rows": 7},b={"file": "x.csv"}`,
	}, seen)
}

// TestWorkflowNodeTemplatesValidation: a node's payload template and
// run_if are checked against what the node may read — the workflow's
// inputs and its upstream nodes, direct or not — and refused by field.
func TestWorkflowNodeTemplatesValidation(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	n := 0
	create := func(change func(b, c *service.WorkflowNodeInput)) error {
		a, b, c := f.node("a"), f.node("b", "a"), f.node("c", "b")
		change(&b, &c)
		n++
		_, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
			Name: fmt.Sprintf("v%d", n), Nodes: []service.WorkflowNodeInput{a, b, c}, Inputs: inputsOf("day", `"2026-12-01"`),
		})
		return err
	}
	require.NoError(t, create(func(_, c *service.WorkflowNodeInput) {
		c.PayloadTemplate = true
		c.Payload = []byte(`{"rows": "{{ .nodes.a.output.rows }}", "day": "{{ .inputs.day }}", "b": "{{ .nodes.b.status }}"}`)
		c.RunIf = `{{ eq .nodes.a.status "succeeded" }}`
	}), "an upstream of an upstream, and the inputs, may be read")
	requireFields(t, create(func(b, _ *service.WorkflowNodeInput) {
		b.PayloadTemplate = true
		b.Payload = []byte(`{"rows": "{{ .nodes.c.output.rows }}", "x": "{{ .inputs.nope }}", "y": "{{ .bad"}`)
	}), "nodes[1].payload.rows", "nodes[1].payload.x", "nodes[1].payload.y")
	requireFields(t, create(func(b, _ *service.WorkflowNodeInput) { b.RunIf = `{{ .nodes.c.status }}` }), "nodes[1].run_if")
	requireFields(t, create(func(b, _ *service.WorkflowNodeInput) { b.RunIf = strings.Repeat("x", service.RunIfMax+1) }), "nodes[1].run_if")
	// Without payload_template the payload is sent as it is: nothing to check.
	require.NoError(t, create(func(b, _ *service.WorkflowNodeInput) { b.Payload = []byte(`{"x": "{{ .nodes.c }}"}`) }))
}
