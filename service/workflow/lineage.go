package workflow

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/template"
)

// Lineage: what a run's templated node was rendered from. When a node's
// payload template or run_if renders (the advance that fires or skips
// it), the engine keeps, on the node (workflow_run_nodes.rendered_from),
// the names of the run inputs its templates read and a snapshot of the
// upstream nodes they read, state and output as .nodes.<key> showed them
// then: an upstream may change afterwards (it is retried), the run's
// inputs never do. Which data a template reads is its parse's
// (template.Reads). Nodes without templates store nothing and cost
// nothing; GET of a run reads them in one query (db.GetRunLineage).

// RenderedFromMax bounds a node's lineage, in bytes of JSON: two whole
// outputs. Upstream outputs past it are left out (their states are kept),
// by name (Omitted).
const RenderedFromMax = 2 * callback.OutputMax

// RenderedFrom is what a templated node was rendered from.
type RenderedFrom struct {
	// Inputs names the run's inputs its templates read (their values are
	// the run's Inputs), sorted.
	Inputs []string `json:"inputs"`
	// Nodes are the upstream nodes its templates read, by key, each as
	// its templates saw it (.nodes.<key>): its state and output then.
	Nodes map[string]RenderedNode `json:"nodes"`
	// Omitted names upstream nodes read whose outputs did not fit in
	// RenderedFromMax (Nodes has their states only), sorted.
	Omitted []string `json:"omitted,omitempty"`
}

// RenderedNode is an upstream node as a template saw it when it rendered.
type RenderedNode struct {
	// Status is its state (.nodes.<key>.status).
	Status string `json:"status"`
	// Output is its output (.nodes.<key>.output); nil: it had none.
	Output json.RawMessage `json:"output,omitempty"`
}

// reads returns the run data node n's templates read: its payload's when
// it rendered (payload), its run_if's when that rendered (runIf).
func reads(scope template.Scope, n StoredNode, payload, runIf bool) template.Reads {
	var r template.Reads
	if payload {
		if tpl, err := template.Parse(n.Payload, scope); err == nil {
			r = r.Union(tpl.Reads())
		}
	}
	if runIf {
		doc, _ := json.Marshal(n.RunIf)
		if tpl, err := template.Parse(doc, scope); err == nil {
			r = r.Union(tpl.Reads())
		}
	}
	return r
}

// Lineage is the lineage of node n of graph g from a run's data (its
// inputs, its nodes as templates see them), for its payload template
// (payload: it rendered) and its run_if (runIf: it rendered); ok is false
// when neither did (nothing to keep). A template that reads no run data
// (only the slot, say) has an empty lineage.
func Lineage(g *Graph, n StoredNode, inputs Inputs, nodes map[string]template.Node, payload, runIf bool) (RenderedFrom, bool) {
	payload = payload && n.PayloadTemplate
	runIf = runIf && n.RunIf != ""
	if !payload && !runIf {
		return RenderedFrom{}, false
	}
	scope := ScopeOf(g, n)
	r := reads(scope, n, payload, runIf)
	out := RenderedFrom{Inputs: r.Inputs, Nodes: map[string]RenderedNode{}}
	if r.AllInputs {
		out.Inputs = slices.Sorted(maps.Keys(inputs))
	}
	if out.Inputs == nil {
		out.Inputs = []string{}
	}
	keys := r.Nodes
	if r.AllNodes {
		keys = slices.Sorted(slices.Values(scope.Upstream))
	}
	size := 64 // the document's own bytes, the inputs' names
	for _, name := range out.Inputs {
		size += len(name) + 3
	}
	for _, k := range keys {
		n := nodes[k]
		cost := len(k) + len(n.Status) + len(n.Output) + 32
		if size+cost > RenderedFromMax {
			// Its state still fits: only outputs are large.
			out.Omitted = append(out.Omitted, k)
			out.Nodes[k] = RenderedNode{Status: n.Status}
			continue
		}
		size += cost
		out.Nodes[k] = RenderedNode{Status: n.Status, Output: n.Output}
	}
	return out, true
}

// DecodeLineage reads the stored lineage of a run's nodes, by key.
func DecodeLineage(rows []db.NodeLineage) (map[string]*RenderedFrom, error) {
	out := make(map[string]*RenderedFrom, len(rows))
	for _, r := range rows {
		var rf RenderedFrom
		if err := json.Unmarshal([]byte(r.RenderedFrom), &rf); err != nil {
			return nil, err
		}
		out[r.Key] = &rf
	}
	return out, nil
}
