package service

import (
	"context"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/bulk"
)

// RetryBulkMax bounds the executions one bulk retry may match
// (bulk.RetryMax).
const RetryBulkMax = bulk.RetryMax

type (
	// RetryBulkInput selects the final executions a bulk retry delivers
	// again.
	RetryBulkInput = bulk.RetryInput
	// RetryBulkResult is what a bulk retry did.
	RetryBulkResult = bulk.RetryResult
)

// RetryBulk delivers again, as Retry does one by one (each with its own
// audit record), every execution in.State selects, oldest slot first
// (bulk.Retry); then one more audit record says what the bulk retry did:
// its selection and its counts, under the task or workflow it named (an
// execution with no id when it named neither). A dry run records nothing.
func (s *Executions) RetryBulk(ctx context.Context, tenant string, in RetryBulkInput) (RetryBulkResult, error) {
	res, err := bulk.Retry(ctx, s.pool, tenant, in, func(ctx context.Context, tenant, id string) error {
		_, err := s.Retry(ctx, tenant, id)
		return err
	})
	if err != nil || in.DryRun || res.Matched == 0 {
		return res, err
	}
	typ, id := ResourceExecution, ""
	switch {
	case in.TaskID != "":
		typ, id = ResourceTask, strings.ToLower(in.TaskID)
	case in.WorkflowID != "":
		typ, id = ResourceWorkflow, strings.ToLower(in.WorkflowID)
	}
	changes := map[string]any{"bulk_retry": map[string]any{
		"state": in.State, "from": in.From.UTC().Format(time.RFC3339Nano), "to": in.To.UTC().Format(time.RFC3339Nano),
		"matched": res.Matched, "retried": res.Retried, "skipped": res.Skipped,
	}}
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		return recordAudit(ctx, tx, tenant, AuditRetry, typ, id, changes)
	})
	return res, storeError(err, "record the bulk retry")
}
