// Package bulk retries many final executions at once, each as an API
// retry of it alone would (POST /v1/executions/retry).
package bulk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/resource"
)

// RetryMax bounds the executions one bulk retry may match.
const RetryMax = 10000

// reasonsMax bounds the skipped executions a bulk retry names.
const reasonsMax = 10

// RetryInput selects the final executions a bulk retry delivers again:
// those in State (failed or cancelled) whose slot lies in [From, To), of
// TaskID and of WorkflowID when set.
type RetryInput struct {
	TaskID, WorkflowID string
	State              string
	From, To           time.Time
	// DryRun counts the matches and retries nothing.
	DryRun bool
}

// RetryResult is what a bulk retry did.
type RetryResult struct {
	Matched, Retried int
	// Skipped are the matches left as they were (a paused or deleted
	// task, a slot another execution fires now, a change in between),
	// and the first few of them with the reason.
	Skipped int
	Reasons []string
}

func (in RetryInput) validate() error {
	var ve errs.ValidationError
	if in.State != lifecycle.ExecFailed && in.State != lifecycle.ExecCancelled {
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

// Retry delivers again, through retry one by one (service's
// Executions.Retry: same ids, so the same idempotency keys; one audit
// record each), every execution in.State selects, oldest slot first; more
// than RetryMax matches is a validation error that says so, and nothing
// is retried. A match retry refuses (a conflict, not found) is skipped and
// counted; any other error stops the bulk retry (what it retried so far
// stays retried).
func Retry(ctx context.Context, q db.Querier, tenant string, in RetryInput, retry func(ctx context.Context, tenant, id string) error,
) (RetryResult, error) {
	if err := in.validate(); err != nil {
		return RetryResult{}, err
	}
	ids, err := db.RetryCandidates(ctx, q, tenant, in.State, strings.ToLower(in.TaskID), strings.ToLower(in.WorkflowID),
		in.From, in.To, RetryMax+1)
	if err != nil {
		return RetryResult{}, errs.Store(err, "list executions to retry")
	}
	if len(ids) > RetryMax {
		return RetryResult{}, errs.Field("to", fmt.Sprintf("the range matches more than %d %s executions: narrow from/to, "+
			"or name a task_id or workflow_id", RetryMax, in.State))
	}
	out := RetryResult{Matched: len(ids)}
	if in.DryRun {
		return out, nil
	}
	for _, id := range ids {
		err := retry(ctx, tenant, id)
		switch {
		case err == nil:
			out.Retried++
		case errors.Is(err, errs.ErrConflict), errors.Is(err, errs.ErrNotFound):
			out.Skipped++
			if len(out.Reasons) < reasonsMax {
				out.Reasons = append(out.Reasons, id+": "+err.Error())
			}
		default:
			return out, errs.Store(err, "retry execution")
		}
	}
	return out, nil
}
