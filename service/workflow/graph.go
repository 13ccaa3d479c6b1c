package workflow

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/dag"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/template"
)

// StoredNode is one node of a workflow version, as workflow_versions
// stores it: the client's fields and the hidden task that delivers it.
type StoredNode struct {
	Key              string          `json:"key"`
	TaskID           string          `json:"task_id"`
	EndpointID       string          `json:"endpoint_id"`
	Payload          json.RawMessage `json:"payload"`
	Priority         int             `json:"priority"`
	TimeoutMS        int64           `json:"timeout_ms,omitempty"`
	MaxAttempts      int             `json:"max_attempts"`
	InitialBackoffMS int64           `json:"initial_backoff_ms"`
	MaxBackoffMS     int64           `json:"max_backoff_ms"`
	Shards           int             `json:"shards"`
	DependsOn        []string        `json:"depends_on"`
	TriggerRule      string          `json:"trigger_rule"`
	// CompletionMode is "callback" for a node in callback mode (absent:
	// response), with its timeouts.
	CompletionMode      string `json:"completion_mode,omitempty"`
	CompletionTimeoutMS int64  `json:"completion_timeout_ms,omitempty"`
	HeartbeatTimeoutMS  int64  `json:"heartbeat_timeout_ms,omitempty"`
	// PayloadTemplate and RunIf: the node's templates (WorkflowNodeInput).
	PayloadTemplate bool   `json:"payload_template,omitempty"`
	RunIf           string `json:"run_if,omitempty"`
	// WaitFor: a node that waits for an event (no task, no delivery).
	WaitFor *StoredWait `json:"wait_for,omitempty"`
}

// Completion is the node's completion mode as a task's.
func (n StoredNode) Completion() callback.Completion {
	if n.CompletionMode != callback.ModeCallback {
		return callback.Completion{}
	}
	return callback.Completion{
		Mode: callback.ModeCallback, Timeout: time.Duration(n.CompletionTimeoutMS) * time.Millisecond,
		HeartbeatTimeout: time.Duration(n.HeartbeatTimeoutMS) * time.Millisecond,
	}
}

// Graph is a parsed workflow version: its nodes in topological order, and
// the same as package dag sees them.
type Graph struct {
	Nodes []StoredNode
	DAG   []dag.Node
	Index map[string]int
}

// ParseGraph parses a version's document.
func ParseGraph(doc string) (*Graph, error) {
	var nodes []StoredNode
	if err := json.Unmarshal([]byte(doc), &nodes); err != nil {
		return nil, fmt.Errorf("workflow version document: %w", err)
	}
	g := &Graph{Nodes: nodes, DAG: make([]dag.Node, len(nodes)), Index: make(map[string]int, len(nodes))}
	for i, n := range nodes {
		g.DAG[i] = dag.Node{Key: n.Key, DependsOn: n.DependsOn, Rule: n.TriggerRule}
		g.Index[n.Key] = i
	}
	return g, nil
}

// NodeState is a node's state from its stored state and, once it fired,
// its executions'.
func NodeState(stored string, execs []db.RunExecution) string {
	if stored == lifecycle.NodeAwaiting {
		return dag.Running // a wait_for node waiting for its event
	}
	if stored != lifecycle.NodeFired {
		return stored
	}
	shards := make([]string, len(execs))
	for i, e := range execs {
		shards[i] = e.State
	}
	return dag.FiredState(shards)
}

// ScopeOf is the template scope of node n in graph g: every upstream node,
// direct or not, and any input name (the inputs were checked when the
// version was stored).
func ScopeOf(g *Graph, n StoredNode) template.Scope {
	seen := map[string]bool{}
	var up []string
	var walk func(keys []string)
	walk = func(keys []string) {
		for _, k := range keys {
			if i, ok := g.Index[k]; ok && !seen[k] {
				seen[k] = true
				up = append(up, k)
				walk(g.Nodes[i].DependsOn)
			}
		}
	}
	walk(n.DependsOn)
	// .event… was checked against the workflow's schedule when the
	// version was stored.
	return template.Scope{Workflow: true, Upstream: up, Event: true}
}

// TruncateText cuts s to at most n bytes on a character boundary.
func TruncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Plan decides, from the stored node states and the executions of a
// running or blocked run of g, which nodes fire, which are blocked or no
// longer blocked, and the run's state (dag.Advance).
func (g *Graph) Plan(stored map[string]string, execs map[string][]db.RunExecution) dag.Plan {
	states := make(map[string]string, len(g.Nodes))
	for _, n := range g.Nodes {
		states[n.Key] = NodeState(stored[n.Key], execs[n.Key])
	}
	return dag.Advance(g.DAG, states)
}

// NeedsTemplates reports whether a node of keys renders a template (a
// payload, a run_if, a wait_for key).
func (g *Graph) NeedsTemplates(keys []string) bool {
	for _, k := range keys {
		if n := g.Nodes[g.Index[k]]; n.PayloadTemplate || n.RunIf != "" || (n.WaitFor != nil && n.WaitFor.Key != "") {
			return true
		}
	}
	return false
}

// SplitWaits separates, of the nodes to fire, the wait_for nodes.
func (g *Graph) SplitWaits(keys []string) (fire, waits []string) {
	for _, k := range keys {
		if g.Nodes[g.Index[k]].WaitFor != nil {
			waits = append(waits, k)
		} else {
			fire = append(fire, k)
		}
	}
	return fire, waits
}
