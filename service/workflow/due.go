package workflow

import (
	"encoding/json"
	"fmt"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/schedule"
)

// Due is claimed workflow w as the scheduler plans a task's slots (its
// schedule's fields, its misfire policy and its cursor); ok is false for a
// workflow with no schedule or no next slot.
func Due(w db.Workflow) (t db.DueTask, ok bool, err error) {
	if w.Schedule == nil || w.NextRunAt == nil {
		return db.DueTask{}, false, nil
	}
	var spec schedule.Spec
	if err := json.Unmarshal([]byte(*w.Schedule), &spec); err != nil {
		return db.DueTask{}, false, fmt.Errorf("decode workflow schedule: %w", err)
	}
	t = db.DueTask{
		TenantID: w.TenantID, ID: w.ID, ScheduleType: spec.Type, Timezone: spec.Timezone,
		RunAt: spec.RunAt, StartAt: spec.StartAt, EndAt: spec.EndAt, MisfirePolicy: w.MisfirePolicy,
		NextRunAt: *w.NextRunAt, Version: w.ScheduleVersion, CreatedAt: w.CreatedAt,
		ScheduleDialect: orDefault(spec.Dialect, schedule.DialectStandard), DSTPolicy: orDefault(spec.DSTPolicy, schedule.DSTVixie),
		ExcludeCalendars: w.ExcludeCalendars,
	}
	if spec.Cron != "" {
		c := spec.Cron
		t.Cron = &c
	}
	if spec.IntervalSeconds != 0 {
		v := spec.IntervalSeconds
		t.IntervalSeconds = &v
	}
	return t, true, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
