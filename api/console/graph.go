package console

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/dag"
)

// A workflow's DAG drawn as an inline SVG, laid out here and rendered by
// the "dag" template: nodes in columns by their longest path from a root
// (a node is one column right of its deepest upstream), edges as curves
// from an upstream's right side to its downstream's left side. No script:
// the page draws it as served.

// Graph geometry, in SVG user units (CSS pixels at scale 1).
const (
	dagNodeW    = 180
	dagNodeH    = 48
	dagGapX     = 60
	dagGapY     = 18
	dagPad      = 12
	dagLabelMax = 22 // runes of a key shown in its box; the title has all of it
)

// dagInput is one node to draw.
type dagInput struct {
	Key       string
	DependsOn []string
	Rule      string
	// State is the node's state in a run ("" on a workflow's own graph).
	State string
	// Href links the node (its execution), "" for none.
	Href string
	// Invalid says, in words, what a draft's node has wrong ("" for
	// nothing): the box is marked and its second line says it.
	Invalid string
}

// dagView is a laid-out graph.
type dagView struct {
	Title         string
	Width, Height int
	Nodes         []dagNode
	Edges         []dagEdge
	// States: the nodes carry run states (the legend is shown).
	States bool
	// Legend lists the states drawn, in a fixed order.
	Legend []string
}

type dagNode struct {
	dagInput
	// Label is the key as shown (shortened); Sub the second line.
	Label, Sub string
	// Tip is the node's tooltip: key, state, rule, upstreams.
	Tip        string
	X, Y, W, H int
	// TX, TY: the label's anchor; SY the second line's baseline.
	TX, TY, SY int
}

type dagEdge struct {
	From, To string
	D        string // the SVG path
}

// dagStates is every node state in the order the legend lists them.
var dagStates = []string{
	service.NodeWaiting, service.NodeBlocked, service.ExecPending, service.ExecRunning, service.ExecRetrying,
	service.ExecSucceeded, service.ExecFailed, service.NodeSkipped, service.NodeCancelled,
}

// layoutDAG places nodes in layers by longest path from the roots
// (dag.Layers) and orders each layer by the mean row of its upstreams
// (fewer crossings).
// Upstream keys that are not nodes are ignored; a cycle (which the service
// refuses) cannot loop forever.
func layoutDAG(title string, in []dagInput) dagView {
	v := dagView{Title: title}
	if len(in) == 0 {
		return v
	}
	index := make(map[string]int, len(in))
	nodes := make([]dag.Node, len(in))
	for i, n := range in {
		index[n.Key] = i
		nodes[i] = dag.Node{Key: n.Key, DependsOn: n.DependsOn, Rule: n.Rule}
	}
	layer := dag.Layers(nodes)
	layers := 0
	for _, l := range layer {
		layers = max(layers, l+1)
	}
	cols := make([][]int, layers)
	for i := range in {
		cols[layer[i]] = append(cols[layer[i]], i)
	}
	row := make([]float64, len(in))
	for r, i := range cols[0] {
		row[i] = float64(r)
	}
	for l := 1; l < layers; l++ {
		bary := make(map[int]float64, len(cols[l]))
		for _, i := range cols[l] {
			var sum float64
			var n int
			for _, up := range in[i].DependsOn {
				if j, ok := index[up]; ok {
					sum += row[j]
					n++
				}
			}
			bary[i] = sum / float64(max(n, 1))
		}
		slices.SortStableFunc(cols[l], func(a, b int) int {
			switch {
			case bary[a] < bary[b]:
				return -1
			case bary[a] > bary[b]:
				return 1
			}
			return 0
		})
		for r, i := range cols[l] {
			row[i] = float64(r)
		}
	}
	rows := 0
	for _, c := range cols {
		rows = max(rows, len(c))
	}
	v.Width = 2*dagPad + layers*dagNodeW + (layers-1)*dagGapX
	v.Height = 2*dagPad + rows*dagNodeH + (rows-1)*dagGapY
	pos := make([]dagNode, len(in))
	for l, c := range cols {
		// A shorter column is centred vertically.
		off := (rows - len(c)) * (dagNodeH + dagGapY) / 2
		for r, i := range c {
			n := dagNode{
				dagInput: in[i], W: dagNodeW, H: dagNodeH,
				X: dagPad + l*(dagNodeW+dagGapX), Y: dagPad + off + r*(dagNodeH+dagGapY),
			}
			n.TX, n.TY, n.SY = n.X+dagNodeW/2, n.Y+20, n.Y+38
			n.Label = shorten(n.Key, dagLabelMax)
			n.Sub, n.Tip = nodeWords(n.dagInput)
			if n.Sub == "" {
				n.TY = n.Y + dagNodeH/2 + 5 // one line: centred
			}
			pos[i] = n
		}
	}
	seen := map[string]bool{}
	for i := range in {
		v.Nodes = append(v.Nodes, pos[i])
		if in[i].State != "" {
			v.States = true
			seen[in[i].State] = true
		}
		for _, up := range in[i].DependsOn {
			j, ok := index[up]
			if !ok {
				continue
			}
			a, b := pos[j], pos[i]
			x1, y1 := a.X+a.W, a.Y+a.H/2
			x2, y2 := b.X-2, b.Y+b.H/2 // the arrowhead ends at the box
			mx := (x1 + x2) / 2
			v.Edges = append(v.Edges, dagEdge{
				From: up, To: in[i].Key,
				D: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mx, y1, mx, y2, x2, y2),
			})
		}
	}
	for _, st := range dagStates {
		if seen[st] {
			v.Legend = append(v.Legend, st)
		}
	}
	return v
}

// nodeWords returns a node's second line (its state, and its trigger rule
// when it is not all_success) and its tooltip.
func nodeWords(n dagInput) (sub, tip string) {
	var parts []string
	if n.State != "" {
		parts = append(parts, n.State)
	}
	if n.Rule != "" && n.Rule != service.RuleAllSuccess {
		parts = append(parts, n.Rule)
	}
	if n.Invalid != "" {
		parts = append(parts, n.Invalid)
	}
	sub = strings.Join(parts, " · ")
	tip = n.Key
	if sub != "" {
		tip += ": " + sub
	}
	if len(n.DependsOn) > 0 {
		tip += " (after " + strings.Join(n.DependsOn, ", ") + ")"
	}
	return sub, tip
}

// shorten cuts s to at most n runes, marking a cut with an ellipsis.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
