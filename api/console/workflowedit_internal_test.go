package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestDocumentJSON: the editor's text is JSON when it starts with '{',
// else YAML read into the same JSON; YAML that JSON cannot hold, or text
// that is neither, is refused on the field "document".
func TestDocumentJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, text, want, refused string
	}{
		{"JSON as is", ` {"name": "x"} `, `{"name": "x"}`, ""},
		{"YAML", "name: x\nnodes:\n  - key: a\n    depends_on: [b]\n    payload: {n: 1}\n", `{"name":"x","nodes":[{"depends_on":["b"],"key":"a","payload":{"n":1}}]}`, ""},
		{"YAML keeps strings that look like other things", "name: \"007\"\nday: 2026-12-03\nat: 2026-12-03T10:00:00+01:00\n", `{"at":"2026-12-03T10:00:00+01:00","day":"2026-12-03","name":"007"}`, ""},
		{"YAML with a key that is not a string", "1: x\n", "", "YAML that JSON cannot hold"},
		{"neither", "name: [x\n", "", "neither JSON nor YAML"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := documentJSON(tt.text)
			if tt.refused != "" {
				var ve *service.ValidationError
				require.ErrorAs(t, err, &ve)
				require.Len(t, ve.Fields, 1)
				require.Equal(t, "document", ve.Fields[0].Field)
				require.Contains(t, ve.Fields[0].Message, tt.refused)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, string(b))
		})
	}
}

// TestNodeIndex: a refusal's field names its node by index.
func TestNodeIndex(t *testing.T) {
	t.Parallel()
	for field, want := range map[string]int{"nodes[0].key": 0, "nodes[12].retry.max_attempts": 12, "nodes[3]": 3} {
		i, ok := nodeIndex(field)
		require.True(t, ok, field)
		require.Equal(t, want, i, field)
	}
	for _, field := range []string{"nodes", "name", "nodes[x].key", "nodes[-1].key", "nodes[1"} {
		_, ok := nodeIndex(field)
		require.False(t, ok, field)
	}
}

// TestDraftOf: each refused node field is listed with its node's anchor;
// the nodes of a refused cycle are marked as on it.
func TestDraftOf(t *testing.T) {
	t.Parallel()
	in := service.WorkflowInput{Nodes: []service.WorkflowNodeInput{
		{Key: "x"}, {Key: "a", DependsOn: []string{"x", "c"}}, {Key: "b", DependsOn: []string{"a"}}, {Key: "c", DependsOn: []string{"b"}},
	}}
	d := draftOf(in, []service.FieldError{{Field: "nodes", Message: "cycle: a → b → c → a"}, {Field: "nodes[0].endpoint_id", Message: "no such endpoint"}, {Field: "name", Message: "bad"}})
	require.Equal(t, []draftError{
		{Field: "nodes", Message: "cycle: a → b → c → a", Anchor: "draft-node-1", Key: "a"},
		{Field: "nodes[0].endpoint_id", Message: "no such endpoint", Anchor: "draft-node-0", Key: "x"},
		{Field: "name", Message: "bad"},
	}, d.Errors)
	require.Equal(t, []string{"endpoint_id: no such endpoint"}, d.Nodes[0].Errors)
	require.Equal(t, []string{"on the cycle: a → b → c → a"}, d.Nodes[2].Errors)
	notes := map[string]string{}
	for _, n := range d.Graph.Nodes {
		notes[n.Key] = n.Invalid
	}
	require.Equal(t, map[string]string{"x": "error", "a": "in the cycle", "b": "in the cycle", "c": "in the cycle"}, notes)
	require.False(t, d.OK())
	require.True(t, draftOf(in, nil).OK())
}
