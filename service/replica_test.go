package service_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/replica"
)

// TestDeclareDeadReplicaOnce: replicas racing to declare a silent replica
// dead decide once; the River jobs it was running (and only those) are
// made available again in the same transaction, every unfinished
// execution they carry gets one reconciled event naming the replica, the
// next run resumes the delivery with a higher lease, and the dead
// replica's late outcome is fenced. The dead replica's next heartbeat
// finds it dead.
func TestDeclareDeadReplicaOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	execs := f.fire(t, 3) // one deliver_batch job carries all three
	reps := service.NewReplicas(f.pool)
	dead, y, z := service.NewID(), service.NewID(), service.NewID()
	for _, id := range []string{dead, y, z} {
		_, err := reps.Register(ctx, id, "client-"+id, "host-"+id[len(id)-4:], "test")
		require.NoError(t, err)
	}
	_, err := reps.Register(ctx, service.NewID(), "client-"+dead, "elsewhere", "test")
	require.Error(t, err, "one live replica per River client")

	// The doomed replica's client runs the batch job; its first member is
	// in flight under lease 1. Replica y runs a job of its own.
	var batch, own int64
	require.NoError(t, f.pool.QueryRow(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = ARRAY['some-earlier-client', $1] WHERE kind = 'deliver_batch' RETURNING id`, "client-"+dead).Scan(&batch))
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, priority, attempt,
			attempted_at, attempted_by)
		VALUES ('{"tenant_id": "x", "execution_id": "00000000-0000-0000-0000-000000000000"}', 'deliver', 5, 'deliver',
			'running', 1, 1, now(), ARRAY[$1]) RETURNING id`, "client-"+y).Scan(&own))
	d := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	first, err := d.BeginJob(ctx, f.tenant, execs[0].id, 1, 0)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, first.Action)
	f.exec(t, `UPDATE executions SET state = 'succeeded', finished_at = now() WHERE id = $1`, execs[2].id)
	f.exec(t, `DELETE FROM unfinished_executions WHERE id = $1`, execs[2].id)

	none, err := reps.DeclareDead(ctx, y, 2*time.Second)
	require.NoError(t, err)
	require.Empty(t, none, "every heartbeat is recent")
	f.exec(t, `UPDATE replicas SET last_heartbeat_at = now() - interval '10 seconds' WHERE id = $1`, dead)

	// y and z race, several times each.
	var (
		mu       sync.Mutex
		declared []replica.Dead
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for i := range 8 {
		by := []string{y, z}[i%2]
		wg.Go(func() {
			<-start
			got, err := reps.DeclareDead(ctx, by, 2*time.Second)
			if !ok(t, err) {
				return
			}
			mu.Lock()
			declared = append(declared, got...)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	require.Len(t, declared, 1, "exactly one decision")
	require.Equal(t, dead, declared[0].ID)
	require.Equal(t, []int64{batch}, declared[0].ResumedJobs)

	var state string
	var attempt, maxAttempts, errs int
	var by string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT state::text, attempt, max_attempts, cardinality(errors), errors[cardinality(errors)]->>'error'
		FROM river_job WHERE id = $1`, batch).Scan(&state, &attempt, &maxAttempts, &errs, &by))
	require.Equal(t, "available", state)
	require.Equal(t, 1, attempt, "the next fetch makes it attempt 2")
	require.GreaterOrEqual(t, maxAttempts, 2)
	require.Equal(t, 1, errs)
	require.Contains(t, by, "declared dead")
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, own).Scan(&state))
	require.Equal(t, "running", state, "a live replica's job is left alone")
	var rowState string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT state FROM replicas WHERE id = $1`, dead).Scan(&rowState))
	require.Equal(t, replica.StateDead, rowState)

	ex := service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{})
	for i, e := range execs {
		got, err := ex.Get(ctx, f.tenant, e.id)
		require.NoError(t, err)
		var marks []service.Event
		for _, ev := range got.Events {
			if ev.Type == service.EventReconciled {
				marks = append(marks, ev)
			}
		}
		if i == 2 {
			require.Empty(t, marks, "a finished execution gets no event")
			continue
		}
		require.Len(t, marks, 1, "execution %d", i)
		require.Equal(t, dead, marks[0].Data["replica_id"])
		require.EqualValues(t, batch, marks[0].Data["job_id"])
		require.Contains(t, marks[0].Message, "declared dead")
	}

	// The resumed run (the batch job's attempt 2 hands each execution to a
	// deliver job whose leases are higher still; any higher lease fences
	// alike) takes the execution over; the dead replica's late outcome
	// records nothing.
	resumed, err := d.BeginJob(ctx, f.tenant, execs[0].id, 2, 0)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, resumed.Action)
	require.True(t, resumed.Resumed)
	require.Equal(t, 2, resumed.Attempt)
	_, err = d.Finish(ctx, f.tenant, execs[0].id, first.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 200})
	require.ErrorIs(t, err, service.ErrConflict, "the dead replica's outcome is stale")
	fin, err := d.Finish(ctx, f.tenant, execs[0].id, resumed.Lease, service.Outcome{Kind: service.OutcomeSucceeded, StatusCode: 201})
	require.NoError(t, err)
	require.Equal(t, service.ExecSucceeded, fin.State)
	got, err := ex.Get(ctx, f.tenant, execs[0].id)
	require.NoError(t, err)
	require.Equal(t, 2, got.Attempts)
	require.Equal(t, 201, *got.LastStatusCode)

	alive, _, err := reps.Heartbeat(ctx, dead, 0)
	require.NoError(t, err)
	require.False(t, alive, "the dead replica learns it was declared dead")
	alive, live, err := reps.Heartbeat(ctx, y, 0)
	require.NoError(t, err)
	require.True(t, alive)
	require.Equal(t, 2, live)
	_, err = reps.Register(ctx, service.NewID(), "client-"+dead, "host", "test")
	require.NoError(t, err, "it registers again under a new id, with the same River client")

	n, err := reps.Leave(ctx, y, "client-"+y)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a job left running by a replica that stops is resumed")
	lives, err := reps.Live(ctx)
	require.NoError(t, err)
	require.Len(t, lives, 2)
}

// ok reports err == nil, failing t otherwise (for goroutines).
func ok(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// TestReleaseStranded: the River jobs shown running under a replica's
// client that it is not working, fetched long enough ago, are made
// available again (their end was lost, say, when River's completer gave up
// during a database outage); jobs it is working, jobs fetched just now and
// other clients' jobs are left alone.
func TestReleaseStranded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	execs := f.fire(t, 2)
	reps := service.NewReplicas(f.pool)
	me := service.NewID()
	_, err := reps.Register(ctx, me, me, "host", "test")
	require.NoError(t, err)
	job := func(client, fetched string, exec string) int64 {
		var id int64
		require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, priority, attempt,
				attempted_at, attempted_by)
			VALUES (jsonb_build_object('tenant_id', $3::text, 'execution_id', $4::text), 'deliver', 5, 'deliver',
				'running', 1, 1, now() - $2::interval, ARRAY[$1]) RETURNING id`, client, fetched, f.tenant, exec).Scan(&id))
		return id
	}
	f.exec(t, `DELETE FROM river_job WHERE kind = 'deliver_batch'`)
	stranded := job(me, "1 minute", execs[0].id)
	working := job(me, "1 minute", execs[1].id)
	fresh := job(me, "1 second", execs[1].id)
	other := job("someone-else", "1 minute", execs[1].id)

	n, err := reps.ReleaseStranded(ctx, me, me, []int64{working}, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	states := map[int64]string{}
	rows, err := f.pool.Query(ctx, `SELECT id, state::text FROM river_job`)
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		var s string
		require.NoError(t, rows.Scan(&id, &s))
		states[id] = s
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[int64]string{stranded: "available", working: "running", fresh: "running", other: "running"}, states)
	got, err := service.NewExecutions(f.pool, f.enq, service.ExecutionsConfig{}).Get(ctx, f.tenant, execs[0].id)
	require.NoError(t, err)
	last := got.Events[len(got.Events)-1]
	require.Equal(t, service.EventReconciled, last.Type)
	require.Equal(t, "job_stranded", last.Data["reason"])
	n, err = reps.ReleaseStranded(ctx, me, me, nil, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, 1, n, "no longer busy, the other old one goes (the fresh one stays)")
	f.exec(t, `DELETE FROM river_job`) // the fixture's reconciler invariant is not this test's
}
