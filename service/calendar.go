package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/schedule"
)

// Calendar limits (a calendar's dates: schedule.CalendarDatesMax).
const (
	calendarNameMax = 128
	// calendarTasksMax bounds the tasks one calendar change reschedules
	// in its transaction.
	calendarTasksMax = 10_000
)

// Calendar is a tenant's list of local dates that schedules can exclude
// (schedule.exclude_calendars): no slot fires on those dates, in the
// calendar's time zone (schedule.Calendar is how a schedule applies it).
type Calendar struct {
	CalendarInput
	ID        string
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CalendarInput is what a client may set on a calendar.
type CalendarInput struct {
	Name     string
	Timezone string // IANA; "" means UTC
	// Dates are local dates, YYYY-MM-DD; stored sorted without duplicates.
	Dates []string
}

// Input returns the client-settable fields of c.
func (c Calendar) Input() CalendarInput { return c.CalendarInput }

// Calendars manages calendars.
type Calendars struct {
	pool  *db.Pool
	tasks *Tasks
}

// NewCalendars returns a Calendars backed by pool; a change reschedules
// the tasks that use the calendar as tasks does for a schedule patch.
func NewCalendars(pool *db.Pool, tasks *Tasks) *Calendars {
	return &Calendars{pool: pool, tasks: tasks}
}

// validate checks in and returns it normalised (zone filled, dates sorted
// and unique).
func (in CalendarInput) validate() (CalendarInput, error) {
	var ve ValidationError
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len(in.Name) > calendarNameMax || strings.ContainsFunc(in.Name, func(r rune) bool { return r < 0x20 }) {
		ve.Add("name", fmt.Sprintf("is required: 1 to %d characters without control characters", calendarNameMax))
	}
	if in.Timezone == "" {
		in.Timezone = "UTC"
	}
	if _, err := schedule.LoadZone(in.Timezone); err != nil {
		ve.Add("timezone", err.Error())
	}
	if len(in.Dates) > schedule.CalendarDatesMax {
		ve.Add("dates", fmt.Sprintf("at most %d dates", schedule.CalendarDatesMax))
	} else {
		dates := make([]string, 0, len(in.Dates))
		for i, d := range in.Dates {
			t, err := time.Parse(time.DateOnly, d)
			if err != nil || t.Format(time.DateOnly) != d {
				ve.Add(fmt.Sprintf("dates[%d]", i), fmt.Sprintf("%q is not a date: want YYYY-MM-DD (e.g. 2027-01-01)", d))
				continue
			}
			dates = append(dates, d)
		}
		slices.Sort(dates)
		in.Dates = slices.Compact(dates)
	}
	if err := ve.Err(); err != nil {
		return CalendarInput{}, err
	}
	return in, nil
}

// Create stores a new calendar. With a context that carries a transaction
// (db.WithTx: a request with an Idempotency-Key) the insert joins it.
func (s *Calendars) Create(ctx context.Context, tenant string, in CalendarInput) (Calendar, error) {
	in, err := in.validate()
	if err != nil {
		return Calendar{}, err
	}
	var out Calendar
	err = auditTx(ctx, s.pool, func(q db.Querier) error {
		row, err := db.InsertCalendar(ctx, q, db.Calendar{TenantID: tenant, ID: NewID(), Name: in.Name,
			Timezone: in.Timezone, Dates: in.Dates})
		if err != nil {
			return calendarStoreError(err, in)
		}
		out = calendarFromRow(row)
		return recordAudit(ctx, q, tenant, AuditCreate, ResourceCalendar, out.ID, auditCreated(in))
	})
	if err != nil {
		return Calendar{}, err
	}
	return out, nil
}

// Get returns one calendar.
func (s *Calendars) Get(ctx context.Context, tenant, id string) (Calendar, error) {
	if !validID(id) {
		return Calendar{}, ErrNotFound
	}
	row, err := db.GetCalendar(ctx, s.pool, tenant, id, false)
	if err != nil {
		return Calendar{}, storeError(err, "load calendar")
	}
	return calendarFromRow(row), nil
}

// List returns a page of calendars, newest first.
func (s *Calendars) List(ctx context.Context, tenant string, page Page) ([]Calendar, string, error) {
	if err := page.check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListCalendars(ctx, s.pool, tenant, page.After, page.Limit+1)
	if err != nil {
		return nil, "", storeError(err, "list calendars")
	}
	out, next := pageOf(rows, page.Limit, calendarFromRow, func(c Calendar) string { return c.ID })
	return out, next, nil
}

// Update applies change under the calendar's row lock. When its dates or
// zone change, every task that excludes it is rescheduled as a schedule
// patch would: slots not yet materialised follow the new dates, and the
// materialised executions that have not started and whose slot the
// calendar now excludes are cancelled.
func (s *Calendars) Update(ctx context.Context, tenant, id string, change func(*CalendarInput) error) (Calendar, error) {
	if !validID(id) {
		return Calendar{}, ErrNotFound
	}
	var (
		out  Calendar
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		row, err := db.GetCalendar(ctx, tx, tenant, id, true)
		if err != nil {
			return storeError(err, "load calendar")
		}
		cur := calendarFromRow(row)
		in := cur.Input()
		if err := change(&in); err != nil {
			return err
		}
		if in, err = in.validate(); err != nil {
			return err
		}
		upd, err := db.UpdateCalendar(ctx, tx, db.Calendar{TenantID: tenant, ID: id, Name: in.Name, Timezone: in.Timezone, Dates: in.Dates})
		if err != nil {
			return calendarStoreError(err, in)
		}
		out = calendarFromRow(upd)
		if err := recordAudit(ctx, tx, tenant, AuditUpdate, ResourceCalendar, id, auditDiff(cur.Input(), in)); err != nil {
			return err
		}
		if in.Timezone == cur.Timezone && slices.Equal(in.Dates, cur.Dates) {
			return nil
		}
		ids, err := db.TasksUsingCalendar(ctx, tx, tenant, id, calendarTasksMax+1)
		if err != nil {
			return err
		}
		if len(ids) > calendarTasksMax {
			return conflictf("more than %d tasks use the calendar; split it before changing its dates", calendarTasksMax)
		}
		for _, taskID := range ids {
			if err := s.tasks.recalendar(ctx, tx, tenant, taskID, &done); err != nil {
				return err
			}
		}
		wfs, err := db.WorkflowsUsingCalendar(ctx, tx, tenant, id, calendarTasksMax+1)
		if err != nil {
			return err
		}
		if len(wfs) > calendarTasksMax {
			return conflictf("more than %d workflows use the calendar; split it before changing its dates", calendarTasksMax)
		}
		for _, wfID := range wfs {
			if err := recalendarWorkflow(ctx, tx, tenant, wfID, s.tasks.cfg.Metrics, &done); err != nil {
				return err
			}
		}
		if len(ids) > 0 {
			return db.NotifyTaskChanged(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return Calendar{}, err
	}
	done.report(s.tasks.cfg.Metrics)
	return out, nil
}

// Delete deletes a calendar no schedule uses; one in use → ConflictError.
func (s *Calendars) Delete(ctx context.Context, tenant, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if _, err := db.GetCalendar(ctx, tx, tenant, id, true); err != nil {
			return storeError(err, "load calendar")
		}
		// The calendar's row lock keeps a schedule from taking it
		// meanwhile (loadCalendars shares it).
		users, tasks, workflows, err := db.CalendarUsers(ctx, tx, tenant, id, calendarUsersShown)
		if err != nil {
			return storeError(err, "list the calendar's users")
		}
		if tasks+workflows > 0 {
			return calendarInUse(users, tasks, workflows)
		}
		ok, err := db.DeleteCalendar(ctx, tx, tenant, id)
		if err != nil {
			return storeError(err, "delete calendar")
		}
		if !ok {
			return ErrNotFound
		}
		return recordAudit(ctx, tx, tenant, AuditDelete, ResourceCalendar, id, nil)
	})
}

// calendarUsersShown bounds how many schedules an in-use conflict names,
// as endpointUsersShown does for an endpoint.
const calendarUsersShown = 10

// calendarInUse names (up to calendarUsersShown of) the tasks and
// workflows whose schedules exclude a calendar, with their counts, so the
// caller knows what to change.
func calendarInUse(users []db.CalendarUser, tasks, workflows int64) error {
	count := func(n int64, noun string) string {
		if n == 1 {
			return "1 " + noun
		}
		return fmt.Sprintf("%d %ss", n, noun)
	}
	var counts []string
	if tasks > 0 {
		counts = append(counts, count(tasks, "task"))
	}
	if workflows > 0 {
		counts = append(counts, count(workflows, "workflow"))
	}
	names := make([]string, len(users))
	for i, u := range users {
		names[i] = fmt.Sprintf("%s %s (%s)", u.Kind, u.Name, u.ID)
	}
	more := ""
	if n := tasks + workflows - int64(len(users)); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return conflictf("the calendar is used by %s: %s%s; remove it from their schedule.exclude_calendars first",
		strings.Join(counts, " and "), strings.Join(names, ", "), more)
}

func calendarStoreError(err error, in CalendarInput) error {
	return storeError(err, "store calendar",
		onConstraint(db.ConstraintCalendarName, conflictf("a calendar named %q already exists", in.Name)))
}

func calendarFromRow(r db.Calendar) Calendar {
	dates := r.Dates
	if dates == nil {
		dates = []string{}
	}
	return Calendar{
		CalendarInput: CalendarInput{Name: r.Name, Timezone: r.Timezone, Dates: dates},
		ID:            r.ID, Version: int(r.Version), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// loadCalendars returns the calendars ids names, as a schedule applies
// them, locked against a concurrent change or delete when share is set; an
// id that is not one of the tenant's calendars is a validation error.
func loadCalendars(ctx context.Context, q db.Querier, tenant string, ids []string, share bool) ([]schedule.Calendar, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cals, err := db.GetCalendars(ctx, q, tenant, ids, share)
	if err != nil {
		return nil, storeError(err, "load calendars")
	}
	if len(cals) != len(ids) {
		found := make(map[string]bool, len(cals))
		for _, c := range cals {
			found[c.ID] = true
		}
		var ve ValidationError
		for i, id := range ids {
			if !found[id] {
				ve.Add(fmt.Sprintf("schedule.exclude_calendars[%d]", i), "no such calendar")
			}
		}
		return nil, ve.Err()
	}
	return scheduleCalendars(cals), nil
}

// scheduleCalendars returns cals as schedules apply them.
func scheduleCalendars(cals []db.Calendar) []schedule.Calendar {
	out := make([]schedule.Calendar, len(cals))
	for i, c := range cals {
		out[i] = schedule.Calendar{Timezone: c.Timezone, Dates: c.Dates}
	}
	return out
}
