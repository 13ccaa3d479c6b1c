package service

import (
	"cmp"
	"context"
	"slices"

	"github.com/axhq/ax/db"
)

// decideMisfires is the batched start's second step, for the attempts
// its statement left (keys, at their indexes idx in the batch): the
// misfires startRules.batchesMisfire admits — late first fires of
// recurring tasks when deliveries fall behind — are decided together in
// one transaction, not row by row (startDecision.MisfireBatch). It locks
// them and their tasks, skipping any another transaction holds
// (db.LockMisfires), reads their facts afterwards
// (db.GetDeliveriesForUpdate: it sees what a concurrent decision of the
// task committed before), asks decideStart for each of a task's misfires
// in the order of its slots, as the row-by-row path would one after the
// other under the task's lock — a catch-up the batch decides counts for
// the task's misfires after it (CaughtUp) — and writes the verdicts, each
// task's row once (db.ApplyMisfireDecisions). The results of the attempts
// it decided are set in res; the others are left to the row-by-row path.
// It returns how many executions it missed (ended skipped).
func (s *Deliveries) decideMisfires(ctx context.Context, keys []db.DeliveryKey, idx []int, res []startResult) (int, error) {
	rules, misfire := s.cfg.rules(), s.cfg.misfire()
	type decided struct {
		at    int // index in res
		lease int
		row   db.DeliveryRow
		dec   startDecision
	}
	var out []decided
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		out = out[:0]
		ords, err := db.LockMisfires(ctx, tx, keys, misfire)
		if err != nil || len(ords) == 0 {
			return err
		}
		refs := make([]db.ExecutionRef, len(ords))
		for i, o := range ords {
			refs[i] = keys[o].ExecutionRef
		}
		rows, err := db.GetDeliveriesForUpdate(ctx, tx, refs, misfire)
		if err != nil {
			return err
		}
		// rows follow ords (every locked execution exists); the slots of
		// each task in order.
		order := make([]int, len(rows))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int {
			ra, rb := rows[a], rows[b]
			return cmp.Or(cmp.Compare(ra.TenantID, rb.TenantID), cmp.Compare(ra.TaskID, rb.TaskID),
				ra.ScheduledFor.Compare(rb.ScheduledFor), cmp.Compare(ra.ID, rb.ID))
		})
		var apply db.MisfireDecisions
		tasks := map[taskKey]int{} // index in apply.Tasks
		for _, i := range order {
			row, key := rows[i], keys[ords[i]]
			if row.ID != key.ID || row.TenantID != key.TenantID {
				continue // not read: the row-by-row path decides it
			}
			task := taskKey{row.TenantID, row.TaskID}
			t, seen := tasks[task]
			f := startFactsOf(row, key.Lease, key.JobID, s.cfg.Limits.deliveryGates(row))
			if seen && apply.Tasks[t].CatchUp && rules.decidedAlone(f) {
				// The catch-up this batch started for the task: now, after
				// this slot (a misfire's slot is before the threshold).
				f.CaughtUp = true
			}
			dec := decideStart(f, rules)
			if !dec.MisfireBatch || row.WorkflowRunID != nil {
				continue // the row-by-row path decides it (a rule of decideStart)
			}
			if !seen {
				t = len(apply.Tasks)
				tasks[task] = t
				apply.Tasks = append(apply.Tasks, db.MisfireTask{TenantID: row.TenantID, ID: row.TaskID})
			}
			lateness := row.Now.Sub(row.ScheduledFor).Milliseconds()
			switch dec.Verdict {
			case startSend:
				apply.Starts = append(apply.Starts, db.MisfireStart{
					ExecutionRef: key.ExecutionRef, Lease: key.Lease,
					Data: map[string]any{"late": true, "lateness_ms": lateness, "misfire_policy": zeroIfNil(row.MisfirePolicy)},
				})
				apply.Tasks[t].CatchUp = apply.Tasks[t].CatchUp || dec.CatchUp
			case startMiss:
				apply.Misses = append(apply.Misses, db.MisfireMiss{
					ExecutionRef: key.ExecutionRef, Reason: dec.Reason,
					Data: map[string]any{"misfire_policy": zeroIfNil(row.MisfirePolicy), "lateness_ms": lateness},
				})
				apply.Tasks[t].Missed++
			default:
				continue
			}
			out = append(out, decided{at: idx[ords[i]], lease: key.Lease, row: row, dec: dec})
		}
		if len(out) == 0 {
			return nil
		}
		attempts, err := db.ApplyMisfireDecisions(ctx, tx, apply)
		if err != nil {
			return err
		}
		sent := 0
		for i := range out {
			if out[i].dec.Verdict == startSend {
				r := &out[i].row
				r.State, r.Attempts, r.LeaseAttempt, r.Late = ExecRunning, attempts[sent], out[i].lease, true
				sent++
			}
		}
		return nil
	})
	if err != nil {
		return 0, storeError(err, "decide misfires")
	}
	missed := 0
	for _, o := range out {
		r := startResult{row: o.row, ok: true}
		if o.dec.Verdict == startMiss {
			r.missed, r.reason = true, o.dec.Reason
			missed++
		}
		res[o.at] = r
	}
	return missed, nil
}

// taskKey names a task.
type taskKey struct{ tenant, id string }
