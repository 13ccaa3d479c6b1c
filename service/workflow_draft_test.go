package service_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestWorkflowCheck: a draft is checked as a create checks it — a cycle
// is refused naming its nodes, an unknown endpoint at its node — and a
// valid one is accepted; nothing is stored either way.
func TestWorkflowCheck(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	check := func(nodes ...service.WorkflowNodeInput) []service.FieldError {
		t.Helper()
		err := f.wf.Check(ctx, f.tenant, service.WorkflowInput{Name: "draft", Nodes: nodes})
		if err == nil {
			return nil
		}
		var ve *service.ValidationError
		require.ErrorAs(t, err, &ve)
		return ve.Fields
	}

	require.Equal(t, []service.FieldError{{Field: "nodes", Message: "cycle: a → c → b → a"}},
		check(f.node("extract"), f.node("a", "extract", "b"), f.node("b", "c"), f.node("c", "a")))

	other := f.node("load", "extract")
	other.EndpointID = service.NewID()
	require.Equal(t, []service.FieldError{{Field: "nodes[1].endpoint_id", Message: "no such endpoint"}},
		check(f.node("extract"), other))

	require.Empty(t, check(f.node("extract"), f.node("a", "extract"), f.node("b", "a"), f.node("c", "b")))
	require.Zero(t, f.count(t, `SELECT count(*) FROM workflows`))
	require.Zero(t, f.count(t, `SELECT count(*) FROM tasks WHERE workflow_id IS NOT NULL`))
}
