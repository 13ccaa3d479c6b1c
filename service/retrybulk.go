package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/resource"
)

// RetryBulkMax bounds the executions one bulk retry may match.
const RetryBulkMax = 10000

// retryBulkReasonsMax bounds the skipped executions a bulk retry names.
const retryBulkReasonsMax = 10

// RetryBulkInput selects the final executions a bulk retry delivers again:
// those in State (failed or cancelled) whose slot lies in [From, To), of
// TaskID and of WorkflowID when set.
type RetryBulkInput struct {
	TaskID, WorkflowID string
	State              string
	From, To           time.Time
	// DryRun counts the matches and retries nothing.
	DryRun bool
}

// RetryBulkResult is what a bulk retry did.
type RetryBulkResult struct {
	Matched, Retried int
	// Skipped are the matches left as they were (a paused or deleted
	// task, a slot another execution fires now, a change in between),
	// and the first few of them with the reason.
	Skipped int
	Reasons []string
}

func (in RetryBulkInput) validate() error {
	var ve ValidationError
	if in.State != ExecFailed && in.State != ExecCancelled {
		ve.Add("state", "must be failed or cancelled")
	}
	switch {
	case in.From.IsZero():
		ve.Add("from", "is required")
	case in.To.IsZero():
		ve.Add("to", "is required")
	case !in.From.Before(in.To):
		ve.Add("to", "must be after from")
	}
	if in.TaskID != "" && !resource.ValidID(in.TaskID) {
		ve.Add("task_id", "must be a task id")
	}
	if in.WorkflowID != "" && !resource.ValidID(in.WorkflowID) {
		ve.Add("workflow_id", "must be a workflow id")
	}
	return ve.Err()
}

// RetryBulk delivers again, as Retry does one by one (same ids, so the
// same idempotency keys; one audit record each), every execution in.State
// selects, oldest slot first; more than RetryBulkMax matches is a
// validation error that says so, and nothing is retried. A match Retry
// refuses is skipped and counted; any other error stops the bulk retry
// (what it retried so far stays retried).
func (s *Executions) RetryBulk(ctx context.Context, tenant string, in RetryBulkInput) (RetryBulkResult, error) {
	if err := in.validate(); err != nil {
		return RetryBulkResult{}, err
	}
	ids, err := db.RetryCandidates(ctx, s.pool, tenant, in.State, strings.ToLower(in.TaskID), strings.ToLower(in.WorkflowID),
		in.From, in.To, RetryBulkMax+1)
	if err != nil {
		return RetryBulkResult{}, storeError(err, "list executions to retry")
	}
	if len(ids) > RetryBulkMax {
		return RetryBulkResult{}, fieldError("to", fmt.Sprintf("the range matches more than %d %s executions: narrow from/to, "+
			"or name a task_id or workflow_id", RetryBulkMax, in.State))
	}
	out := RetryBulkResult{Matched: len(ids)}
	if in.DryRun {
		return out, nil
	}
	for _, id := range ids {
		_, err := s.Retry(ctx, tenant, id)
		switch {
		case err == nil:
			out.Retried++
		case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
			out.Skipped++
			if len(out.Reasons) < retryBulkReasonsMax {
				out.Reasons = append(out.Reasons, id+": "+err.Error())
			}
		default:
			return out, err
		}
	}
	return out, nil
}
