// Package dag is the pure logic of workflow graphs: checking a graph's
// keys, rules and dependencies, ordering its nodes (a topological order,
// layers), and deciding from its nodes' states which nodes of a run fire,
// are blocked or are no longer blocked, and what state the run is in. It
// knows nothing of storage: the caller reads the states and writes the
// decisions.
package dag

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Trigger rules: when a node fires, given its upstream nodes' states.
const (
	// AllSuccess: every upstream succeeded or was skipped.
	AllSuccess = "all_success"
	// AllDone: every upstream is done, whatever its outcome.
	AllDone = "all_done"
	// OneSuccess: an upstream succeeded or was skipped (a node without
	// upstream fires at once).
	OneSuccess = "one_success"
)

// Node states, as the API shows them. A node that has not fired is
// Waiting, or Blocked when its rule can no longer be met; Skipped and
// Cancelled are set on it without firing. A fired node has its
// executions' state: Pending, Running, Retrying, Succeeded, Failed or
// Cancelled. A run's state uses the same words (Running, Blocked,
// Succeeded, Failed).
const (
	Waiting   = "waiting"
	Blocked   = "blocked"
	Skipped   = "skipped"
	Cancelled = "cancelled"
	Pending   = "pending"
	Running   = "running"
	Retrying  = "retrying"
	Succeeded = "succeeded"
	Failed    = "failed"
)

// KeyPattern is the form of a node's key.
const KeyPattern = `^[a-z0-9][a-z0-9._-]{0,63}$`

var keyPattern = regexp.MustCompile(KeyPattern)

// Node is a node of a graph as the rules see it.
type Node struct {
	Key       string
	DependsOn []string // upstream keys
	Rule      string   // AllSuccess, AllDone or OneSuccess
}

// Problem is one thing wrong with a node of a graph.
type Problem struct {
	Node    int    // the node's index in the nodes checked
	Field   string // "key", "trigger_rule" or "depends_on"
	Message string
}

// Check returns what is wrong with nodes' keys (their form, a key used
// twice), rules and dependencies (on itself, on an unknown key, the same
// key twice): for each node its key's and its rule's problems, then for
// each node its dependencies'. It does not look for cycles: Order does,
// on nodes without problems.
func Check(nodes []Node) []Problem {
	var out []Problem
	keys := make(map[string]bool, len(nodes))
	for i, n := range nodes {
		if !keyPattern.MatchString(n.Key) {
			out = append(out, Problem{i, "key", "must match " + KeyPattern})
		} else if keys[n.Key] {
			out = append(out, Problem{i, "key", fmt.Sprintf("key %q is used by another node", n.Key)})
		}
		keys[n.Key] = true
		if n.Rule != AllSuccess && n.Rule != AllDone && n.Rule != OneSuccess {
			out = append(out, Problem{i, "trigger_rule", "must be all_success, all_done or one_success"})
		}
	}
	for i, n := range nodes {
		seen := make(map[string]bool, len(n.DependsOn))
		for _, d := range n.DependsOn {
			switch {
			case d == n.Key:
				out = append(out, Problem{i, "depends_on", fmt.Sprintf("node %q depends on itself", n.Key)})
			case !keys[d]:
				out = append(out, Problem{i, "depends_on", fmt.Sprintf("unknown node %q", d)})
			case seen[d]:
				out = append(out, Problem{i, "depends_on", fmt.Sprintf("%q is listed twice", d)})
			}
			seen[d] = true
		}
	}
	return out
}

// CycleError is a cycle of dependencies: its keys downstream first, the
// first repeated at the end.
type CycleError struct {
	Keys []string
}

func (e *CycleError) Error() string { return "cycle: " + strings.Join(e.Keys, " → ") }

// Order returns the indexes of nodes, each after its upstreams: a
// depth-first walk from each node in turn, through its dependencies in
// their order, so the same graph always gives the same order. A cycle is
// a *CycleError naming the first one met. Dependencies on unknown keys
// (which Check reports) are ignored.
func Order(nodes []Node) ([]int, error) {
	idx := indexOf(nodes)
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(nodes))
	var (
		order []int
		stack []string
		cycle []string
		visit func(i int) bool
	)
	visit = func(i int) bool {
		color[i] = grey
		stack = append(stack, nodes[i].Key)
		for _, d := range nodes[i].DependsOn {
			j, ok := idx[d]
			if !ok {
				continue
			}
			switch color[j] {
			case grey:
				at := slices.Index(stack, d)
				// The path runs upstream; show it downstream first.
				c := slices.Clone(stack[at:])
				slices.Reverse(c)
				cycle = append([]string{d}, c...)
				return false
			case white:
				if !visit(j) {
					return false
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
		order = append(order, i)
		return true
	}
	for i := range nodes {
		if color[i] == white && !visit(i) {
			return nil, &CycleError{Keys: cycle}
		}
	}
	return order, nil
}

// Layers returns each node's layer: 0 for a node without upstream,
// otherwise one more than its deepest upstream's (the longest path from a
// root). Dependencies on unknown keys are ignored, and a dependency that
// closes a cycle counts as on a root, so a cycle (which Order refuses)
// cannot loop forever.
func Layers(nodes []Node) []int {
	idx := indexOf(nodes)
	const (
		unseen = iota
		visiting
		done
	)
	layer := make([]int, len(nodes))
	mark := make([]int, len(nodes))
	var depth func(i int) int
	depth = func(i int) int {
		switch mark[i] {
		case done:
			return layer[i]
		case visiting:
			return 0
		}
		mark[i] = visiting
		d := 0
		for _, up := range nodes[i].DependsOn {
			if j, ok := idx[up]; ok {
				d = max(d, depth(j)+1)
			}
		}
		mark[i], layer[i] = done, d
		return d
	}
	for i := range nodes {
		depth(i)
	}
	return layer
}

// indexOf maps each key to its node's index (the last, for a key used
// twice).
func indexOf(nodes []Node) map[string]int {
	idx := make(map[string]int, len(nodes))
	for i, n := range nodes {
		idx[n.Key] = i
	}
	return idx
}

// Done reports whether a node in state s has an outcome: Succeeded,
// Skipped, Failed or Cancelled.
func Done(s string) bool {
	return s == Succeeded || s == Skipped || s == Failed || s == Cancelled
}

// Successful reports whether a node in state s counts as a success
// downstream: Succeeded or Skipped.
func Successful(s string) bool { return s == Succeeded || s == Skipped }

// FiredState is the state of a fired node from its shards' execution
// states: the least advanced in flight (Running, then Retrying, then
// Pending), else Failed if a shard failed, else Cancelled if one ended
// otherwise (cancelled, or skipped without being sent), else Succeeded.
// A node whose executions are not there yet is Pending.
func FiredState(shards []string) string {
	if len(shards) == 0 {
		return Pending
	}
	var running, retrying, pending, failed, cancelled int
	for _, s := range shards {
		switch s {
		case Running:
			running++
		case Retrying:
			retrying++
		case Pending:
			pending++
		case Succeeded:
		case Failed:
			failed++
		default:
			cancelled++
		}
	}
	switch {
	case running > 0:
		return Running
	case retrying > 0:
		return Retrying
	case pending > 0:
		return Pending
	case failed > 0:
		return Failed
	case cancelled > 0:
		return Cancelled
	}
	return Succeeded
}

// Evaluate says whether a node's rule is met by its upstreams' states,
// or can no longer be met (broken). An unknown rule is AllSuccess.
func Evaluate(rule string, upstream []string) (met, broken bool) {
	all, done, ok := len(upstream), 0, 0
	for _, s := range upstream {
		if Done(s) {
			done++
		}
		if Successful(s) {
			ok++
		}
	}
	switch rule {
	case AllDone:
		return done == all, false
	case OneSuccess:
		return ok > 0 || all == 0, done == all && ok == 0 && all > 0
	}
	return ok == all, done > ok
}

// Plan is what Advance decides for a run.
type Plan struct {
	// Fire, Block and Unblock are the keys of the nodes that fire now,
	// that become Blocked and that are Waiting again, in graph order.
	Fire, Block, Unblock []string
	// States is every node's state after the plan (a fired node is
	// Pending).
	States map[string]string
	// Run is the run's state after the plan: Blocked when a node is,
	// else Running while a node is not done, else Succeeded when every
	// node counts as a success, else Failed.
	Run string
}

// Advance decides, for a running or blocked run of nodes (in
// topological order, Order) whose nodes are in the states given by key,
// which nodes fire (their rule is met), which become blocked (their rule
// can no longer be met) or waiting again (a blocked node whose rule can be
// met again, an upstream having been retried), and the run's state. Only
// Waiting and Blocked nodes are decided; a node missing from states has
// state "" and counts as neither done nor waiting.
func Advance(nodes []Node, states map[string]string) Plan {
	p := Plan{States: make(map[string]string, len(nodes))}
	for _, n := range nodes {
		st := states[n.Key]
		if st == Waiting || st == Blocked {
			ups := make([]string, len(n.DependsOn))
			for i, u := range n.DependsOn {
				ups[i] = p.States[u]
			}
			met, broken := Evaluate(n.Rule, ups)
			switch {
			case met:
				p.Fire = append(p.Fire, n.Key)
				st = Pending
			case broken && st == Waiting:
				p.Block = append(p.Block, n.Key)
				st = Blocked
			case !broken && st == Blocked:
				p.Unblock = append(p.Unblock, n.Key)
				st = Waiting
			}
		}
		p.States[n.Key] = st
	}
	blocked, done, ok := false, 0, 0
	for _, st := range p.States {
		blocked = blocked || st == Blocked
		if Done(st) {
			done++
		}
		if Successful(st) {
			ok++
		}
	}
	switch {
	case blocked:
		p.Run = Blocked
	case done < len(nodes):
		p.Run = Running
	case ok == len(nodes):
		p.Run = Succeeded
	default:
		p.Run = Failed
	}
	return p
}
