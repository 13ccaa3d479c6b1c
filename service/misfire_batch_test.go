package service

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/metrics"
)

// backlogTask is a recurring task of a backlog with several overdue
// pending first fires (slots, before now, the latest first).
type backlogTask struct {
	ID     string
	Policy string
	// CaughtUp: the task's latest catch-up started half an hour ago, after
	// every slot below.
	CaughtUp bool
	// Pending: a later misfire of the task still pending, outside the
	// batch (an hour and a half ago).
	Pending bool
	Slots   []time.Duration
	Execs   []string
}

// writeBacklog stores tasks in e (the same ids in every database).
func (e *equivDB) writeBacklog(t *testing.T, tasks []backlogTask) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pools.Main.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for i, task := range tasks {
		_, err := tx.Exec(ctx, `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds,
				state, overlap_policy, max_attempts, misfire_policy, caught_up_at)
			VALUES ($1, $2, $3, $4, 'interval', 60, 'active', 'allow', 3, $5, CASE WHEN $6 THEN now() - interval '30 minutes' END)`,
			equivTenant, task.ID, fmt.Sprintf("backlog-%d-%s", i, task.ID), e.epOn, task.Policy, task.CaughtUp)
		require.NoError(t, err)
		slots, ids := task.Slots, task.Execs
		if task.Pending {
			slots, ids = append(slots, 90*time.Minute), append(ids, uuidFor(task.ID, 99))
		}
		for k, ago := range slots {
			_, err := tx.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state)
				VALUES ($1, $2, $3, now() - make_interval(secs => $4), 'schedule', 'pending')`,
				equivTenant, ids[k], task.ID, ago.Seconds())
			require.NoError(t, err)
		}
	}
	require.NoError(t, tx.Commit(ctx))
	_, err = e.pools.Main.Exec(ctx, `INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
		SELECT tenant_id, task_id, scheduled_for, id FROM executions WHERE state = 'pending'
		ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
}

// backlog returns tasks of every misfire policy, each with four overdue
// pending first fires (equivConfig: misfire threshold 1 h, CatchUpMax 2,
// catch-up window 24 h), some caught up already, some with a later misfire
// outside the batch, some fire_all slots beyond the catch-up window.
func backlog() []backlogTask {
	rnd := rand.New(rand.NewPCG(7, 8))
	newID := func() string { return uuid.Must(uuid.NewRandomFromReader(rndReader{rnd})).String() }
	var out []backlogTask
	for _, policy := range []string{MisfireFireOnce, MisfireSkip, MisfireFireAll} {
		for k := range 4 {
			task := backlogTask{ID: newID(), Policy: policy, CaughtUp: k == 1, Pending: k == 2}
			for j := range 4 {
				ago := 2*time.Hour + time.Duration(j)*time.Minute
				if k == 3 && j >= 2 {
					ago += 24 * time.Hour // beyond fire_all's catch-up window
				}
				task.Slots = append(task.Slots, ago)
				task.Execs = append(task.Execs, newID())
			}
			out = append(out, task)
		}
	}
	return out
}

// TestMisfireBacklogIsDecidedInBatchAsRowByRow: after an outage every
// recurring task has several overdue pending first fires. Started through
// the batch, all at once and in any order, they end exactly as the
// row-by-row path ends them one after the other in the order of their
// slots in an identical database: for fire_once, the latest sent late as
// the task's catch-up and the others missed (and all of them missed when
// a catch-up or a later misfire stands against them); for skip all missed;
// for fire_all the CatchUpMax latest within the window sent late — each
// execution's row, Begin's result, its timeline (events, reasons, the
// late fire's data), the task's missed_count and catch-up, and the
// executions-finished metric alike.
func TestMisfireBacklogIsDecidedInBatchAsRowByRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tasks := backlog()
	rowDB, batchDB := newEquivDB(t), newEquivDB(t)
	rowDB.writeBacklog(t, tasks)
	batchDB.writeBacklog(t, tasks)
	withMetrics := func(e *equivDB) (*Deliveries, *metrics.Metrics) {
		m := metrics.New(prometheus.NewRegistry())
		cfg := equivConfig
		cfg.Metrics = m
		return NewDeliveries(e.pools.Delivery, e.enq, cfg), m
	}
	rowD, rowM := withMetrics(rowDB)
	batchD, batchM := withMetrics(batchDB)

	var cases []equivCase
	var keys []db.DeliveryKey
	for _, task := range tasks {
		for k := len(task.Execs) - 1; k >= 0; k-- { // the earliest slot first
			c := equivCase{ID: task.Execs[k], TaskID: task.ID, Task: &equivTask{}, Lease: 1}
			cases = append(cases, c)
			keys = append(keys, db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: equivTenant, ID: c.ID}, Lease: 1})
		}
	}

	rowOut := make([]string, len(cases))
	for i, c := range cases {
		d, err := rowD.beginRow(ctx, equivTenant, c.ID, c.Lease, 0)
		rowOut[i] = beginResult(d, err)
	}

	order := rand.New(rand.NewPCG(9, 10)).Perm(len(keys)) // any order
	shuffled := make([]db.DeliveryKey, len(keys))
	for i, o := range order {
		shuffled[i] = keys[o]
	}
	res, err := batchD.startPending(ctx, shuffled)
	require.NoError(t, err)
	batchOut := make([]string, len(cases))
	for i, o := range order {
		require.True(t, res[i].ok, "execution %d was decided in the batch", o)
		batchOut[o] = beginResult(resultDelivery(t, batchD, res[i], cases[o].Lease))
	}

	rowState, batchState := rowDB.snapshot(t, cases), batchDB.snapshot(t, cases)
	outcomes := map[string]int{}
	for i := range cases {
		require.Equal(t, rowOut[i], batchOut[i], "execution %d: Begin's result", i)
		require.Equal(t, rowState[i], batchState[i], "execution %d: what Begin left", i)
		outcomes[rowState[i].Row[:7]]++
	}
	t.Logf("outcomes: %v", outcomes)
	require.Positive(t, outcomes["running"], "some are sent late")
	require.Positive(t, outcomes["skipped"], "some are missed")
	for _, state := range []string{ExecSkipped, ExecRunning} {
		require.InDelta(t, testutil.ToFloat64(rowM.Finished.WithLabelValues(state)),
			testutil.ToFloat64(batchM.Finished.WithLabelValues(state)), 0, "executions finished %s", state)
	}
	// lateness_ms (left out of the snapshots) is in every event.
	var without int
	require.NoError(t, batchDB.pools.Main.QueryRow(ctx, `SELECT count(*) FROM execution_events WHERE NOT data ? 'lateness_ms'`).Scan(&without))
	require.Zero(t, without)
}

// resultDelivery is what BeginJob returns for a batched start's result.
func resultDelivery(t *testing.T, s *Deliveries, r startResult, lease int) (Delivery, error) {
	t.Helper()
	d := deliveryFromRow(r.row, lease)
	if r.missed {
		d.Action, d.State, d.Reason, d.Ended, d.Missed = ActionDone, ExecSkipped, r.reason, true, true
		return d, nil
	}
	keys, err := endpointOf(r.row.JoinedEndpoint).SigningKeysFrom(r.row.Now, &s.secrets)
	d.Action, d.Attempt, d.Keys, d.Late = ActionSend, r.row.Attempts, keys, r.row.Late
	d.FiringLateness = firstFiringLateness(r.row, r.row.Late)
	return d, err
}

// TestMisfireBatchAndRowByRowSendOneCatchUp: a fire_once task's overdue
// first fires are decided at once, some through the batch and the others
// row by row: whatever the interleaving, exactly one of them is sent (the
// task's catch-up, recorded on the task), each of the others is missed
// once and counted once, and none is sent twice.
func TestMisfireBatchAndRowByRowSendOneCatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEquivDB(t)
	rnd := rand.New(rand.NewPCG(11, 12))
	newID := func() string { return uuid.Must(uuid.NewRandomFromReader(rndReader{rnd})).String() }
	var inBatch, batchCatchUps int
	for round := range 30 {
		task := backlogTask{ID: newID(), Policy: MisfireFireOnce}
		for j := range 5 {
			task.Slots = append(task.Slots, 2*time.Hour+time.Duration(j)*time.Minute)
			task.Execs = append(task.Execs, newID())
		}
		e.writeBacklog(t, []backlogTask{task})
		var batched []db.DeliveryKey
		var byRow []string
		for _, id := range task.Execs {
			if rnd.IntN(2) == 0 {
				batched = append(batched, db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: equivTenant, ID: id}, Lease: 1})
			} else {
				byRow = append(byRow, id)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(byRow)+1)
		var res []startResult
		wg.Go(func() {
			var err error
			res, err = e.d.startPending(ctx, batched)
			errs <- err
		})
		for _, id := range byRow {
			wg.Go(func() {
				_, err := e.d.beginRow(ctx, equivTenant, id, 1, 0)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "round %d", round)
		}
		for i, r := range res {
			if r.ok {
				inBatch++
				if !r.missed {
					batchCatchUps++
				}
			}
			if !r.ok { // left to the row-by-row path (locked by it at the time)
				_, err := e.d.beginRow(ctx, equivTenant, batched[i].ID, 1, 0)
				require.NoError(t, err)
			}
		}
		var running, skipped, started, missedEvents, missedCount int
		var caughtUp bool
		require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'running' AND late),
				count(*) FILTER (WHERE state = 'skipped'),
				(SELECT count(*) FROM execution_events v WHERE v.tenant_id = $1 AND v.type = 'attempt_started'
					AND v.execution_id = ANY (array_agg(e.id))),
				(SELECT count(*) FROM execution_events v WHERE v.tenant_id = $1 AND v.type = 'skipped'
					AND v.execution_id = ANY (array_agg(e.id)))
			FROM executions e WHERE e.tenant_id = $1 AND e.task_id = $2`, equivTenant, task.ID).
			Scan(&running, &skipped, &started, &missedEvents))
		require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT missed_count, caught_up_at IS NOT NULL FROM tasks
			WHERE tenant_id = $1 AND id = $2`, equivTenant, task.ID).Scan(&missedCount, &caughtUp))
		require.Equal(t, 1, running, "round %d: one catch-up", round)
		require.Equal(t, 1, started, "round %d: sent once", round)
		require.Equal(t, 4, skipped, "round %d: the others missed", round)
		require.Equal(t, 4, missedEvents, "round %d: each miss recorded once", round)
		require.Equal(t, 4, missedCount, "round %d: each miss counted once", round)
		require.True(t, caughtUp, "round %d: the catch-up recorded", round)
	}
	t.Logf("the batch decided %d executions, %d of them catch-ups", inBatch, batchCatchUps)
	require.Positive(t, inBatch, "the batch decided some")
	require.Positive(t, batchCatchUps, "the batch sent some catch-ups")
}
