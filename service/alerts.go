package service

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
)

// AlertListMax bounds the rows one of the lists below returns.
const AlertListMax = 200

// ExecutionSLAMiss is an execution recorded as not succeeded by its task's
// SLA deadline (the sla_missed event of its timeline).
type ExecutionSLAMiss struct {
	ExecutionID  string
	TaskID       string
	TaskName     string
	ScheduledFor time.Time
	DueAt        time.Time
	MissedAt     time.Time
	// State is the execution's state now: a miss is recorded while it is
	// unfinished and its delivery goes on.
	State string
}

// SLAMisses returns up to limit (at most AlertListMax) of a tenant's
// recorded execution SLA misses, newest execution first.
func (s *Executions) SLAMisses(ctx context.Context, tenant string, limit int) ([]ExecutionSLAMiss, error) {
	rows, err := db.ListSLAMisses(ctx, s.pool, tenant, alertLimit(limit))
	if err != nil {
		return nil, storeError(err, "list SLA misses")
	}
	out := make([]ExecutionSLAMiss, 0, len(rows))
	for _, r := range rows {
		out = append(out, ExecutionSLAMiss{ExecutionID: r.ExecutionID, TaskID: r.TaskID, TaskName: zeroIfNil(r.TaskName),
			ScheduledFor: r.ScheduledFor.UTC(), DueAt: r.DueAt.UTC(), MissedAt: r.MissedAt.UTC(), State: r.State})
	}
	return out, nil
}

// FailedSince returns up to limit (at most AlertListMax) of a tenant's
// executions that failed for good at or after since, newest first: failed
// (retries exhausted or a permanent error), and their slot not re-run
// since by a backfill (db.FailedForGood) — a slot whose latest round
// succeeded is no longer failed.
func (s *Executions) FailedSince(ctx context.Context, tenant string, since time.Time, limit int) ([]FailedExecution, error) {
	rows, err := db.ListFailedSince(ctx, s.pool, tenant, since, alertLimit(limit))
	if err != nil {
		return nil, storeError(err, "list failed executions")
	}
	out := make([]FailedExecution, 0, len(rows))
	for _, r := range rows {
		out = append(out, FailedExecution{ExecutionDetail: executionDetailOf(r.Execution, nil),
			TaskName: zeroIfNil(r.TaskName), WorkflowName: zeroIfNil(r.WorkflowName)})
	}
	return out, nil
}

// FailedExecution is an execution failed for good with the names that
// tell it: its task's, or for a workflow step its workflow's ("" when
// deleted since: there is no page to link to).
type FailedExecution struct {
	ExecutionDetail
	TaskName, WorkflowName string
}

// AlertRun is a workflow run that needs attention: one that missed its
// workflow's SLA, or one that is blocked.
type AlertRun struct {
	ID           string
	WorkflowID   string
	WorkflowName string
	ScheduledFor time.Time
	State        string
	// UpdatedAt is when the run last changed (for a blocked run: about
	// when it became blocked).
	UpdatedAt   time.Time
	SLAMissedAt *time.Time
	// SLADueAt is the deadline its sla_missed event recorded.
	SLADueAt *time.Time
}

// SLAMissedRuns returns up to limit (at most AlertListMax) of a tenant's
// workflow runs recorded as missing their workflow's SLA, newest first.
func (s *Workflows) SLAMissedRuns(ctx context.Context, tenant string, limit int) ([]AlertRun, error) {
	rows, err := db.ListSLAMissedRuns(ctx, s.pool, tenant, alertLimit(limit))
	return alertRuns(rows, err)
}

// BlockedRuns returns up to limit (at most AlertListMax) of a tenant's
// blocked workflow runs (a node failed for good; they wait for a person to
// run, skip or cancel), newest first.
func (s *Workflows) BlockedRuns(ctx context.Context, tenant string, limit int) ([]AlertRun, error) {
	rows, err := db.ListBlockedRuns(ctx, s.pool, tenant, alertLimit(limit))
	return alertRuns(rows, err)
}

func alertRuns(rows []db.AlertRun, err error) ([]AlertRun, error) {
	if err != nil {
		return nil, storeError(err, "list workflow runs")
	}
	out := make([]AlertRun, 0, len(rows))
	for _, r := range rows {
		out = append(out, AlertRun{ID: r.ID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
			ScheduledFor: r.ScheduledFor.UTC(), State: r.State, UpdatedAt: r.UpdatedAt.UTC(),
			SLAMissedAt: utcPtr(r.SLAMissedAt), SLADueAt: utcPtr(r.SLADueAt)})
	}
	return out, nil
}

func alertLimit(n int) int {
	if n <= 0 || n > AlertListMax {
		return AlertListMax
	}
	return n
}
