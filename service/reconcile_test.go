package service_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestReconcileResumesOrphanedExecutions: unfinished executions that no
// live River job carries — their batch job completed without their
// outcome (lost in a database crash), their own job discarded — get a new
// job whose run decides as any run would: an interrupted attempt resumes
// as the next attempt, a lost start starts, a requested cancel cancels.
// Executions whose job is live, final executions and recent slots are left
// alone (so are slots more recent than the bound), and a second pass finds
// nothing.
func TestReconcileResumesOrphanedExecutions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	execs := f.fire(t, 8) // one deliver_batch job carries all eight
	sched := f.scheduler(service.SchedulerConfig{})
	past := -time.Hour // every slot is "older" than this

	n, err := sched.Reconcile(ctx, past)
	require.NoError(t, err)
	require.Zero(t, n, "the batch job is live")
	n, err = sched.Reconcile(ctx, time.Minute)
	require.NoError(t, err)
	require.Zero(t, n)

	// The batch job completes without what it carried.
	f.exec(t, `UPDATE river_job SET state = 'completed', finalized_at = now(), attempt = 1 WHERE kind = 'deliver_batch'`)
	var discarded, live int64
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, priority, attempt, finalized_at)
		VALUES (jsonb_build_object('tenant_id', $1::text, 'execution_id', $2::text, 'lease_base', 1), 'deliver', 28, 'deliver',
			'discarded', 2, 28, now()) RETURNING id`, f.tenant, execs[3].id).Scan(&discarded))
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, priority)
		VALUES (jsonb_build_object('tenant_id', $1::text, 'execution_id', $2::text, 'lease_base', 1), 'deliver', 28, 'deliver',
			'available', 2) RETURNING id`, f.tenant, execs[4].id).Scan(&live))
	running := func(i int, extra string) {
		f.exec(t, `UPDATE executions SET state = 'running', attempts = 1, lease_attempt = 1, started_at = now(),
			first_started_at = now()`+extra+` WHERE id = $1`, execs[i].id)
	}
	running(0, "") // its success was lost
	// execs[1] stays pending: its start was lost
	f.exec(t, `UPDATE executions SET state = 'succeeded', finished_at = now() WHERE id = $1`, execs[2].id)
	f.exec(t, `DELETE FROM unfinished_executions WHERE id = $1`, execs[2].id)
	running(3, ", river_job_id = "+strconv.FormatInt(discarded, 10)) // its own job was discarded
	running(4, ", river_job_id = "+strconv.FormatInt(live, 10))      // its own job is live
	running(5, ", cancel_requested = true")                          // cancelled through the API meanwhile
	// execs[6] stays pending too.
	// execs[7] stays pending, carried by a live deliver job that names it
	// without being recorded (as a single fire's job is).
	f.exec(t, `INSERT INTO river_job (args, kind, max_attempts, queue, state, priority)
		VALUES (jsonb_build_object('tenant_id', $1::text, 'execution_id', $2::text, 'lease_base', 0), 'deliver', 25, 'deliver',
			'available', 2)`, f.tenant, execs[7].id)

	n, err = sched.Reconcile(ctx, time.Minute)
	require.NoError(t, err)
	require.Zero(t, n, "the slots are more recent than the bound (a minute ago; however slow the machine)")
	n, err = sched.Reconcile(ctx, past)
	require.NoError(t, err)
	require.Equal(t, 5, n, "0, 1, 3, 5 and 6")
	n, err = sched.Reconcile(ctx, past)
	require.NoError(t, err)
	require.Zero(t, n, "every execution has a live job again")

	ex := service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{})
	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	begin := func(i int) service.Delivery {
		t.Helper()
		var job int64
		var base int
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT j.id, (j.args->>'lease_base')::int FROM executions e
			JOIN river_job j ON j.id = e.river_job_id WHERE e.id = $1 AND j.state = 'available' AND j.kind = 'deliver'`,
			execs[i].id).Scan(&job, &base))
		require.GreaterOrEqual(t, base, 28, "the new job's leases are above every lease of the lost jobs")
		got, err := ex.Get(ctx, f.tenant, execs[i].id)
		require.NoError(t, err)
		last := got.Events[len(got.Events)-1]
		require.Equal(t, service.EventReconciled, last.Type)
		require.Contains(t, last.Message, "resumed by job "+strconv.FormatInt(job, 10)+" with the same idempotency key")
		dl, err := d.BeginJob(ctx, f.tenant, execs[i].id, base+1, job)
		require.NoError(t, err)
		return dl
	}

	resumed := begin(0)
	require.Equal(t, service.ActionSend, resumed.Action)
	require.True(t, resumed.Resumed)
	require.Equal(t, 2, resumed.Attempt, "the interrupted attempt 1 is resumed as attempt 2")
	fin, err := d.Finish(ctx, f.tenant, execs[0].id, resumed.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
	require.NoError(t, err)
	require.Equal(t, service.ExecSucceeded, fin.State)

	started := begin(1)
	require.Equal(t, service.ActionSend, started.Action)
	require.Equal(t, 1, started.Attempt)

	discardedRun := begin(3)
	require.Equal(t, service.ActionSend, discardedRun.Action)
	require.Equal(t, 2, discardedRun.Attempt)
	got, err := ex.Get(ctx, f.tenant, execs[3].id)
	require.NoError(t, err)
	require.Equal(t, []string{service.EventReconciled, service.EventRescued, service.EventAttemptStarted},
		eventTypes(got)[len(got.Events)-3:])
	require.Contains(t, got.Events[len(got.Events)-3].Message, "its River job "+strconv.FormatInt(discarded, 10)+" is discarded")

	cancelled := begin(5)
	require.Equal(t, service.ActionDone, cancelled.Action)
	require.Equal(t, service.ExecCancelled, cancelled.State)

	require.Equal(t, service.ActionSend, begin(6).Action)

	var job4 int64
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT river_job_id FROM executions WHERE id = $1`, execs[4].id).Scan(&job4))
	require.Equal(t, live, job4, "an execution with a live job is left alone")
	var job7 *int64
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT river_job_id FROM executions WHERE id = $1`, execs[7].id).Scan(&job7))
	require.Nil(t, job7, "an execution a live deliver job names is left alone")
}
