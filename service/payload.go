package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/template"
)

// RenderedPayloadMax bounds a templated task's rendered payload, in bytes
// (a template may expand past PayloadMaxDefault, its own bound).
const RenderedPayloadMax = 1 << 20

// ErrorClassTemplate is the error class of an execution whose payload's
// template failed to render when it was created: it fails without being
// sent, and is not retried.
const ErrorClassTemplate = "template"

// checkPayloadTemplate adds each template error of payload to ve, under
// field ("payload" → "payload.rows").
func checkPayloadTemplate(ve *ValidationError, field string, payload []byte, scope template.Scope) {
	err := template.Check(payload, scope)
	var errs template.Errors
	switch {
	case errors.As(err, &errs):
		for _, e := range errs {
			ve.Add(e.Field(field), e.Reason)
		}
	case err != nil:
		ve.Add(field, err.Error())
	}
}

// payloadRenderer renders a templated task's payload for its executions.
// The zero value (an untemplated task) renders nothing.
type payloadRenderer struct {
	tpl    *template.Template
	broken error // the stored template does not parse: every render fails
	loc    *time.Location
	taskID string
	name   string
}

// newPayloadRenderer prepares task's payload for rendering in loc, its
// schedule's zone; an untemplated task's renderer renders nothing.
func newPayloadRenderer(templated bool, payload []byte, loc *time.Location, taskID, name string) payloadRenderer {
	if !templated {
		return payloadRenderer{}
	}
	r := payloadRenderer{loc: loc, taskID: taskID, name: name}
	// .event… is checked against the schedule when the task is written.
	r.tpl, r.broken = template.Parse(payload, template.Scope{Event: true})
	if r.broken == nil && !r.tpl.Templated() {
		r.tpl = nil // no string holds a template: the task's payload is sent as it is
	}
	return r
}

// taskRenderer is newPayloadRenderer for a stored task, in its schedule's
// zone.
func taskRenderer(t db.Task) payloadRenderer {
	if !t.PayloadTemplate {
		return payloadRenderer{}
	}
	loc, err := schedule.LoadZone(t.Timezone)
	if err != nil {
		return payloadRenderer{broken: err}
	}
	return newPayloadRenderer(true, t.Payload, loc, t.ID, t.Name)
}

// active reports whether executions need a payload of their own.
func (r payloadRenderer) active() bool { return r.tpl != nil || r.broken != nil }

// payloadFire is what one execution renders its payload for.
type payloadFire struct {
	ExecutionID  string
	ScheduledFor time.Time
	Round        int
	Shard        int
	ShardCount   int
	Trigger      string
	Event        *template.Event // an event's fire: .event…
}

// data is the template data of fire f.
func (r payloadRenderer) data(f payloadFire) template.Data {
	return template.Data{
		ScheduledFor: f.ScheduledFor, Location: r.loc, ExecutionID: f.ExecutionID, TaskID: r.taskID,
		TaskName: r.name, Round: max(f.Round, 1), ShardIndex: f.Shard, ShardCount: max(f.ShardCount, 1), Trigger: f.Trigger,
		Event: f.Event,
	}
}

// render returns the bytes f sends: nil (the task's payload) for an
// untemplated task; an error whose text is the execution's last_error
// when the template fails.
func (r payloadRenderer) render(f payloadFire) ([]byte, error) {
	if r.broken != nil {
		return nil, errors.New("the payload's template does not parse: " + r.broken.Error())
	}
	if r.tpl == nil {
		return nil, nil
	}
	return r.tpl.Render(r.data(f), RenderedPayloadMax)
}

// unsentFire is an execution just created, pending and not enqueued,
// whose payload's template failed to render (Reason).
type unsentFire struct {
	TenantID, ID, TaskID, Reason string
}

// failUnsent fails fires whose template failed to render: never sent,
// never retried. Each failure then counts for its task as a delivery's
// failure does (pause_after_failures, the alert), once every one of them
// is failed (an auto-pause cancels only executions still pending). done
// counts what ended.
func failUnsent(ctx context.Context, tx db.Tx, enq *Enqueuer, fires []unsentFire, done *ended) error {
	class := ErrorClassTemplate
	failed := fires[:0:0]
	for _, f := range fires {
		end := db.DeliveryEnd{
			TenantID: f.TenantID, ID: f.ID, From: []string{ExecPending}, To: ExecFailed, Error: &f.Reason,
			ErrorClass: &class,
		}
		if err := checkExec(end.From, end.To); err != nil {
			return err
		}
		ok, err := db.EndDelivery(ctx, tx, end)
		if err != nil {
			return storeError(err, "fail execution")
		}
		if !ok {
			continue // no longer pending: nothing to fail
		}
		ev := db.DeliveryEvent{Type: EventFailed, ErrorClass: &class, Message: &f.Reason}
		if err := db.InsertDeliveryEvents(ctx, tx, f.TenantID, f.ID, []db.DeliveryEvent{ev}); err != nil {
			return storeError(err, "record template failure")
		}
		done.add(ExecFailed, 1)
		failed = append(failed, f)
	}
	for _, f := range failed {
		fx, err := afterFailure(ctx, tx, enq, AlertMaxAttemptsDefault, f.TenantID, f.ID, f.TaskID)
		if err != nil {
			return err
		}
		done.add(ExecCancelled, fx.cancelled)
	}
	return nil
}

// renderManual renders a templated task's payload into e, a manual fire
// at the transaction's now() (its scheduled_for), one payload per shard,
// when render is set (no override). It returns the reasons of the shards
// whose template failed, by shard ("" for those that rendered); nil when
// nothing failed.
func renderManual(ctx context.Context, tx db.Tx, task db.Task, render bool, e *db.ManualExecution) ([]string, error) {
	r := taskRenderer(task)
	if !render || !r.active() {
		return nil, nil
	}
	now, err := db.Now(ctx, tx) // now() is the transaction's start: the insert's scheduled_for
	if err != nil {
		return nil, storeError(err, "read the database clock")
	}
	ids := append([]string{e.ID}, e.ShardIDs...)
	var unsent []string
	e.ShardPayloads = make([][]byte, len(ids))
	for i, id := range ids {
		b, err := r.render(payloadFire{
			ExecutionID: id, ScheduledFor: now, Round: 1, Shard: i, ShardCount: len(ids),
			Trigger: TriggerManual,
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

// rerender renders anew, for an API retry, the payload of row, an
// execution of task whose template failed when it was created (a task
// fixed since sends its new template's rendering; one no longer
// templated, its payload). A template that still fails is a conflict.
func rerender(ctx context.Context, tx db.Tx, task db.Task, row db.Execution) error {
	b, err := taskRenderer(task).render(payloadFire{
		ExecutionID: row.ID, ScheduledFor: row.ScheduledFor, Round: int(row.Round),
		Shard: int(row.Shard), ShardCount: int(row.ShardCount), Trigger: row.Trigger,
	})
	if err != nil {
		return conflictf("the task's payload template still fails (%s); change the task's payload first", err.Error())
	}
	_, err = db.SetExecutionPayload(ctx, tx, row.TenantID, row.ID, b)
	return storeError(err, "store rendered payload")
}

// renderUnsent renders the payload of task's unfinished executions that
// have no payload of their own, whose next attempt would send the task's
// payload, now a template: created before the change, they send from now
// on what they would have had they been created after it (as an
// untemplated task's payload change reaches its executions' next
// attempts). A template that fails for one of them refuses the change (a
// 422 on payload).
func renderUnsent(ctx context.Context, tx db.Tx, task db.Task) error {
	r := taskRenderer(task)
	if !r.active() {
		return nil
	}
	execs, err := db.UnfinishedWithoutPayload(ctx, tx, task.TenantID, task.ID)
	if err != nil {
		return storeError(err, "list unsent executions")
	}
	for _, e := range execs {
		b, err := r.render(payloadFire{
			ExecutionID: e.ID, ScheduledFor: e.ScheduledFor, Round: int(e.Round), Shard: int(e.Shard),
			ShardCount: int(e.ShardCount), Trigger: e.Trigger,
		})
		if err != nil {
			return fieldError("payload", fmt.Sprintf("fails to render for execution %s, which is not finished: %s", e.ID, err.Error()))
		}
		if _, err := db.SetExecutionPayload(ctx, tx, e.TenantID, e.ID, b); err != nil {
			return storeError(err, "store rendered payload")
		}
	}
	return nil
}

// RenderInput is what Tasks.Render renders a task's payload for.
type RenderInput struct {
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

// Render returns what the task would send for a slot (shard 0, round 1,
// trigger schedule, a fresh execution id), sending nothing. A template
// that fails is a 422 naming the field (payload.rows).
func (s *Tasks) Render(ctx context.Context, tenant, id string, in RenderInput) (Rendered, error) {
	if len(in.Inputs) > 0 {
		return Rendered{}, fieldError("inputs", "a task has no inputs (a workflow's nodes read their run's)")
	}
	if !validID(id) {
		return Rendered{}, ErrNotFound
	}
	row, err := apiTask(db.GetTask(ctx, s.pool, tenant, id, false))
	if err != nil {
		return Rendered{}, storeError(err, "load task")
	}
	var slot time.Time
	switch {
	case in.ScheduledFor != nil:
		slot = *in.ScheduledFor
	case row.NextRunAt != nil && row.State == TaskActive:
		slot = *row.NextRunAt
	default:
		if slot, err = s.now(ctx); err != nil {
			return Rendered{}, err
		}
	}
	slot = slot.UTC().Truncate(time.Microsecond) // as executions.scheduled_for keeps it
	out := Rendered{Body: row.Payload, ScheduledFor: slot}
	r := taskRenderer(row)
	if !r.active() {
		return out, nil
	}
	b, err := r.render(payloadFire{
		ExecutionID: NewID(), ScheduledFor: slot, Round: 1, ShardCount: int(row.Shards),
		Trigger: TriggerSchedule,
	})
	var re *template.RenderError
	switch {
	case errors.As(err, &re):
		return Rendered{}, fieldError(payloadField(re.Path), re.Err.Error())
	case err != nil:
		return Rendered{}, fieldError("payload", err.Error())
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
