package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// TestPreviewSchedule: the next fires of a task as if its schedule were
// another, with that schedule's calendars applied and nothing stored; an
// invalid schedule is a validation error on its field; another tenant's
// task is not found.
func TestPreviewSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "daily", EndpointID: f.endpoint, Schedule: schedule.Spec{Type: schedule.Cron, Cron: "0 9 * * *"},
	})
	require.NoError(t, err)

	p, err := f.tasks.PreviewSchedule(ctx, f.tenant, task.ID, schedule.Spec{Type: schedule.Cron, Cron: "30 18 * * *", Timezone: "Asia/Tokyo"}, 3)
	require.NoError(t, err)
	require.Len(t, p.Fires, 3)
	for i, at := range p.Fires {
		assert.Equal(t, "09:30", at.UTC().Format("15:04"), "18:30 in Tokyo")
		if i > 0 {
			assert.Equal(t, 24*time.Hour, at.Sub(p.Fires[i-1]))
		}
	}
	assert.Equal(t, "Asia/Tokyo", p.Schedule.Location().String())

	// The calendars the schedule names remove their dates.
	tomorrow := p.Fires[0].In(p.Schedule.Location()).Format(time.DateOnly)
	cal, err := service.NewCalendars(f.pool, f.tasks).Create(ctx, f.tenant, service.CalendarInput{
		Name: "off", Timezone: "Asia/Tokyo", Dates: []string{tomorrow},
	})
	require.NoError(t, err)
	q, err := f.tasks.PreviewSchedule(ctx, f.tenant, task.ID,
		schedule.Spec{Type: schedule.Cron, Cron: "30 18 * * *", Timezone: "Asia/Tokyo", ExcludeCalendars: []string{cal.ID}}, 3)
	require.NoError(t, err)
	assert.Equal(t, []time.Time{p.Fires[0]}, q.Excluded)
	assert.Equal(t, p.Fires[1:], q.Fires[:2])

	_, err = f.tasks.PreviewSchedule(ctx, f.tenant, task.ID, schedule.Spec{Type: schedule.Cron, Cron: "61 * * * *"}, 3)
	var ve *service.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "schedule.cron", ve.Fields[0].Field)

	_, err = f.tasks.PreviewSchedule(ctx, "globex", task.ID, schedule.Spec{Type: schedule.Cron, Cron: "* * * * *"}, 3)
	require.ErrorIs(t, err, service.ErrNotFound)

	got, err := f.tasks.Get(ctx, f.tenant, task.ID)
	require.NoError(t, err)
	assert.Equal(t, "0 9 * * *", got.Schedule.Cron, "nothing stored")
}
