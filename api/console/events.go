package console

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/event"
)

// eventsLimit bounds the events page's list.
const eventsLimit = 50

// eventsView is the tenant's recent events, each with what it fired, and
// the form that posts a test event (with events:write).
type eventsView struct {
	Events []event.Event
	// Posted is the event the form just posted (nil: none).
	Posted *event.Event
	Error  *errorView
	Form   eventForm
}

func (eventsView) title() (string, string) { return "Events", "events" }

type eventForm struct{ Name, Key, Payload string }

// events lists the tenant's latest events, newest first.
func (c *console) events(ec echo.Context, s *session) error {
	return c.eventsPage(ec, s, http.StatusOK, eventsView{})
}

func (c *console) eventsPage(ec echo.Context, s *session, status int, v eventsView) error {
	items, _, err := c.cfg.Events.List(ec.Request().Context(), s.Tenant, event.Filter{}, service.Page{Limit: eventsLimit})
	if err != nil {
		return err
	}
	v.Events = items
	return c.render(ec, status, "events", s, v)
}

// postEvent posts the form's event, as POST /v1/events does, and shows
// what it fired; a refused field shows the form again with the reasons.
func (c *console) postEvent(ec echo.Context, s *session) error {
	f := eventForm{
		Name: strings.TrimSpace(ec.FormValue("name")), Key: ec.FormValue("key"),
		Payload: strings.TrimSpace(ec.FormValue("payload")),
	}
	in := event.Input{Name: f.Name, Key: f.Key}
	if f.Payload != "" {
		in.Payload = json.RawMessage(f.Payload)
	}
	e, err := c.cfg.Events.Post(ec.Request().Context(), s.Tenant, in)
	var ve *service.ValidationError
	if errors.As(err, &ve) {
		return c.eventsPage(ec, s, http.StatusUnprocessableEntity, eventsView{
			Form: f, Error: &errorView{Title: "The event was not posted", Fields: ve.Fields},
		})
	}
	if err != nil {
		return err
	}
	return c.eventsPage(ec, s, http.StatusCreated, eventsView{Posted: &e, Form: eventForm{Name: f.Name}})
}
