package service

import (
	"cmp"
	"context"
	"slices"

	"github.com/axhq/ax/db"
)

// Workflow steps batched: the successes of workflow nodes' executions
// (Outcome.WorkflowRun) that arrive together, from any runs, are recorded
// in one transaction (Deliveries.recordSteps) rather than one each, and
// each run they belong to advances once in it, after all of them: the
// eight upstreams of a join that finish together cost one commit and one
// advance, not eight of each, and the successors of many runs are handed
// off at one commit. Each success is recorded exactly as the row-by-row
// path records it (Deliveries.finish, with the same decision): the plain
// ones (plainStep, nearly all) in one statement for the batch
// (db.EndNodeSuccesses: the same execution row, events and output), the
// others one by one; only its run's advance waits for the end of the
// batch, still in its transaction.
// A success the batch does not record (its attempt is stale, its row is
// gone) and every success of a batch that failed take the row-by-row
// path, which reports the conflict or records it alone.
//
// Locks are taken in one order, the engine's (execution, then run, then
// workflow): every execution of the batch first (in id order, read in
// one statement: db.GetDeliveryOutcomes), then every
// run (db.LockRuns, in id order, tenant by tenant), and only then the
// advances, which may lock a workflow (a run's end that promotes a
// pending run). Two batches, or a batch and a single transition, never
// hold what the other waits for.

// stepFlushers is how many step batches run at once: a step's successors
// wait for its commit, so two run side by side while more gather.
const stepFlushers = 2

// stepSuccess is a node execution's success offered to the step batch.
type stepSuccess struct {
	tenant, id string
	lease      int
	out        Outcome
}

// stepResult is what the batch did with one success: ok, it recorded it
// (fin).
type stepResult struct {
	fin Finished
	ok  bool
}

// mayBatchStep reports whether Finish offers out to the step batch: a
// workflow node's success (the plain ones have their own batch,
// mayBatchFinish).
func mayBatchStep(out Outcome) bool { return out.Kind == OutcomeSucceeded && out.WorkflowRun }

// finishStep records a node's success in the step batch; ok false leaves
// it to the row-by-row path.
func (s *Deliveries) finishStep(ctx context.Context, tenant, executionID string, lease int, out Outcome) (Finished, bool) {
	r, err := s.steps.Do(ctx, stepSuccess{tenant: tenant, id: executionID, lease: lease, out: out})
	if err != nil || !r.ok {
		return Finished{}, false
	}
	return r.fin, true
}

// laterKey marks a context whose node transitions leave their run's
// advance to the step batch (advanceLater).
type laterKey struct{}

// runsToAdvance are the runs a step batch advances once its successes are
// recorded.
type runsToAdvance map[db.RunRef]struct{}

// advanceLater returns the runs ctx collects for a step batch's advances
// (nil: advance at once).
func advanceLater(ctx context.Context) runsToAdvance {
	r, _ := ctx.Value(laterKey{}).(runsToAdvance)
	return r
}

// recordSteps records a batch of node successes in one transaction (see
// the top of the file).
func (s *Deliveries) recordSteps(ctx context.Context, reqs []stepSuccess) ([]stepResult, error) {
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(reqs[a].tenant, reqs[b].tenant), cmp.Compare(reqs[a].id, reqs[b].id))
	})
	var (
		res  []stepResult
		done ended // what the advances end (nodes failed unsent)
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		res, done = make([]stepResult, len(reqs)), nil
		refs := make([]db.ExecutionRef, len(order))
		for k, i := range order {
			refs[k] = db.ExecutionRef{TenantID: reqs[i].tenant, ID: reqs[i].id}
		}
		read, err := db.GetDeliveryOutcomes(ctx, tx, refs)
		if err != nil {
			return storeError(err, "load executions")
		}
		rows := make([]*db.DeliveryOutcome, len(reqs))
		runs := runsToAdvance{}
		for k, i := range order {
			r, row := reqs[i], read[k]
			if row == nil || row.WorkflowRunID == nil ||
				decideFinish(s.finishFactsOf(*row, r.lease), r.out).Verdict != finishSucceed {
				continue // gone or stale: the row-by-row path reports the conflict
			}
			rows[i] = row
			runs[db.RunRef{TenantID: r.tenant, ID: *row.WorkflowRunID}] = struct{}{}
		}
		locks := sortedRuns(runs)
		for i := 0; i < len(locks); {
			j := i
			var ids []string
			for ; j < len(locks) && locks[j].TenantID == locks[i].TenantID; j++ {
				ids = append(ids, locks[j].ID)
			}
			if _, err := db.LockRuns(ctx, tx, locks[i].TenantID, ids); err != nil {
				return storeError(err, "lock workflow runs")
			}
			i = j
		}
		recorded := runsToAdvance{}
		later := context.WithValue(ctx, laterKey{}, recorded)
		var (
			plain []db.NodeSuccess // recorded in one statement
			at    []int            // their indexes in reqs
			seen  = map[db.ExecutionRef]bool{}
		)
		for _, i := range order {
			row := rows[i]
			if row == nil {
				continue
			}
			r := reqs[i]
			ref := db.ExecutionRef{TenantID: r.tenant, ID: r.id}
			if plainStep(*row, decideFinish(s.finishFactsOf(*row, r.lease), r.out)) && !seen[ref] {
				seen[ref] = true
				events, output := successWrites(*row, r.out)
				var status *int
				if r.out.StatusCode != 0 {
					status = &r.out.StatusCode
				}
				plain = append(plain, db.NodeSuccess{
					ExecutionRef: ref, Lease: r.lease, StatusCode: status,
					KeepStatusCode: r.out.Detached && status == nil, Events: events, Output: output,
				})
				at = append(at, i)
				recorded[db.RunRef{TenantID: r.tenant, ID: *row.WorkflowRunID}] = struct{}{}
				continue
			}
			fin, err := s.finish(later, tx, r.tenant, r.id, r.lease, *row, r.out)
			if err != nil {
				return err
			}
			res[i] = stepResult{fin: fin, ok: true}
		}
		if len(plain) > 0 {
			ended, err := db.EndNodeSuccesses(ctx, tx, plain)
			if err != nil {
				return storeError(err, "record node successes")
			}
			if len(ended) != len(plain) { // they are locked: only a bug gets here
				return conflictf("%d of %d node successes found their execution changed under its lock",
					len(plain)-len(ended), len(plain))
			}
			for _, i := range at {
				fin := Finished{State: ExecSucceeded, Attempt: rows[i].Attempts}
				fin.ended.add(ExecSucceeded, 1)
				res[i] = stepResult{fin: fin, ok: true}
			}
		}
		eng := runEngine{enq: s.enqueuer, metrics: s.cfg.Metrics, graphs: &s.graphs, ended: &done}.gathering(&handOffs{})
		// Every run is read before any advances: an advance changes its
		// own run's rows only (and opens pending runs, which none of
		// these is).
		reads, err := db.ReadRunsForAdvance(ctx, tx, sortedRuns(recorded))
		if err != nil {
			return storeError(err, "load workflow runs")
		}
		for _, r := range reads {
			if err := eng.advanceRead(ctx, tx, r); err != nil {
				return err
			}
		}
		return eng.handOffs.insert(ctx, tx, s.enqueuer)
	})
	if err != nil {
		return nil, storeError(err, "record workflow steps")
	}
	for i := range res {
		if res[i].ok {
			s.released(res[i].fin)
			res[i].fin.ended.report(s.cfg.Metrics)
		}
	}
	done.report(s.cfg.Metrics)
	return res, nil
}

// plainStep reports whether the step batch records the success of row
// (decided dec) in its one statement (db.EndNodeSuccesses): a success
// that writes nothing beyond its execution, events and output — no permit
// to give back (dec.Release), no failure streak of a task to end.
// Deliveries.finish records the others, in the batch's transaction.
func plainStep(row db.DeliveryOutcome, dec finishDecision) bool {
	return dec.Verdict == finishSucceed && !dec.Release && row.TaskFailures == 0 && !row.TaskFailureAlerted
}

// sortedRuns returns runs in (tenant, id) order: the order the batch locks
// and advances them in.
func sortedRuns(runs runsToAdvance) []db.RunRef {
	out := make([]db.RunRef, 0, len(runs))
	for r := range runs {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b db.RunRef) int {
		return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.ID, b.ID))
	})
	return out
}
