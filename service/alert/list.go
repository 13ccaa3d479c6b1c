package alert

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/execution"
)

// ListMax bounds the rows one of the lists below returns.
const ListMax = 200

// SLAMiss is an execution recorded as not succeeded by its task's
// SLA deadline (the sla_missed event of its timeline).
type SLAMiss struct {
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

// SLAMisses returns up to limit (at most ListMax) of a tenant's recorded
// execution SLA misses, newest execution first.
func SLAMisses(ctx context.Context, q db.Querier, tenant string, limit int) ([]SLAMiss, error) {
	rows, err := db.ListSLAMisses(ctx, q, tenant, Limit(limit))
	if err != nil {
		return nil, errs.Store(err, "list SLA misses")
	}
	out := make([]SLAMiss, 0, len(rows))
	for _, r := range rows {
		out = append(out, SLAMiss{
			ExecutionID: r.ExecutionID, TaskID: r.TaskID, TaskName: zeroIfNil(r.TaskName),
			ScheduledFor: r.ScheduledFor.UTC(), DueAt: r.DueAt.UTC(), MissedAt: r.MissedAt.UTC(), State: r.State,
		})
	}
	return out, nil
}

// Run is a workflow run that needs attention: one that missed its
// workflow's SLA, or one that is blocked.
type Run struct {
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

// SLAMissedRuns returns up to limit (at most ListMax) of a tenant's
// workflow runs recorded as missing their workflow's SLA, newest first.
func SLAMissedRuns(ctx context.Context, q db.Querier, tenant string, limit int) ([]Run, error) {
	rows, err := db.ListSLAMissedRuns(ctx, q, tenant, Limit(limit))
	return runs(rows, err)
}

// BlockedRuns returns up to limit (at most ListMax) of a tenant's blocked
// workflow runs (a node failed for good; they wait for a person to run,
// skip or cancel), newest first.
func BlockedRuns(ctx context.Context, q db.Querier, tenant string, limit int) ([]Run, error) {
	rows, err := db.ListBlockedRuns(ctx, q, tenant, Limit(limit))
	return runs(rows, err)
}

func runs(rows []db.AlertRun, err error) ([]Run, error) {
	if err != nil {
		return nil, errs.Store(err, "list workflow runs")
	}
	out := make([]Run, 0, len(rows))
	for _, r := range rows {
		out = append(out, Run{
			ID: r.ID, WorkflowID: r.WorkflowID, WorkflowName: r.WorkflowName,
			ScheduledFor: r.ScheduledFor.UTC(), State: r.State, UpdatedAt: r.UpdatedAt.UTC(),
			SLAMissedAt: utcPtr(r.SLAMissedAt), SLADueAt: utcPtr(r.SLADueAt),
		})
	}
	return out, nil
}

// Limit is the rows a list asked for up to n returns: n, but at most
// ListMax (ListMax too when n is not positive).
func Limit(n int) int {
	if n <= 0 || n > ListMax {
		return ListMax
	}
	return n
}

// FailedSince returns up to limit (at most ListMax) of a tenant's
// executions that failed for good at or after since, newest first: failed
// (retries exhausted or a permanent error), and their slot not re-run
// since by a backfill (db.FailedForGood) — a slot whose latest round
// succeeded is no longer failed.
func FailedSince(ctx context.Context, q db.Querier, tenant string, since time.Time, limit int) ([]Failed, error) {
	rows, err := db.ListFailedSince(ctx, q, tenant, since, Limit(limit))
	if err != nil {
		return nil, errs.Store(err, "list failed executions")
	}
	out := make([]Failed, 0, len(rows))
	for _, r := range rows {
		out = append(out, Failed{
			Detail:   execution.Of(r.Execution, nil),
			TaskName: zeroIfNil(r.TaskName), WorkflowName: zeroIfNil(r.WorkflowName),
		})
	}
	return out, nil
}

// Failed is an execution failed for good with the names that tell it: its
// task's, or for a workflow step its workflow's ("" when deleted since:
// there is no page to link to).
type Failed struct {
	execution.Detail
	TaskName, WorkflowName string
}
