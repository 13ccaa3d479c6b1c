package service

import (
	"context"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/template"
)

// Templated payloads (service/payload), as service's files and callers
// name them.
const (
	// RenderedPayloadMax bounds a templated task's rendered payload, in
	// bytes (payload.RenderedMax).
	RenderedPayloadMax = payload.RenderedMax
	// ErrorClassTemplate is the error class of an execution whose
	// payload's template failed to render when it was created
	// (payload.ErrorClass).
	ErrorClassTemplate = payload.ErrorClass
)

type (
	// RenderInput is what Tasks.Render renders a task's payload for.
	RenderInput = payload.Input
	// Rendered is what one slot of a task would send.
	Rendered = payload.Rendered
)

// Render returns what the task would send for a slot, sending nothing
// (payload.Preview).
func (s *Tasks) Render(ctx context.Context, tenant, id string, in RenderInput) (Rendered, error) {
	return payload.Preview(ctx, in, func() (db.Task, error) {
		if !validID(id) {
			return db.Task{}, ErrNotFound
		}
		row, err := apiTask(db.GetTask(ctx, s.pool, tenant, id, false))
		return row, storeError(err, "load task")
	}, s.now)
}

// checkPayloadTemplate, renderManual, rerender and renderUnsent are
// payload's Check, Manual, Rerender and Unsent, as service's files call
// them.
func checkPayloadTemplate(ve *ValidationError, field string, p []byte, scope template.Scope) {
	payload.Check(ve, field, p, scope)
}

func renderManual(ctx context.Context, tx db.Tx, task db.Task, render bool, e *db.ManualExecution) ([]string, error) {
	return payload.Manual(ctx, tx, task, render, e)
}

func rerender(ctx context.Context, tx db.Tx, task db.Task, row db.Execution) error {
	return payload.Rerender(ctx, tx, task, row)
}

func renderUnsent(ctx context.Context, tx db.Tx, task db.Task) error {
	return payload.Unsent(ctx, tx, task)
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
