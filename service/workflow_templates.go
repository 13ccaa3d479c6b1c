package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/template"
	"github.com/axhq/ax/service/workflow"
)

// runTemplates renders a run's node templates (payloads and run_if) from
// its data, read once per advance and only when a node to fire has one:
// plain workflows pay nothing.
type runTemplates struct {
	run    db.WorkflowRun
	g      *graph
	loc    *time.Location
	inputs map[string]json.RawMessage
	nodes  map[string]template.Node
	event  *template.Event // the event that started the run (nil: none)
}

// loadTemplates reads run's data (runData) and its workflow's zone.
func loadTemplates(ctx context.Context, tx db.Tx, run db.WorkflowRun, g *graph, stored map[string]string,
	execs map[string][]db.RunExecution,
) (*runTemplates, error) {
	d, err := runData(ctx, tx, run, g, stored, execs)
	if err != nil {
		return nil, err
	}
	t := &runTemplates{run: run, g: g, inputs: d.Inputs, nodes: make(map[string]template.Node, len(d.Nodes))}
	for k, n := range d.Nodes {
		t.nodes[k] = template.Node{Status: n.Status, Output: n.Output}
	}
	if run.EventID != nil {
		// Gone past its retention: the run's templates read no event.
		ev, err := db.GetEvent(ctx, tx, run.TenantID, *run.EventID)
		switch err = storeError(err, "load the run's event"); {
		case err == nil:
			t.event = &template.Event{Name: ev.Name, Key: zeroIfNil(ev.Key), Payload: ev.Payload}
		case !errors.Is(err, ErrNotFound):
			return nil, err
		}
	}
	w, err := db.GetWorkflow(ctx, tx, run.TenantID, run.WorkflowID, false)
	if err != nil {
		return nil, storeError(err, "load workflow")
	}
	t.loc = workflow.Zone(w.Schedule)
	return t, nil
}

// data is the template data of node n's execution id (shard of count).
func (t *runTemplates) data(n storedNode, id, trigger string, shard, count int) template.Data {
	return template.Data{
		ScheduledFor: t.run.ScheduledFor, Location: t.loc, ExecutionID: id, TaskName: n.Key,
		Round: max(int(t.run.Round), 1), ShardIndex: shard, ShardCount: max(count, 1), Trigger: trigger,
		WorkflowID: t.run.WorkflowID, WorkflowRunID: t.run.ID, Inputs: t.inputs, Nodes: t.nodes, Event: t.event,
	}
}

// runIf renders node n's run_if: fire is its verdict; a reason (fire
// false) says why the node fails instead (anything but true or false).
func (t *runTemplates) runIf(n storedNode) (fire, skip bool, reason string) {
	doc, _ := json.Marshal(n.RunIf)
	tpl, err := template.Parse(doc, workflow.ScopeOf(t.g, n))
	if err != nil {
		return false, false, "run_if does not parse: " + err.Error()
	}
	out, err := tpl.Render(t.data(n, "", TriggerDependency, 0, 1), RunIfMax)
	if err != nil {
		return false, false, "run_if: " + err.Error()
	}
	return workflow.RunIfVerdict(out)
}

// payload renders node n's payload for one of its executions; nil, nil
// for a node without a payload template.
func (t *runTemplates) payload(n storedNode, id, trigger string, shard, count int) ([]byte, error) {
	if t == nil || !n.PayloadTemplate {
		return nil, nil
	}
	tpl, err := template.Parse(n.Payload, workflow.ScopeOf(t.g, n))
	if err != nil {
		return nil, fmt.Errorf("the payload's template does not parse: %w", err)
	}
	return tpl.Render(t.data(n, id, trigger, shard, count), RenderedPayloadMax)
}
