package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordedSLAMiss is an execution recorded in sla_misses, with what a
// reader of the miss needs: its task, slot, deadline and current state.
type RecordedSLAMiss struct {
	ExecutionID  string    `db:"execution_id"`
	TaskID       string    `db:"task_id"`
	TaskName     *string   `db:"task_name"`
	ScheduledFor time.Time `db:"scheduled_for"`
	DueAt        time.Time `db:"due_at"`
	MissedAt     time.Time `db:"missed_at"`
	State        string    `db:"state"`
}

// ListSLAMisses returns a tenant's recorded execution SLA misses, newest
// execution first (ids are UUIDv7): it walks sla_misses' primary key
// (tenant_id, execution_id) backwards, each miss then looks up its
// execution and task by their primary keys.
func ListSLAMisses(ctx context.Context, q Querier, tenant string, limit int) ([]RecordedSLAMiss, error) {
	rows, err := q.Query(ctx, `SELECT s.execution_id::text AS execution_id, e.task_id::text AS task_id, t.name AS task_name,
			e.scheduled_for, s.due_at, s.missed_at, e.state
		FROM sla_misses s
		JOIN executions e ON e.tenant_id = s.tenant_id AND e.id = s.execution_id
		LEFT JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
		WHERE s.tenant_id = $1
		ORDER BY s.execution_id DESC LIMIT $2`, tenant, limit)
	if err != nil {
		return nil, wrap("list SLA misses", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RecordedSLAMiss])
	return out, wrap("list SLA misses", err)
}

// FailedForGood is the condition on executions e of a failure that
// stands: e failed (retries spent, or a permanent error) and no later
// round re-ran its slot — a backfill's re-run of a task's slot (the same
// task, slot and shard, a higher round), or of a workflow run's slot (a
// run of the same workflow and slot with a higher round). Once a slot is
// re-run its latest round speaks for it: a success clears the failure,
// and a failed re-run is listed itself.
var FailedForGood = `e.state = ` + execFailed + `
	AND NOT (e.workflow_run_id IS NULL AND e.trigger IN ('schedule', 'backfill') AND EXISTS (
		SELECT 1 FROM executions l
		WHERE l.task_id = e.task_id AND l.scheduled_for = e.scheduled_for AND l.round > e.round AND l.shard = e.shard
			AND l.trigger IN ('schedule', 'backfill') AND NOT l.rescheduled AND l.tenant_id = e.tenant_id))
	AND NOT (e.workflow_run_id IS NOT NULL AND EXISTS (
		SELECT 1 FROM workflow_runs l
		WHERE l.workflow_id = e.workflow_id AND l.scheduled_for = e.scheduled_for AND l.round > e.round
			AND l.trigger IN ('schedule', 'backfill') AND NOT l.rescheduled AND l.tenant_id = e.tenant_id))`

// ListFailedSince returns a tenant's executions failed for good
// (FailedForGood) at or after since, newest first. Like ListExecutions'
// failed filter it walks executions_last_error_idx, where every failed,
// cancelled or skipped execution is and no succeeded one; a failure's
// later rounds are found by the slot indexes.
func ListFailedSince(ctx context.Context, q Querier, tenant string, since time.Time, limit int) ([]FailedExecution, error) {
	// The names are looked up by primary key for the rows kept only.
	rows, err := q.Query(ctx, `SELECT `+executionColumns+`,
			(SELECT t.name FROM tasks t WHERE t.tenant_id = e.tenant_id AND t.id = e.task_id AND t.workflow_id IS NULL),
			(SELECT w.name FROM workflows w WHERE w.tenant_id = e.tenant_id AND w.id = e.workflow_id)
		FROM executions e
		WHERE e.tenant_id = $1 AND e.last_error IS NOT NULL AND e.finished_at >= $2 AND `+FailedForGood+`
		ORDER BY e.id DESC LIMIT $3`, tenant, since, limit)
	if err != nil {
		return nil, wrap("list failed executions", err)
	}
	out, err := collectRows[FailedExecution](rows, limit)
	return out, wrap("list failed executions", err)
}

// FailedExecution is an execution failed for good, with the name of its
// task (nil: a workflow step's, or a task since deleted) and of its
// workflow (nil: not a step, or the workflow is gone).
type FailedExecution struct {
	Execution
	TaskName, WorkflowName *string
}

func (f *FailedExecution) fields() []any {
	return append(f.Execution.fields(), &f.TaskName, &f.WorkflowName)
}

// AlertRun is a workflow run that needs attention, with its workflow's
// name and, for an SLA miss, the deadline its sla_missed event recorded.
type AlertRun struct {
	ID           string     `db:"id"`
	WorkflowID   string     `db:"workflow_id"`
	WorkflowName string     `db:"workflow_name"`
	ScheduledFor time.Time  `db:"scheduled_for"`
	State        string     `db:"state"`
	UpdatedAt    time.Time  `db:"updated_at"`
	SLAMissedAt  *time.Time `db:"sla_missed_at"`
	SLADueAt     *time.Time `db:"sla_due_at"`
}

// ListSLAMissedRuns returns a tenant's workflow runs recorded as missing
// their workflow's SLA, newest run first; ListBlockedRuns its blocked
// runs. Both walk the tenant's runs by primary key (tenant_id, id)
// backwards, as many as it takes to fill limit: no index holds either
// condition (one would need a migration).
func ListSLAMissedRuns(ctx context.Context, q Querier, tenant string, limit int) ([]AlertRun, error) {
	return listAlertRuns(ctx, q, "r.sla_missed_at IS NOT NULL", tenant, limit)
}

// ListBlockedRuns: see ListSLAMissedRuns.
func ListBlockedRuns(ctx context.Context, q Querier, tenant string, limit int) ([]AlertRun, error) {
	return listAlertRuns(ctx, q, "r.state = "+runBlocked, tenant, limit)
}

func listAlertRuns(ctx context.Context, q Querier, cond, tenant string, limit int) ([]AlertRun, error) {
	rows, err := q.Query(ctx, `SELECT r.id::text AS id, r.workflow_id::text AS workflow_id, w.name AS workflow_name,
			r.scheduled_for, r.state, r.updated_at, r.sla_missed_at,
			(SELECT (ev.data->>'due_at')::timestamptz FROM workflow_run_events ev
			 WHERE ev.tenant_id = r.tenant_id AND ev.run_id = r.id AND ev.type = 'sla_missed'
			 ORDER BY ev.id LIMIT 1) AS sla_due_at
		FROM workflow_runs r
		JOIN workflows w ON w.tenant_id = r.tenant_id AND w.id = r.workflow_id
		WHERE r.tenant_id = $1 AND `+cond+`
		ORDER BY r.id DESC LIMIT $2`, tenant, limit)
	if err != nil {
		return nil, wrap("list workflow runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[AlertRun])
	return out, wrap("list workflow runs", err)
}
