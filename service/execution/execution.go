// Package execution is an execution as operators see it (Detail, with
// its timeline), its listing, and what an operator's action does to one
// execution in the action's transaction: a cancel, a retry's parts, a
// manual trigger's checks, a hold and its release. service runs each
// action in its transaction with the audit record and the advance of a
// workflow node's run (Executions.change), and reports what ended.
package execution

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/resource"
)

// Execution triggers.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
	TriggerRetry    = "retry"
	// TriggerBackfill: created by a backfill (POST /v1/tasks/{id}/backfill).
	TriggerBackfill = "backfill"
	// TriggerEvent: fired by an event (POST /v1/events) matching the
	// task's event schedule.
	TriggerEvent = "event"
)

// Execution is one fire of a task, or of a workflow step.
type Execution struct {
	ID string
	// TaskID is the task the execution fires; "" for a workflow step's,
	// which WorkflowID, WorkflowRunID and Node name (a step is sent by a
	// task of the workflow's own, which the API never shows: its id would
	// lead nowhere).
	TaskID         string
	ScheduledFor   time.Time
	Trigger        string
	DedupKey       string
	State          string
	Attempts       int
	Late           bool
	LastStatusCode *int
	LastError      string
	LastErrorClass string
	CreatedAt      time.Time
	// StartedAt is when its latest attempt started, FirstStartedAt its
	// first.
	StartedAt      *time.Time
	FirstStartedAt *time.Time
	FinishedAt     *time.Time
	// Round is 1 for a slot's first fire and one more for each backfill
	// that re-ran the slot.
	Round      int
	BackfillID string
	// EventID is the event that fired it (trigger event).
	EventID string
	// WorkflowID, WorkflowRunID and Node name a workflow step's run and
	// node; Shard is the shard (0 unless sharded).
	WorkflowID, WorkflowRunID, Node string
	Shard                           int
	// Held: an operator holds the pending execution; it does not start
	// until it is released (Executions.Hold, Executions.Release).
	Held   bool
	Events []Event
}

// Event is one step on an execution's timeline.
type Event struct {
	Type       string
	At         time.Time
	Attempt    *int
	StatusCode *int
	LatencyMS  *int
	ErrorClass string
	Message    string
	Data       map[string]any
}

// Detail is an execution as operators see it: the execution and the
// delivery state they act on.
type Detail struct {
	Execution
	// CancelRequested: a cancel arrived while the execution was running;
	// its worker finishes it as cancelled.
	CancelRequested bool
	// NextAttemptAt is when a retrying execution's next attempt is due.
	NextAttemptAt *time.Time
	// Output and Progress: the latest callback attempt's completion
	// output and last heartbeat progress (callback completion mode); for
	// a workflow node in response mode, Output is its 2xx JSON answer.
	Output   json.RawMessage
	Progress json.RawMessage
}

// Filter narrows List. Since and Until bound scheduled_for (Since
// inclusive, Until exclusive).
type Filter struct {
	TaskID string
	State  string
	Since  *time.Time
	Until  *time.Time
	// Held: only held executions (which are pending).
	Held bool
}

// List returns a page of a tenant's executions, newest first (by id, i.e.
// by creation). State failed is the dead-letter set.
func List(ctx context.Context, q db.Querier, tenant string, f Filter, page resource.Page) ([]Detail, string, error) {
	var ve errs.ValidationError
	if f.TaskID != "" && !resource.ValidID(f.TaskID) {
		ve.Add("task_id", "must be a task id")
	}
	if states := lifecycle.Executions.States(); f.State != "" && !states.Has(f.State) {
		ve.Add("state", "must be one of "+strings.Join(states.States(), ", "))
	}
	if f.Held && f.State != "" && f.State != lifecycle.ExecPending {
		ve.Add("held", "held executions are pending: combine held with state pending or none")
	}
	if f.Since != nil && f.Until != nil && !f.Since.Before(*f.Until) {
		ve.Add("until", "must be after since")
	}
	if err := ve.Err(); err != nil {
		return nil, "", err
	}
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListExecutions(ctx, q, tenant, db.ExecutionFilter{
		TaskID: f.TaskID, State: f.State, Since: f.Since, Until: f.Until, Before: page.After, Limit: page.Limit + 1,
		Held: f.Held,
	})
	if err != nil {
		return nil, "", errs.Store(err, "list executions")
	}
	out, next := resource.PageOf(rows, page.Limit, func(r db.Execution) Detail { return Of(r, nil) },
		func(e Detail) string { return e.ID })
	return out, next, nil
}

// Get returns one execution with its timeline and its callbacks' output
// and progress.
func Get(ctx context.Context, q db.Querier, tenant, id string) (Detail, error) {
	if !resource.ValidID(id) {
		return Detail{}, errs.ErrNotFound
	}
	row, events, cb, err := db.GetExecutionDetail(ctx, q, tenant, id)
	if err != nil {
		return Detail{}, errs.Store(err, "load execution")
	}
	d, whole := OfDetail(db.ExecutionDetail{Row: row, Events: events, Callback: cb})
	if !whole {
		// A workflow node in response mode keeps its JSON answer.
		if d.Output, err = db.GetExecutionOutput(ctx, q, tenant, id); err != nil {
			return Detail{}, errs.Store(err, "load execution output")
		}
	}
	return d, nil
}

// OfDetail returns an execution's detail as Get returns it; whole is
// false when it lacks the output of a workflow node in response mode,
// which Get reads on its own (execution_outputs).
func OfDetail(x db.ExecutionDetail) (d Detail, whole bool) {
	d = Of(x.Row, x.Events)
	d.Output, d.Progress = x.Callback.Output, x.Callback.Progress
	return d, d.Output != nil || x.Row.WorkflowRunID == nil
}

// WithEvents returns row as operators see it, with its timeline.
func WithEvents(ctx context.Context, q db.Querier, row db.Execution) (Detail, error) {
	events, err := db.ListExecutionEvents(ctx, q, row)
	if err != nil {
		return Detail{}, errs.Store(err, "list execution events")
	}
	return Of(row, events), nil
}

// Of returns r as operators see it, with events as its timeline (nil:
// without one).
func Of(r db.Execution, events []db.ExecutionEvent) Detail {
	d := Detail{
		Execution: Execution{
			ID: r.ID, ScheduledFor: r.ScheduledFor.UTC(), Trigger: r.Trigger, DedupKey: strValue(r.DedupKey),
			State: r.State, Attempts: int(r.Attempts), Late: r.Late, LastStatusCode: intValue(r.LastStatusCode),
			LastError: strValue(r.LastError), LastErrorClass: strValue(r.LastErrorClass), CreatedAt: r.CreatedAt.UTC(),
			StartedAt: utcPtr(r.StartedAt), FirstStartedAt: utcPtr(r.FirstStartedAt), FinishedAt: utcPtr(r.FinishedAt), Round: int(r.Round), BackfillID: strValue(r.BackfillID),
			WorkflowID: strValue(r.WorkflowID), WorkflowRunID: strValue(r.WorkflowRunID), Node: strValue(r.Node),
			Shard: int(r.Shard), Held: Held(r), EventID: strValue(r.EventID),
		},
		CancelRequested: r.CancelRequested,
		NextAttemptAt:   utcPtr(r.NextAttemptAt),
	}
	if r.WorkflowRunID == nil {
		d.TaskID = r.TaskID
	}
	if events != nil {
		d.Events = make([]Event, 0, len(events))
		for _, ev := range events {
			d.Events = append(d.Events, Event{
				Type: ev.Type, At: ev.At.UTC(), Attempt: intValue(ev.Attempt), StatusCode: intValue(ev.StatusCode),
				LatencyMS: intValue(ev.LatencyMS), ErrorClass: strValue(ev.ErrorClass), Message: strValue(ev.Message), Data: ev.Data,
			})
		}
	}
	return d
}

func strValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func intValue(n *int32) *int {
	if n == nil {
		return nil
	}
	v := int(*n)
	return &v
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
