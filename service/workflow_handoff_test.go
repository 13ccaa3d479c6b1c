package service_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
)

// TestWorkflowJoinStartsOnce: a join node whose two upstreams finish at
// the same moment, each in its own Finish, fires once with one deliver
// job: the two advances serialize on the run's row, and the second finds
// the node fired.
func TestWorkflowJoinStartsOnce(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.create(t, "join", f.node("a"), f.node("b", "a"), f.node("c", "a"), f.node("d", "b", "c"))
	const runs = 8
	var ids []string
	for range runs {
		r := f.trigger(t, w)
		f.deliver(t, r.ID, "a", true)
		ids = append(ids, r.ID)
	}
	type started struct {
		id    string
		lease int
	}
	var todo []started
	for _, r := range ids {
		for _, k := range []string{"b", "c"} {
			x := f.execsOf(t, r, k)
			require.Len(t, x, 1)
			d, err := f.del.Begin(ctx, f.tenant, x[0], 1)
			require.NoError(t, err)
			require.Equal(t, service.ActionSend, d.Action)
			todo = append(todo, started{x[0], d.Lease})
		}
	}
	// Every upstream finishes at once: each run's two Finishes race.
	var wg sync.WaitGroup
	errs := make(chan error, len(todo))
	for _, s := range todo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.del.Finish(ctx, f.tenant, s.id, s.lease,
				service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: true})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, r := range ids {
		x := f.execsOf(t, r, "d")
		require.Len(t, x, 1, "run %s: the join fired once", r)
		require.Equal(t, 1, f.count(t, `SELECT count(*) FROM river_job WHERE args->>'execution_id' = $1`, x[0]),
			"run %s: one deliver job for the join", r)
		nodes, _ := f.nodes(t, r)
		require.Equal(t, "pending", nodes["d"], "fired, not yet sent")
	}
}

// TestWorkflowHandOffNotifiesItsQueue: every transaction that fires a
// node notifies the node's deliver queue at its commit, so that the
// River clients fetch the job at once. River's own insert notification
// goes out at most once per queue and cooldown from one process: the
// finishes here, one after the other within the cooldown and each in a
// transaction of its own (alone, a success is its step batch's only
// one), would otherwise leave most of their successors to the queue's
// next poll.
func TestWorkflowHandOffNotifiesItsQueue(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.create(t, "notify", f.node("a"), f.node("b", "a"))
	const runs = 10
	type started struct {
		id    string
		lease int
	}
	var todo []started
	for range runs {
		r := f.trigger(t, w)
		x := f.execsOf(t, r.ID, "a")
		require.Len(t, x, 1)
		d, err := f.del.Begin(ctx, f.tenant, x[0], 1)
		require.NoError(t, err)
		todo = append(todo, started{x[0], d.Lease})
	}

	pooled, err := f.pool.Acquire(ctx)
	require.NoError(t, err)
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema))
	_, err = conn.Exec(ctx, `LISTEN `+pgx.Identifier{schema + ".river_insert"}.Sanitize())
	require.NoError(t, err)

	for _, s := range todo {
		_, err := f.del.Finish(ctx, f.tenant, s.id, s.lease,
			service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200, WorkflowRun: true})
		require.NoError(t, err)
	}
	require.Equal(t, runs, f.count(t, `SELECT count(*) FROM executions WHERE node = 'b'`))

	// Each commit delivers its own notifications (identical ones of one
	// transaction are one): at least one per Finish for the deliver queue.
	got := 0
	for got < runs {
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := conn.WaitForNotification(wait)
		cancel()
		require.NoError(t, err, "%d of %d hand-offs notified their queue", got, runs)
		var payload struct {
			Queue string `json:"queue"`
		}
		require.NoError(t, json.Unmarshal([]byte(n.Payload), &payload))
		if payload.Queue == service.QueueDeliver {
			got++
		}
	}
}

// TestWorkflowTriggersKeepMaxActiveRuns: triggers of one workflow at the
// same moment insert their runs side by side and start them in promotes
// that serialize on the workflow's row: never more runs started than
// max_active_runs, and each started run's root fired once. A run's end
// then starts a pending one in its own transaction.
func TestWorkflowTriggersKeepMaxActiveRuns(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w, err := f.wf.Create(ctx, f.tenant, service.WorkflowInput{
		Name: "three-at-a-time", MaxActiveRuns: 3,
		Nodes: []service.WorkflowNodeInput{f.node("a")},
	})
	require.NoError(t, err)
	const triggers = 24
	var wg sync.WaitGroup
	runs := make(chan service.WorkflowRun, triggers)
	errs := make(chan error, triggers)
	for range triggers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.wf.Trigger(ctx, f.tenant, w.ID, "")
			errs <- err
			runs <- r
		}()
	}
	wg.Wait()
	close(errs)
	close(runs)
	for err := range errs {
		require.NoError(t, err)
	}
	var running []string
	for r := range runs {
		if r.State == service.RunRunning {
			running = append(running, r.ID)
		}
	}
	require.Len(t, running, 3, "the triggers that answered running")
	require.Equal(t, 3, f.count(t, `SELECT count(*) FROM workflow_runs WHERE state = 'running'`))
	require.Equal(t, triggers-3, f.count(t, `SELECT count(*) FROM workflow_runs WHERE state = 'pending'`))
	require.Equal(t, 3, f.count(t, `SELECT count(*) FROM executions WHERE node = 'a'`))
	require.Equal(t, 3, f.count(t, `SELECT count(*) FROM river_job j JOIN executions e ON e.id::text = j.args->>'execution_id'
		WHERE e.node = 'a'`), "each root's deliver job, inserted by the admission that fired it")

	f.deliver(t, running[0], "a", true)
	require.Equal(t, 3, f.count(t, `SELECT count(*) FROM workflow_runs WHERE state = 'running'`),
		"the run's end started the oldest pending run")
	require.Equal(t, triggers-4, f.count(t, `SELECT count(*) FROM workflow_runs WHERE state = 'pending'`))
}

// TestWorkflowSweepStartsALeftRun: a trigger that dies between its
// transactions leaves its run pending with room (it died before the
// admission; or the run that made room ended while the trigger still
// counted it); a run running with no node fired (an admission by an
// older ax, which fired the roots in a transaction of its own, died
// between the two) is stalled. The sweep starts both, once, with
// their roots fired once.
func TestWorkflowSweepStartsALeftRun(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	w := f.create(t, "left", f.node("a"), f.node("b", "a"))
	insert := func() string {
		run := db.WorkflowRun{
			TenantID: f.tenant, ID: service.NewID(), WorkflowID: w.ID, Version: int32(w.Version),
			ScheduledFor: time.Now(), Trigger: service.TriggerManual,
		}
		ok, err := db.InsertWorkflowRun(ctx, f.pool, run)
		require.NoError(t, err)
		require.True(t, ok)
		return run.ID
	}
	pending, admitted := insert(), insert()
	_, err := db.OpenRuns(ctx, f.pool, f.tenant, []string{admitted}, []string{admitted, admitted}, []string{"a", "b"})
	require.NoError(t, err)
	f.exec(t, `UPDATE workflow_runs SET advanced_at = now() - interval '1 minute' WHERE id = $1`, admitted)
	_, state := f.nodes(t, pending)
	require.Equal(t, service.RunPending, state)

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.wf.Sweep(ctx)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, r := range []string{pending, admitted} {
		_, state = f.nodes(t, r)
		require.Equal(t, service.RunRunning, state)
		require.Len(t, f.execsOf(t, r, "a"), 1)
		f.deliver(t, r, "a", true)
		require.Len(t, f.execsOf(t, r, "b"), 1)
	}
}
