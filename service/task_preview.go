package service

import (
	"context"

	"github.com/axhq/ax/service/preview"
	"github.com/axhq/ax/service/schedule"
)

// PreviewSchedule returns the next n fire times that task id would have
// with schedule spec instead of its own, from now: the slots its preview
// would list once a change of its schedule to spec is saved (the console
// shows them while the schedule is edited), computed by the same code as
// Preview, with spec's calendars applied. Nothing is stored. An invalid
// spec is a *ValidationError on the schedule's fields.
func (s *Tasks) PreviewSchedule(ctx context.Context, tenant, id string, spec schedule.Spec, n int) (TaskPreview, error) {
	t, err := s.Get(ctx, tenant, id)
	if err != nil {
		return TaskPreview{}, err
	}
	if spec.Timezone == "" {
		spec.Timezone = "UTC"
	}
	sched, err := parseSchedule(spec, t.CreatedAt)
	if err != nil {
		return TaskPreview{}, err
	}
	if sched, err = s.withCalendars(ctx, s.pool, tenant, sched, false); err != nil {
		return TaskPreview{}, err
	}
	now, err := s.now(ctx)
	if err != nil {
		return TaskPreview{}, err
	}
	return preview.Schedule(ctx, sched, now, n)
}

// TaskPreview is a task's upcoming fire times (service/preview).
type TaskPreview = preview.Preview
