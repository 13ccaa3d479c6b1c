package service

import (
	"context"

	"github.com/axhq/ax/db"
)

// CompletionRequest is one call of CompleteTogether.
type CompletionRequest struct {
	ExecutionID string
	Grant       *CallbackGrant
	In          CompletionInput
}

// CompleteTogether answers reqs as Complete answers each, but offers every
// success among them to one batched statement together — the batch
// Complete forms only from the calls that meet in time — and sends the
// ones it leaves to the row-by-row path, as Complete does. batched lists
// the requests the statement recorded, in order.
func (s *Deliveries) CompleteTogether(ctx context.Context, tenant string, reqs []CompletionRequest,
) (out []Completed, errs []error, batched []int, err error) {
	out, errs = make([]Completed, len(reqs)), make([]error, len(reqs))
	var offered []int
	var cs []db.CallbackCompletion
	for i, r := range reqs {
		if !validID(r.ExecutionID) {
			errs[i] = ErrNotFound
			continue
		}
		if errs[i] = r.In.Validate(); errs[i] != nil || r.In.Status != ExecSucceeded {
			continue
		}
		c, err := completionOf(ctx, tenant, r.ExecutionID, r.Grant, r.In, completionData(r.Grant, r.In))
		if err != nil {
			return nil, nil, nil, err
		}
		offered, cs = append(offered, i), append(cs, c)
	}
	res, err := s.completeMany(ctx, cs)
	if err != nil {
		return nil, nil, nil, err
	}
	taken := map[int]bool{}
	for j, i := range offered {
		if res[j].ok {
			out[i], taken[i] = batchedCompletion(reqs[i].In, res[j]), true
			batched = append(batched, i)
		}
	}
	for i, r := range reqs {
		if taken[i] || errs[i] != nil {
			continue
		}
		out[i], errs[i] = s.CompleteRow(ctx, tenant, r)
	}
	return out, errs, batched, nil
}

// CompleteRow completes r through the row-by-row path only.
func (s *Deliveries) CompleteRow(ctx context.Context, tenant string, r CompletionRequest) (Completed, error) {
	return s.completeRow(ctx, tenant, r.ExecutionID, r.Grant, r.In, completionData(r.Grant, r.In))
}
