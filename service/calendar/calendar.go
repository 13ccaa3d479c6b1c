// Package calendar manages the tenants' calendars, lists of local dates
// that schedules exclude (Calendars), and reads them as schedules apply
// them (Load). Rescheduling the schedules that use a calendar when its
// dates change is the caller's (New's reschedule).
package calendar

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/resource"
	"github.com/axhq/ax/service/schedule"
)

// nameMax bounds a calendar's name (its dates: schedule.CalendarDatesMax).
const nameMax = 128

// Calendar is a tenant's list of local dates that schedules can exclude
// (schedule.exclude_calendars): no slot fires on those dates, in the
// calendar's time zone (schedule.Calendar is how a schedule applies it).
type Calendar struct {
	Input
	ID        string
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Input is what a client may set on a calendar.
type Input struct {
	Name     string
	Timezone string // IANA; "" means UTC
	// Dates are local dates, YYYY-MM-DD; stored sorted without duplicates.
	Dates []string
}

// Calendars manages calendars.
type Calendars struct {
	pool       *db.Pool
	reschedule Reschedule
}

// Reschedule reschedules, in tx, the schedules that exclude calendar id of
// tenant, whose dates or zone just changed. committed, when not nil, is
// called once the change committed (to report what it ended).
type Reschedule func(ctx context.Context, tx db.Tx, tenant, id string) (committed func(), err error)

// New returns a Calendars backed by pool; a change of a calendar's dates
// or zone calls reschedule in its transaction.
func New(pool *db.Pool, reschedule Reschedule) *Calendars {
	return &Calendars{pool: pool, reschedule: reschedule}
}

// validate checks in and returns it normalised (zone filled, dates sorted
// and unique).
func (in Input) validate() (Input, error) {
	var ve errs.ValidationError
	in.Name = strings.TrimSpace(in.Name)
	if in.Name == "" || len(in.Name) > nameMax || strings.ContainsFunc(in.Name, func(r rune) bool { return r < 0x20 }) {
		ve.Add("name", fmt.Sprintf("is required: 1 to %d characters without control characters", nameMax))
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
		return Input{}, err
	}
	return in, nil
}

// Create stores a new calendar. With a context that carries a transaction
// (db.WithTx: a request with an Idempotency-Key) the insert joins it.
func (s *Calendars) Create(ctx context.Context, tenant string, in Input) (Calendar, error) {
	in, err := in.validate()
	if err != nil {
		return Calendar{}, err
	}
	var out Calendar
	err = audit.Tx(ctx, s.pool, func(q db.Querier) error {
		row, err := db.InsertCalendar(ctx, q, db.Calendar{
			TenantID: tenant, ID: resource.NewID(), Name: in.Name,
			Timezone: in.Timezone, Dates: in.Dates,
		})
		if err != nil {
			return storeError(err, in)
		}
		out = fromRow(row)
		return audit.Record(ctx, q, tenant, audit.Create, audit.ResourceCalendar, out.ID, audit.Created(in))
	})
	if err != nil {
		return Calendar{}, err
	}
	return out, nil
}

// Get returns one calendar.
func (s *Calendars) Get(ctx context.Context, tenant, id string) (Calendar, error) {
	if !resource.ValidID(id) {
		return Calendar{}, errs.ErrNotFound
	}
	row, err := db.GetCalendar(ctx, s.pool, tenant, id, false)
	if err != nil {
		return Calendar{}, errs.Store(err, "load calendar")
	}
	return fromRow(row), nil
}

// List returns a page of calendars, newest first.
func (s *Calendars) List(ctx context.Context, tenant string, page resource.Page) ([]Calendar, string, error) {
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListCalendars(ctx, s.pool, tenant, page.After, page.Limit+1)
	if err != nil {
		return nil, "", errs.Store(err, "list calendars")
	}
	out, next := resource.PageOf(rows, page.Limit, fromRow, func(c Calendar) string { return c.ID })
	return out, next, nil
}

// Update applies change under the calendar's row lock. When its dates or
// zone change, every task that excludes it is rescheduled as a schedule
// patch would: slots not yet materialised follow the new dates, and the
// materialised executions that have not started and whose slot the
// calendar now excludes are cancelled.
func (s *Calendars) Update(ctx context.Context, tenant, id string, change func(*Input) error) (Calendar, error) {
	if !resource.ValidID(id) {
		return Calendar{}, errs.ErrNotFound
	}
	var (
		out       Calendar
		committed func()
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		committed = nil
		row, err := db.GetCalendar(ctx, tx, tenant, id, true)
		if err != nil {
			return errs.Store(err, "load calendar")
		}
		cur := fromRow(row)
		in := cur.Input
		if err := change(&in); err != nil {
			return err
		}
		if in, err = in.validate(); err != nil {
			return err
		}
		upd, err := db.UpdateCalendar(ctx, tx, db.Calendar{TenantID: tenant, ID: id, Name: in.Name, Timezone: in.Timezone, Dates: in.Dates})
		if err != nil {
			return storeError(err, in)
		}
		out = fromRow(upd)
		if err := audit.Record(ctx, tx, tenant, audit.Update, audit.ResourceCalendar, id, audit.Diff(cur.Input, in)); err != nil {
			return err
		}
		if in.Timezone == cur.Timezone && slices.Equal(in.Dates, cur.Dates) {
			return nil
		}
		committed, err = s.reschedule(ctx, tx, tenant, id)
		return err
	})
	if err != nil {
		return Calendar{}, errs.Store(err, "update calendar")
	}
	if committed != nil {
		committed()
	}
	return out, nil
}

// Delete deletes a calendar no schedule uses; one in use → ConflictError.
func (s *Calendars) Delete(ctx context.Context, tenant, id string) error {
	if !resource.ValidID(id) {
		return errs.ErrNotFound
	}
	return errs.Store(db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if _, err := db.GetCalendar(ctx, tx, tenant, id, true); err != nil {
			return errs.Store(err, "load calendar")
		}
		// The calendar's row lock keeps a schedule from taking it
		// meanwhile (loadCalendars shares it).
		users, tasks, workflows, err := db.CalendarUsers(ctx, tx, tenant, id, usersShown)
		if err != nil {
			return errs.Store(err, "list the calendar's users")
		}
		if tasks+workflows > 0 {
			return inUse(users, tasks, workflows)
		}
		ok, err := db.DeleteCalendar(ctx, tx, tenant, id)
		if err != nil {
			return errs.Store(err, "delete calendar")
		}
		if !ok {
			return errs.ErrNotFound
		}
		return audit.Record(ctx, tx, tenant, audit.Delete, audit.ResourceCalendar, id, nil)
	}), "delete calendar")
}

// User is a task or a workflow whose schedule excludes a calendar.
type User struct {
	// Kind is "task" or "workflow".
	Kind     string
	ID, Name string
}

// Users returns up to limit of the tasks and workflows whose schedules
// exclude calendar id, tasks first, each kind by name, and how many of
// each there are in all.
func (s *Calendars) Users(ctx context.Context, tenant, id string, limit int) (users []User, tasks, workflows int64, err error) {
	if !resource.ValidID(id) {
		return nil, 0, 0, errs.ErrNotFound
	}
	rows, tasks, workflows, err := db.CalendarUsers(ctx, s.pool, tenant, id, limit)
	if err != nil {
		return nil, 0, 0, errs.Store(err, "list the calendar's users")
	}
	for _, r := range rows {
		users = append(users, User{Kind: r.Kind, ID: r.ID, Name: r.Name})
	}
	return users, tasks, workflows, nil
}

// usersShown bounds how many schedules an in-use conflict names, as the
// endpoints' does for an endpoint.
const usersShown = 10

// inUse names (up to usersShown of) the tasks and
// workflows whose schedules exclude a calendar, with their counts, so the
// caller knows what to change.
func inUse(users []db.CalendarUser, tasks, workflows int64) error {
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
	return errs.Conflictf("the calendar is used by %s: %s%s; remove it from their schedule.exclude_calendars first",
		strings.Join(counts, " and "), strings.Join(names, ", "), more)
}

func storeError(err error, in Input) error {
	return errs.Store(err, "store calendar",
		errs.OnConstraint(db.ConstraintCalendarName, errs.Conflictf("a calendar named %q already exists", in.Name)))
}

func fromRow(r db.Calendar) Calendar {
	dates := r.Dates
	if dates == nil {
		dates = []string{}
	}
	return Calendar{
		Input: Input{Name: r.Name, Timezone: r.Timezone, Dates: dates},
		ID:    r.ID, Version: int(r.Version), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
}

// Load returns the calendars ids names, as a schedule applies them, locked against a concurrent change or delete when share is set; an
// id that is not one of the tenant's calendars is a validation error.
func Load(ctx context.Context, q db.Querier, tenant string, ids []string, share bool) ([]schedule.Calendar, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cals, err := db.GetCalendars(ctx, q, tenant, ids, share)
	if err != nil {
		return nil, errs.Store(err, "load calendars")
	}
	if len(cals) != len(ids) {
		found := make(map[string]bool, len(cals))
		for _, c := range cals {
			found[c.ID] = true
		}
		var ve errs.ValidationError
		for i, id := range ids {
			if !found[id] {
				ve.Add(fmt.Sprintf("schedule.exclude_calendars[%d]", i), "no such calendar")
			}
		}
		return nil, ve.Err()
	}
	return Schedules(cals), nil
}

// Schedules returns cals as schedules apply them.
func Schedules(cals []db.Calendar) []schedule.Calendar {
	out := make([]schedule.Calendar, len(cals))
	for i, c := range cals {
		out[i] = schedule.Calendar{ID: c.ID, Timezone: c.Timezone, Dates: c.Dates}
	}
	return out
}
