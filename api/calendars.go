package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// calendarRequest is the body of POST /v1/calendars, and the shape a PATCH
// merges into.
type calendarRequest struct {
	// Name: 1 to 128 characters without control characters, not all spaces (leading and trailing spaces are trimmed).
	Name string `json:"name" example:"cn-public-holidays-2027" validate:"required" minLength:"1" maxLength:"128"`
	// Timezone is the IANA zone whose local dates the calendar lists; default UTC.
	Timezone string `json:"timezone,omitempty" example:"Asia/Shanghai" maxLength:"64"`
	// Dates are local dates (YYYY-MM-DD), at most 10000; returned sorted without duplicates.
	Dates []string `json:"dates" example:"2027-01-01,2027-02-06" format:"date"`
} // @name CalendarRequest

// calendarResponse is a calendar as the API returns it.
type calendarResponse struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Timezone  string    `json:"timezone"`
	Dates     []string  `json:"dates"`
	CreatedAt timestamp `json:"created_at" swaggertype:"string" format:"date-time"`
	UpdatedAt timestamp `json:"updated_at" swaggertype:"string" format:"date-time"`
} // @name Calendar

// calendarList is a page of calendars.
type calendarList struct {
	Items      []calendarResponse `json:"items"`
	NextCursor string             `json:"next_cursor,omitempty"`
} // @name CalendarList

var calendarReadOnly = []string{"id", "created_at", "updated_at", "tenant", "tenant_id"}

func (r calendarRequest) input() service.CalendarInput {
	return service.CalendarInput{Name: r.Name, Timezone: r.Timezone, Dates: r.Dates}
}

func calendarOut(c service.Calendar) calendarResponse {
	return calendarResponse{
		ID: c.ID, Name: c.Name, Timezone: c.Timezone, Dates: c.Dates,
		CreatedAt: stamp(c.CreatedAt), UpdatedAt: stamp(c.UpdatedAt),
	}
}

// createCalendar godoc
//
//	@ID				createCalendar
//	@Summary		Create a calendar
//	@Description	A list of local dates that schedules exclude with schedule.exclude_calendars: no slot fires on them.
//	@Tags			calendars
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string			false	"replays the first response for 24 h"
//	@Param			body			body		calendarRequest	true	"the calendar"
//	@Success		201				{object}	calendarResponse
//	@Failure		400,401,403,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/calendars [post]
func (h *handlers) createCalendar(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req calendarRequest
	if err := decodeStrict(body, &req, calendarReadOnly...); err != nil {
		return err
	}
	cal, err := h.cfg.Calendars.Create(c.Request().Context(), principalFrom(c).Tenant, req.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, calendarOut(cal))
}

// listCalendars godoc
//
//	@ID			listCalendars
//	@Summary	List calendars, newest first
//	@Tags		calendars
//	@Produce	json
//	@Security	BearerAuth
//	@Param		limit	query		int		false	"page size (default 50, max 500)"
//	@Param		cursor	query		string	false	"next_cursor of the previous page"
//	@Success	200		{object}	calendarList
//	@Failure	401,403,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/calendars [get]
func (h *handlers) listCalendars(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	items, next, err := h.cfg.Calendars.List(c.Request().Context(), principalFrom(c).Tenant, page)
	if err != nil {
		return err
	}
	out := calendarList{Items: make([]calendarResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, cal := range items {
		out.Items = append(out.Items, calendarOut(cal))
	}
	return c.JSON(http.StatusOK, out)
}

// getCalendar godoc
//
//	@ID			getCalendar
//	@Summary	Get a calendar
//	@Tags		calendars
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"calendar id"
//	@Success	200	{object}	calendarResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/calendars/{id} [get]
func (h *handlers) getCalendar(c echo.Context) error {
	cal, err := h.cfg.Calendars.Get(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, calendarOut(cal))
}

// patchCalendar godoc
//
//	@ID				patchCalendar
//	@Summary		Update a calendar
//	@Description	Fields present replace the current ones (dates as a whole). New dates apply to slots not yet materialised; executions already materialised for a date the calendar now excludes are cancelled if they have not started.
//	@Tags			calendars
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string			true	"calendar id"
//	@Param			body	body		calendarRequest	true	"fields to change"
//	@Success		200		{object}	calendarResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/calendars/{id} [patch]
func (h *handlers) patchCalendar(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := checkReadOnly(body, calendarReadOnly); err != nil {
		return err
	}
	cal, err := h.cfg.Calendars.Update(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"),
		func(in *service.CalendarInput) error {
			req := calendarRequest{Name: in.Name, Timezone: in.Timezone, Dates: in.Dates}
			if err := mergePatch(body, &req, "dates"); err != nil {
				return err
			}
			*in = req.input()
			return nil
		})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, calendarOut(cal))
}

// deleteCalendar godoc
//
//	@ID				deleteCalendar
//	@Summary		Delete a calendar
//	@Description	409 while a task's or a workflow's schedule excludes it; the detail names up to 10 of them and counts them.
//	@Tags			calendars
//	@Security		BearerAuth
//	@Param			id	path	string	true	"calendar id"
//	@Success		204
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/calendars/{id} [delete]
func (h *handlers) deleteCalendar(c echo.Context) error {
	if err := h.cfg.Calendars.Delete(c.Request().Context(), principalFrom(c).Tenant, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
