package service_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/metrics"
)

// TestNodeTemplateFailureCountedAfterCommit: a node whose payload does
// not render is failed unsent in the transaction that fires it, and
// ax_executions_finished_total counts it once that transaction commits:
// a trigger whose transaction rolls back (its audit record is refused
// here by a trigger of this test's database) counts nothing, the same
// trigger committed counts one failure.
func TestNodeTemplateFailureCountedAfterCommit(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{Subject: "alice", RequestID: "req-1"})
	m := metrics.New(nil)
	f.wf = service.NewWorkflows(f.pool, f.enq, service.WorkflowsConfig{Metrics: m})
	root := f.node("root")
	root.PayloadTemplate = true
	root.Payload = []byte(`{"next": "{{ date_add .inputs.day 1 }}"}`)
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "counted", MaxActiveRuns: 10, Inputs: inputsOf("day", `"2026-12-01"`),
		Nodes: []service.WorkflowNodeInput{root},
	})
	require.NoError(t, err)
	failed := func() (rows int, counted float64) {
		return f.count(t, `SELECT count(*) FROM executions WHERE state = 'failed'`), testutil.ToFloat64(m.Finished.WithLabelValues(service.ExecFailed))
	}

	f.exec(t, `CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'audit refused'; END $$`)
	f.exec(t, `CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit()`)
	_, err = f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("day", `"not a date"`)})
	require.Error(t, err)
	rows, counted := failed()
	require.Zero(t, rows, "rolled back")
	require.Zero(t, counted, "a rolled back failure is not counted")

	f.exec(t, `DROP TRIGGER refuse_audit ON audit_log`)
	r, err := f.wf.TriggerWith(ctx, f.tenant, w.ID, service.WorkflowTrigger{Inputs: inputsOf("day", `"not a date"`)})
	require.NoError(t, err)
	states, _ := f.nodes(t, r.ID)
	require.Equal(t, service.ExecFailed, states["root"])
	rows, counted = failed()
	require.Equal(t, 1, rows)
	require.InDelta(t, 1, counted, 0, "counted once committed")
}
