package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// FutureScheduledRuns locks a workflow's unfinished scheduled runs whose
// slot is after `after` and none of whose executions has started (the
// runs a schedule or calendar change may cancel). A run another
// transaction holds is skipped (SKIP LOCKED): the caller holds the
// workflow's row, and the engine locks a run before its workflow.
func FutureScheduledRuns(ctx context.Context, q Querier, tenant, workflowID string, after time.Time) ([]WorkflowRun, error) {
	rows, err := q.Query(ctx, `SELECT `+runColumns+` FROM workflow_runs r
		WHERE r.workflow_id = $2 AND r.state IN `+runUnfinished+` AND r.tenant_id = $1
		  AND r.trigger = 'schedule' AND NOT r.rescheduled AND r.scheduled_for > $3
		  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.workflow_run_id = r.id AND e.tenant_id = r.tenant_id
			AND e.first_started_at IS NOT NULL)
		ORDER BY r.scheduled_for FOR UPDATE SKIP LOCKED`, tenant, workflowID, after)
	if err != nil {
		return nil, wrap("future scheduled runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[WorkflowRun])
	return out, wrap("future scheduled runs", err)
}

// MarkRunRescheduled gives a cancelled run's slot up, with its roots'
// cancelled executions' slots (both slot indexes leave them out), so that
// the schedule can start the slot again and fire its roots.
func MarkRunRescheduled(ctx context.Context, q Querier, tenant, id string) error {
	_, err := q.Exec(ctx, `WITH x AS (
			UPDATE executions SET rescheduled = true
			WHERE workflow_run_id = $2 AND tenant_id = $1 AND state = `+execCancelled+` AND NOT rescheduled)
		UPDATE workflow_runs SET rescheduled = true WHERE tenant_id = $1 AND id = $2`, tenant, id)
	return wrap("mark run rescheduled", err)
}

// WorkflowsUsingCalendar returns up to limit ids of the workflows whose
// schedule excludes calendar id, locked.
func WorkflowsUsingCalendar(ctx context.Context, q Querier, tenant, id string, limit int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id::text FROM workflows
		WHERE tenant_id = $1 AND exclude_calendars @> ARRAY[$2::uuid] AND exclude_calendars <> '{}'
		ORDER BY id LIMIT $3 FOR UPDATE`, tenant, id, limit)
	if err != nil {
		return nil, wrap("find workflows using a calendar", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap("find workflows using a calendar", err)
}

// RetireVersions retires a workflow's versions older than its current one
// that no unfinished run uses and no unfinished execution of their hidden
// tasks needs: their hidden node tasks are deleted (they keep no endpoint
// in use any more) and retired_at is set (the document stays for the
// runs' timelines). The caller holds the workflow's row lock, which every
// run start takes, so no run of a retired version can start afterwards.
// It returns how many versions it retired.
func RetireVersions(ctx context.Context, q Querier, tenant, workflowID string) (int64, error) {
	tag, err := q.Exec(ctx, `WITH v AS (
			SELECT v.tenant_id, v.workflow_id, v.version,
				ARRAY(SELECT (n->>'task_id')::uuid FROM jsonb_array_elements(v.nodes) n) AS tasks
			FROM workflow_versions v JOIN workflows w ON w.tenant_id = v.tenant_id AND w.id = v.workflow_id
			WHERE v.tenant_id = $1 AND v.workflow_id = $2 AND v.retired_at IS NULL AND v.version < w.version
		), free AS (
			SELECT v.* FROM v
			WHERE NOT EXISTS (SELECT 1 FROM workflow_runs r WHERE r.workflow_id = v.workflow_id AND r.tenant_id = v.tenant_id
					AND r.version = v.version AND r.state IN `+runUnfinished+`)
			  AND NOT EXISTS (SELECT 1 FROM unfinished_executions u WHERE u.tenant_id = v.tenant_id AND u.task_id = ANY (v.tasks))
		), gone AS (
			DELETE FROM tasks t USING free f
			WHERE t.tenant_id = f.tenant_id AND t.id = ANY (f.tasks) AND t.workflow_id = f.workflow_id
		)
		UPDATE workflow_versions x SET retired_at = now() FROM free f
		WHERE x.tenant_id = f.tenant_id AND x.workflow_id = f.workflow_id AND x.version = f.version`, tenant, workflowID)
	if err != nil {
		return 0, wrap("retire workflow versions", err)
	}
	return tag.RowsAffected(), nil
}

// WorkflowsWithOldVersions returns up to limit workflows that have a
// version older than the current one not retired yet (the retirement
// sweep's candidates).
func WorkflowsWithOldVersions(ctx context.Context, q Querier, limit int) ([]RunRef, error) {
	// Cross-tenant by design: the sweep serves every tenant.
	rows, err := q.Query(ctx, `SELECT DISTINCT w.tenant_id, w.id::text FROM workflow_versions v
		JOIN workflows w ON w.tenant_id = v.tenant_id AND w.id = v.workflow_id
		WHERE v.retired_at IS NULL AND v.version < w.version
		LIMIT $1`, limit)
	if err != nil {
		return nil, wrap("workflows with old versions", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunRef])
	return out, wrap("workflows with old versions", err)
}
