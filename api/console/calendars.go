package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/calendar"
)

// calendarUsersShown bounds the tasks and workflows a calendar's page
// names (the counts are complete).
const calendarUsersShown = 100

// calendarForm is the calendar form's values, as typed: dates one per
// line (or separated by commas or spaces).
type calendarForm struct{ Name, Timezone, Dates string }

var calendarFields = []string{"name", "timezone", "dates"}

type calendarRow struct {
	service.Calendar
	Tasks, Workflows int64
	// Span is the first and last dates ("" without dates).
	Span string
}

type calendarsView struct {
	Calendars []calendarRow
	Next      string
	Form      calendarForm
	Errs      map[string]string
	Problem   *errorView
	Flash     string
}

func (calendarsView) title() (string, string) { return "Calendars", "calendars" }

type calendarView struct {
	Calendar         service.Calendar
	Users            []calendar.User
	Tasks, Workflows int64
	Form             calendarForm
	Errs             map[string]string
	Problem          *errorView
	Flash            string
	// ConfirmDelete shows the delete's confirmation step (?delete=1);
	// DeleteProblem is the service's refusal of the delete.
	ConfirmDelete bool
	DeleteProblem *errorView
}

func (v calendarView) title() (string, string) { return "Calendar " + v.Calendar.Name, "calendars" }

func (f calendarForm) input() service.CalendarInput {
	return service.CalendarInput{Name: f.Name, Timezone: f.Timezone, Dates: strings.FieldsFunc(f.Dates, func(r rune) bool {
		return r == '\n' || r == '\r' || r == ',' || r == ' ' || r == '\t'
	})}
}

func readCalendarForm(ec echo.Context) calendarForm {
	return calendarForm{
		Name: strings.TrimSpace(ec.FormValue("name")), Timezone: strings.TrimSpace(ec.FormValue("timezone")),
		Dates: ec.FormValue("dates"),
	}
}

// calendars lists the tenant's calendars with how many tasks and
// workflows exclude each, and the create form.
func (c *console) calendars(ec echo.Context, s *session) error {
	v := calendarsView{Form: calendarForm{Timezone: "UTC"}}
	if ec.QueryParam("done") == "deleted" {
		v.Flash = "The calendar is deleted."
	}
	return c.calendarsPage(ec, s, http.StatusOK, v)
}

func (c *console) calendarsPage(ec echo.Context, s *session, status int, v calendarsView) error {
	if c.cfg.Calendars == nil {
		return service.ErrNotFound
	}
	ctx := ec.Request().Context()
	cals, next, err := c.cfg.Calendars.List(ctx, s.Tenant, pageOf(ec, 50))
	if err != nil {
		return err
	}
	v.Next = next
	for _, cal := range cals {
		// One user read brings the counts.
		_, tasks, workflows, err := c.cfg.Calendars.Users(ctx, s.Tenant, cal.ID, 1)
		if err != nil {
			return err
		}
		row := calendarRow{Calendar: cal, Tasks: tasks, Workflows: workflows}
		if n := len(cal.Dates); n > 0 {
			row.Span = cal.Dates[0] + " … " + cal.Dates[n-1]
		}
		v.Calendars = append(v.Calendars, row)
	}
	return c.render(ec, status, "calendars", s, v)
}

// createCalendar creates a calendar from the form (the REST create's
// service call) and opens it; a refusal shows the form with its reasons.
func (c *console) createCalendar(ec echo.Context, s *session) error {
	if c.cfg.Calendars == nil {
		return service.ErrNotFound
	}
	f := readCalendarForm(ec)
	cal, err := c.cfg.Calendars.Create(ec.Request().Context(), s.Tenant, f.input())
	if p, errs, ok := formRefusal(err, "The calendar was not created", calendarFields); ok {
		return c.calendarsPage(ec, s, refusalStatus(err), calendarsView{Form: f, Errs: errs, Problem: p})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/calendars/"+url.PathEscape(cal.ID)+"?done=created")
}

// calendarFlashes are the calendar page's messages (?done=…).
var calendarFlashes = map[string]string{
	"created": "The calendar is created. Tasks and workflows exclude its dates once their schedule lists it (Edit on a task's page).",
	"saved":   "The calendar is saved: the schedules that exclude it follow its new dates from now.",
}

// calendar shows a calendar: its dates, the tasks and workflows that
// exclude it, and the form that changes it.
func (c *console) calendar(ec echo.Context, s *session) error {
	return c.calendarPage(ec, s, http.StatusOK, ec.Param("id"), calendarView{
		Flash: calendarFlashes[ec.QueryParam("done")], ConfirmDelete: ec.QueryParam("delete") != "",
	})
}

func (c *console) calendarPage(ec echo.Context, s *session, status int, id string, v calendarView) error {
	if c.cfg.Calendars == nil {
		return service.ErrNotFound
	}
	ctx := ec.Request().Context()
	cal, err := c.cfg.Calendars.Get(ctx, s.Tenant, id)
	if err != nil {
		return err
	}
	v.Calendar = cal
	if v.Users, v.Tasks, v.Workflows, err = c.cfg.Calendars.Users(ctx, s.Tenant, id, calendarUsersShown); err != nil {
		return err
	}
	if v.Form == (calendarForm{}) {
		v.Form = calendarForm{Name: cal.Name, Timezone: cal.Timezone, Dates: strings.Join(cal.Dates, "\n")}
	}
	return c.render(ec, status, "calendar", s, v)
}

// updateCalendar saves the calendar form (the REST PATCH's service call:
// the schedules that exclude it are rescheduled in its transaction).
func (c *console) updateCalendar(ec echo.Context, s *session) error {
	if c.cfg.Calendars == nil {
		return service.ErrNotFound
	}
	id := ec.Param("id")
	f := readCalendarForm(ec)
	_, err := c.cfg.Calendars.Update(ec.Request().Context(), s.Tenant, id, func(in *service.CalendarInput) error {
		*in = f.input()
		return nil
	})
	if p, errs, ok := formRefusal(err, "The calendar was not saved", calendarFields); ok {
		return c.calendarPage(ec, s, refusalStatus(err), id, calendarView{Form: f, Errs: errs, Problem: p})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/calendars/"+url.PathEscape(id)+"?done=saved")
}

// deleteCalendar deletes a calendar (the REST DELETE's service call) and
// goes to the calendars list; a calendar a schedule still excludes is
// refused, and the calendar's page shows the service's reason (which
// names them).
func (c *console) deleteCalendar(ec echo.Context, s *session) error {
	if c.cfg.Calendars == nil {
		return service.ErrNotFound
	}
	id := ec.Param("id")
	if err := c.cfg.Calendars.Delete(ec.Request().Context(), s.Tenant, id); err != nil {
		p, err := conflictView(err)
		if err != nil {
			return err
		}
		p.Title = "The calendar was not deleted"
		return c.calendarPage(ec, s, http.StatusConflict, id, calendarView{DeleteProblem: p})
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/calendars?done=deleted")
}

// formRefusal turns a refused form's error into what the form shows: the
// messages at their inputs and a problem listing the rest (a validation
// error), or a problem with the reason (a conflict). ok is false for any
// other error.
func formRefusal(err error, title string, known []string) (*errorView, map[string]string, bool) {
	var ve *service.ValidationError
	switch {
	case errors.As(err, &ve):
		errs, rest := fieldMessages(ve.Fields, known)
		return &errorView{Title: title, Detail: "Correct the fields marked below.", Fields: rest}, errs, true
	case errors.Is(err, service.ErrConflict):
		return &errorView{Title: title, Detail: err.Error()}, nil, true
	}
	return nil, nil, false
}

// refusalStatus is the status of a page showing a refused form.
func refusalStatus(err error) int {
	if errors.Is(err, service.ErrConflict) {
		return http.StatusConflict
	}
	return http.StatusUnprocessableEntity
}
