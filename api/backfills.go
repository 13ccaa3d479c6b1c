package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// skipRequest is the body of POST /v1/tasks/{id}/skip.
type skipRequest struct {
	// ScheduledFor is the future slot not to fire, RFC 3339 (the example is a slot of TaskRequest's: 02:00 in Shanghai).
	ScheduledFor string `json:"scheduled_for" format:"date-time" example:"2099-12-31T18:00:00Z" validate:"required"`
} // @name SkipRequest

// backfillRequest is the body of POST /v1/tasks/{id}/backfill.
type backfillRequest struct {
	// From is the first instant of the range (inclusive), RFC 3339.
	From string `json:"from" format:"date-time" example:"2026-11-01T00:00:00Z" validate:"required"`
	// To ends the range (exclusive), RFC 3339.
	To string `json:"to" format:"date-time" example:"2026-12-01T00:00:00Z" validate:"required"`
	// Rerun: missing (slots with no execution; default), failed (also slots whose latest execution failed or was cancelled), all (every finished slot).
	Rerun string `json:"rerun,omitempty" enums:"missing,failed,all" example:"missing"`
	// MaxConcurrency bounds the backfill's unfinished executions (1..100; 0 or absent: 4).
	MaxConcurrency int `json:"max_concurrency,omitempty" example:"4" minimum:"0" maximum:"100"`
	// DryRun: answer 200 with the plan and create nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Inputs (a workflow backfill only) override the workflow's input defaults for every run of the backfill; a name
	// the workflow does not declare → 422 naming inputs.<name>.
	Inputs inputsDTO `json:"inputs,omitempty"`
} // @name BackfillRequest

// backfillResponse is a backfill as the API returns it.
type backfillResponse struct {
	ID string `json:"id"`
	// TaskID is the task a task backfill runs (absent for a workflow backfill).
	TaskID string `json:"task_id,omitempty"`
	// WorkflowID is the workflow a workflow backfill runs (absent for a task backfill).
	WorkflowID     string    `json:"workflow_id,omitempty"`
	From           timestamp `json:"from" swaggertype:"string" format:"date-time"`
	To             timestamp `json:"to" swaggertype:"string" format:"date-time"`
	Rerun          string    `json:"rerun" enums:"missing,failed,all"`
	MaxConcurrency int       `json:"max_concurrency"`
	State          string    `json:"state" enums:"running,succeeded,failed,cancelled"`
	// Total is the number of slots the backfill runs.
	Total int `json:"total"`
	// Created counts the executions (a workflow backfill: the runs) created so far.
	Created int `json:"created"`
	// Succeeded and Failed count its executions (runs) that ended so (failed: failed, cancelled or skipped).
	Succeeded  int        `json:"succeeded"`
	Failed     int        `json:"failed"`
	CreatedAt  timestamp  `json:"created_at" swaggertype:"string" format:"date-time"`
	FinishedAt *timestamp `json:"finished_at" extensions:"x-nullable" swaggertype:"string" format:"date-time"`
	// Inputs are a workflow backfill's input overrides (absent: none).
	Inputs inputsDTO `json:"inputs,omitempty"`
} // @name Backfill

// backfillList is a page of backfills.
type backfillList struct {
	Items      []backfillResponse `json:"items"`
	NextCursor string             `json:"next_cursor,omitempty"`
} // @name BackfillList

// backfillSlotDTO is one slot of a dry run.
type backfillSlotDTO struct {
	ScheduledFor timestamp `json:"scheduled_for" swaggertype:"string" format:"date-time"`
	// Round the slot's new execution would have (create: 1; rerun: latest + 1; keep: the latest).
	Round  int    `json:"round"`
	Action string `json:"action" enums:"create,rerun,keep"`
} // @name BackfillSlot

// backfillPlan is a dry run's answer.
type backfillPlan struct {
	Slots []backfillSlotDTO `json:"slots"`
} // @name BackfillPlan

func backfillOut(b service.Backfill) backfillResponse {
	return backfillResponse{
		ID: b.ID, TaskID: b.TaskID, WorkflowID: b.WorkflowID, From: stamp(b.From), To: stamp(b.To), Rerun: b.Rerun,
		MaxConcurrency: b.MaxConcurrency, State: b.State, Total: b.Total, Created: b.Created, Succeeded: b.Succeeded,
		Failed: b.Failed, CreatedAt: stamp(b.CreatedAt), FinishedAt: stampPtr(b.FinishedAt), Inputs: inputsOut(b.Inputs),
	}
}

// skipSlot godoc
//
//	@ID				skipSlot
//	@Summary		Skip a future slot
//	@Description	The slot will not fire: it is recorded as a skipped execution (last_error "skipped by request"). A time that is not a slot of the schedule, or that has passed → 422; a slot that already started → 409. Skipping it again returns the same execution.
//	@Tags			tasks
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string		true	"task id"
//	@Param			body	body		skipRequest	true	"the slot"
//	@Success		200		{object}	executionResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id}/skip [post]
func (h *handlers) skipSlot(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req skipRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	var ve service.ValidationError
	var at *time.Time
	if req.ScheduledFor == "" {
		ve.Add("scheduled_for", "is required: the slot's time, RFC 3339")
	} else {
		at = parseTime(&ve, "scheduled_for", &req.ScheduledFor)
	}
	if err := ve.Err(); err != nil {
		return err
	}
	x, err := h.cfg.Executions.Skip(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), *at)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, executionOut(x))
}

// backfillTask godoc
//
//	@ID				backfillTask
//	@Summary		Backfill or re-run a range of slots
//	@Description	The slots are the schedule's fire times in [from, to) (calendars, start_at and end_at applied; the task's creation time is no bound), oldest first; more than 10000 → 422. A slot re-run gets a new execution with round = latest round + 1; a slot whose latest execution is unfinished is kept. At most max_concurrency of the backfill's executions are unfinished at once. Backfill executions have trigger backfill and the task's priority, timeout and retry policy; misfire and overlap policies do not apply to them. dry_run → 200 with the plan. Supports Idempotency-Key.
//	@Tags			tasks
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id				path		string			true	"task id"
//	@Param			Idempotency-Key	header		string			false	"replays the first response for 24 h"
//	@Param			body			body		backfillRequest	true	"the range"
//	@Success		202				{object}	backfillResponse
//	@Success		200				{object}	backfillPlan	"dry run"
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id}/backfill [post]
func (h *handlers) backfillTask(c echo.Context) error {
	return h.backfill(c, h.cfg.Backfills.Create)
}

// backfillWorkflow godoc
//
//	@ID				backfillWorkflow
//	@Summary		Backfill or re-run a range of a workflow's slots
//	@Description	As a task's backfill, for runs: the slots are the workflow schedule's fire times in [from, to) (calendars, start_at and end_at applied), oldest first; more than 10000 → 422; a workflow without a schedule → 422. Each slot starts one run with trigger backfill and the workflow's current version; a slot re-run gets a new run with round = latest round + 1 (a slot whose latest run is pending, running or blocked is kept). At most max_concurrency of the backfill's runs are unfinished at once, and max_active_runs still applies. The roots' executions have trigger backfill, every execution of a run carries its round (X-Ax-Round). A paused workflow's backfill waits for its resume. dry_run → 200 with the plan. Supports Idempotency-Key.
//	@Tags			workflows
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id				path		string			true	"workflow id"
//	@Param			Idempotency-Key	header		string			false	"replays the first response for 24 h"
//	@Param			body			body		backfillRequest	true	"the range"
//	@Success		202				{object}	backfillResponse
//	@Success		200				{object}	backfillPlan	"dry run"
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflows/{id}/backfill [post]
func (h *handlers) backfillWorkflow(c echo.Context) error {
	return h.backfill(c, h.cfg.Backfills.CreateForWorkflow)
}

// backfill serves a backfill request of the task or workflow c names.
func (h *handlers) backfill(c echo.Context,
	create func(ctx context.Context, tenant, id string, in service.BackfillInput) (service.Backfill, []service.BackfillSlot, error),
) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req backfillRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	var ve service.ValidationError
	in := service.BackfillInput{Rerun: req.Rerun, MaxConcurrency: req.MaxConcurrency, DryRun: req.DryRun, Inputs: req.Inputs.service()}
	if req.From != "" {
		if t := parseTime(&ve, "from", &req.From); t != nil {
			in.From = *t
		}
	}
	if req.To != "" {
		if t := parseTime(&ve, "to", &req.To); t != nil {
			in.To = *t
		}
	}
	if req.MaxConcurrency < 0 {
		ve.Add("max_concurrency", "must be 1 to 100")
	}
	if err := ve.Err(); err != nil {
		return err
	}
	b, plan, err := create(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), in)
	if err != nil {
		return err
	}
	if in.DryRun {
		out := backfillPlan{Slots: make([]backfillSlotDTO, 0, len(plan))}
		for _, s := range plan {
			out.Slots = append(out.Slots, backfillSlotDTO{ScheduledFor: stamp(s.ScheduledFor), Round: s.Round, Action: s.Action})
		}
		return c.JSON(http.StatusOK, out)
	}
	return c.JSON(http.StatusAccepted, backfillOut(b))
}

// listBackfills godoc
//
//	@ID			listBackfills
//	@Summary	List backfills, newest first
//	@Tags		backfills
//	@Produce	json
//	@Security	BearerAuth
//	@Param		task_id	query		string	false	"only this task's"
//	@Param		workflow_id	query		string	false	"only this workflow's"
//	@Param		state	query		string	false	"only in this state"	Enums(running, succeeded, failed, cancelled)
//	@Param		limit	query		int		false	"page size (default 50, max 500)"
//	@Param		cursor	query		string	false	"next_cursor of the previous page"
//	@Success	200		{object}	backfillList
//	@Failure	401,403,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/backfills [get]
func (h *handlers) listBackfills(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	f := service.BackfillFilter{TaskID: c.QueryParam("task_id"), WorkflowID: c.QueryParam("workflow_id"), State: c.QueryParam("state")}
	items, next, err := h.cfg.Backfills.List(c.Request().Context(), principalFrom(c).Tenant, f, page)
	if err != nil {
		return err
	}
	out := backfillList{Items: make([]backfillResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, b := range items {
		out.Items = append(out.Items, backfillOut(b))
	}
	return c.JSON(http.StatusOK, out)
}

// getBackfill godoc
//
//	@ID			getBackfill
//	@Summary	Get a backfill and its progress
//	@Tags		backfills
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"backfill id"
//	@Success	200	{object}	backfillResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/backfills/{id} [get]
func (h *handlers) getBackfill(c echo.Context) error {
	b, err := h.cfg.Backfills.Get(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, backfillOut(b))
}

// cancelBackfill godoc
//
//	@ID				cancelBackfill
//	@Summary		Cancel a backfill
//	@Description	Creates nothing more and cancels its executions that have not started; running ones finish. A finished backfill is returned unchanged.
//	@Tags			backfills
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"backfill id"
//	@Success		200	{object}	backfillResponse
//	@Failure		401,403,404,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/backfills/{id}/cancel [post]
func (h *handlers) cancelBackfill(c echo.Context) error {
	b, err := h.cfg.Backfills.Cancel(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, backfillOut(b))
}

// idempotentWorkflowBackfill is idempotentBackfill for a workflow's backfill.
func (h *handlers) idempotentWorkflowBackfill(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		return h.idempotent("workflows/" + c.Param("id") + "/backfill")(next)(c)
	}
}

// idempotentBackfill is idempotent for a task's backfill; keys are kept per
// task (idempotentTrigger).
func (h *handlers) idempotentBackfill(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		return h.idempotent("tasks/" + c.Param("id") + "/backfill")(next)(c)
	}
}
