package service

import (
	"context"
	"encoding/json"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/backfill"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/workflow"
)

// Backfills (service/backfill), as service's callers name them.
const (
	RerunMissing = backfill.RerunMissing
	RerunFailed  = backfill.RerunFailed
	RerunAll     = backfill.RerunAll

	SlotCreate = backfill.SlotCreate
	SlotRerun  = backfill.SlotRerun
	SlotKeep   = backfill.SlotKeep

	BackfillSlotsMax           = backfill.SlotsMax
	BackfillConcurrencyMax     = backfill.ConcurrencyMax
	BackfillConcurrencyDefault = backfill.ConcurrencyDefault
)

type (
	// Backfill re-runs a range of a task's or a workflow's slots.
	Backfill = backfill.Backfill
	// BackfillInput is a backfill request.
	BackfillInput = backfill.Input
	// BackfillSlot is what a backfill does with one slot.
	BackfillSlot = backfill.Slot
	// BackfillFilter narrows Backfills.List.
	BackfillFilter = backfill.Filter
	// Backfills creates and drives backfills.
	Backfills = backfill.Backfills
)

// NewBackfills returns a Backfills of tasks' and workflows' slots: a
// task's schedule and calendars are tasks', a templated fire that fails
// fails as the scheduler's do, and a workflow's runs start as its
// triggered ones.
func NewBackfills(pool *db.Pool, enq *Enqueuer, tasks *Tasks) *Backfills {
	graphs := &graphCache{} // the workflow versions its runs' starts read
	return backfill.New(backfill.Config{
		Pool: pool, Enqueuer: enq.Enqueuer, Metrics: tasks.cfg.Metrics,
		Schedule:     tasks.backfillSchedule,
		DecodeInputs: func(doc string) (map[string]json.RawMessage, error) { return workflow.DecodeInputs(doc) },
		FailUnsent: func(ctx context.Context, tx db.Tx, tenant, executionID, taskID, reason string) (func(), error) {
			var done ended
			err := failUnsent(ctx, tx, enq, []unsentFire{{TenantID: tenant, ID: executionID, TaskID: taskID, Reason: reason}}, &done)
			return func() { done.report(tasks.cfg.Metrics) }, err
		},
		Promote: func(ctx context.Context, tx db.Tx, tenant, workflowID string) (func(), error) {
			var done ended
			err := runEngine{enq: enq, metrics: tasks.cfg.Metrics, graphs: graphs, ended: &done}.promote(ctx, tx, tenant, workflowID)
			return func() { done.report(tasks.cfg.Metrics) }, err
		},
	})
}

// backfillSchedule loads the schedule of a backfill's target with its
// calendars, and checks inputs (overrides) against what it declares: the
// overrides' JSON ("": none) is returned for the backfill to keep.
func (s *Tasks) backfillSchedule(ctx context.Context, tx db.Tx, tenant string, t backfill.Target, inputs map[string]json.RawMessage,
) (*schedule.Schedule, string, error) {
	if t.WorkflowID != "" {
		row, err := db.GetWorkflow(ctx, tx, tenant, t.WorkflowID, false)
		if err != nil {
			return nil, "", storeError(err, "load workflow")
		}
		w, err := workflowFromRow(row)
		if err != nil {
			return nil, "", err
		}
		overrides, err := workflow.MergeInputs(w.Inputs, inputs)
		if err != nil {
			return nil, "", err
		}
		if w.Schedule == nil {
			return nil, "", fieldError("workflow", "the workflow has no schedule, so it has no slots to backfill: trigger runs instead")
		}
		sched, err := workflowSchedule(ctx, tx, tenant, w, false)
		return sched, overrides, err
	}
	if len(inputs) > 0 {
		return nil, "", fieldError("inputs", "only a workflow backfill takes inputs")
	}
	row, err := apiTask(db.GetTask(ctx, tx, tenant, t.TaskID, false))
	if err != nil {
		return nil, "", storeError(err, "load task")
	}
	task := taskFromRow(row)
	sched, err := parseSchedule(task.Schedule, task.CreatedAt)
	if err != nil {
		return nil, "", err
	}
	sched, err = s.withCalendars(ctx, tx, tenant, sched, false)
	return sched, "", err
}
