package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// executionEventDTO is one step on an execution's timeline.
type executionEventDTO struct {
	Type string    `json:"type" example:"attempt_succeeded"`
	At   timestamp `json:"at" swaggertype:"string" format:"date-time"`
	// Attempt is the delivery attempt the event belongs to (1-based).
	Attempt    *int `json:"attempt,omitempty" example:"1"`
	StatusCode *int `json:"status_code,omitempty" example:"200"`
	LatencyMS  *int `json:"latency_ms,omitempty" example:"12"`
	// ErrorClass classifies a failed attempt (timeout, connection, http_5xx, …).
	ErrorClass string `json:"error_class,omitempty"`
	Message    string `json:"message,omitempty"`
	// Data carries event-specific details, e.g. {"trigger":"manual"} on fired.
	Data map[string]any `json:"data,omitempty"`
} // @name ExecutionEvent

// executionResponse is an execution as the API returns it.
type executionResponse struct {
	// ID is also the webhook's Idempotency-Key and webhook-id.
	ID string `json:"id"`
	// TaskID is the task the execution fires; absent for a workflow step's execution, which workflow_id,
	// workflow_run_id and node name instead.
	TaskID       string    `json:"task_id,omitempty"`
	ScheduledFor timestamp `json:"scheduled_for" swaggertype:"string" format:"date-time"`
	Trigger      string    `json:"trigger" enums:"schedule,manual,backfill,retry,dependency,event"`
	// DedupKey is the dedup_key of a manual trigger.
	DedupKey string `json:"dedup_key,omitempty"`
	State    string `json:"state" enums:"pending,running,retrying,succeeded,failed,cancelled,skipped"`
	Attempts int    `json:"attempts"`
	// Round is 1 for a slot's first fire; a backfill that re-runs the slot creates round + 1.
	Round int `json:"round" example:"1"`
	// BackfillID is the backfill that created the execution (trigger backfill).
	BackfillID string `json:"backfill_id,omitempty"`
	// EventID is the event that fired the execution (trigger event), also sent as X-Ax-Event-Id.
	EventID string `json:"event_id,omitempty"`
	// WorkflowID, WorkflowRunID and Node name a workflow step's workflow, run and node.
	WorkflowID    string `json:"workflow_id,omitempty"`
	WorkflowRunID string `json:"workflow_run_id,omitempty"`
	Node          string `json:"node,omitempty"`
	// Shard is the execution's shard (0-based; 0 when the task or node is not sharded).
	Shard int `json:"shard"`
	// Late: the slot was fired late, as a misfire catch-up (e.g. after downtime).
	Late bool `json:"late"`
	// Held: an operator holds the pending execution (POST /v1/executions/{id}/hold); it does not start until released.
	Held bool `json:"held"`
	// CancelRequested: a cancel arrived while the execution was running; it ends as cancelled.
	CancelRequested bool    `json:"cancel_requested,omitempty"`
	LastStatusCode  *int    `json:"last_status_code" extensions:"x-nullable"`
	LastError       *string `json:"last_error" extensions:"x-nullable"`
	// ErrorClass classifies the last error.
	ErrorClass string `json:"error_class,omitempty"`
	// NextAttemptAt is when a retrying execution's next attempt is due.
	NextAttemptAt *timestamp `json:"next_attempt_at,omitempty" swaggertype:"string" format:"date-time"`
	CreatedAt     timestamp  `json:"created_at" swaggertype:"string" format:"date-time"`
	StartedAt     *timestamp `json:"started_at" extensions:"x-nullable" swaggertype:"string" format:"date-time"`
	FinishedAt    *timestamp `json:"finished_at" extensions:"x-nullable" swaggertype:"string" format:"date-time"`
	// Output is the completion's output of the latest callback attempt (callback completion mode) or, for a workflow
	// node in response mode, its 2xx response body when that is a JSON value of at most 64 KiB; only on
	// single-execution responses.
	Output json.RawMessage `json:"output,omitempty" swaggertype:"object"`
	// Progress is the last heartbeat's progress of the latest callback attempt; only on single-execution responses.
	Progress json.RawMessage `json:"progress,omitempty" swaggertype:"object"`
	// Events is the timeline, oldest first; only on single-execution responses.
	Events []executionEventDTO `json:"events,omitempty"`
} // @name Execution

// executionList is a page of executions.
type executionList struct {
	Items      []executionResponse `json:"items"`
	NextCursor string              `json:"next_cursor,omitempty"`
} // @name ExecutionList

// triggerRequest is the optional body of POST /v1/tasks/{id}/trigger.
type triggerRequest struct {
	// Payload overrides the task's payload for this execution only; the webhook body carries it byte for byte (it is
	// not a template, even when the task's payload is). Absent or null: the task's payload, rendered for now when it is
	// a template.
	Payload json.RawMessage `json:"payload,omitempty" swaggertype:"object"`
	// DedupKey (1 to 128 printable characters) makes the trigger idempotent per task, forever: the same key returns the execution it first created and fires nothing.
	DedupKey *string `json:"dedup_key,omitempty" example:"invoice-2026-01-42" minLength:"1" maxLength:"128"`
} // @name TriggerRequest

func executionOut(x service.ExecutionDetail) executionResponse {
	out := executionResponse{
		ID: x.ID, TaskID: x.TaskID, ScheduledFor: stamp(x.ScheduledFor), Trigger: x.Trigger, DedupKey: x.DedupKey, State: x.State,
		Attempts: x.Attempts, Round: x.Round, BackfillID: x.BackfillID, EventID: x.EventID,
		WorkflowID: x.WorkflowID, WorkflowRunID: x.WorkflowRunID, Node: x.Node, Shard: x.Shard, Late: x.Late, Held: x.Held, CancelRequested: x.CancelRequested, LastStatusCode: x.LastStatusCode,
		ErrorClass: x.LastErrorClass, NextAttemptAt: stampPtr(x.NextAttemptAt),
		CreatedAt: stamp(x.CreatedAt), StartedAt: stampPtr(x.StartedAt), FinishedAt: stampPtr(x.FinishedAt),
	}
	if x.LastError != "" {
		out.LastError = &x.LastError
	}
	out.Output, out.Progress = x.Output, x.Progress
	for _, ev := range x.Events {
		out.Events = append(out.Events, executionEventDTO{
			Type: ev.Type, At: stamp(ev.At), Attempt: ev.Attempt, StatusCode: ev.StatusCode, LatencyMS: ev.LatencyMS,
			ErrorClass: ev.ErrorClass, Message: ev.Message, Data: ev.Data,
		})
	}
	return out
}

// listExecutions godoc
//
//	@ID				listExecutions
//	@Summary		List executions, newest first
//	@Description	state=failed is the dead-letter view. since and until bound scheduled_for (since inclusive, until exclusive). Items carry no events; get one execution for its timeline.
//	@Tags			executions
//	@Produce		json
//	@Security		BearerAuth
//	@Param			task_id	query		string	false	"only this task's executions"
//	@Param			state	query		string	false	"pending, running, retrying, succeeded, failed, cancelled or skipped"	Enums(pending, running, retrying, succeeded, failed, cancelled, skipped)
//	@Param			since	query		string	false	"RFC 3339; scheduled_for at or after"	format(date-time)
//	@Param			until	query		string	false	"RFC 3339; scheduled_for before"		format(date-time)
//	@Param			held	query		boolean	false	"true: only held executions (they are pending; state, if given, must be pending); false: no filter"
//	@Param			limit	query		int		false	"page size (default 50, max 500)"
//	@Param			cursor	query		string	false	"next_cursor of the previous page"
//	@Success		200		{object}	executionList
//	@Failure		401,403,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/executions [get]
func (h *handlers) listExecutions(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	var ve service.ValidationError
	f := service.ExecutionFilter{TaskID: c.QueryParam("task_id"), State: c.QueryParam("state")}
	if v := c.QueryParam("since"); v != "" {
		f.Since = parseTime(&ve, "since", &v)
	}
	if v := c.QueryParam("until"); v != "" {
		f.Until = parseTime(&ve, "until", &v)
	}
	switch v := c.QueryParam("held"); v {
	case "", "false":
	case "true":
		f.Held = true
	default:
		ve.Add("held", "must be true or false")
	}
	if err := ve.Err(); err != nil {
		return err
	}
	items, next, err := h.cfg.Executions.List(c.Request().Context(), principalFrom(c).Tenant, f, page)
	if err != nil {
		return err
	}
	out := executionList{Items: make([]executionResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, x := range items {
		out.Items = append(out.Items, executionOut(x))
	}
	return c.JSON(http.StatusOK, out)
}

// getExecution godoc
//
//	@ID			getExecution
//	@Summary	Get an execution with its timeline
//	@Tags		executions
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"execution id"
//	@Success	200	{object}	executionResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header	503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/executions/{id} [get]
func (h *handlers) getExecution(c echo.Context) error {
	x, err := h.cfg.Executions.Get(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, executionOut(x))
}

// cancelExecution godoc
//
//	@ID				cancelExecution
//	@Summary		Cancel an execution
//	@Description	pending or retrying: cancelled at once, and its queued delivery is cancelled. running: 202; the in-flight attempt is interrupted and the execution ends as cancelled; until then it shows state running with cancel_requested true (an attempt that completes first keeps its outcome). Idempotent while running. A running execution that no job is delivering (a fault left it) is cancelled at once. Finished executions (succeeded, failed, cancelled, skipped): 409.
//	@Tags			executions
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"execution id"
//	@Success		200	{object}	executionResponse	"cancelled: state is cancelled"
//	@Success		202	{object}	executionResponse	"running: the cancel is requested (cancel_requested true, state still running); poll the execution for its end"
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/executions/{id}/cancel [post]
func (h *handlers) cancelExecution(c echo.Context) error {
	x, err := h.cfg.Executions.Cancel(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	if x.State != service.ExecCancelled {
		// Running: the attempt is being interrupted, not yet over. 202 says
		// so; cancel_requested is true in the body.
		return c.JSON(http.StatusAccepted, executionOut(x))
	}
	return c.JSON(http.StatusOK, executionOut(x))
}

// holdExecution godoc
//
//	@ID				holdExecution
//	@Summary		Hold a pending execution
//	@Description	The execution stays pending and does not start, whenever its slot comes, until it is released (held true). It can still be cancelled, and a cancel, a paused task or a schedule change ends it as for any pending execution. A held execution does not hold its task's later fires back (overlap_policy skip and queue do not count it). Started or finished executions, and one held already: 409.
//	@Tags			executions
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"execution id"
//	@Success		200	{object}	executionResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/executions/{id}/hold [post]
func (h *handlers) holdExecution(c echo.Context) error {
	x, err := h.cfg.Executions.Hold(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, executionOut(x))
}

// releaseExecution godoc
//
//	@ID				releaseExecution
//	@Summary		Release a held execution
//	@Description	The execution starts at its slot when that is still ahead, else now, with the same id (so the same Idempotency-Key and webhook-id). A first fire of a scheduled slot released more than the misfire threshold (5 s) after its slot is a misfire: the task's misfire_policy decides, as for any late fire (skip misses it; fire_once and fire_all send it late, within their limits). Its start is decided as for any pending execution: a paused task (unless it was triggered manually) or a disabled endpoint cancels it. An execution that is not held: 409.
//	@Tags			executions
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"execution id"
//	@Success		202	{object}	executionResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/executions/{id}/release [post]
func (h *handlers) releaseExecution(c echo.Context) error {
	x, err := h.cfg.Executions.Release(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, executionOut(x))
}

// retryExecutionsRequest selects the executions a bulk retry delivers again.
type retryExecutionsRequest struct {
	// TaskID limits the retry to one task's executions.
	TaskID string `json:"task_id,omitempty" format:"uuid"`
	// WorkflowID limits it to one workflow's step executions.
	WorkflowID string `json:"workflow_id,omitempty" format:"uuid"`
	// State is the state retried: failed or cancelled.
	State string `json:"state" enums:"failed,cancelled" example:"failed" validate:"required"`
	// From is the first slot (scheduled_for) of the range (inclusive), RFC 3339.
	From string `json:"from" format:"date-time" example:"2026-12-03T22:00:00Z" validate:"required"`
	// To ends the range (exclusive), RFC 3339.
	To string `json:"to" format:"date-time" example:"2026-12-04T06:00:00Z" validate:"required"`
	// DryRun: count the matches, retry nothing.
	DryRun bool `json:"dry_run,omitempty"`
} // @name RetryExecutionsRequest

// retryExecutionsResult is what a bulk retry did.
type retryExecutionsResult struct {
	// Matched executions are in state with a slot in [from, to).
	Matched int `json:"matched" example:"312"`
	// Retried of them are pending again (0 in a dry run).
	Retried int `json:"retried" example:"309"`
	// Skipped were left as they were: their task paused or deleted, their slot fired by another execution now, a change in between.
	Skipped int `json:"skipped" example:"3"`
	// SkipReasons name the first 10 skipped: "<execution id>: <why>".
	SkipReasons []string `json:"skip_reasons"`
} // @name RetryExecutionsResult

// retryExecutions godoc
//
//	@ID				retryExecutions
//	@Summary		Deliver again every failed (or cancelled) execution of a range
//	@Description	Bulk replay after an incident: every execution in state whose slot lies in [from, to), of task_id or workflow_id when given, oldest first, is retried as POST /v1/executions/{id}/retry does (same id, so the same Idempotency-Key and webhook-id; one audit record each), and one audit record of action retry says what the bulk retry did (its selection and counts, under the task or workflow named, else an execution without id). More than 10000 matches → 422 and nothing is retried. A match that retry refuses (its task paused or deleted, its slot now fired by another execution) is skipped and counted. dry_run → the count only.
//	@Tags			executions
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			body	body		retryExecutionsRequest	true	"which executions"
//	@Success		202		{object}	retryExecutionsResult
//	@Success		200		{object}	retryExecutionsResult	"dry run"
//	@Failure		400,401,403,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/executions/retry [post]
func (h *handlers) retryExecutions(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req retryExecutionsRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	var ve service.ValidationError
	in := service.RetryBulkInput{TaskID: req.TaskID, WorkflowID: req.WorkflowID, State: req.State, DryRun: req.DryRun}
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
	if err := ve.Err(); err != nil {
		return err
	}
	res, err := h.cfg.Executions.RetryBulk(c.Request().Context(), principalFrom(c).Tenant, in)
	if err != nil {
		return err
	}
	out := retryExecutionsResult{Matched: res.Matched, Retried: res.Retried, Skipped: res.Skipped, SkipReasons: res.Reasons}
	if out.SkipReasons == nil {
		out.SkipReasons = []string{}
	}
	status := http.StatusAccepted
	if in.DryRun {
		status = http.StatusOK
	}
	return c.JSON(status, out)
}

// retryExecution godoc
//
//	@ID				retryExecution
//	@Summary		Deliver an execution again
//	@Description	failed or cancelled: the execution becomes pending with its last outcome cleared and a fresh attempt budget (attempt numbers keep counting) and is delivered again at once, with the same id (so the same Idempotency-Key and webhook-id) and the task's current retry policy. retrying: its next attempt runs now. pending, running or retrying with no job delivering it (a fault left it): a new job resumes it now. 409 for succeeded and skipped executions (that slot was deliberately not fired; trigger the task instead), for a pending or running execution being delivered, when the task was deleted, when it is paused and the execution was not triggered manually (resume the task first), while the previous delivery is still finishing, or when the execution was cancelled by a schedule change and another execution now fires its slot. An execution that failed because its payload's template failed to render (error_class template) renders the task's current payload again: 409 if it still fails.
//	@Tags			executions
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"execution id"
//	@Success		202	{object}	executionResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/executions/{id}/retry [post]
func (h *handlers) retryExecution(c echo.Context) error {
	x, err := h.cfg.Executions.Retry(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, executionOut(x))
}

// triggerTask godoc
//
//	@ID				triggerTask
//	@Summary		Fire a task now
//	@Description	Creates an execution with trigger manual, scheduled for now, and queues its delivery. Works on active, paused and completed tasks. The body is optional. With a dedup_key already used for this task, the execution it created is returned (202 too) and nothing fires. A task whose endpoint is disabled: 409 naming the endpoint, and nothing fires. A templated task's payload is rendered for now (each shard its own); a template that fails to render makes the execution failed (error_class template), unsent. Supports Idempotency-Key, remembered per task.
//	@Tags			tasks
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id				path		string			true	"task id"
//	@Param			Idempotency-Key	header		string			false	"replay protection for 24 h"
//	@Param			body			body		triggerRequest	false	"payload override and dedup key"
//	@Success		202				{object}	executionResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/tasks/{id}/trigger [post]
func (h *handlers) triggerTask(c echo.Context) error {
	var req triggerRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	in, err := req.input()
	if err != nil {
		return err
	}
	x, err := h.cfg.Executions.Trigger(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, executionOut(x))
}

func (r triggerRequest) input() (service.TriggerInput, error) {
	var in service.TriggerInput
	if len(r.Payload) > 0 && string(r.Payload) != "null" {
		in.Payload = r.Payload
	}
	if r.DedupKey != nil {
		if *r.DedupKey == "" {
			return in, &service.ValidationError{Fields: []service.FieldError{{
				Field:   "dedup_key",
				Message: "must be 1 to 128 printable characters; omit it for no deduplication",
			}}}
		}
		in.DedupKey = *r.DedupKey
	}
	return in, nil
}

// idempotentTrigger is idempotent for a task's trigger. Keys are kept per
// tenant and route, so the route names the task: the same key sent to two
// tasks fires both.
func (h *handlers) idempotentTrigger(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		return h.idempotent("tasks/" + c.Param("id") + "/trigger")(next)(c)
	}
}
