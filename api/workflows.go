package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// workflowNodeDTO is one node of a workflow: a webhook call with a task's
// delivery fields, its upstream keys and its trigger rule.
type workflowNodeDTO struct {
	// Key is unique in the workflow: ^[a-z0-9][a-z0-9._-]{0,63}$.
	Key string `json:"key" example:"extract" validate:"required" minLength:"1" maxLength:"64"`
	// EndpointID is the endpoint the node calls; required unless the node has wait_for (never both).
	EndpointID string `json:"endpoint_id,omitempty" example:"0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e" format:"uuid"`
	// Payload is any JSON; the webhook body carries it. Default {}.
	Payload json.RawMessage `json:"payload,omitempty" swaggertype:"object"`
	// Priority 1 (highest) to 4; 0 or absent: 2.
	Priority int `json:"priority,omitempty" example:"2" minimum:"0" maximum:"4"`
	// TimeoutMS per attempt (100..300000); absent: the endpoint's timeout.
	TimeoutMS *int     `json:"timeout_ms,omitempty" example:"30000" minimum:"100" maximum:"300000"`
	Retry     retryDTO `json:"retry"`
	// Shards fires this many executions of the node (1..1000; 0 or absent: 1), with X-Ax-Shard-Index/Count.
	Shards int `json:"shards,omitempty" example:"1" minimum:"0" maximum:"1000"`
	// DependsOn lists the keys of the node's upstream nodes.
	DependsOn []string `json:"depends_on,omitempty"`
	// TriggerRule: all_success (default), all_done (every upstream finished) or one_success.
	TriggerRule string `json:"trigger_rule,omitempty" enums:"all_success,all_done,one_success" example:"all_success"`
	// Completion says how an attempt of the node ends, as for a task; absent or null: {"mode": "response"}. In callback
	// mode the node's 2xx only accepts the attempt: the nodes downstream wait until its execution is completed
	// (POST /v1/executions/{id}/complete), and heartbeat and completion timeouts retry it under its retry policy.
	Completion *completionDTO `json:"completion,omitempty" extensions:"x-nullable"`
	// PayloadTemplate: each JSON string of payload is a Go template rendered when the node fires, over the slot's data,
	// the run's inputs (.inputs.<name>) and its upstream nodes' outputs and states (.nodes.<key>.output…, .status).
	PayloadTemplate bool `json:"payload_template,omitempty"`
	// RunIf is a template rendered when the node's trigger rule is met: "true" fires it, "false" skips it (downstream
	// all_success treats it as satisfied), anything else fails it (error_class template). Empty: no condition.
	RunIf string `json:"run_if,omitempty" maxLength:"4096" example:"{{ ne .trigger \"backfill\" }}"`
	// WaitFor, instead of endpoint_id, makes the node wait for an event: it sends nothing, and has no payload, shards,
	// completion, timeout_ms, priority or retry.
	WaitFor *waitForDTO `json:"wait_for,omitempty"`
} // @name WorkflowNode

// waitForDTO is what a wait_for node waits for. Once its rule is met, the node succeeds when an event of that name
// (and, with a key, that key) is posted (POST /v1/events), the event's payload becoming its output (null when none);
// an event posted before does not count. No such event within timeout_ms fails it (error_class event_timeout).
type waitForDTO struct {
	// Event is the event's name: letters, digits and "._:-", 1 to 200 characters.
	Event string `json:"event" validate:"required" minLength:"1" maxLength:"200"`
	// Key, when set, is a template rendered when the node's rule is met, with the data of a node's payload template
	// (.business_date, .inputs.<name>, .nodes.<key>.output…): only an event with that key satisfies the node. A key
	// that does not render fails the node (error_class template).
	Key string `json:"key,omitempty" maxLength:"4096"`
	// TimeoutMS: 1000 (1 s) to 2592000000 (30 days).
	TimeoutMS int64 `json:"timeout_ms" validate:"required" minimum:"1000" maximum:"2592000000"`
} // @name WorkflowNodeWaitFor

// (No examples above: the example bodies the spec tests send are built
// from every field with one, and a node has endpoint_id or wait_for.)

// workflowRequest is the body of POST /v1/workflows, and the shape a PATCH merges into.
type workflowRequest struct {
	// Name: as a task's, 1 to 128 lower-case or uncased letters and digits of any script, '.', '_', '-', starting with a
	// letter or digit.
	Name string `json:"name" example:"billing.daily" validate:"required" minLength:"1" maxLength:"128"`
	// Schedule is optional: without one (absent, or null in a PATCH to remove it), runs start by trigger.
	Schedule *scheduleDTO `json:"schedule,omitempty" extensions:"x-nullable"`
	// MaxActiveRuns bounds the unfinished runs (1..1000; 0 or absent: 1); a slot beyond it waits, in order.
	MaxActiveRuns int    `json:"max_active_runs,omitempty" example:"1" minimum:"0" maximum:"1000"`
	MisfirePolicy string `json:"misfire_policy,omitempty" enums:"fire_once,fire_all,skip" example:"fire_once"`
	// AlertEndpointID receives the runs' alerts (blocked, SLA missed); empty: none.
	AlertEndpointID string `json:"alert_endpoint_id,omitempty"`
	// SLA (absent or null: none): a run not succeeded finish_within_ms after its slot (pending, running or blocked) gets an sla_missed event
	// (GET /v1/workflow-runs/{id}: events, sla_missed_at) and one workflow_run.sla_missed alert; it goes on.
	SLA *slaDTO `json:"sla,omitempty" extensions:"x-nullable"`
	// Nodes: at most 200; a cycle, an unknown key or a self-dependency is a 422 naming the nodes.
	Nodes []workflowNodeDTO `json:"nodes" validate:"required"`
	// Inputs declares the workflow's inputs with their defaults (name → any JSON): each run's inputs are these,
	// overridden by its trigger's or backfill's inputs. Names: 1 to 64 ASCII letters, digits and '_', not starting
	// with a digit; at most 100 inputs and 64 KiB of JSON. A change makes a new version, as a change of the nodes does.
	Inputs inputsDTO `json:"inputs,omitempty"`
} // @name WorkflowRequest

// inputsDTO is a set of named inputs: name → any JSON value. It decodes
// each value as its raw JSON (a json.RawMessage), so that numbers keep
// their digits.
type inputsDTO map[string]any // @name Inputs

// UnmarshalJSON keeps each value's raw JSON.
func (d *inputsDTO) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m == nil {
		*d = nil
		return nil
	}
	out := make(inputsDTO, len(m))
	for k, v := range m {
		out[k] = v
	}
	*d = out
	return nil
}

// service returns the inputs for the service.
func (d inputsDTO) service() service.Inputs {
	if d == nil {
		return nil
	}
	out := make(service.Inputs, len(d))
	for k, v := range d {
		raw, ok := v.(json.RawMessage)
		if !ok { // not decoded: encode it
			raw, _ = json.Marshal(v)
		}
		out[k] = raw
	}
	return out
}

// inputsOut returns inputs as the API shows them.
func inputsOut(in service.Inputs) inputsDTO {
	if in == nil {
		return nil
	}
	out := make(inputsDTO, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// workflowResponse is a workflow as the API returns it (its current version).
type workflowResponse struct {
	workflowRequest
	ID    string `json:"id"`
	State string `json:"state" enums:"active,paused"`
	// Version moves on with each PATCH of the nodes; runs keep the version they started with.
	Version   int        `json:"version"`
	NextRunAt *timestamp `json:"next_run_at" swaggertype:"string" format:"date-time" extensions:"x-nullable"`
	CreatedAt timestamp  `json:"created_at" swaggertype:"string" format:"date-time"`
	UpdatedAt timestamp  `json:"updated_at" swaggertype:"string" format:"date-time"`
} // @name Workflow

// workflowList is a page of workflows.
type workflowList struct {
	Items      []workflowResponse `json:"items"`
	NextCursor string             `json:"next_cursor,omitempty"`
} // @name WorkflowList

// runNodeResponse is one node of a run.
type runNodeResponse struct {
	Key   string `json:"key"`
	State string `json:"state" enums:"waiting,pending,running,retrying,succeeded,failed,blocked,skipped,cancelled"`
	// ExecutionID is the node's execution (shard 0's when sharded); absent before it fires.
	ExecutionID string `json:"execution_id,omitempty"`
	// Shards is the node's shard count, when above 1; ShardStates counts its executions per state.
	Shards      int            `json:"shards,omitempty"`
	ShardStates map[string]int `json:"shard_states,omitempty"`
	// RuleMetAt is when its rule was met (or it was forced) and it fired.
	RuleMetAt  *timestamp `json:"rule_met_at,omitempty" swaggertype:"string" format:"date-time"`
	StartedAt  *timestamp `json:"started_at,omitempty" swaggertype:"string" format:"date-time"`
	FinishedAt *timestamp `json:"finished_at,omitempty" swaggertype:"string" format:"date-time"`
	// Output is the node's output (shard 0's execution's when sharded), absent while it has none: in callback mode the
	// output of its completion, in response mode its 2xx response body when that is a JSON value of at most 64 KiB
	// (otherwise none, and its execution's timeline has a no_output event saying why).
	Output json.RawMessage `json:"output,omitempty" swaggertype:"object"`
	// RenderedFrom is the node's lineage, present once its payload template or run_if rendered (absent for a node
	// without templates): what they were rendered from.
	RenderedFrom *renderedFromResponse `json:"rendered_from,omitempty"`
	// Wait is what a wait_for node awaits, while it does (state running); absent otherwise.
	Wait *runNodeWaitResponse `json:"wait,omitempty"`
	// EventID is the event that resolved a wait_for node (its output is that event's payload).
	EventID string `json:"event_id,omitempty" format:"uuid"`
	// ErrorClass and LastError say why a wait_for node failed: event_timeout (no event within its timeout) or
	// template (its key did not render).
	ErrorClass string `json:"error_class,omitempty" example:"event_timeout"`
	LastError  string `json:"last_error,omitempty"`
} // @name WorkflowRunNode

// runNodeWaitResponse is what an awaiting wait_for node waits for.
type runNodeWaitResponse struct {
	Event string `json:"event" example:"files.ready"`
	// Key is its rendered key; absent: any event of that name.
	Key      string    `json:"key,omitempty" example:"2026-12-03"`
	Deadline timestamp `json:"deadline" swaggertype:"string" format:"date-time"`
} // @name WorkflowRunNodeWait

// runNodeRequest is the optional body of POST /v1/workflow-runs/{id}/nodes/{key}/run.
type runNodeRequest struct {
	// Output becomes the output of a wait_for node run by hand (any JSON, at most 64 KiB); only a wait_for node takes
	// one.
	Output json.RawMessage `json:"output,omitempty" swaggertype:"object"`
} // @name WorkflowRunNodeRequest

// renderedFromResponse is what a templated node was rendered from: the run inputs and upstream outputs its payload
// template and run_if read, kept when they rendered.
type renderedFromResponse struct {
	// Inputs names the run's inputs its templates read, sorted; their values are the run's inputs.
	Inputs []string `json:"inputs"`
	// Nodes are the upstream nodes its templates read, by key, each as .nodes.<key> was when the node rendered. A node
	// skipped by its run_if has what its run_if read.
	Nodes map[string]renderedNodeResponse `json:"nodes"`
	// Omitted names upstream nodes its templates read whose outputs did not fit in the lineage's 128 KiB (nodes has
	// their status only).
	Omitted []string `json:"omitted,omitempty"`
} // @name WorkflowRunNodeRenderedFrom

// renderedNodeResponse is an upstream node as a templated node's templates saw it when they rendered.
type renderedNodeResponse struct {
	// Status is its state then (.nodes.<key>.status).
	Status string `json:"status" enums:"waiting,pending,running,retrying,succeeded,failed,blocked,skipped,cancelled"`
	// Output is its output then (.nodes.<key>.output), absent when it had none.
	Output json.RawMessage `json:"output,omitempty" swaggertype:"object"`
} // @name WorkflowRunNodeRenderedNode

// runResponse is a workflow run.
type runResponse struct {
	ID           string    `json:"id"`
	WorkflowID   string    `json:"workflow_id"`
	Version      int       `json:"version"`
	ScheduledFor timestamp `json:"scheduled_for" swaggertype:"string" format:"date-time"`
	Round        int       `json:"round"`
	Trigger      string    `json:"trigger" enums:"schedule,manual,backfill,event"`
	State        string    `json:"state" enums:"pending,running,blocked,succeeded,failed,cancelled"`
	// Inputs are the run's inputs: the defaults of its version overridden by its trigger's or backfill's.
	Inputs     inputsDTO  `json:"inputs"`
	CreatedAt  timestamp  `json:"created_at" swaggertype:"string" format:"date-time"`
	StartedAt  *timestamp `json:"started_at" swaggertype:"string" format:"date-time" extensions:"x-nullable"`
	FinishedAt *timestamp `json:"finished_at" swaggertype:"string" format:"date-time" extensions:"x-nullable"`
	// SLAMissedAt is when the run was recorded as not succeeded by the workflow's SLA deadline (scheduled_for +
	// sla.finish_within_ms); absent while it has not missed it.
	SLAMissedAt *timestamp `json:"sla_missed_at,omitempty" swaggertype:"string" format:"date-time"`
	// SLA is where the run stands with its workflow's SLA now.
	SLA runSLAResponse `json:"sla"`
	// Nodes is the run's timeline (absent in lists).
	Nodes []runNodeResponse `json:"nodes,omitempty"`
	// Events is the run's own timeline, oldest first (absent in lists): sla_missed, with data {"due_at",
	// "finish_within_ms", "state", "alert_endpoint_id"?}. A node's events are on its execution.
	Events []runEventResponse `json:"events,omitempty"`
} // @name WorkflowRun

// runSLAResponse is where a run stands with its workflow's SLA (sla.finish_within_ms), by the database clock.
type runSLAResponse struct {
	// Status: none (the workflow has no SLA), open (unfinished, not due yet), overdue (unfinished and past its
	// deadline; the miss is recorded within moments), missed (recorded as missed: sla_missed_at), met
	// (succeeded by its deadline), late (succeeded after it, before a miss was recorded), ended (failed or
	// cancelled without a miss).
	Status string `json:"status" enums:"none,open,overdue,missed,met,late,ended" example:"open"`
	// FinishWithinMS is the workflow's sla.finish_within_ms (absent without an SLA).
	FinishWithinMS int64 `json:"finish_within_ms,omitempty" example:"3600000"`
	// DueAt is the deadline, scheduled_for + finish_within_ms; for a missed run, the deadline its miss recorded
	// (single-run responses). Absent without an SLA.
	DueAt *timestamp `json:"due_at,omitempty" swaggertype:"string" format:"date-time"`
	// MissedAt is when the miss was recorded (as sla_missed_at).
	MissedAt *timestamp `json:"missed_at,omitempty" swaggertype:"string" format:"date-time"`
} // @name WorkflowRunSLA

// runEventResponse is one event of a run as a whole.
type runEventResponse struct {
	Type    string         `json:"type" enums:"sla_missed" example:"sla_missed"`
	At      timestamp      `json:"at" swaggertype:"string" format:"date-time"`
	Message string         `json:"message,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
} // @name WorkflowRunEvent

// runList is a page of runs.
type runList struct {
	Items      []runResponse `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty"`
} // @name WorkflowRunList

// workflowTriggerRequest is the body of POST /v1/workflows/{id}/trigger.
type workflowTriggerRequest struct {
	// DedupKey (at most 256 bytes; empty: none): a second trigger with the same key returns the first run.
	DedupKey *string `json:"dedup_key,omitempty" maxLength:"256"`
	// Inputs override the workflow's input defaults for this run (name → any JSON); a name the workflow does not
	// declare is a 422 naming it (inputs.<name>). At most 64 KiB of JSON, merged.
	Inputs inputsDTO `json:"inputs,omitempty"`
} // @name WorkflowTriggerRequest

var workflowReadOnly = []string{"id", "state", "version", "next_run_at", "created_at", "updated_at", "tenant", "tenant_id"}

func (r workflowRequest) input() (service.WorkflowInput, error) {
	var ve service.ValidationError
	in := service.WorkflowInput{
		Name: r.Name, MaxActiveRuns: r.MaxActiveRuns, MisfirePolicy: r.MisfirePolicy,
		AlertEndpointID: r.AlertEndpointID, Inputs: r.Inputs.service(),
	}
	if r.Schedule != nil {
		s := r.Schedule
		in.Schedule = &schedule.Spec{
			Type: s.Type, Cron: s.Cron, Timezone: s.Timezone, IntervalSeconds: s.IntervalSeconds,
			RunAt: parseTime(&ve, "schedule.run_at", s.RunAt), StartAt: parseTime(&ve, "schedule.start_at", s.StartAt),
			EndAt: parseTime(&ve, "schedule.end_at", s.EndAt), Dialect: s.Dialect, DSTPolicy: s.DSTPolicy,
			ExcludeCalendars: s.ExcludeCalendars, Event: s.Event,
		}
	}
	if r.SLA != nil {
		if r.SLA.FinishWithinMS < 0 {
			ve.Add("sla.finish_within_ms", "must not be negative")
		}
		in.SLAFinishWithin = time.Duration(r.SLA.FinishWithinMS) * time.Millisecond
	}
	if r.MaxActiveRuns < 0 {
		ve.Add("max_active_runs", "must be 1 to 1000")
	}
	for i, n := range r.Nodes {
		f := fmt.Sprintf("nodes[%d].", i)
		node := service.WorkflowNodeInput{
			Key: n.Key, EndpointID: n.EndpointID, Payload: n.Payload, Priority: n.Priority,
			Shards: n.Shards, DependsOn: n.DependsOn, TriggerRule: n.TriggerRule,
			PayloadTemplate: n.PayloadTemplate, RunIf: n.RunIf, WaitFor: waitForIn(&ve, f, n.WaitFor),
			Retry: service.RetryPolicy{
				MaxAttempts:    n.Retry.MaxAttempts,
				InitialBackoff: time.Duration(n.Retry.InitialBackoffMS) * time.Millisecond,
				MaxBackoff:     time.Duration(n.Retry.MaxBackoffMS) * time.Millisecond,
			},
		}
		if c := n.Completion; c != nil {
			negative(&ve, f+"completion.timeout_ms", c.TimeoutMS)
			negative(&ve, f+"completion.heartbeat_timeout_ms", c.HeartbeatTimeoutMS)
			node.Completion = service.Completion{
				Mode: c.Mode, Timeout: time.Duration(c.TimeoutMS) * time.Millisecond,
				HeartbeatTimeout: time.Duration(c.HeartbeatTimeoutMS) * time.Millisecond,
			}
		}
		if n.TimeoutMS != nil {
			if *n.TimeoutMS <= 0 {
				ve.Add(f+"timeout_ms", "must be between 100 and 300000")
			}
			node.Timeout = time.Duration(*n.TimeoutMS) * time.Millisecond
		}
		negative(&ve, f+"priority", int64(n.Priority))
		negative(&ve, f+"shards", int64(n.Shards))
		negative(&ve, f+"retry.max_attempts", int64(n.Retry.MaxAttempts))
		negative(&ve, f+"retry.initial_backoff_ms", n.Retry.InitialBackoffMS)
		negative(&ve, f+"retry.max_backoff_ms", n.Retry.MaxBackoffMS)
		in.Nodes = append(in.Nodes, node)
	}
	return in, ve.Err()
}

func workflowRequestOf(in service.WorkflowInput) workflowRequest {
	r := workflowRequest{
		Name: in.Name, MaxActiveRuns: in.MaxActiveRuns, MisfirePolicy: in.MisfirePolicy,
		AlertEndpointID: in.AlertEndpointID, Nodes: []workflowNodeDTO{}, Inputs: inputsOut(in.Inputs),
	}
	if in.Schedule != nil {
		s := scheduleOut(*in.Schedule)
		r.Schedule = &s
	}
	if in.SLAFinishWithin > 0 {
		r.SLA = &slaDTO{FinishWithinMS: in.SLAFinishWithin.Milliseconds()}
	}
	for _, n := range in.Nodes {
		d := workflowNodeDTO{
			Key: n.Key, EndpointID: n.EndpointID, Payload: n.Payload, Priority: n.Priority, Shards: n.Shards,
			DependsOn: n.DependsOn, TriggerRule: n.TriggerRule, PayloadTemplate: n.PayloadTemplate, RunIf: n.RunIf,
			Retry: retryDTO{
				MaxAttempts: n.Retry.MaxAttempts, InitialBackoffMS: n.Retry.InitialBackoff.Milliseconds(),
				MaxBackoffMS: n.Retry.MaxBackoff.Milliseconds(),
			},
		}
		if n.Timeout != 0 {
			ms := int(n.Timeout.Milliseconds())
			d.TimeoutMS = &ms
		}
		if w := n.WaitFor; w != nil {
			d.WaitFor = &waitForDTO{Event: w.Event, Key: w.Key, TimeoutMS: w.Timeout.Milliseconds()}
		}
		if n.Completion.Callback() {
			d.Completion = &completionDTO{
				Mode: service.CompletionCallback, TimeoutMS: n.Completion.Timeout.Milliseconds(),
				HeartbeatTimeoutMS: n.Completion.HeartbeatTimeout.Milliseconds(),
			}
		}
		r.Nodes = append(r.Nodes, d)
	}
	return r
}

func workflowOut(w service.Workflow) workflowResponse {
	return workflowResponse{
		workflowRequest: workflowRequestOf(w.Input()), ID: w.ID, State: w.State, Version: w.Version,
		NextRunAt: stampPtr(w.NextRunAt), CreatedAt: stamp(w.CreatedAt), UpdatedAt: stamp(w.UpdatedAt),
	}
}

func runOut(r service.WorkflowRun) runResponse {
	out := runResponse{
		ID: r.ID, WorkflowID: r.WorkflowID, Version: r.Version, ScheduledFor: stamp(r.ScheduledFor),
		Round: r.Round, Trigger: r.Trigger, State: r.State, Inputs: inputsOut(r.Inputs), CreatedAt: stamp(r.CreatedAt), StartedAt: stampPtr(r.StartedAt),
		FinishedAt: stampPtr(r.FinishedAt), SLAMissedAt: stampPtr(r.SLAMissedAt),
		SLA: runSLAResponse{
			Status: r.SLA.Status, FinishWithinMS: r.SLA.Within.Milliseconds(), DueAt: stampPtr(r.SLA.DueAt),
			MissedAt: stampPtr(r.SLA.MissedAt),
		},
	}
	for _, ev := range r.Events {
		out.Events = append(out.Events, runEventResponse{Type: ev.Type, At: stamp(ev.At), Message: ev.Message, Data: ev.Data})
	}
	for _, n := range r.Nodes {
		rn := runNodeResponse{
			Key: n.Key, State: n.State, ExecutionID: n.ExecutionID, ShardStates: n.ShardStates,
			RuleMetAt: stampPtr(n.RuleMetAt), StartedAt: stampPtr(n.StartedAt), FinishedAt: stampPtr(n.FinishedAt), Output: n.Output,
		}
		if n.Shards > 1 {
			rn.Shards = n.Shards
		}
		rn.EventID, rn.ErrorClass, rn.LastError = n.EventID, n.ErrorClass, n.LastError
		if w := n.Wait; w != nil {
			rn.Wait = &runNodeWaitResponse{Event: w.Event, Key: w.Key, Deadline: stamp(w.Deadline)}
		}
		if rf := n.RenderedFrom; rf != nil {
			rn.RenderedFrom = &renderedFromResponse{
				Inputs: rf.Inputs, Nodes: make(map[string]renderedNodeResponse, len(rf.Nodes)), Omitted: rf.Omitted,
			}
			for k, v := range rf.Nodes {
				rn.RenderedFrom.Nodes[k] = renderedNodeResponse{Status: v.Status, Output: v.Output}
			}
		}
		out.Nodes = append(out.Nodes, rn)
	}
	return out
}

// createWorkflow godoc
//
//	@ID				createWorkflow
//	@Summary		Create a workflow
//	@Description	A DAG of webhook steps. Supports Idempotency-Key. A cycle, an unknown key or a self-dependency is a 422 whose error names the nodes.
//	@Tags			workflows
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string			false	"replay protection for 24 h"
//	@Param			body			body		workflowRequest	true	"the workflow"
//	@Success		201				{object}	workflowResponse
//	@Failure		400,401,403,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflows [post]
func (h *handlers) createWorkflow(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req workflowRequest
	if err := decodeStrict(body, &req, workflowReadOnly...); err != nil {
		return err
	}
	in, err := req.input()
	if err != nil {
		return err
	}
	w, err := h.cfg.Workflows.Create(c.Request().Context(), principalFrom(c).Tenant, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, workflowOut(w))
}

// listWorkflows godoc
//
//	@ID			listWorkflows
//	@Summary	List workflows, newest first
//	@Tags		workflows
//	@Produce	json
//	@Security	BearerAuth
//	@Param		limit	query		int		false	"page size (default 50, max 500)"
//	@Param		cursor	query		string	false	"next_cursor of the previous page"
//	@Success	200		{object}	workflowList
//	@Failure	401,403,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/workflows [get]
func (h *handlers) listWorkflows(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	items, next, err := h.cfg.Workflows.List(c.Request().Context(), principalFrom(c).Tenant, page)
	if err != nil {
		return err
	}
	out := workflowList{Items: make([]workflowResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, w := range items {
		out.Items = append(out.Items, workflowOut(w))
	}
	return c.JSON(http.StatusOK, out)
}

// getWorkflow godoc
//
//	@ID			getWorkflow
//	@Summary	Get a workflow
//	@Tags		workflows
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"workflow id"
//	@Success	200	{object}	workflowResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/workflows/{id} [get]
func (h *handlers) getWorkflow(c echo.Context) error {
	w, err := h.cfg.Workflows.Get(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workflowOut(w))
}

// patchWorkflow godoc
//
//	@ID				patchWorkflow
//	@Summary		Update a workflow
//	@Description	Fields present replace the current ones (nodes and inputs as a whole). A change of the nodes or the inputs makes a new version: runs in flight keep the version (and inputs) they started with.
//	@Tags			workflows
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string			true	"workflow id"
//	@Param			body	body		workflowRequest	true	"fields to change"
//	@Success		200		{object}	workflowResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflows/{id} [patch]
func (h *handlers) patchWorkflow(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := checkReadOnly(body, workflowReadOnly); err != nil {
		return err
	}
	w, err := h.cfg.Workflows.Update(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"),
		func(in *service.WorkflowInput) error {
			req := workflowRequestOf(*in)
			if err := mergePatch(body, &req, "nodes", "schedule", "inputs"); err != nil {
				return err
			}
			next, err := req.input()
			if err != nil {
				return err
			}
			*in = next
			return nil
		})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workflowOut(w))
}

// deleteWorkflow godoc
//
//	@ID				deleteWorkflow
//	@Summary		Delete a workflow
//	@Description	Deletes its runs too; node executions not started yet are cancelled.
//	@Tags			workflows
//	@Security		BearerAuth
//	@Param			id	path	string	true	"workflow id"
//	@Success		204
//	@Failure		401,403,404,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflows/{id} [delete]
func (h *handlers) deleteWorkflow(c echo.Context) error {
	if err := h.cfg.Workflows.Delete(c.Request().Context(), principalFrom(c).Tenant, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// pauseWorkflow godoc
//
//	@ID				pauseWorkflow
//	@Summary		Pause a workflow
//	@Description	Its schedule starts no run while paused; runs in flight go on.
//	@Tags			workflows
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"workflow id"
//	@Success		200	{object}	workflowResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflows/{id}/pause [post]
func (h *handlers) pauseWorkflow(c echo.Context) error {
	w, err := h.cfg.Workflows.Pause(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workflowOut(w))
}

// resumeWorkflow godoc
//
//	@ID				resumeWorkflow
//	@Summary		Resume a workflow
//	@Description	Its schedule starts runs again from the next slot after now.
//	@Tags			workflows
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"workflow id"
//	@Success		200	{object}	workflowResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflows/{id}/resume [post]
func (h *handlers) resumeWorkflow(c echo.Context) error {
	w, err := h.cfg.Workflows.Resume(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workflowOut(w))
}

// triggerWorkflow godoc
//
//	@ID				triggerWorkflow
//	@Summary		Start a run now
//	@Description	The run is pending while max_active_runs runs are unfinished. inputs override the workflow's input defaults for the run (an undeclared name → 422 naming inputs.<name>); the run returns its merged inputs. The same dedup_key returns the first run. Supports Idempotency-Key.
//	@Tags			workflows
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id				path		string					true	"workflow id"
//	@Param			Idempotency-Key	header		string					false	"replay protection for 24 h"
//	@Param			body			body		workflowTriggerRequest	false	"optional dedup key and inputs"
//	@Success		202				{object}	runResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflows/{id}/trigger [post]
func (h *handlers) triggerWorkflow(c echo.Context) error {
	var req workflowTriggerRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	in := service.WorkflowTrigger{Inputs: req.Inputs.service()}
	if req.DedupKey != nil {
		in.DedupKey = *req.DedupKey
	}
	r, err := h.cfg.Workflows.TriggerWith(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, runOut(r))
}

// idempotentWorkflowTrigger keeps Idempotency-Keys per workflow.
func (h *handlers) idempotentWorkflowTrigger(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		return h.idempotent("workflows/" + c.Param("id") + "/trigger")(next)(c)
	}
}

// listWorkflowRuns godoc
//
//	@ID			listWorkflowRuns
//	@Summary	List a workflow's runs, newest first
//	@Tags		workflows
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id		path		string	true	"workflow id"
//	@Param		limit	query		int		false	"page size (default 50, max 500)"
//	@Param		cursor	query		string	false	"next_cursor of the previous page"
//	@Success	200		{object}	runList
//	@Failure	401,403,404,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/workflows/{id}/runs [get]
func (h *handlers) listWorkflowRuns(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	items, next, err := h.cfg.Workflows.ListRuns(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), page)
	if err != nil {
		return err
	}
	out := runList{Items: make([]runResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, r := range items {
		out.Items = append(out.Items, runOut(r))
	}
	return c.JSON(http.StatusOK, out)
}

// getWorkflowRun godoc
//
//	@ID			getWorkflowRun
//	@Summary	Get a workflow run with its nodes
//	@Tags		workflows
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"run id"
//	@Success	200	{object}	runResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/workflow-runs/{id} [get]
func (h *handlers) getWorkflowRun(c echo.Context) error {
	r, err := h.cfg.Workflows.GetRun(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runOut(r))
}

// cancelWorkflowRun godoc
//
//	@ID				cancelWorkflowRun
//	@Summary		Cancel a workflow run
//	@Description	Nodes not fired are cancelled, executions not started are cancelled and running ones asked to stop. A final run is a 409.
//	@Tags			workflows
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"run id"
//	@Success		200	{object}	runResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflow-runs/{id}/cancel [post]
func (h *handlers) cancelWorkflowRun(c echo.Context) error {
	r, err := h.cfg.Workflows.CancelRun(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runOut(r))
}

// runWorkflowNode godoc
//
//	@ID				runWorkflowNode
//	@Summary		Run a node now
//	@Description	Fires a waiting or blocked node of a running or blocked run, ignoring its rule. A node that fired already is a 409 (retry its execution instead). A wait_for node that is waiting, blocked or awaiting its event succeeds at once, with the body's output as its output (any JSON, at most 64 KiB; absent: none); one that ended is a 409. Only a wait_for node takes an output (otherwise 422).
//	@Tags			workflows
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string			true	"run id"
//	@Param			key		path		string			true	"node key"
//	@Param			body	body		runNodeRequest	false	"a wait_for node's output"
//	@Success		200		{object}	runResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflow-runs/{id}/nodes/{key}/run [post]
func (h *handlers) runWorkflowNode(c echo.Context) error {
	var body runNodeRequest
	if err := decodeOptional(c, &body); err != nil {
		return err
	}
	r, err := h.cfg.Workflows.RunNodeWith(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), c.Param("key"), body.Output)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runOut(r))
}

// skipWorkflowNode godoc
//
//	@ID				skipWorkflowNode
//	@Summary		Skip a node
//	@Description	Marks a waiting or blocked node skipped (a wait_for node also while it awaits its event); a skipped upstream satisfies all_success. A node that fired already, or a wait_for node that ended, is a 409.
//	@Tags			workflows
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id	path		string	true	"run id"
//	@Param			key	path		string	true	"node key"
//	@Success		200	{object}	runResponse
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header			503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/workflow-runs/{id}/nodes/{key}/skip [post]
func (h *handlers) skipWorkflowNode(c echo.Context) error {
	r, err := h.cfg.Workflows.SkipNode(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runOut(r))
}

// waitForIn is a node's wait_for for the service (nil: none).
func waitForIn(ve *service.ValidationError, f string, w *waitForDTO) *service.WaitFor {
	if w == nil {
		return nil
	}
	negative(ve, f+"wait_for.timeout_ms", w.TimeoutMS)
	return &service.WaitFor{Event: w.Event, Key: w.Key, Timeout: time.Duration(w.TimeoutMS) * time.Millisecond}
}
