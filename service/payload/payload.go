// Package payload renders templated task payloads (service/template) for
// their executions: a fire's data built from the task and the slot, the
// payloads of manual fires, an API retry's, the unsent executions' when a
// task turns templating on, and a task's preview ([Templated
// payloads](../../docs/templates.md)). service fails the fires whose
// template fails.
package payload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/resource"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/template"
)

// RenderedMax bounds a templated task's rendered payload, in bytes (a
// template may expand past service's PayloadMaxDefault, its own bound).
const RenderedMax = 1 << 20

// ErrorClass is the error class of an execution whose payload's template
// failed to render when it was created: it fails without being sent, and
// is not retried.
const ErrorClass = "template"

// Check adds each template error of payload to ve, under field
// ("payload" → "payload.rows").
func Check(ve *errs.ValidationError, field string, payload []byte, scope template.Scope) {
	err := template.Check(payload, scope)
	var list template.Errors
	switch {
	case errors.As(err, &list):
		for _, e := range list {
			ve.Add(e.Field(field), e.Reason)
		}
	case err != nil:
		ve.Add(field, err.Error())
	}
}

// Renderer renders a templated task's payload for its executions. The
// zero value (an untemplated task) renders nothing.
type Renderer struct {
	tpl    *template.Template
	broken error // the stored template does not parse: every render fails
	loc    *time.Location
	sched  *schedule.Schedule // when set, a fire's zone is its slot's (a union member's, LocationAt)
	taskID string
	name   string
}

// WithSchedule returns r rendering each fire in the zone of the member of
// sched (a union) that produces its slot; nil keeps r's one zone.
func (r Renderer) WithSchedule(sched *schedule.Schedule) Renderer {
	r.sched = sched
	return r
}

// NewRenderer prepares a task's payload for rendering in loc, its
// schedule's zone; an untemplated task's renderer renders nothing.
func NewRenderer(templated bool, payload []byte, loc *time.Location, taskID, name string) Renderer {
	if !templated {
		return Renderer{}
	}
	r := Renderer{loc: loc, taskID: taskID, name: name}
	// .event… is checked against the schedule when the task is written.
	r.tpl, r.broken = template.Parse(payload, template.Scope{Event: true})
	if r.broken == nil && !r.tpl.Templated() {
		r.tpl = nil // no string holds a template: the task's payload is sent as it is
	}
	return r
}

// ForTask is NewRenderer for a stored task, in its schedule's zone.
func ForTask(t db.Task) Renderer {
	if !t.PayloadTemplate {
		return Renderer{}
	}
	loc, err := schedule.LoadZone(t.Timezone)
	if err != nil {
		return Renderer{broken: err}
	}
	r := NewRenderer(true, t.Payload, loc, t.ID, t.Name)
	if t.ScheduleUnion != nil {
		var spec schedule.Spec
		if json.Unmarshal([]byte(*t.ScheduleUnion), &spec) == nil && spec.Type == schedule.Union {
			// Members' calendars aside: an instant two members produce is
			// the lower one's unless its calendar excludes it.
			r.sched, _ = schedule.Parse(spec, t.CreatedAt)
		}
	}
	return r
}

// Size is about how many bytes r keeps (template.Template.Size).
func (r Renderer) Size() int {
	n := 128 + len(r.taskID) + len(r.name)
	if r.tpl != nil {
		n += r.tpl.Size()
	}
	return n
}

// Active reports whether executions need a payload of their own.
func (r Renderer) Active() bool { return r.tpl != nil || r.broken != nil }

// Fire is what one execution renders its payload for.
type Fire struct {
	ExecutionID  string
	ScheduledFor time.Time
	Round        int
	Shard        int
	ShardCount   int
	Trigger      string
	Event        *template.Event // an event's fire: .event…
}

// data is the template data of fire f.
func (r Renderer) data(f Fire) template.Data {
	return template.Data{
		ScheduledFor: f.ScheduledFor, Location: r.location(f.ScheduledFor), ExecutionID: f.ExecutionID, TaskID: r.taskID,
		TaskName: r.name, Round: max(f.Round, 1), ShardIndex: f.Shard, ShardCount: max(f.ShardCount, 1), Trigger: f.Trigger,
		Event: f.Event,
	}
}

// location returns the zone a fire at t is local to.
func (r Renderer) location(t time.Time) *time.Location {
	if r.sched != nil {
		return r.sched.LocationAt(t)
	}
	return r.loc
}

// Render returns the bytes f sends: nil (the task's payload) for an
// untemplated task; an error whose text is the execution's last_error
// when the template fails.
func (r Renderer) Render(f Fire) ([]byte, error) {
	if r.broken != nil {
		return nil, errors.New("the payload's template does not parse: " + r.broken.Error())
	}
	if r.tpl == nil {
		return nil, nil
	}
	return r.tpl.Render(r.data(f), RenderedMax)
}

// Manual renders a templated task's payload into e, a manual fire
// at the transaction's now() (its scheduled_for), one payload per shard,
// when render is set (no override). It returns the reasons of the shards
// whose template failed, by shard ("" for those that rendered); nil when
// nothing failed.
func Manual(ctx context.Context, tx db.Tx, task db.Task, render bool, e *db.ManualExecution) ([]string, error) {
	r := ForTask(task)
	if !render || !r.Active() {
		return nil, nil
	}
	now, err := db.Now(ctx, tx) // now() is the transaction's start: the insert's scheduled_for
	if err != nil {
		return nil, errs.Store(err, "read the database clock")
	}
	ids := append([]string{e.ID}, e.ShardIDs...)
	var unsent []string
	e.ShardPayloads = make([][]byte, len(ids))
	for i, id := range ids {
		b, err := r.Render(Fire{
			ExecutionID: id, ScheduledFor: now, Round: 1, Shard: i, ShardCount: len(ids),
			Trigger: lifecycle.TriggerManual,
		})
		if err != nil {
			if unsent == nil {
				unsent = make([]string, len(ids))
			}
			unsent[i] = err.Error()
			continue
		}
		e.ShardPayloads[i] = b
	}
	return unsent, nil
}

// Rerender renders anew, for an API retry, the payload of row, an
// execution of task whose template failed when it was created (a task
// fixed since sends its new template's rendering; one no longer
// templated, its payload). A template that still fails is a conflict.
func Rerender(ctx context.Context, tx db.Tx, task db.Task, row db.Execution) error {
	b, err := ForTask(task).Render(Fire{
		ExecutionID: row.ID, ScheduledFor: row.ScheduledFor, Round: int(row.Round),
		Shard: int(row.Shard), ShardCount: int(row.ShardCount), Trigger: row.Trigger,
	})
	if err != nil {
		return errs.Conflictf("the task's payload template still fails (%s); change the task's payload first", err.Error())
	}
	_, err = db.SetExecutionPayload(ctx, tx, row.TenantID, row.ID, b)
	return errs.Store(err, "store rendered payload")
}

// Unsent renders the payload of task's unfinished executions that
// have no payload of their own, whose next attempt would send the task's
// payload, now a template: created before the change, they send from now
// on what they would have had they been created after it (as an
// untemplated task's payload change reaches its executions' next
// attempts). A template that fails for one of them refuses the change (a
// 422 on payload).
func Unsent(ctx context.Context, tx db.Tx, task db.Task) error {
	r := ForTask(task)
	if !r.Active() {
		return nil
	}
	execs, err := db.UnfinishedWithoutPayload(ctx, tx, task.TenantID, task.ID)
	if err != nil {
		return errs.Store(err, "list unsent executions")
	}
	for _, e := range execs {
		b, err := r.Render(Fire{
			ExecutionID: e.ID, ScheduledFor: e.ScheduledFor, Round: int(e.Round), Shard: int(e.Shard),
			ShardCount: int(e.ShardCount), Trigger: e.Trigger,
		})
		if err != nil {
			return errs.Field("payload", fmt.Sprintf("fails to render for execution %s, which is not finished: %s", e.ID, err.Error()))
		}
		if _, err := db.SetExecutionPayload(ctx, tx, e.TenantID, e.ID, b); err != nil {
			return errs.Store(err, "store rendered payload")
		}
	}
	return nil
}

// Input is what Preview renders a task's payload for.
type Input struct {
	// ScheduledFor is the slot; nil: the task's next slot, or now when
	// it has none.
	ScheduledFor *time.Time
	// Inputs are a workflow run's inputs, which a task has none of: any
	// is a 422.
	Inputs map[string]json.RawMessage
}

// Rendered is what one slot of a task would send.
type Rendered struct {
	// Body is the request body: the rendered payload (the payload itself
	// for an untemplated task).
	Body []byte
	// ScheduledFor is the slot it was rendered for.
	ScheduledFor time.Time
}

// Preview returns what the task load returns would send for a slot
// (shard 0, round 1, trigger schedule, a fresh execution id), sending
// nothing; without in.ScheduledFor, an active task's next slot, or now
// (now, the database's clock). A template that fails is a 422 naming the
// field (payload.rows).
func Preview(ctx context.Context, in Input, load func() (db.Task, error), now func(context.Context) (time.Time, error),
) (Rendered, error) {
	if len(in.Inputs) > 0 {
		return Rendered{}, errs.Field("inputs", "a task has no inputs (a workflow's nodes read their run's)")
	}
	row, err := load()
	if err != nil {
		return Rendered{}, errs.Store(err, "load task")
	}
	var slot time.Time
	switch {
	case in.ScheduledFor != nil:
		slot = *in.ScheduledFor
	case row.NextRunAt != nil && row.State == lifecycle.TaskActive:
		slot = *row.NextRunAt
	default:
		if slot, err = now(ctx); err != nil {
			return Rendered{}, errs.Store(err, "read the database clock")
		}
	}
	slot = slot.UTC().Truncate(time.Microsecond) // as executions.scheduled_for keeps it
	out := Rendered{Body: row.Payload, ScheduledFor: slot}
	r := ForTask(row)
	if !r.Active() {
		return out, nil
	}
	b, err := r.Render(Fire{
		ExecutionID: resource.NewID(), ScheduledFor: slot, Round: 1, ShardCount: int(row.Shards),
		Trigger: lifecycle.TriggerSchedule,
	})
	var re *template.RenderError
	switch {
	case errors.As(err, &re):
		return Rendered{}, errs.Field(payloadField(re.Path), re.Err.Error())
	case err != nil:
		return Rendered{}, errs.Field("payload", err.Error())
	}
	if b != nil {
		out.Body = b
	}
	return out, nil
}

// payloadField names the payload's string at path ("rows" →
// "payload.rows"), as template.Error.Field does.
func payloadField(path string) string {
	return (&template.Error{Path: path}).Field("payload")
}
