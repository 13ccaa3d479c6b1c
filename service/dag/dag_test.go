package dag

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// n is a node with the all_success rule.
func n(key string, deps ...string) Node { return Node{Key: key, DependsOn: deps, Rule: AllSuccess} }

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		nodes []Node
		want  []Problem
	}{
		{"a valid graph", []Node{n("extract"), n("transform", "extract"), {Key: "report", DependsOn: []string{"transform"}, Rule: AllDone}}, nil},
		{"no nodes", nil, nil},
		{"a key of the wrong form", []Node{n("Extract"), n("-x"), n(strings.Repeat("k", 65)), n("")}, []Problem{
			{0, "key", "must match " + KeyPattern},
			{1, "key", "must match " + KeyPattern},
			{2, "key", "must match " + KeyPattern},
			{3, "key", "must match " + KeyPattern},
		}},
		{"the longest key", []Node{n(strings.Repeat("k", 64)), n("a.b_c-9")}, nil},
		{"a key used twice", []Node{n("a"), n("b"), n("a")}, []Problem{{2, "key", `key "a" is used by another node`}}},
		{"an unknown rule", []Node{{Key: "a", Rule: "any_success"}, {Key: "b"}}, []Problem{
			{0, "trigger_rule", "must be all_success, all_done or one_success"},
			{1, "trigger_rule", "must be all_success, all_done or one_success"},
		}},
		{"a node depends on itself", []Node{n("a", "a")}, []Problem{{0, "depends_on", `node "a" depends on itself`}}},
		{"an unknown upstream", []Node{n("a", "nope")}, []Problem{{0, "depends_on", `unknown node "nope"`}}},
		{"an upstream listed twice", []Node{n("a"), n("b", "a", "a")}, []Problem{{1, "depends_on", `"a" is listed twice`}}},
		{"an upstream with a bad key still exists", []Node{n("A"), n("b", "A")}, []Problem{{0, "key", "must match " + KeyPattern}}},
		{"keys and rules node by node, then dependencies", []Node{n("a", "x"), {Key: "B", Rule: "?"}, n("c", "c")}, []Problem{
			{1, "key", "must match " + KeyPattern},
			{1, "trigger_rule", "must be all_success, all_done or one_success"},
			{0, "depends_on", `unknown node "x"`},
			{2, "depends_on", `node "c" depends on itself`},
		}},
		{"a cycle is no problem of Check", []Node{n("a", "b"), n("b", "a")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Check(tt.nodes))
		})
	}
}

func TestOrder(t *testing.T) {
	t.Parallel()
	keys := func(nodes []Node, order []int) []string {
		out := make([]string, len(order))
		for i, j := range order {
			out[i] = nodes[j].Key
		}
		return out
	}
	tests := []struct {
		name  string
		nodes []Node
		want  []string // the order, or the cycle's message
		cycle string
	}{
		{"empty", nil, []string{}, ""},
		{"already upstream first", []Node{n("a"), n("b", "a"), n("c", "b")}, []string{"a", "b", "c"}, ""},
		{"downstream first", []Node{n("c", "b"), n("b", "a"), n("a")}, []string{"a", "b", "c"}, ""},
		{
			"a diamond: dependencies in their order",
			[]Node{n("join", "right", "left"), n("left", "root"), n("right", "root"), n("root")},
			[]string{"root", "right", "left", "join"},
			"",
		},
		{"independent nodes keep their order", []Node{n("x"), n("y"), n("z")}, []string{"x", "y", "z"}, ""},
		{"two roots", []Node{n("report", "a", "b"), n("b"), n("a")}, []string{"a", "b", "report"}, ""},
		{"an unknown upstream is ignored", []Node{n("b", "nope", "a"), n("a")}, []string{"a", "b"}, ""},
		{"a two-node cycle", []Node{n("a", "b"), n("b", "a")}, nil, "cycle: a → b → a"},
		{
			"a cycle behind a root",
			[]Node{n("extract"), n("transform", "extract", "report"), n("report", "transform")},
			nil, "cycle: transform → report → transform",
		},
		{
			"a longer cycle, named downstream first",
			[]Node{n("a", "c"), n("b", "a"), n("c", "b"), n("d", "c")},
			nil, "cycle: a → b → c → a",
		},
		{"a self-loop", []Node{n("a", "a")}, nil, "cycle: a → a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			order, err := Order(tt.nodes)
			if tt.cycle != "" {
				var ce *CycleError
				require.ErrorAs(t, err, &ce)
				require.EqualError(t, err, tt.cycle)
				require.Equal(t, tt.cycle, "cycle: "+strings.Join(ce.Keys, " → "))
				require.Nil(t, order)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, keys(tt.nodes, order))
		})
	}
}

func TestLayers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		nodes []Node
		want  []int
	}{
		{"empty", nil, []int{}},
		{"roots", []Node{n("a"), n("b")}, []int{0, 0}},
		{"a chain, downstream first", []Node{n("c", "b"), n("b", "a"), n("a")}, []int{2, 1, 0}},
		{"the longest path decides", []Node{n("root"), n("mid", "root"), n("join", "root", "mid")}, []int{0, 1, 2}},
		{"a diamond", []Node{n("root"), n("l", "root"), n("r", "root"), n("join", "l", "r")}, []int{0, 1, 1, 2}},
		{"an unknown upstream is ignored", []Node{n("a", "nope")}, []int{0}},
		{"a cycle ends", []Node{n("a", "b"), n("b", "a")}, []int{2, 1}},
		{"a self-loop ends", []Node{n("a", "a")}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, Layers(tt.nodes))
		})
	}
}

// Every state against every trigger rule, one upstream or two.
func TestEvaluate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule        string
		upstream    []string
		met, broken bool
	}{
		// all_success: every upstream succeeded or was skipped; broken by
		// one that failed or was cancelled.
		{AllSuccess, nil, true, false},
		{AllSuccess, []string{Succeeded}, true, false},
		{AllSuccess, []string{Skipped}, true, false},
		{AllSuccess, []string{Succeeded, Skipped}, true, false},
		{AllSuccess, []string{Succeeded, Running}, false, false},
		{AllSuccess, []string{Waiting}, false, false},
		{AllSuccess, []string{Blocked}, false, false},
		{AllSuccess, []string{Pending}, false, false},
		{AllSuccess, []string{Retrying}, false, false},
		{AllSuccess, []string{Failed}, false, true},
		{AllSuccess, []string{Cancelled}, false, true},
		{AllSuccess, []string{Failed, Running}, false, true},
		{AllSuccess, []string{Succeeded, Cancelled}, false, true},
		// all_done: every upstream has an outcome; never broken.
		{AllDone, nil, true, false},
		{AllDone, []string{Succeeded, Failed}, true, false},
		{AllDone, []string{Cancelled, Skipped}, true, false},
		{AllDone, []string{Failed, Running}, false, false},
		{AllDone, []string{Waiting}, false, false},
		{AllDone, []string{Blocked}, false, false},
		// one_success: an upstream succeeded or was skipped; broken when
		// every upstream is done without one.
		{OneSuccess, nil, true, false},
		{OneSuccess, []string{Failed, Succeeded}, true, false},
		{OneSuccess, []string{Running, Skipped}, true, false},
		{OneSuccess, []string{Failed, Running}, false, false},
		{OneSuccess, []string{Failed, Cancelled}, false, true},
		{OneSuccess, []string{Failed}, false, true},
		{OneSuccess, []string{Blocked}, false, false},
		// An unknown rule is all_success.
		{"", []string{Succeeded}, true, false},
		{"", []string{Failed}, false, true},
	}
	for _, tt := range tests {
		met, broken := Evaluate(tt.rule, tt.upstream)
		require.Equal(t, tt.met, met, "%s %v: met", tt.rule, tt.upstream)
		require.Equal(t, tt.broken, broken, "%s %v: broken", tt.rule, tt.upstream)
	}
}

func TestDoneAndSuccessful(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		state            string
		done, successful bool
	}{
		{Waiting, false, false},
		{Blocked, false, false},
		{Pending, false, false},
		{Running, false, false},
		{Retrying, false, false},
		{Succeeded, true, true},
		{Skipped, true, true},
		{Failed, true, false},
		{Cancelled, true, false},
		{"", false, false},
	} {
		require.Equal(t, tt.done, Done(tt.state), tt.state)
		require.Equal(t, tt.successful, Successful(tt.state), tt.state)
	}
}

func TestFiredState(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		shards []string
		want   string
	}{
		{nil, Pending},
		{[]string{Succeeded}, Succeeded},
		{[]string{Succeeded, Succeeded}, Succeeded},
		{[]string{Succeeded, Running, Failed}, Running},
		{[]string{Retrying, Pending, Failed}, Retrying},
		{[]string{Pending, Failed, Succeeded}, Pending},
		{[]string{Failed, Cancelled, Succeeded}, Failed},
		{[]string{Cancelled, Succeeded}, Cancelled},
		{[]string{Skipped}, Cancelled}, // skipped without being sent
		{[]string{Succeeded, "something else"}, Cancelled},
	} {
		require.Equal(t, tt.want, FiredState(tt.shards), "%v", tt.shards)
	}
}

func TestAdvance(t *testing.T) {
	t.Parallel()
	// extract → transform → load; notify (all_done) after transform;
	// audit (one_success) after extract and notify.
	graph := []Node{
		n("extract"), n("transform", "extract"), n("load", "transform"),
		{Key: "notify", DependsOn: []string{"transform"}, Rule: AllDone},
		{Key: "audit", DependsOn: []string{"extract", "notify"}, Rule: OneSuccess},
	}
	all := func(st string) map[string]string {
		m := map[string]string{}
		for _, n := range graph {
			m[n.Key] = st
		}
		return m
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name                 string
		states               map[string]string
		fire, block, unblock []string
		run                  string
		after                map[string]string // some states after the plan
	}{
		{
			name: "a start fires the root", states: all(Waiting), fire: []string{"extract"}, run: Running,
			after: map[string]string{"extract": Pending, "transform": Waiting},
		},
		{name: "nodes wait while their upstream runs", states: with(all(Waiting), "extract", Running), run: Running},
		{
			name:   "one success fires the all_success and one_success downstreams",
			states: with(all(Waiting), "extract", Succeeded), fire: []string{"transform", "audit"}, run: Running,
		},
		{
			name:   "a failure blocks all_success downstream; all_done fires",
			states: with(all(Waiting), "extract", Succeeded, "transform", Failed, "audit", Succeeded),
			fire:   []string{"notify"}, block: []string{"load"}, run: Blocked,
			after: map[string]string{"load": Blocked, "notify": Pending},
		},
		{
			name:   "a skipped upstream counts as a success",
			states: with(all(Waiting), "extract", Succeeded, "transform", Skipped, "audit", Succeeded),
			fire:   []string{"load", "notify"}, run: Running,
		},
		{
			name:    "a blocked node whose upstream is retried waits again",
			states:  with(all(Waiting), "extract", Succeeded, "transform", Retrying, "load", Blocked, "audit", Succeeded),
			unblock: []string{"load"}, run: Running, after: map[string]string{"load": Waiting},
		},
		{name: "a blocked node stays blocked", states: with(all(Waiting), "extract", Succeeded, "transform", Failed,
			"load", Blocked, "notify", Succeeded, "audit", Succeeded), run: Blocked},
		{
			name:   "one_success is broken when its upstreams are done without one",
			states: with(all(Waiting), "extract", Failed, "transform", Blocked, "notify", Cancelled),
			block:  []string{"audit"}, run: Blocked,
		},
		{name: "every node a success: succeeded", states: with(all(Succeeded), "notify", Skipped), run: Succeeded},
		{name: "every node done, one failed: failed", states: with(all(Succeeded), "load", Failed), run: Failed},
		{name: "every node done, one cancelled: failed", states: with(all(Succeeded), "audit", Cancelled), run: Failed},
		{name: "a node in flight: running", states: with(all(Succeeded), "load", Running), run: Running},
		{name: "a node without a state is not done", states: with(all(Succeeded), "load", ""), run: Running},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Advance(graph, tt.states)
			require.Equal(t, tt.fire, p.Fire, "fire")
			require.Equal(t, tt.block, p.Block, "block")
			require.Equal(t, tt.unblock, p.Unblock, "unblock")
			require.Equal(t, tt.run, p.Run, "run")
			require.Len(t, p.States, len(graph))
			for k, st := range tt.after {
				require.Equal(t, st, p.States[k], k)
			}
		})
	}
}

// A chain fires one node per pass, each once its upstream succeeded, and
// the run succeeds with the last.
func TestAdvanceThroughAChain(t *testing.T) {
	t.Parallel()
	graph := []Node{n("a"), n("b", "a"), {Key: "c", DependsOn: []string{"b"}, Rule: OneSuccess}}
	states := map[string]string{"a": Waiting, "b": Waiting, "c": Waiting}
	for _, want := range []string{"a", "b", "c"} {
		p := Advance(graph, states)
		require.Equal(t, []string{want}, p.Fire)
		require.Equal(t, Running, p.Run)
		states[want] = Succeeded // its executions succeed
	}
	require.Equal(t, Succeeded, Advance(graph, states).Run)
}
