package service

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
)

// slaSweepBatch bounds the misses one SweepSLA pass records.
const slaSweepBatch = 500

// SLASweep is what one SweepSLA pass did.
type SLASweep struct {
	// Missed counts the executions newly recorded as missing their SLA.
	Missed int
	// RunsMissed counts the workflow runs newly recorded as missing
	// their workflow's SLA.
	RunsMissed int
	// More: the pass stopped at its batch with more left.
	More bool
}

// SweepSLA records the unfinished executions and workflow runs (sweepRunSLA) that are past their task's
// SLA deadline (slot + sla.finish_within_ms, database clock): each gets
// one sla_missed event and, when its task has an alert endpoint, one
// execution.sla_missed alert, whatever it is doing (pending, running,
// waiting for a callback, retrying); its delivery goes on. sla_misses
// keeps a miss from being recorded twice, by this or another replica.
func (s *Deliveries) SweepSLA(ctx context.Context) (SLASweep, error) {
	var res SLASweep
	misses, err := db.FindSLAMisses(ctx, s.pool, slaSweepBatch)
	if err != nil {
		return res, storeError(err, "find SLA misses")
	}
	res.More = len(misses) == slaSweepBatch
	for _, m := range misses {
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			state, ok, err := db.RecordSLAMiss(ctx, tx, m.TenantID, m.ExecutionID, m.DueAt)
			if err != nil || !ok {
				return err
			}
			within := time.Duration(m.FinishWithinMS) * time.Millisecond
			events := []db.DeliveryEvent{{
				Type:    EventSLAMissed,
				Message: refTo(fmt.Sprintf("not succeeded within %s of its slot (sla.finish_within_ms); it is %s", within, state)),
				Data: map[string]any{
					"due_at": m.DueAt.UTC().Format(time.RFC3339Nano), "finish_within_ms": m.FinishWithinMS,
					"state": state,
				},
			}}
			if alertTo := zeroIfNil(m.AlertEndpointID); alertTo != "" {
				_, err := s.enqueuer.insertMany(ctx, tx, []river.InsertManyParams{{
					Args:       AlertArgs{TenantID: m.TenantID, ExecutionID: m.ExecutionID, Type: AlertExecutionSLAMissed},
					InsertOpts: &river.InsertOpts{Queue: QueueAlert, MaxAttempts: s.cfg.AlertMaxAttempts},
				}})
				if err != nil {
					return err
				}
				events = append(events, db.DeliveryEvent{
					Type: EventAlertQueued,
					Data: map[string]any{"endpoint_id": alertTo, "type": AlertExecutionSLAMissed},
				})
			}
			if err := db.InsertDeliveryEvents(ctx, tx, m.TenantID, m.ExecutionID, events); err != nil {
				return err
			}
			res.Missed++
			return nil
		})
		if err != nil {
			return res, storeError(err, "record SLA miss")
		}
	}
	runs, more, err := s.sweepRunSLA(ctx)
	res.RunsMissed, res.More = runs, res.More || more
	return res, err
}

// sweepRunSLA is SweepSLA for workflow runs: each unfinished run past its
// workflow's SLA deadline (slot + sla.finish_within_ms, database clock) —
// pending behind max_active_runs, running, or blocked — gets, in one
// transaction, sla_missed_at (the once: a conditional update), an
// sla_missed event on its own timeline and, when the workflow has an
// alert endpoint, one workflow_run.sla_missed alert. The run goes on.
func (s *Deliveries) sweepRunSLA(ctx context.Context) (int, bool, error) {
	misses, err := db.FindRunSLAMisses(ctx, s.pool, slaSweepBatch)
	if err != nil {
		return 0, false, storeError(err, "find run SLA misses")
	}
	n := 0
	for _, m := range misses {
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			state, ok, err := db.RecordRunSLAMiss(ctx, tx, m.TenantID, m.RunID)
			if err != nil || !ok {
				return err
			}
			within := time.Duration(m.FinishWithinMS) * time.Millisecond
			data := map[string]any{
				"due_at": m.DueAt.UTC().Format(time.RFC3339Nano), "finish_within_ms": m.FinishWithinMS,
				"state": state,
			}
			if alertTo := zeroIfNil(m.AlertEndpointID); alertTo != "" {
				due := m.DueAt.UTC()
				scheduled := m.ScheduledFor.UTC()
				_, err := s.enqueuer.insertMany(ctx, tx, workflowAlertInsert(WorkflowAlertArgs{
					TenantID: m.TenantID, WorkflowID: m.WorkflowID, RunID: m.RunID, EndpointID: alertTo,
					Type: AlertWorkflowRunSLAMissed, State: state, ScheduledFor: &scheduled,
					SLAFinishWithinMS: m.FinishWithinMS, SLADueAt: &due,
				}))
				if err != nil {
					return err
				}
				data["alert_endpoint_id"] = alertTo
			}
			if err := db.InsertRunEvent(ctx, tx, m.TenantID, m.RunID, db.RunEvent{
				Type: EventSLAMissed, Data: data,
				Message: refTo(fmt.Sprintf("not succeeded within %s of its slot (sla.finish_within_ms); it is %s", within, state)),
			}); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return n, false, storeError(err, "record run SLA miss")
		}
	}
	return n, len(misses) == slaSweepBatch, nil
}
