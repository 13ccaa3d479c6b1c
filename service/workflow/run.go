package workflow

import (
	"encoding/json"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/dag"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/sla"
)

// RunNode is one node of a run.
type RunNode struct {
	Key   string
	State string
	// ExecutionID is the node's execution (shard 0's); empty before it fires.
	ExecutionID string
	Shards      int
	// ShardStates counts a sharded node's executions per state.
	ShardStates map[string]int
	// DependsOn and TriggerRule are the node's, in the run's version.
	DependsOn   []string
	TriggerRule string
	RuleMetAt   *time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	// Output is the node's output (its execution's, shard 0's when
	// sharded); nil: none.
	Output json.RawMessage
	// RenderedFrom is what its templates were rendered from (lineage);
	// nil for a node without templates, or before they rendered.
	RenderedFrom *RenderedFrom
	// Wait is what a wait_for node awaits, while it does (nil otherwise).
	Wait *NodeWait
	// EventID is the event that resolved a wait_for node ("": none).
	EventID string
	// ErrorClass and LastError say why a wait_for node failed
	// (event_timeout, template).
	ErrorClass, LastError string
}

// Run is a run of a workflow.
type Run struct {
	ID           string
	WorkflowID   string
	Version      int
	ScheduledFor time.Time
	Round        int
	Trigger      string
	State        string
	CreatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	// SLAMissedAt is when the run was recorded as not succeeded by its
	// workflow's SLA deadline (nil: it was not).
	SLAMissedAt *time.Time
	// Inputs are the run's inputs: its version's defaults overridden by
	// its trigger's or backfill's.
	Inputs Inputs
	// Nodes is set by GetRun (the run's timeline), not by lists.
	Nodes []RunNode
	// Events is the run's own timeline (sla_missed), set by GetRun.
	Events []RunEvent
	// SLA is where the run stands with its workflow's SLA now.
	SLA sla.RunStatus
}

// RunEvent is one event of a run as a whole (not of a node's execution):
// sla_missed.
type RunEvent struct {
	At      time.Time
	Type    string
	Message string
	Data    map[string]any
}

// Trigger is what a trigger of a workflow may say.
type Trigger struct {
	// DedupKey: a second trigger with the same key returns the first run.
	DedupKey string
	// Inputs override the workflow's defaults for the run; a name the
	// workflow does not declare is a 422 (inputs.<name>).
	Inputs Inputs
}

// RunFromRow is a stored run without its nodes and events.
func RunFromRow(r db.WorkflowRun) (Run, error) {
	inputs, err := DecodeInputs(r.Inputs)
	if err != nil {
		return Run{}, err
	}
	return Run{
		ID: r.ID, WorkflowID: r.WorkflowID, Version: int(r.Version), ScheduledFor: r.ScheduledFor.UTC(),
		Round: int(r.Round), Trigger: r.Trigger, State: r.State, CreatedAt: r.CreatedAt.UTC(), StartedAt: utcPtr(r.StartedAt),
		FinishedAt: utcPtr(r.FinishedAt), SLAMissedAt: utcPtr(r.SLAMissedAt), Inputs: inputs,
	}, nil
}

// EventsFromRows is a run's own timeline.
func EventsFromRows(events []db.RunEvent) []RunEvent {
	out := make([]RunEvent, 0, len(events))
	for _, ev := range events {
		out = append(out, RunEvent{At: ev.At.UTC(), Type: ev.Type, Message: zeroIfNil(ev.Message), Data: ev.Data})
	}
	return out
}

// NodeOf is node n of a run in state runState as the run shows it: from
// its row sn (stored: it has one), its executions, its output and its
// lineage (nil: none).
func NodeOf(n StoredNode, sn db.RunNode, stored bool, runState string, execs []db.RunExecution, output json.RawMessage,
	lineage *RenderedFrom,
) RunNode {
	st := lifecycle.NodeWaiting
	if stored {
		st = NodeState(sn.State, execs)
	}
	if runState == lifecycle.RunCancelled && st == lifecycle.NodeWaiting {
		st = lifecycle.NodeCancelled
	}
	rn := RunNode{
		Key: n.Key, State: st, Shards: max(n.Shards, 1), DependsOn: n.DependsOn, TriggerRule: n.TriggerRule,
		RuleMetAt: utcPtr(sn.RuleMetAt), Output: output, RenderedFrom: lineage,
	}
	if n.WaitFor != nil {
		rn.Shards = 1
		waitOf(&rn, sn)
	}
	for _, x := range execs {
		if x.Shard == 0 {
			rn.ExecutionID = x.ID
		}
		if rn.Shards > 1 {
			if rn.ShardStates == nil {
				rn.ShardStates = map[string]int{}
			}
			rn.ShardStates[x.State]++
		}
		if x.StartedAt != nil && (rn.StartedAt == nil || x.StartedAt.Before(*rn.StartedAt)) {
			rn.StartedAt = utcPtr(x.StartedAt)
		}
		if dag.Done(st) && x.FinishedAt != nil && (rn.FinishedAt == nil || x.FinishedAt.After(*rn.FinishedAt)) {
			rn.FinishedAt = utcPtr(x.FinishedAt)
		}
	}
	return rn
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func zeroIfNil[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
