package service

import (
	"context"

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

// RetryBulk delivers again, as Retry does one by one, every execution
// in.State selects, oldest slot first (bulk.Retry).
func (s *Executions) RetryBulk(ctx context.Context, tenant string, in RetryBulkInput) (RetryBulkResult, error) {
	return bulk.Retry(ctx, s.pool, tenant, in, func(ctx context.Context, tenant, id string) error {
		_, err := s.Retry(ctx, tenant, id)
		return err
	})
}
