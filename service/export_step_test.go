package service

import "context"

// StepRequest is one node success for FinishStepsTogether.
type StepRequest struct {
	ExecutionID string
	Lease       int
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
