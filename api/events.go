package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service/event"
)

// eventRequest is the body of POST /v1/events.
type eventRequest struct {
	// Name is what happened: 1 to 200 letters, digits and . _ : - characters. Tasks and workflows whose schedule is
	// {"type": "event", "event": name} fire once per event.
	Name string `json:"name" example:"files.ready" validate:"required" minLength:"1" maxLength:"200" pattern:"^[A-Za-z0-9._:-]+$"`
	// Key narrows the event (a date, a file): workflow nodes that wait for the event with a key match it only when
	// equal.
	Key *string `json:"key,omitempty" example:"2026-12-03" maxLength:"256"`
	// Payload is any JSON value of at most 64 KiB; the fires' templates read it as .event.payload.
	Payload json.RawMessage `json:"payload,omitempty" swaggertype:"object"`
	// DedupKey: the same key within 24 h answers the first event's answer and fires nothing again.
	DedupKey *string `json:"dedup_key,omitempty" maxLength:"256"`
} // @name EventRequest

// eventMatched counts what an event fired.
type eventMatched struct {
	// Tasks is how many tasks it fired (one execution each, every shard of a sharded task).
	Tasks int `json:"tasks"`
	// Workflows is how many workflows it started a run of.
	Workflows int `json:"workflows"`
	// Waits is how many waiting workflow nodes it resolved.
	Waits int `json:"waits"`
} // @name EventMatched

// eventMatch is one thing an event fired.
type eventMatch struct {
	Type        string `json:"type" enums:"task,workflow,wait"`
	TaskID      string `json:"task_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	WorkflowID  string `json:"workflow_id,omitempty"`
	RunID       string `json:"run_id,omitempty"`
	Node        string `json:"node,omitempty"`
} // @name EventMatch

// postEventResponse is POST /v1/events' answer.
type postEventResponse struct {
	ID      string       `json:"id"`
	Matched eventMatched `json:"matched"`
} // @name EventAccepted

// eventResponse is an event as GET returns it.
type eventResponse struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
	// Payload is the event's payload (absent: none).
	Payload    json.RawMessage `json:"payload,omitempty" swaggertype:"object"`
	DedupKey   string          `json:"dedup_key,omitempty"`
	ReceivedAt timestamp       `json:"received_at" swaggertype:"string" format:"date-time"`
	Matched    eventMatched    `json:"matched"`
	// Matches are the executions and runs it fired.
	Matches []eventMatch `json:"matches"`
} // @name Event

// eventList is a page of events.
type eventList struct {
	Items      []eventResponse `json:"items"`
	NextCursor string          `json:"next_cursor,omitempty"`
} // @name EventList

func matchedOut(m event.Matched) eventMatched {
	return eventMatched{Tasks: m.Tasks, Workflows: m.Workflows, Waits: m.Waits}
}

func eventOut(e event.Event) eventResponse {
	out := eventResponse{
		ID: e.ID, Name: e.Name, Key: e.Key, Payload: e.Payload, DedupKey: e.DedupKey, ReceivedAt: stamp(e.ReceivedAt),
		Matched: matchedOut(e.Matched), Matches: make([]eventMatch, 0, len(e.Matches)),
	}
	for _, m := range e.Matches {
		out.Matches = append(out.Matches, eventMatch(m))
	}
	return out
}

// postEvent godoc
//
//	@ID				postEvent
//	@Summary		Post an event
//	@Description	Records that something happened and fires, in the same transaction, one execution of every active task and one run of every active workflow whose schedule is {"type": "event", "event": name} (trigger event, scheduled_for the event's arrival, X-Ax-Event-Id on the webhook). A paused task or workflow fires nothing and is not fired later. The same dedup_key within 24 h answers the first event's answer and fires nothing again.
//	@Tags			events
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			body	body		eventRequest	true	"the event"
//	@Success		202		{object}	postEventResponse
//	@Failure		400,401,403,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/events [post]
func (h *handlers) postEvent(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req eventRequest
	if err := decodeStrict(body, &req, "id", "matched", "received_at"); err != nil {
		return err
	}
	in := event.Input{Name: req.Name, Payload: req.Payload}
	if req.Key != nil {
		in.Key = *req.Key
	}
	if req.DedupKey != nil {
		in.DedupKey = *req.DedupKey
	}
	e, err := h.cfg.Events.Post(c.Request().Context(), principalFrom(c).Tenant, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, postEventResponse{ID: e.ID, Matched: matchedOut(e.Matched)})
}

// listEvents godoc
//
//	@ID			listEvents
//	@Summary	List events, newest first
//	@Tags		events
//	@Produce	json
//	@Security	BearerAuth
//	@Param		name	query		string	false	"only events of this name"
//	@Param		limit	query		int		false	"page size (default 50, max 500)"
//	@Param		cursor	query		string	false	"next_cursor of the previous page"
//	@Success	200		{object}	eventList
//	@Failure	401,403,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/events [get]
func (h *handlers) listEvents(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	items, next, err := h.cfg.Events.List(c.Request().Context(), principalFrom(c).Tenant, event.Filter{Name: c.QueryParam("name")}, page)
	if err != nil {
		return err
	}
	out := eventList{Items: make([]eventResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, e := range items {
		out.Items = append(out.Items, eventOut(e))
	}
	return c.JSON(http.StatusOK, out)
}

// getEvent godoc
//
//	@ID			getEvent
//	@Summary	Get an event and what it fired
//	@Tags		events
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"event id"
//	@Success	200	{object}	eventResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/events/{id} [get]
func (h *handlers) getEvent(c echo.Context) error {
	e, err := h.cfg.Events.Get(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, eventOut(e))
}
