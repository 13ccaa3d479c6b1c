// Package sla records the executions and workflow runs that missed their
// SLA (sla.finish_within_ms) and queues their alerts (Sweeper).
package sla

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/alert"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/queue"
)

// sweepBatch bounds the misses one pass records.
const sweepBatch = 500

// Sweep is what one pass of Sweeper.Run did.
type Sweep struct {
	// Missed counts the executions newly recorded as missing their SLA.
	Missed int
	// RunsMissed counts the workflow runs newly recorded as missing
	// their workflow's SLA.
	RunsMissed int
	// More: the pass stopped at its batch with more left.
	More bool
}

// Sweeper records the misses of SLAs; service hands it the timeline events
// it appends and a workflow run's alert.
type Sweeper struct {
	Pool     *db.Pool
	Enqueuer *queue.Enqueuer
	// AlertMaxAttempts is an execution's alert job's River attempts.
	AlertMaxAttempts int
	// MissedEvent is the timeline event of a miss; AlertQueuedEvent an
	// execution's alert queued.
	MissedEvent, AlertQueuedEvent string
	// RunAlert is the job of a run's workflow_run.sla_missed alert to
	// endpoint alertTo, the run being in state.
	RunAlert func(m db.RunSLAMiss, alertTo, state string) []river.InsertManyParams
}

// Run records the unfinished executions and workflow runs (runs) that are past their task's
// SLA deadline (slot + sla.finish_within_ms, database clock): each gets
// one sla_missed event and, when its task has an alert endpoint, one
// execution.sla_missed alert, whatever it is doing (pending, running,
// waiting for a callback, retrying); its delivery goes on. sla_misses
// keeps a miss from being recorded twice, by this or another replica.
func (s Sweeper) Run(ctx context.Context) (Sweep, error) {
	var res Sweep
	misses, err := db.FindSLAMisses(ctx, s.Pool, sweepBatch)
	if err != nil {
		return res, errs.Store(err, "find SLA misses")
	}
	res.More = len(misses) == sweepBatch
	for _, m := range misses {
		err := db.InTx(ctx, s.Pool, func(tx db.Tx) error {
			state, ok, err := db.RecordSLAMiss(ctx, tx, m.TenantID, m.ExecutionID, m.DueAt)
			if err != nil || !ok {
				return err
			}
			within := time.Duration(m.FinishWithinMS) * time.Millisecond
			events := []db.DeliveryEvent{{
				Type:    s.MissedEvent,
				Message: ref(fmt.Sprintf("not succeeded within %s of its slot (sla.finish_within_ms); it is %s", within, state)),
				Data: map[string]any{
					"due_at": m.DueAt.UTC().Format(time.RFC3339Nano), "finish_within_ms": m.FinishWithinMS,
					"state": state,
				},
			}}
			if m.AlertEndpointID != nil && *m.AlertEndpointID != "" {
				_, err := s.Enqueuer.Enqueue(ctx, tx, []river.InsertManyParams{{
					Args:       job.AlertArgs{TenantID: m.TenantID, ExecutionID: m.ExecutionID, Type: alert.ExecutionSLAMissed},
					InsertOpts: &river.InsertOpts{Queue: queue.Alert, MaxAttempts: s.AlertMaxAttempts},
				}})
				if err != nil {
					return err
				}
				events = append(events, db.DeliveryEvent{
					Type: s.AlertQueuedEvent,
					Data: map[string]any{"endpoint_id": *m.AlertEndpointID, "type": alert.ExecutionSLAMissed},
				})
			}
			if err := db.InsertDeliveryEvents(ctx, tx, m.TenantID, m.ExecutionID, events); err != nil {
				return err
			}
			res.Missed++
			return nil
		})
		if err != nil {
			return res, errs.Store(err, "record SLA miss")
		}
	}
	runs, more, err := s.runs(ctx)
	res.RunsMissed, res.More = runs, res.More || more
	return res, err
}

// runs is Run for workflow runs: each unfinished run past its
// workflow's SLA deadline (slot + sla.finish_within_ms, database clock) —
// pending behind max_active_runs, running, or blocked — gets, in one
// transaction, sla_missed_at (the once: a conditional update), an
// sla_missed event on its own timeline and, when the workflow has an
// alert endpoint, one workflow_run.sla_missed alert. The run goes on.
func (s Sweeper) runs(ctx context.Context) (int, bool, error) {
	misses, err := db.FindRunSLAMisses(ctx, s.Pool, sweepBatch)
	if err != nil {
		return 0, false, errs.Store(err, "find run SLA misses")
	}
	n := 0
	for _, m := range misses {
		err := db.InTx(ctx, s.Pool, func(tx db.Tx) error {
			state, ok, err := db.RecordRunSLAMiss(ctx, tx, m.TenantID, m.RunID)
			if err != nil || !ok {
				return err
			}
			within := time.Duration(m.FinishWithinMS) * time.Millisecond
			data := map[string]any{
				"due_at": m.DueAt.UTC().Format(time.RFC3339Nano), "finish_within_ms": m.FinishWithinMS,
				"state": state,
			}
			if m.AlertEndpointID != nil && *m.AlertEndpointID != "" {
				if _, err := s.Enqueuer.Enqueue(ctx, tx, s.RunAlert(m, *m.AlertEndpointID, state)); err != nil {
					return err
				}
				data["alert_endpoint_id"] = *m.AlertEndpointID
			}
			if err := db.InsertRunEvent(ctx, tx, m.TenantID, m.RunID, db.RunEvent{
				Type: s.MissedEvent, Data: data,
				Message: ref(fmt.Sprintf("not succeeded within %s of its slot (sla.finish_within_ms); it is %s", within, state)),
			}); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return n, false, errs.Store(err, "record run SLA miss")
		}
	}
	return n, len(misses) == sweepBatch, nil
}

func ref[T any](v T) *T { return &v }
