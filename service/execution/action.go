package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/queue"
	"github.com/axhq/ax/service/reconcile"
)

// EventRetried is the timeline event of an unfinished execution that no
// job carried, resumed by an API retry.
const EventRetried = "retried"

// Jobs are the River attempts and the lease ceiling of the deliver jobs
// an action inserts for executions that a batch may have carried: the
// worker enforces the task's own budget.
type Jobs struct {
	// MaxAttempts is a new job's River attempts.
	MaxAttempts int
	// LeaseCeiling is the last lease a job inserted with an execution may
	// use (reconcile.Reconciler.LeaseCeiling).
	LeaseCeiling int
}

// Cancel cancels row, an execution locked in tx (Executions.Cancel): a
// pending or retrying one at once, a running one that waits for its
// callback or that no live job carries at once too, any other running one
// by a cancel request its worker honours; its deliver jobs that did not
// complete are cancelled. now reports that it ended here (cancelled).
func Cancel(ctx context.Context, tx db.Tx, enq *queue.Enqueuer, jobs Jobs, tenant string, row db.Execution) (now bool, err error) {
	var ok bool
	now = true
	if !lifecycle.ExecUnfinished.Has(row.State) {
		return false, errs.Conflictf("the execution is %s; only pending, retrying and running executions can be cancelled", row.State)
	}
	if err := lifecycle.Executions.Check([]string{row.State}, lifecycle.ExecCancelled); err != nil {
		return false, err
	}
	switch {
	case lifecycle.ExecIdle.Has(row.State):
		ok, err = db.CancelExecution(ctx, tx, tenant, row.ID, "cancelled through the API", []string{row.State})
	case row.State == lifecycle.ExecRunning:
		var orphaned, waiting bool
		if waiting, err = db.EndCallbacks(ctx, tx, tenant, row.ID); err != nil {
			return false, errs.Store(err, "end callbacks")
		}
		if !waiting {
			if _, orphaned, err = db.GetOrphanedExecution(ctx, tx, tenant, row.ID, jobs.LeaseCeiling); err != nil {
				return false, errs.Store(err, "load orphaned execution")
			}
		}
		switch {
		case waiting:
			// No worker holds it: the wait ends with the cancel (the
			// token can no longer act).
			ok, err = db.CancelExecution(ctx, tx, tenant, row.ID,
				"cancelled through the API while waiting for the receiver's callback", []string{lifecycle.ExecRunning})
		case orphaned:
			ok, err = db.CancelExecution(ctx, tx, tenant, row.ID,
				"cancelled through the API (no job was delivering the execution)", []string{lifecycle.ExecRunning})
		default:
			ok, err = db.RequestExecutionCancel(ctx, tx, tenant, row.ID)
			now = false
		}
	}
	if err != nil {
		return false, errs.Store(err, "cancel execution")
	}
	if !ok { // the row is locked: cannot happen
		return false, errs.Conflictf("the execution changed state; try again")
	}
	// Even when a job cannot be cancelled (a worker just picked it up),
	// the worker re-checks the execution and sends nothing.
	carriers, err := db.ExecutionJobs(ctx, tx, job.DeliverArgs{}.Kind(), tenant, row.ID, row.RiverJobID)
	if err != nil {
		return false, errs.Store(err, "list execution jobs")
	}
	for _, j := range carriers {
		if rivertype.JobState(j.State) == rivertype.JobStateCompleted {
			continue
		}
		if err := enq.CancelTx(ctx, tx, j.ID); err != nil {
			return false, err
		}
	}
	return now, nil
}

// RetryUnfinished is an API retry of row, an execution locked in tx that
// is not final: one that no live job carries is resumed by a new job; a
// retrying one makes its next attempt now; any other is a conflict.
func RetryUnfinished(ctx context.Context, tx db.Tx, enq *queue.Enqueuer, jobs Jobs, tenant string, row db.Execution) error {
	o, orphaned, err := db.GetOrphanedExecution(ctx, tx, tenant, row.ID, jobs.LeaseCeiling)
	if err != nil {
		return errs.Store(err, "load orphaned execution")
	}
	if orphaned {
		data := map[string]any{"previous_state": row.State}
		ok, err := reconcile.Resume(ctx, tx, enq, o, jobs.MaxAttempts, EventRetried,
			"retried through the API: no job was delivering the execution", data)
		if err == nil && !ok {
			return errs.Conflictf("the execution changed state; try again")
		}
		return err
	}
	if row.State != lifecycle.ExecRetrying {
		return errs.Conflictf("the execution is %s and being delivered; it cannot be retried until it ends", row.State)
	}
	ok, err := db.HurryRetry(ctx, tx, tenant, row.ID)
	if err != nil {
		return errs.Store(err, "hurry retry")
	}
	if !ok { // the row is locked: cannot happen
		return errs.Conflictf("the execution changed state; try again")
	}
	carriers, err := db.ExecutionJobs(ctx, tx, job.DeliverArgs{}.Kind(), tenant, row.ID, row.RiverJobID)
	if err != nil {
		return errs.Store(err, "list execution jobs")
	}
	for _, j := range carriers {
		switch rivertype.JobState(j.State) {
		case rivertype.JobStateScheduled, rivertype.JobStateRetryable:
			if err := enq.RetryNowTx(ctx, tx, j.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReleaseJobs frees the River unique slot of an execution's deliver job
// (DeliverArgs are unique by execution, and a completed job keeps its slot
// until River's cleaner deletes it) so that a new job can be inserted: a
// completed job is deleted (the execution's own timeline keeps the
// history), a queued one is cancelled. A running job means a worker is
// still finishing the previous delivery: a conflict.
func ReleaseJobs(ctx context.Context, tx db.Tx, enq *queue.Enqueuer, tenant string, row db.Execution) error {
	carriers, err := db.ExecutionJobs(ctx, tx, job.DeliverArgs{}.Kind(), tenant, row.ID, row.RiverJobID)
	if err != nil {
		return errs.Store(err, "list execution jobs")
	}
	for _, j := range carriers {
		switch rivertype.JobState(j.State) {
		case rivertype.JobStateRunning:
			return errs.Conflictf("the previous delivery of this execution is still finishing; retry shortly")
		case rivertype.JobStateCompleted:
			err = enq.DeleteTx(ctx, tx, j.ID)
		default:
			err = enq.CancelTx(ctx, tx, j.ID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// EnqueueNow inserts an execution's deliver job, available at once, with
// the task's priority and attempt budget, and returns its id.
func EnqueueNow(ctx context.Context, tx db.Tx, enq *queue.Enqueuer, tenant, executionID string, task db.Task) (int64, error) {
	var now time.Time // scheduled for now: not a scheduled job
	res, err := enq.Enqueue(ctx, tx, []river.InsertManyParams{
		queue.DeliverInsert(tenant, executionID, task.EndpointID, now, int(task.Priority), int(task.MaxAttempts), now, 0, queue.Deliver),
	})
	if err != nil {
		return 0, err
	}
	if res[0].UniqueSkippedAsDuplicate {
		return 0, errs.Conflictf("a delivery of this execution is already queued")
	}
	return res[0].Job.ID, nil
}

// DedupKeyMax is the longest dedup key of a manual trigger, in characters.
const DedupKeyMax = 128

// TriggerInput is a manual fire of a task.
type TriggerInput struct {
	// Payload overrides the task's payload for this execution; nil means
	// the task's.
	Payload []byte
	// DedupKey, when set, makes the trigger idempotent per task: the same
	// key returns the execution it first created.
	DedupKey string
}

// Validate checks in; an overriding payload has at most payloadMax bytes.
func (in TriggerInput) Validate(payloadMax int) error {
	var ve errs.ValidationError
	if in.Payload != nil {
		switch {
		case len(in.Payload) > payloadMax:
			ve.Add("payload", fmt.Sprintf("must be at most %d bytes", payloadMax))
		case !json.Valid(in.Payload):
			ve.Add("payload", "must be valid JSON")
		}
	}
	if in.DedupKey != "" && !validDedupKey(in.DedupKey) {
		ve.Add("dedup_key", fmt.Sprintf("must be 1 to %d printable characters", DedupKeyMax))
	}
	return ve.Err()
}

func validDedupKey(k string) bool {
	return k != "" && utf8.ValidString(k) && utf8.RuneCountInString(k) <= DedupKeyMax &&
		!strings.ContainsFunc(k, func(r rune) bool { return !unicode.IsPrint(r) })
}

// CheckEndpointEnabled is a conflict naming the endpoint when it is
// disabled (by a client, or by ax after a 410 Gone): a fire sent to it is
// cancelled before it leaves.
func CheckEndpointEnabled(ctx context.Context, q db.Querier, tenant, endpointID string) error {
	ep, err := db.GetEndpoint(ctx, q, tenant, endpointID, false)
	if err != nil {
		return errs.Store(err, "load endpoint "+endpointID)
	}
	if ep.Enabled {
		return nil
	}
	why := ""
	if ep.DisabledReason != nil && *ep.DisabledReason != "" {
		why = " (" + *ep.DisabledReason + ")"
	}
	return errs.Conflictf("the task's endpoint %q (%s) is disabled%s: enable it (PATCH /v1/endpoints/%s {\"enabled\": true}) "+
		"before triggering", ep.Name, ep.ID, why, ep.ID)
}
