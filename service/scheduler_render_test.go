package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/schedule"
)

// TestRenderCacheBound: the scheduler keeps templated tasks' renderers up
// to its bound in bytes; a task past it still renders (its template
// parsed at each claim), and a task's new version gives back its old
// renderer's bytes.
func TestRenderCacheBound(t *testing.T) {
	t.Parallel()
	every := int64(1)
	task := func(id string, version int32) db.DueTask {
		return db.DueTask{
			TenantID: "tenant", ID: id, ScheduleType: schedule.Interval, Timezone: "Asia/Shanghai", IntervalSeconds: &every,
			Version: version, CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), PayloadTemplate: true, Name: "export",
			Payload: []byte(`{"date":"{{ date_add .business_date -1 }}","key":"{{ .execution_id }}"}`),
		}
	}
	fire := payload.Fire{ExecutionID: "e1", ScheduledFor: time.Date(2026, 12, 5, 16, 30, 0, 0, time.UTC), Round: 1, Trigger: TriggerSchedule}
	want := `{"date":"2026-12-05","key":"e1"}`
	size := payload.ForTask(db.Task{PayloadTemplate: true, Payload: task("a", 1).Payload, Timezone: "Asia/Shanghai", ID: "a", Name: "export"}).Size()

	s := NewScheduler(nil, nil, SchedulerConfig{}, nil)
	s.renderMax = 2 * size // two tasks' renderers
	cachedRender := func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cache[id].render != nil
	}
	for _, id := range []string{"a", "b", "c"} {
		b, err := s.renderer(task(id, 1), nil).Render(fire)
		require.NoError(t, err)
		require.JSONEq(t, want, string(b), id)
	}
	require.True(t, cachedRender("a"))
	require.True(t, cachedRender("b"))
	require.False(t, cachedRender("c"), "past the bound")
	require.Equal(t, 2*size, s.renderBytes)

	// Claimed again: c still renders, uncached.
	b, err := s.renderer(task("c", 1), nil).Render(fire)
	require.NoError(t, err)
	require.JSONEq(t, want, string(b))
	require.False(t, cachedRender("c"))

	// a's new version replaces its entry: its old renderer's bytes are
	// given back and its new one's taken, the cache at its bound still.
	_, err = s.renderer(task("a", 2), nil).Render(fire)
	require.NoError(t, err)
	require.True(t, cachedRender("a"))
	require.Equal(t, 2*size, s.renderBytes, "a's old renderer's bytes given back, its new one's taken")
	require.False(t, cachedRender("c"))
}
