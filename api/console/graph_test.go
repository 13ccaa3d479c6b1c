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
	assert.Equal(t, map[string]int{"a": 0, "b": 1, "c": 2, "d": 0}, col, "longest path, not shortest")
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

// TestIdent: an id is its name when it has one, else its tail, which
// tells apart UUIDv7 ids of one millisecond (same first 12 hex digits);
// the full id is in the title; both are escaped.
func TestIdent(t *testing.T) {
	a, b := "01938a2b-7c00-7abc-8def-0123456789ab", "01938a2b-7c00-7abc-9fed-ba9876543210"
	assert.Equal(t, a[:8], b[:8])
	assert.Equal(t, `<code class="ident" title="`+a+`">…456789ab</code>`, string(ident(a)))
	assert.Equal(t, `<code class="ident" title="`+b+`">…76543210</code>`, string(ident(b)))
	assert.Equal(t, `<span class="ident" title="`+a+`">nightly</span>`, string(ident(a, "nightly")))
	assert.Equal(t, `<code class="ident" title="`+a+`">…456789ab</code>`, string(ident(a, "")), "an empty name is no name")
	assert.Equal(t, `<span class="ident" title="&lt;x&gt;">&lt;b&gt;</span>`, string(ident("<x>", "<b>")))
	assert.Equal(t, `<code class="ident" title="short">short</code>`, string(ident("short")))
}
