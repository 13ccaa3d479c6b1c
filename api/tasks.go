package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// scheduleDTO is a task's schedule (README, "Tasks").
type scheduleDTO struct {
	Type string `json:"type" enums:"cron,interval,once,union,event" example:"cron" validate:"required"`
	// Event (event only): the name of the event that fires it, once per event posted (POST /v1/events); an event
	// schedule has no time slots.
	Event string `json:"event,omitempty" example:"files.ready" maxLength:"200" pattern:"^[A-Za-z0-9._:-]+$"`
	// Cron: standard dialect 5 fields, or 6 with seconds first, or 7 with a year last; quartz dialect 6 or 7 fields,
	// seconds first; descriptors like @hourly; L, W, LW, # and wrapped ranges (FRI-MON) in both.
	Cron string `json:"cron,omitempty" example:"0 2 * * *" maxLength:"256"`
	// Timezone is an IANA zone name (letters, digits, _ + - in segments separated by /; not Local); default UTC.
	Timezone        string  `json:"timezone,omitempty" example:"Asia/Shanghai" maxLength:"64"`
	IntervalSeconds int64   `json:"interval_seconds,omitempty" example:"60" minimum:"1" maximum:"31622400"`
	RunAt           *string `json:"run_at,omitempty" format:"date-time"`
	StartAt         *string `json:"start_at,omitempty" format:"date-time"`
	EndAt           *string `json:"end_at,omitempty" format:"date-time"`
	// Dialect of the cron expression (cron only; default standard): standard is Vixie cron's
	// (day-of-week 0 and 7 = Sunday), quartz is Quartz's (seconds first, ? in exactly one day field,
	// day-of-week 1 = Sunday .. 7 = Saturday).
	Dialect string `json:"dialect,omitempty" enums:"standard,quartz" example:"standard"`
	// DSTPolicy (cron only; default vixie): vixie fires a fixed hour once per local time and an hour of * or a step
	// by elapsed time (both passes of a repeated hour, none for skipped times); once_per_local_time fires every
	// slot at most once per local time.
	DSTPolicy string `json:"dst_policy,omitempty" enums:"vixie,once_per_local_time" example:"vixie"`
	// ExcludeCalendars lists calendar ids: no slot fires on their local dates (at most 20).
	ExcludeCalendars []string `json:"exclude_calendars,omitempty" format:"uuid"`
	// Schedules are a union's members (union only): 2 to 10 cron or interval schedules, each with its own timezone,
	// dialect, dst_policy, bounds and exclude_calendars. The union fires at every slot of each; an instant two of
	// them produce is one slot. The union's own start_at, end_at and exclude_calendars apply to every member; its
	// timezone, if given, is UTC.
	Schedules []scheduleDTO `json:"schedules,omitempty"`
} // @name Schedule

// retryDTO bounds delivery retries.
type retryDTO struct {
	// MaxAttempts 1..100; 1 means never retry. 0 or absent: 5.
	MaxAttempts int `json:"max_attempts,omitempty" example:"5" minimum:"0" maximum:"100"`
	// InitialBackoffMS 100..604800000; 0 or absent: 1000.
	InitialBackoffMS int64 `json:"initial_backoff_ms,omitempty" example:"1000" minimum:"0" maximum:"604800000"`
	// MaxBackoffMS 100..604800000 and at least initial_backoff_ms; 0 or absent: 600000 (or initial_backoff_ms when larger).
	MaxBackoffMS int64 `json:"max_backoff_ms,omitempty" example:"600000" minimum:"0" maximum:"604800000"`
} // @name RetryPolicy

// completionDTO says how an attempt ends.
type completionDTO struct {
	// Mode response (default): a 2xx ends the attempt. callback: a 2xx only accepts it; the execution stays running
	// and the request carries X-Ax-Callback-Token, with which the receiver reports heartbeats and the outcome
	// (POST /v1/executions/{id}/heartbeat, /complete).
	Mode string `json:"mode" enums:"response,callback" example:"callback" validate:"required"`
	// TimeoutMS (callback, required; 1000..604800000): the attempt fails with callback_timeout unless completed this
	// long after it was sent.
	TimeoutMS int64 `json:"timeout_ms,omitempty" example:"3600000" minimum:"0" maximum:"604800000"`
	// HeartbeatTimeoutMS (callback, optional; 1000..timeout_ms): the attempt fails with heartbeat_timeout unless a
	// heartbeat or the completion arrives this long after the acceptance and after each heartbeat.
	HeartbeatTimeoutMS int64 `json:"heartbeat_timeout_ms,omitempty" example:"120000" minimum:"0" maximum:"604800000"`
} // @name Completion

// slaDTO is a task's service level.
type slaDTO struct {
	// FinishWithinMS (1000..2592000000): an execution not succeeded this long after its slot gets an sla_missed
	// event and one execution.sla_missed alert; its retries go on.
	FinishWithinMS int64 `json:"finish_within_ms" example:"7200000" validate:"required" minimum:"1000" maximum:"2592000000"`
} // @name SLA

// taskRequest is the body of POST /v1/tasks, and the shape a PATCH merges into.
type taskRequest struct {
	// Name: 1 to 128 lower-case or uncased letters and digits of any script, '.', '_', '-', starting with a letter or digit
	// (order.reconcile.daily, 订单.对账.每日).
	Name       string      `json:"name" example:"order.reconcile.daily" validate:"required" minLength:"1" maxLength:"128"`
	EndpointID string      `json:"endpoint_id" example:"0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e" validate:"required" format:"uuid"`
	Schedule   scheduleDTO `json:"schedule" validate:"required"`
	// Payload is any JSON; the webhook body carries it byte for byte. Default {}.
	Payload json.RawMessage `json:"payload,omitempty" swaggertype:"object"`
	// PayloadTemplate: each JSON string of payload is a Go text/template, rendered once when an execution is
	// created ({{ .business_date }}, {{ date_add .business_date -1 }}; docs/templates.md). Default false: the body is
	// the payload's bytes.
	PayloadTemplate bool `json:"payload_template,omitempty" example:"false"`
	// Priority 1 (highest) to 4; null or absent: 2.
	Priority *int `json:"priority,omitempty" example:"2" minimum:"1" maximum:"4" extensions:"x-nullable"`
	// TimeoutMS per attempt (100..300000); null or absent: the endpoint's timeout.
	TimeoutMS     *int     `json:"timeout_ms,omitempty" example:"30000" minimum:"100" maximum:"300000" extensions:"x-nullable"`
	Retry         retryDTO `json:"retry"`
	OverlapPolicy string   `json:"overlap_policy,omitempty" enums:"allow,skip,queue" example:"allow"`
	MisfirePolicy string   `json:"misfire_policy,omitempty" enums:"fire_once,fire_all,skip" example:"fire_once"`
	// Labels: at most 32; a key is 1 to 63 of A-Z a-z 0-9 . _ / -, starting with a letter or digit
	// (^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$), a value at most 256 characters without control characters.
	Labels map[string]string `json:"labels,omitempty"`
	// AlertEndpointID receives a signed alert when an execution fails for good (from alert_after_failures on),
	// and an execution.recovered alert at the first success after an alerted failure; empty: none.
	AlertEndpointID string `json:"alert_endpoint_id,omitempty"`
	// PauseAfterFailures pauses the task after this many consecutive failed executions (0: never).
	PauseAfterFailures int `json:"pause_after_failures,omitempty" minimum:"0" maximum:"1000"`
	// AlertAfterFailures alerts only from the Nth failed execution in a row (N, N+1, … alert; a success resets
	// the count); null or absent: 1, every failure.
	AlertAfterFailures *int `json:"alert_after_failures,omitempty" example:"1" minimum:"1" maximum:"1000" extensions:"x-nullable"`
	// Shards fires this many executions per slot (1..1000; 0 or absent: 1), each with X-Ax-Shard-Index and
	// X-Ax-Shard-Count, its own idempotency key, retries and timeline.
	Shards int `json:"shards,omitempty" example:"1" minimum:"0" maximum:"1000"`
	// Completion says how an attempt ends; absent or null: {"mode": "response"}.
	Completion *completionDTO `json:"completion,omitempty" extensions:"x-nullable"`
	// SLA; absent or null: none.
	SLA *slaDTO `json:"sla,omitempty" extensions:"x-nullable"`
} // @name TaskRequest

// taskResponse is a task as the API returns it.
type taskResponse struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	EndpointID string          `json:"endpoint_id"`
	Schedule   scheduleDTO     `json:"schedule"`
	Payload    json.RawMessage `json:"payload" swaggertype:"object"`
	// PayloadTemplate: payload's strings are templates rendered when an execution is created.
	PayloadTemplate bool `json:"payload_template"`
	Priority        int  `json:"priority"`
	// TimeoutMS per attempt; absent: the endpoint's timeout.
	TimeoutMS          *int              `json:"timeout_ms,omitempty"`
	Retry              retryDTO          `json:"retry"`
	OverlapPolicy      string            `json:"overlap_policy"`
	MisfirePolicy      string            `json:"misfire_policy"`
	Labels             map[string]string `json:"labels"`
	AlertEndpointID    string            `json:"alert_endpoint_id,omitempty"`
	PauseAfterFailures int               `json:"pause_after_failures,omitempty"`
	// AlertAfterFailures: failure alerts start at the Nth failed execution in a row.
	AlertAfterFailures int           `json:"alert_after_failures"`
	Shards             int           `json:"shards"`
	Completion         completionDTO `json:"completion"`
	SLA                *slaDTO       `json:"sla,omitempty"`
	State              string        `json:"state" enums:"active,paused,completed"`
	// NextRunAt is the next slot the task will fire; null when it will not fire (paused or completed).
	NextRunAt *timestamp `json:"next_run_at" swaggertype:"string" format:"date-time" extensions:"x-nullable"`
	// MissedCount counts slots that were not fired (misfire policy).
	MissedCount int64     `json:"missed_count"`
	CreatedAt   timestamp `json:"created_at" swaggertype:"string" format:"date-time"`
	UpdatedAt   timestamp `json:"updated_at" swaggertype:"string" format:"date-time"`
} // @name Task

// taskList is a page of tasks.
type taskList struct {
	Items      []taskResponse `json:"items"`
	NextCursor string         `json:"next_cursor,omitempty"`
} // @name TaskList

// previewItem is one upcoming fire time.
type previewItem struct {
	// At is the fire time in UTC.
	At timestamp `json:"at" swaggertype:"string" format:"date-time"`
	// Local is the same instant on the schedule's time zone.
	Local string `json:"local" example:"2026-03-08T03:00:00-04:00"`
	// Member, for a union, is the index in schedule.schedules of the member that produces this slot (the lowest
	// when several do; for an excluded slot, the one whose calendar removed it). Absent for other schedules.
	Member *int `json:"member,omitempty" example:"0"`
	// DST, for a cron fire near a DST transition: shifted when the local time it is for does not exist and it
	// fires at the first instant after the gap; repeated when its local time occurs twice and this is the second
	// pass (dst_policy vixie, hour field * or a step). Absent otherwise.
	DST string `json:"dst,omitempty" enums:"shifted,repeated"`
} // @name PreviewItem

// previewResponse lists a task's next fire times.
type previewResponse struct {
	Timezone string `json:"timezone"`
	// DSTPolicy is the cron schedule's DST policy, which the fire times follow (absent for other types).
	DSTPolicy string `json:"dst_policy,omitempty" enums:"vixie,once_per_local_time"`
	// Items are the next slots that fire (count of them); a slot that will not fire is in skipped or excluded
	// instead. Empty for a paused task.
	Items []previewItem `json:"items"`
	// Excluded are the slots in the same span that the schedule's calendars removed.
	Excluded []previewItem `json:"excluded"`
	// Skipped are the slots in the same span that do not fire because they were skipped
	// (POST /v1/tasks/{id}/skip) or their queued execution was cancelled.
	Skipped []previewItem `json:"skipped"`
	// Paused: the task is paused and fires nothing until it is resumed (items is empty); resuming it fires its
	// schedule's slots from then on.
	Paused bool `json:"paused"`
	// Event: the task's schedule is this event's (type event); it has no time slots and fires once per event posted
	// (items is empty). Absent for other schedules.
	Event string `json:"event,omitempty"`
} // @name Preview

var taskReadOnly = []string{"id", "state", "next_run_at", "created_at", "updated_at", "missed_count", "tenant", "tenant_id", "version"}

func (r taskRequest) input() (service.TaskInput, error) {
	var ve service.ValidationError
	in := service.TaskInput{
		Name: r.Name, EndpointID: r.EndpointID, Payload: r.Payload, PayloadTemplate: r.PayloadTemplate,
		Schedule: r.Schedule.spec(&ve, "schedule"),
		Retry: service.RetryPolicy{
			MaxAttempts: r.Retry.MaxAttempts, InitialBackoff: time.Duration(r.Retry.InitialBackoffMS) * time.Millisecond,
			MaxBackoff: time.Duration(r.Retry.MaxBackoffMS) * time.Millisecond,
		},
		OverlapPolicy: r.OverlapPolicy, MisfirePolicy: r.MisfirePolicy, Labels: r.Labels,
		AlertEndpointID: r.AlertEndpointID, PauseAfterFailures: r.PauseAfterFailures, Shards: r.Shards,
	}
	if r.Shards < 0 {
		ve.Add("shards", "must be 1 to 1000")
	}
	if c := r.Completion; c != nil {
		negative(&ve, "completion.timeout_ms", c.TimeoutMS)
		negative(&ve, "completion.heartbeat_timeout_ms", c.HeartbeatTimeoutMS)
		in.Completion = service.Completion{
			Mode: c.Mode, Timeout: time.Duration(c.TimeoutMS) * time.Millisecond,
			HeartbeatTimeout: time.Duration(c.HeartbeatTimeoutMS) * time.Millisecond,
		}
	}
	if r.SLA != nil {
		if r.SLA.FinishWithinMS <= 0 {
			ve.Add("sla.finish_within_ms", "must be 1000 to 2592000000, or sla absent for none")
		}
		in.SLA.FinishWithin = time.Duration(r.SLA.FinishWithinMS) * time.Millisecond
	}
	if r.TimeoutMS != nil {
		if *r.TimeoutMS <= 0 {
			ve.Add("timeout_ms", "must be between 100 and 300000, or null for the endpoint's timeout")
		}
		in.Timeout = time.Duration(*r.TimeoutMS) * time.Millisecond
	}
	if r.Retry.InitialBackoffMS < 0 {
		ve.Add("retry.initial_backoff_ms", "must be positive")
	}
	if r.Retry.MaxBackoffMS < 0 {
		ve.Add("retry.max_backoff_ms", "must be positive")
	}
	if r.Retry.MaxAttempts < 0 {
		ve.Add("retry.max_attempts", "must be 1 to 100")
	}
	if r.AlertAfterFailures != nil {
		// 0 is out of range; only null or absent take the default.
		if *r.AlertAfterFailures < 1 {
			ve.Add("alert_after_failures", "must be 1 (every failure) to "+strconv.Itoa(service.AlertAfterFailuresMax))
		}
		in.AlertAfterFailures = *r.AlertAfterFailures
	}
	if r.Priority != nil {
		// 0 is out of range like 5 is; only null or absent take the default.
		if *r.Priority < 1 || *r.Priority > 4 {
			ve.Add("priority", "must be 1 (highest) to 4")
		}
		in.Priority = *r.Priority
	}
	return in, ve.Err()
}

// negative refuses a negative value of field, naming the field (the
// service reads 0 as its default and checks the rest of the range).
func negative(ve *service.ValidationError, field string, v int64) {
	if v < 0 {
		ve.Add(field, "must not be negative")
	}
}

func parseTime(ve *service.ValidationError, field string, s *string) *time.Time {
	if s == nil {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		ve.Add(field, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		return nil
	}
	return &t
}

func formatTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

func scheduleOut(s schedule.Spec) scheduleDTO {
	out := scheduleDTO{
		Type: s.Type, Cron: s.Cron, Timezone: s.Timezone, IntervalSeconds: s.IntervalSeconds,
		RunAt: formatTime(s.RunAt), StartAt: formatTime(s.StartAt), EndAt: formatTime(s.EndAt),
		Dialect: s.Dialect, DSTPolicy: s.DSTPolicy, ExcludeCalendars: s.ExcludeCalendars, Event: s.Event,
	}
	for _, m := range s.Schedules {
		out.Schedules = append(out.Schedules, scheduleOut(m))
	}
	return out
}

// spec is the schedule d describes; its times' problems are added to ve
// under field (schedule, schedule.schedules[1]).
func (d scheduleDTO) spec(ve *service.ValidationError, field string) schedule.Spec {
	s := schedule.Spec{
		Type: d.Type, Cron: d.Cron, Timezone: d.Timezone, IntervalSeconds: d.IntervalSeconds,
		RunAt: parseTime(ve, field+".run_at", d.RunAt), StartAt: parseTime(ve, field+".start_at", d.StartAt),
		EndAt: parseTime(ve, field+".end_at", d.EndAt), Dialect: d.Dialect, DSTPolicy: d.DSTPolicy,
		ExcludeCalendars: d.ExcludeCalendars, Event: d.Event,
	}
	for i, m := range d.Schedules {
		s.Schedules = append(s.Schedules, m.spec(ve, fmt.Sprintf("%s.schedules[%d]", field, i)))
	}
	return s
}

func taskRequestOf(in service.TaskInput) taskRequest {
	r := taskRequest{
		Name: in.Name, EndpointID: in.EndpointID, Schedule: scheduleOut(in.Schedule), Payload: in.Payload,
		PayloadTemplate: in.PayloadTemplate,
		Retry: retryDTO{
			MaxAttempts: in.Retry.MaxAttempts, InitialBackoffMS: in.Retry.InitialBackoff.Milliseconds(),
			MaxBackoffMS: in.Retry.MaxBackoff.Milliseconds(),
		},
		OverlapPolicy: in.OverlapPolicy, MisfirePolicy: in.MisfirePolicy, Labels: in.Labels,
		AlertEndpointID: in.AlertEndpointID, PauseAfterFailures: in.PauseAfterFailures, Shards: in.Shards,
	}
	if in.Completion.Callback() {
		r.Completion = &completionDTO{
			Mode: service.CompletionCallback, TimeoutMS: in.Completion.Timeout.Milliseconds(),
			HeartbeatTimeoutMS: in.Completion.HeartbeatTimeout.Milliseconds(),
		}
	}
	if in.SLA.FinishWithin > 0 {
		r.SLA = &slaDTO{FinishWithinMS: in.SLA.FinishWithin.Milliseconds()}
	}
	if in.Timeout != 0 {
		ms := int(in.Timeout.Milliseconds())
		r.TimeoutMS = &ms
	}
	if in.Priority != 0 {
		p := in.Priority
		r.Priority = &p
	}
	if in.AlertAfterFailures != 0 {
		n := in.AlertAfterFailures
		r.AlertAfterFailures = &n
	}
	return r
}

func taskOut(t service.Task) taskResponse {
	req := taskRequestOf(t.Input())
	out := taskResponse{
		ID: t.ID, Name: t.Name, EndpointID: t.EndpointID, Schedule: req.Schedule, Payload: t.Payload,
		PayloadTemplate: t.PayloadTemplate, Priority: t.Priority,
		TimeoutMS: req.TimeoutMS, Retry: req.Retry, OverlapPolicy: t.OverlapPolicy, MisfirePolicy: t.MisfirePolicy,
		Labels: t.Labels, AlertEndpointID: t.AlertEndpointID, PauseAfterFailures: t.PauseAfterFailures,
		AlertAfterFailures: t.AlertAfterFailures, Shards: t.Shards,
		Completion: completionDTO{Mode: service.CompletionResponse}, SLA: req.SLA,
		State: t.State, NextRunAt: nextRunAt(t), MissedCount: t.MissedCount,
		CreatedAt: stamp(t.CreatedAt), UpdatedAt: stamp(t.UpdatedAt),
	}
	if req.Completion != nil {
		out.Completion = *req.Completion
	}
	return out
}

// nextRunAt is the slot the task will fire next: none while it is paused
// (the stored next_run_at is where the scheduler would have continued;
// resume recomputes it from now) or completed.
func nextRunAt(t service.Task) *timestamp {
	if t.State != service.TaskActive {
		return nil
	}
	return stampPtr(t.NextRunAt)
}

// createTask godoc
//
//	@ID			createTask
//	@Summary		Create a task
//	@Description	Supports Idempotency-Key. An endpoint_id that is not one of yours is a 422 on endpoint_id.
//	@Tags			tasks
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string		false	"replay protection for 24 h"
//	@Param			body			body		taskRequest	true	"the task"
//	@Success		201				{object}	taskResponse
//	@Failure		400,401,403,409,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks [post]
func (h *handlers) createTask(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req taskRequest
	if err := decodeStrict(body, &req, taskReadOnly...); err != nil {
		return err
	}
	in, err := req.input()
	if err != nil {
		return err
	}
	t, err := h.cfg.Tasks.Create(c.Request().Context(), principalFrom(c).Tenant, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, taskOut(t))
}

// listTasks godoc
//
//	@ID			listTasks
//	@Summary	List tasks, newest first
//	@Tags		tasks
//	@Produce	json
//	@Security	BearerAuth
//	@Param		state	query		string		false	"active, paused or completed"	Enums(active, paused, completed)
//	@Param		name	query		string		false	"keep tasks whose name starts with this prefix"
//	@Param		label	query		[]string	false	"key:value (or key=value); repeat to require several labels"	collectionFormat(multi)
//	@Param		limit	query		int			false	"page size (default 50, max 500)"
//	@Param		cursor	query		string		false	"next_cursor of the previous page"
//	@Success	200		{object}	taskList
//	@Failure	400,401,403,422,503	{object}	problem
//	@Header	503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/tasks [get]
func (h *handlers) listTasks(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	f := service.TaskFilter{State: c.QueryParam("state"), NamePrefix: c.QueryParam("name"), Labels: map[string]string{}}
	for _, l := range c.QueryParams()["label"] {
		k, v, ok := service.ParseLabelFilter(l)
		if !ok {
			return &service.ValidationError{Fields: []service.FieldError{{Field: "label", Message: service.LabelFilterRule}}}
		}
		f.Labels[k] = v
	}
	items, next, err := h.cfg.Tasks.List(c.Request().Context(), principalFrom(c).Tenant, f, page)
	if err != nil {
		return err
	}
	out := taskList{Items: make([]taskResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, t := range items {
		out.Items = append(out.Items, taskOut(t))
	}
	return c.JSON(http.StatusOK, out)
}

// getTask godoc
//
//	@ID			getTask
//	@Summary	Get a task
//	@Tags		tasks
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"task id"
//	@Success	200	{object}	taskResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header	503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/tasks/{id} [get]
func (h *handlers) getTask(c echo.Context) error {
	t, err := h.cfg.Tasks.Get(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, taskOut(t))
}

// patchTask godoc
//
//	@ID			patchTask
//	@Summary		Update a task
//	@Description	Fields present replace the current ones; schedule and labels are replaced as a whole, retry is merged. A schedule change recomputes next_run_at and cancels slots materialised for the old schedule.
//	@Tags			tasks
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string		true	"task id"
//	@Param			body	body		taskRequest	true	"fields to change"
//	@Success		200		{object}	taskResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id} [patch]
func (h *handlers) patchTask(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := checkReadOnly(body, taskReadOnly); err != nil {
		return err
	}
	t, err := h.cfg.Tasks.Update(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"),
		func(in *service.TaskInput) error {
			req := taskRequestOf(*in)
			if err := mergePatch(body, &req, "schedule", "labels", "completion", "sla"); err != nil {
				return err
			}
			next, err := req.input()
			*in = next
			return err
		})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, taskOut(t))
}

// deleteTask godoc
//
//	@ID			deleteTask
//	@Summary		Delete a task
//	@Description	Cancels its executions that have not started; execution history is kept.
//	@Tags			tasks
//	@Security		BearerAuth
//	@Param			id	path	string	true	"task id"
//	@Success		204
//	@Failure		401,403,404,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id} [delete]
func (h *handlers) deleteTask(c echo.Context) error {
	if err := h.cfg.Tasks.Delete(c.Request().Context(), principalFrom(c).Tenant, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// pauseTask godoc
//
//	@ID			pauseTask
//	@Summary		Pause a task
//	@Description	Stops new slots and cancels materialised ones that have not started. Idempotent.
//	@Tags			tasks
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"task id"
//	@Success		200	{object}	taskResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id}/pause [post]
func (h *handlers) pauseTask(c echo.Context) error {
	t, err := h.cfg.Tasks.Pause(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, taskOut(t))
}

// resumeTask godoc
//
//	@ID			resumeTask
//	@Summary		Resume a paused task
//	@Description	Fires again from now on; slots missed while paused are not fired. Idempotent.
//	@Tags			tasks
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"task id"
//	@Success		200	{object}	taskResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id}/resume [post]
func (h *handlers) resumeTask(c echo.Context) error {
	t, err := h.cfg.Tasks.Resume(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, taskOut(t))
}

// previewTask godoc
//
//	@ID			previewTask
//	@Summary		The task's next fire times
//	@Description	Computed by the scheduler's own code, DST rules included: the fire times follow the schedule's dst_policy. items are the slots that fire; slots skipped on request (or whose queued execution was cancelled) are listed apart in skipped, those the calendars remove in excluded. A paused task fires nothing: paused true and no items.
//	@Tags			tasks
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string	true	"task id"
//	@Param			count	query		int		false	"how many (1..1000, default 10)"
//	@Success		200		{object}	previewResponse
//	@Failure		400,401,403,404,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id}/preview [get]
func (h *handlers) previewTask(c echo.Context) error {
	n := 10
	if err := presentButEmpty(c, "count"); err != nil {
		return err
	}
	if v := c.QueryParam("count"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > schedule.PreviewMax {
			return &service.ValidationError{Fields: []service.FieldError{{Field: "count", Message: "must be 1 to 1000"}}}
		}
	}
	p, err := h.cfg.Tasks.Preview(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), n)
	if err != nil {
		return err
	}
	loc := p.Schedule.Location()
	out := previewResponse{
		Timezone: loc.String(), DSTPolicy: p.Schedule.Spec().DSTPolicy, Items: make([]previewItem, 0, len(p.Fires)),
		Excluded: make([]previewItem, 0, len(p.Excluded)), Skipped: make([]previewItem, 0, len(p.Skipped)), Paused: p.Paused,
		Event: p.Event,
	}
	item := func(t time.Time, dst bool) previewItem {
		it := previewItem{At: stamp(t.UTC()), Local: t.In(p.Schedule.LocationAt(t)).Format(time.RFC3339)}
		if dst {
			it.DST = p.Schedule.DSTNote(t)
		}
		if i := p.Schedule.MemberAt(t); i >= 0 {
			it.Member = &i
		}
		return it
	}
	for _, t := range p.Fires {
		out.Items = append(out.Items, item(t, true))
	}
	for _, t := range p.Skipped {
		out.Skipped = append(out.Skipped, item(t, true))
	}
	for _, t := range p.Excluded {
		out.Excluded = append(out.Excluded, item(t, false))
	}
	return c.JSON(http.StatusOK, out)
}

// renderRequest is the body of POST /v1/tasks/{id}/render.
type renderRequest struct {
	// ScheduledFor is the slot to render (RFC 3339); absent: the task's next slot, or now when it has none.
	ScheduledFor *string `json:"scheduled_for,omitempty" format:"date-time"`
	// Inputs are a workflow run's inputs; a task has none (any is a 422).
	Inputs map[string]any `json:"inputs,omitempty"`
} // @name RenderRequest

// renderResponse is what a slot of the task would send.
type renderResponse struct {
	// Body is the request body the slot would send: the rendered payload (the payload itself when payload_template
	// is false).
	Body json.RawMessage `json:"body" swaggertype:"object"`
	// ScheduledFor is the slot rendered.
	ScheduledFor timestamp `json:"scheduled_for" swaggertype:"string" format:"date-time"`
} // @name RenderResponse

// renderTask godoc
//
//	@ID			renderTask
//	@Summary		What a slot of the task would send
//	@Description	Renders the task's payload for a slot (shard 0, round 1, trigger schedule, a fresh execution id) and sends nothing. A template that fails to render is a 422 naming the field (payload.rows).
//	@Tags			tasks
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string			true	"task id"
//	@Param			body	body		renderRequest	false	"the slot"
//	@Success		200		{object}	renderResponse
//	@Failure		400,401,403,404,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id}/render [post]
func (h *handlers) renderTask(c echo.Context) error {
	var req renderRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	var ve service.ValidationError
	in := service.RenderInput{ScheduledFor: parseTime(&ve, "scheduled_for", req.ScheduledFor)}
	for name, v := range req.Inputs {
		raw, err := json.Marshal(v)
		if err != nil {
			return badRequest("inputs." + name + " is not JSON")
		}
		if in.Inputs == nil {
			in.Inputs = map[string]json.RawMessage{}
		}
		in.Inputs[name] = raw
	}
	if err := ve.Err(); err != nil {
		return err
	}
	r, err := h.cfg.Tasks.Render(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderResponse{Body: r.Body, ScheduledFor: stamp(r.ScheduledFor)})
}
