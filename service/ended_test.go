package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/schedule"
)

// TestExecutionsFinishedAreCounted: ax_executions_finished_total counts
// every execution that reaches a final state, one at a time or many at
// once, on every path that ends one: after each kind of transition the
// counter of each final state equals the executions in that state (the
// database starts empty, and nothing here leaves a final state).
func TestExecutionsFinishedAreCounted(t *testing.T) {
	t.Parallel()
	f := newWFFixture(t)
	ctx := context.Background()
	m := metrics.New(nil)
	tasks := service.NewTasks(f.pool, service.TasksConfig{Metrics: m})
	f.tasks = tasks
	f.del = service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{Metrics: m})
	f.ex = service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{Metrics: m})
	f.wf = service.NewWorkflows(f.pool, f.enq, service.WorkflowsConfig{Metrics: m})
	backfills := service.NewBackfills(f.pool, f.enq, tasks)
	sched := f.scheduler(service.SchedulerConfig{LookAhead: 10 * time.Second})
	states := []string{service.ExecSucceeded, service.ExecFailed, service.ExecCancelled, service.ExecSkipped}

	// step runs one kind of transition, which must end want executions,
	// and compares the counter with the rows.
	step := func(name string, want int, run func()) {
		t.Helper()
		before := f.count(t, `SELECT count(*) FROM executions WHERE state IN ('succeeded', 'failed', 'cancelled', 'skipped')`)
		run()
		after := f.count(t, `SELECT count(*) FROM executions WHERE state IN ('succeeded', 'failed', 'cancelled', 'skipped')`)
		require.Equal(t, want, after-before, "%s: executions ended", name)
		for _, s := range states {
			rows := f.count(t, `SELECT count(*) FROM executions WHERE state = $1`, s)
			require.InDelta(t, float64(rows), testutil.ToFloat64(m.Finished.WithLabelValues(s)), 0, "%s: %s", name, s)
		}
	}
	task := func(name string, in service.TaskInput) service.Task {
		t.Helper()
		in.Name, in.EndpointID = name, f.endpoint
		if in.Schedule.Type == "" {
			in.Schedule = schedule.Spec{Type: schedule.Interval, IntervalSeconds: 3600}
		}
		x, err := tasks.Create(ctx, f.tenant, in)
		require.NoError(t, err)
		return x
	}
	fire := func(taskID string) string {
		t.Helper()
		x, err := f.ex.Trigger(ctx, f.tenant, taskID, service.TriggerInput{})
		require.NoError(t, err)
		return x.ID
	}
	begin := func(id string) service.Delivery {
		t.Helper()
		lease := f.count(t, `SELECT lease_attempt + 1 FROM executions WHERE id = $1`, id)
		d, err := f.del.Begin(ctx, f.tenant, id, lease)
		require.NoError(t, err)
		return d
	}
	send := func(id string, out service.Outcome) service.Finished {
		t.Helper()
		d := begin(id)
		require.Equal(t, service.ActionSend, d.Action, d.Reason)
		fin, err := f.del.Finish(ctx, f.tenant, id, d.Lease, out)
		require.NoError(t, err)
		return fin
	}
	ok := service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200}
	permanent := service.Outcome{Kind: service.OutcomePermanent, StatusCode: 400, ErrorClass: "http_4xx", Error: "HTTP 400"}
	pending := func(taskID string) int {
		return f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'`, taskID)
	}

	plain := task("plain", service.TaskInput{Retry: service.RetryPolicy{MaxAttempts: 1}})
	step("a success, batched", 1, func() {
		require.Equal(t, service.ExecSucceeded, send(fire(plain.ID), ok).State)
	})
	step("a failure, row by row", 1, func() {
		require.Equal(t, service.ExecFailed, send(fire(plain.ID), permanent).State)
	})

	fragile := task("fragile", service.TaskInput{Retry: service.RetryPolicy{MaxAttempts: 1}, PauseAfterFailures: 1})
	first, _, _ := fire(fragile.ID), fire(fragile.ID), fire(fragile.ID)
	step("a failure that pauses its task, which cancels its due pending executions", 3, func() {
		fin := send(first, permanent)
		require.True(t, fin.TaskPaused)
	})

	single := task("single", service.TaskInput{OverlapPolicy: service.OverlapSkip})
	running := fire(single.ID)
	require.Equal(t, service.ActionSend, begin(running).Action)
	step("a start that ends an execution without sending it (overlap policy skip)", 1, func() {
		d := begin(fire(single.ID))
		require.Equal(t, service.ExecSkipped, d.State, d.Reason)
	})
	step("a cancel requested of a running execution, ended by its outcome", 1, func() {
		_, err := f.ex.Cancel(ctx, f.tenant, running)
		require.NoError(t, err)
		fin, err := f.del.Finish(ctx, f.tenant, running, 1, service.Outcome{
			Kind: service.OutcomeRetry, CutByCancel: true,
			ErrorClass: "canceled", Error: "cut short",
		})
		require.NoError(t, err)
		require.Equal(t, service.ExecCancelled, fin.State)
	})
	step("a cancel through the API", 1, func() {
		_, err := f.ex.Cancel(ctx, f.tenant, fire(plain.ID))
		require.NoError(t, err)
	})

	often := task("often", service.TaskInput{Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 2}})
	doomed := task("doomed", service.TaskInput{Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 2}})
	_, err := sched.Tick(ctx)
	require.NoError(t, err)
	n := pending(often.ID)
	require.GreaterOrEqual(t, n, 2)
	step("a pause", n, func() {
		_, err := tasks.Pause(ctx, f.tenant, often.ID)
		require.NoError(t, err)
	})
	_, err = tasks.Resume(ctx, f.tenant, often.ID)
	require.NoError(t, err)
	_, err = sched.Tick(ctx)
	require.NoError(t, err)
	n = pending(often.ID)
	require.GreaterOrEqual(t, n, 2)
	step("a schedule change", n, func() {
		_, err := tasks.Update(ctx, f.tenant, often.ID, func(in *service.TaskInput) error {
			in.Schedule = schedule.Spec{Type: schedule.Interval, IntervalSeconds: 3600} // no slot in common
			return nil
		})
		require.NoError(t, err)
	})
	n = pending(doomed.ID)
	require.GreaterOrEqual(t, n, 2)
	step("a delete", n, func() {
		require.NoError(t, tasks.Delete(ctx, f.tenant, doomed.ID))
	})

	daily := task("daily", service.TaskInput{Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 3 * * *"}})
	p, err := tasks.Preview(ctx, f.tenant, daily.ID, 2)
	require.NoError(t, err)
	step("a skipped slot", 1, func() {
		_, err := f.ex.Skip(ctx, f.tenant, daily.ID, p.Fires[1])
		require.NoError(t, err)
	})
	step("a slot skipped again", 0, func() {
		_, err := f.ex.Skip(ctx, f.tenant, daily.ID, p.Fires[1])
		require.NoError(t, err)
	})

	hourly := task("hourly", service.TaskInput{Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 * * * *"}})
	b, _, err := backfills.Create(ctx, f.tenant, hourly.ID, service.BackfillInput{
		From: time.Now().Add(-10 * time.Hour),
		To:   time.Now().Add(-time.Hour), MaxConcurrency: 3,
	})
	require.NoError(t, err)
	_, err = backfills.Pump(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, pending(hourly.ID))
	step("a backfill's cancel", 3, func() {
		_, err := backfills.Cancel(ctx, f.tenant, b.ID)
		require.NoError(t, err)
	})

	w := f.create(t, "flow", f.node("a"), f.node("b", "a"))
	run := f.trigger(t, w)
	step("a workflow step's success", 1, func() { f.deliver(t, run.ID, "a", true) })
	step("a workflow run's cancel", 1, func() {
		_, err := f.wf.CancelRun(ctx, f.tenant, run.ID)
		require.NoError(t, err)
	})

	callback := task("callback", service.TaskInput{
		Retry:      service.RetryPolicy{MaxAttempts: 1},
		Completion: service.Completion{Mode: service.CompletionCallback, Timeout: time.Hour},
	})
	accepted := func() string {
		t.Helper()
		id := fire(callback.ID)
		d := begin(id)
		require.Equal(t, service.ActionSend, d.Action, d.Reason)
		_, err := f.del.PrepareCallback(ctx, d)
		require.NoError(t, err)
		state, err := f.del.Accept(ctx, d, 202, time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, service.ExecRunning, state)
		return id
	}
	step("a callback's completion", 1, func() {
		c, err := f.del.Complete(ctx, f.tenant, accepted(), nil, service.CompletionInput{Status: service.ExecSucceeded})
		require.NoError(t, err)
		require.Equal(t, service.ExecSucceeded, c.State)
	})
	timedOut := accepted()
	f.exec(t, `UPDATE callback_attempts SET expires_at = now() - interval '1 second' WHERE execution_id = $1`, timedOut)
	step("a callback's timeout, by the sweep", 1, func() {
		res, err := f.del.SweepCallbacks(ctx)
		require.NoError(t, err)
		require.Equal(t, map[string]int{service.ExecFailed: 1}, res.Finished, fmt.Sprint(res))
	})
}
