package service

import (
	"context"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/calendar"
	"github.com/axhq/ax/service/schedule"
)

// calendarUsersMax bounds the tasks, and the workflows, one calendar
// change reschedules in its transaction.
const calendarUsersMax = 10_000

type (
	// Calendar is a tenant's list of local dates that schedules can
	// exclude (service/calendar).
	Calendar = calendar.Calendar
	// CalendarInput is what a client may set on a calendar.
	CalendarInput = calendar.Input
	// Calendars manages calendars.
	Calendars = calendar.Calendars
)

// NewCalendars returns a Calendars backed by pool; a change of a
// calendar's dates reschedules the tasks and workflows that exclude it, as
// tasks does for a schedule patch.
func NewCalendars(pool *db.Pool, tasks *Tasks) *Calendars {
	return calendar.New(pool, func(ctx context.Context, tx db.Tx, tenant, id string) (func(), error) {
		return rescheduleCalendarUsers(ctx, tx, tasks, tenant, id)
	})
}

// rescheduleCalendarUsers reschedules, in tx, every task and workflow
// whose schedule excludes calendar id, whose dates just changed; the
// returned function reports the executions that ended (cancelled) once
// the change committed.
func rescheduleCalendarUsers(ctx context.Context, tx db.Tx, tasks *Tasks, tenant, id string) (func(), error) {
	var done ended
	ids, err := db.TasksUsingCalendar(ctx, tx, tenant, id, calendarUsersMax+1)
	if err != nil {
		return nil, storeError(err, "list the calendar's tasks")
	}
	if len(ids) > calendarUsersMax {
		return nil, conflictf("more than %d tasks use the calendar; split it before changing its dates", calendarUsersMax)
	}
	for _, taskID := range ids {
		if err := tasks.recalendar(ctx, tx, tenant, taskID, &done); err != nil {
			return nil, err
		}
	}
	wfs, err := db.WorkflowsUsingCalendar(ctx, tx, tenant, id, calendarUsersMax+1)
	if err != nil {
		return nil, storeError(err, "list the calendar's workflows")
	}
	if len(wfs) > calendarUsersMax {
		return nil, conflictf("more than %d workflows use the calendar; split it before changing its dates", calendarUsersMax)
	}
	for _, wfID := range wfs {
		if err := recalendarWorkflow(ctx, tx, tenant, wfID, tasks.cfg.Metrics, &done); err != nil {
			return nil, err
		}
	}
	if len(ids) > 0 {
		if err := db.NotifyTaskChanged(ctx, tx); err != nil {
			return nil, storeError(err, "notify task change")
		}
	}
	return func() { done.report(tasks.cfg.Metrics) }, nil
}

// loadCalendars returns the calendars ids names as a schedule applies
// them (calendar.Load).
func loadCalendars(ctx context.Context, q db.Querier, tenant string, ids []string, share bool) ([]schedule.Calendar, error) {
	return calendar.Load(ctx, q, tenant, ids, share)
}

func scheduleCalendars(cals []db.Calendar) []schedule.Calendar { return calendar.Schedules(cals) }
