package service

import "context"

// Check validates a workflow document as Create and Update do — its
// fields, its graph (a cycle is refused naming its nodes), the tenant's
// endpoints and calendars — and stores nothing: the console's preview of
// a draft. It does not look at the tenant's other workflows (a name
// already taken) or its quota, which only saving can settle.
func (s *Workflows) Check(ctx context.Context, tenant string, in WorkflowInput) error {
	in = in.withDefaults()
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return err
	}
	sched, _, err := s.validate(in, now)
	if err != nil {
		return err
	}
	if err := checkEndpoints(ctx, s.pool, tenant, in); err != nil {
		return err
	}
	_, err = withWorkflowCalendars(ctx, s.pool, tenant, sched, false)
	return storeError(err, "check workflow")
}
