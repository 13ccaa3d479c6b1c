package console

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayoutDAG: a node's column is its longest path from a root, edges
// join an upstream's right side to its downstream's left side, and a
// bad graph (unknown upstream, cycle) still lays out.
func TestLayoutDAG(t *testing.T) {
	t.Parallel()
	v := layoutDAG("g", []dagInput{
		{Key: "a"},
		{Key: "b", DependsOn: []string{"a"}},
		{Key: "c", DependsOn: []string{"a", "b"}, Rule: "all_done", State: "blocked"},
		{Key: "d"},
	})
	col := map[string]int{}
	for _, n := range v.Nodes {
		col[n.Key] = (n.X - dagPad) / (dagNodeW + dagGapX)
	}
	require.Equal(t, map[string]int{"a": 0, "b": 1, "c": 2, "d": 0}, col, "longest path, not shortest")
	require.Len(t, v.Edges, 3)
	assert.Equal(t, 2*dagPad+3*dagNodeW+2*dagGapX, v.Width)
	assert.Equal(t, 2*dagPad+2*dagNodeH+dagGapY, v.Height, "two roots stacked")
	assert.Equal(t, "blocked · all_done", v.Nodes[2].Sub)
	assert.Equal(t, "c: blocked · all_done (after a, b)", v.Nodes[2].Tip)
	assert.Empty(t, v.Nodes[1].Sub, "all_success and no state: no second line")
	assert.Equal(t, v.Nodes[1].Y+dagNodeH/2+5, v.Nodes[1].TY, "a lone key is centred")
	assert.Less(t, v.Nodes[2].TY, v.Nodes[2].SY)
	assert.True(t, v.States)
	assert.Equal(t, []string{"blocked"}, v.Legend)
	for _, n := range v.Nodes {
		assert.LessOrEqual(t, n.X+n.W+dagPad, v.Width)
		assert.LessOrEqual(t, n.Y+n.H+dagPad, v.Height)
	}

	v = layoutDAG("cycle", []dagInput{{Key: "x", DependsOn: []string{"y", "nope"}}, {Key: "y", DependsOn: []string{"x"}}})
	assert.Len(t, v.Nodes, 2)
	assert.Len(t, v.Edges, 2)
	assert.Empty(t, layoutDAG("empty", nil).Nodes)
	assert.Equal(t, "abcdefghijklmnopqrstu…", shorten("abcdefghijklmnopqrstuvwxyz", dagLabelMax))
}
