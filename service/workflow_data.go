package service

import (
	"context"
	"encoding/json"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/template"
	"github.com/axhq/ax/service/workflow"
)

// The data of a workflow run, its inputs and its nodes' outputs, and the
// scope a node's templates are checked against: service/workflow.

// Input limits, the run_if bound and the event of an output not kept
// (service/workflow).
const (
	InputsMax     = workflow.InputsMax
	InputNamesMax = workflow.InputNamesMax
	EventNoOutput = workflow.EventNoOutput
	RunIfMax      = workflow.RunIfMax
)

type (
	// Inputs are named JSON values: a workflow's defaults, a trigger's
	// overrides, a run's inputs.
	Inputs = workflow.Inputs
	// NodeData is what a run shows of one of its nodes downstream.
	NodeData = workflow.NodeData
	// RunData is what a run's nodes may be made from.
	RunData = workflow.RunData
)

// ResponseOutput is the output of a workflow node's 2xx response in
// response mode (workflow.ResponseOutput).
func ResponseOutput(body []byte, truncated bool) (json.RawMessage, string) {
	return workflow.ResponseOutput(body, truncated)
}

// runData reads the data of run (version graph g) in q: its inputs, and
// each node's state from its stored state and its executions (stored and
// execs, as advanceLocked and getRun read them) with its output. It costs
// one query (db.GetRunOutputs).
func runData(ctx context.Context, q db.Querier, run db.WorkflowRun, g *graph, stored map[string]string,
	execs map[string][]db.RunExecution,
) (RunData, error) {
	outs, err := db.GetRunOutputs(ctx, q, run.TenantID, run.ID)
	if err != nil {
		return RunData{}, storeError(err, "load run outputs")
	}
	return runDataOf(run, g, stored, execs, outs)
}

// runDataOf is runData from the run's outputs read (db.GetRunOutputs).
func runDataOf(run db.WorkflowRun, g *graph, stored map[string]string, execs map[string][]db.RunExecution,
	outs []db.NodeOutput,
) (RunData, error) {
	inputs, err := workflow.DecodeInputs(run.Inputs)
	if err != nil {
		return RunData{}, err
	}
	d := RunData{Inputs: inputs, Nodes: make(map[string]NodeData, len(g.Nodes))}
	for _, n := range g.Nodes {
		st, ok := stored[n.Key]
		if !ok {
			st = NodeWaiting
		}
		d.Nodes[n.Key] = NodeData{Status: workflow.NodeState(st, execs[n.Key])}
	}
	for _, o := range outs {
		if nd, ok := d.Nodes[o.Node]; ok && o.Output != nil {
			nd.Output = json.RawMessage(*o.Output)
			d.Nodes[o.Node] = nd
		}
	}
	return d, nil
}

// nodeScope is the template data node n of workflow in may read: the
// workflow's inputs and its upstream nodes, direct or not; and .event…
// for the runs of an event-scheduled workflow.
func nodeScope(n WorkflowNodeInput, in WorkflowInput) func() template.Scope {
	return func() template.Scope {
		deps := make(map[string][]string, len(in.Nodes))
		for _, m := range in.Nodes {
			deps[m.Key] = m.DependsOn
		}
		event := in.Schedule != nil && in.Schedule.Type == schedule.Event
		return workflow.NodeScope(n.DependsOn, deps, in.Inputs, event)
	}
}
