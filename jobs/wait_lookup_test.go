package jobs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
	events "github.com/axhq/ax/service/event"
)

// TestWaitLookupJob: a run's wait_for node starts waiting while an event
// it matches is posted but not committed; River works the lookup the
// start queued, which waits for the event's transaction and ends the
// node with that event, and the run goes on to succeed.
func TestWaitLookupJob(t *testing.T) {
	t.Parallel()
	h, wf := newWorkflowHarness(t)
	ctx := t.Context()
	w, err := wf.Create(ctx, h.tenant, service.WorkflowInput{
		Name: h.name("wf"), MaxActiveRuns: 1,
		Nodes: []service.WorkflowNodeInput{{Key: "gate", WaitFor: &service.WaitFor{Event: "go", Key: "a", Timeout: time.Hour}}},
	})
	require.NoError(t, err)

	txW, err := h.pool.Begin(ctx) // the run's start: its clock is the node's ready-since
	require.NoError(t, err)
	defer func() { _ = txW.Rollback(ctx) }()
	txE, err := h.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = txE.Rollback(ctx) }()
	posted := service.NewEvents(h.pool, h.enq, wf, nil)
	ev, err := posted.Post(db.WithTx(ctx, h.pool, txE), h.tenant, events.Input{Name: "go", Key: "a"})
	require.NoError(t, err)
	require.Zero(t, ev.Matched.Waits)
	run, err := wf.Trigger(db.WithTx(ctx, h.pool, txW), h.tenant, w.ID, "")
	require.NoError(t, err)
	require.NoError(t, txW.Commit(ctx))
	var queued int
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'wait_lookup'`).Scan(&queued))
	require.Equal(t, 1, queued, "the start queued a lookup")
	require.NoError(t, txE.Commit(ctx))

	r, nodes := waitRun(t, h, wf, run.ID, service.RunSucceeded)
	require.Equal(t, map[string]string{"gate": service.ExecSucceeded}, nodes)
	require.Equal(t, ev.ID, r.Nodes[0].EventID, "the node ended with the event")
}
