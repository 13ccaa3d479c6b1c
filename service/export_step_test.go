package service

import "context"

// StepRequest is one node success for FinishStepsTogether.
type StepRequest struct {
	ExecutionID string
	Lease       int
	// Outcome is the success to record (zero: a 200 without a body).
	Outcome Outcome
}

// FinishStepsTogether records the node successes reqs in one step batch,
// as Finish's batch does with the ones that meet in time, and reports
// which of them it recorded (the others are the row-by-row path's).
func (s *Deliveries) FinishStepsTogether(ctx context.Context, tenant string, reqs []StepRequest) ([]bool, error) {
	in := make([]stepSuccess, len(reqs))
	for i, r := range reqs {
		in[i] = stepSuccess{
			tenant: tenant, id: r.ExecutionID, lease: r.Lease,
			out: Outcome{Kind: OutcomeSucceeded, StatusCode: 200, WorkflowRun: true},
		}
		if r.Outcome.Kind != 0 {
			in[i].out = r.Outcome
		}
	}
	res, err := s.recordSteps(ctx, in)
	if err != nil {
		return nil, err
	}
	ok := make([]bool, len(res))
	for i, r := range res {
		ok[i] = r.ok
	}
	return ok, nil
}

// FinishRow records an outcome on the row-by-row path (never a batch).
func (s *Deliveries) FinishRow(ctx context.Context, tenant, executionID string, lease int, out Outcome) (Finished, error) {
	return s.finishRow(ctx, tenant, executionID, lease, out)
}
