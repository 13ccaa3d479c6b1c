package db

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// SLAMiss is an unfinished execution past its task's SLA deadline that has
// not been recorded as missed yet.
type SLAMiss struct {
	TenantID        string    `db:"tenant_id"`
	ExecutionID     string    `db:"execution_id"`
	TaskID          string    `db:"task_id"`
	DueAt           time.Time `db:"due_at"`
	FinishWithinMS  int64     `db:"sla_finish_within_ms"`
	AlertEndpointID *string   `db:"alert_endpoint_id"`
	ScheduledFor    time.Time `db:"scheduled_for"`
}

// FindSLAMisses returns up to limit unfinished executions whose slot plus
// their task's sla_finish_within_ms has passed by the database clock and
// that are not in sla_misses, earliest deadline first. It walks the tasks
// with an SLA (tasks_sla_idx) and, for each, its unfinished executions by
// slot (the primary key of unfinished_executions): no index of executions
// is needed.
func FindSLAMisses(ctx context.Context, q Querier, limit int) ([]SLAMiss, error) {
	// Across tenants on purpose: the sweeper serves them all.
	rows, err := q.Query(ctx, `SELECT u.tenant_id, u.id::text AS execution_id, u.task_id::text AS task_id,
			u.scheduled_for + make_interval(secs => t.sla_finish_within_ms / 1000.0) AS due_at,
			t.sla_finish_within_ms, t.alert_endpoint_id::text AS alert_endpoint_id, u.scheduled_for
		FROM tasks t
		JOIN unfinished_executions u ON u.tenant_id = t.tenant_id AND u.task_id = t.id
		WHERE t.sla_finish_within_ms IS NOT NULL
		  AND u.scheduled_for <= now() - make_interval(secs => t.sla_finish_within_ms / 1000.0)
		  AND NOT EXISTS (SELECT 1 FROM sla_misses s WHERE s.tenant_id = u.tenant_id AND s.execution_id = u.id)
		ORDER BY 4 LIMIT $1`, limit)
	if err != nil {
		return nil, wrap("find SLA misses", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[SLAMiss])
	return out, wrap("find SLA misses", err)
}

// RecordSLAMiss records that an execution, still unfinished, missed its
// deadline dueAt, and returns its state; ok is false when it was recorded
// already or has finished meanwhile (nothing is written then).
func RecordSLAMiss(ctx context.Context, q Querier, tenant, executionID string, dueAt time.Time) (state string, ok bool, err error) {
	rows, err := q.Query(ctx, `WITH e AS (
			SELECT tenant_id, id, state FROM executions
			WHERE tenant_id = $1 AND id = $2 AND state IN `+execUnfinished+`
			FOR UPDATE
		), ins AS (
			INSERT INTO sla_misses (tenant_id, execution_id, due_at)
			SELECT tenant_id, id, $3 FROM e
			ON CONFLICT DO NOTHING
			RETURNING execution_id)
		SELECT e.state FROM e JOIN ins ON ins.execution_id = e.id`, tenant, executionID, dueAt)
	if err != nil {
		return "", false, wrap("record SLA miss", err)
	}
	states, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", false, wrap("record SLA miss", err)
	}
	if len(states) == 0 {
		return "", false, nil
	}
	return states[0], true, nil
}

// RunSLAMiss is an unfinished workflow run past its workflow's SLA
// deadline that has not been recorded as missed yet.
type RunSLAMiss struct {
	TenantID        string    `db:"tenant_id"`
	RunID           string    `db:"run_id"`
	WorkflowID      string    `db:"workflow_id"`
	DueAt           time.Time `db:"due_at"`
	FinishWithinMS  int64     `db:"sla_finish_within_ms"`
	AlertEndpointID *string   `db:"alert_endpoint_id"`
	ScheduledFor    time.Time `db:"scheduled_for"`
}

// FindRunSLAMisses returns up to limit unfinished workflow runs (pending,
// running, blocked) whose slot plus their workflow's sla_finish_within_ms
// has passed by the database clock and that are not recorded as missed,
// earliest deadline first. It walks the workflows with an SLA
// (workflows_sla_idx) and, for each, its unfinished runs by slot
// (workflow_runs_unfinished_idx).
func FindRunSLAMisses(ctx context.Context, q Querier, limit int) ([]RunSLAMiss, error) {
	// Across tenants on purpose: the sweeper serves them all.
	rows, err := q.Query(ctx, `SELECT r.tenant_id, r.id::text AS run_id, r.workflow_id::text AS workflow_id,
			r.scheduled_for + make_interval(secs => w.sla_finish_within_ms / 1000.0) AS due_at,
			w.sla_finish_within_ms, w.alert_endpoint_id::text AS alert_endpoint_id, r.scheduled_for
		FROM workflows w
		JOIN workflow_runs r ON r.tenant_id = w.tenant_id AND r.workflow_id = w.id
		WHERE w.sla_finish_within_ms IS NOT NULL
		  AND r.state IN `+runUnfinished+`
		  AND r.scheduled_for <= now() - make_interval(secs => w.sla_finish_within_ms / 1000.0)
		  AND r.sla_missed_at IS NULL
		ORDER BY 4 LIMIT $1`, limit)
	if err != nil {
		return nil, wrap("find run SLA misses", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunSLAMiss])
	return out, wrap("find run SLA misses", err)
}

// RecordRunSLAMiss marks a workflow run, still unfinished, as having
// missed its SLA and returns its state; ok is false when it was marked
// already or has finished meanwhile (nothing is written then). The
// conditional update is the once: a second sweep, on this replica or
// another, waits for the first's row lock and then matches nothing.
func RecordRunSLAMiss(ctx context.Context, q Querier, tenant, runID string) (state string, ok bool, err error) {
	err = q.QueryRow(ctx, `UPDATE workflow_runs SET sla_missed_at = now()
		WHERE tenant_id = $1 AND id = $2 AND sla_missed_at IS NULL AND state IN `+runUnfinished+`
		RETURNING state`, tenant, runID).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrap("record run SLA miss", err)
	}
	return state, true, nil
}

// RunEvent is one event of a workflow run's own timeline.
type RunEvent struct {
	At      time.Time      `db:"at"`
	Type    string         `db:"type"`
	Message *string        `db:"message"`
	Data    map[string]any `db:"data"`
}

const runEventsSQL = `SELECT at, type, message, data FROM workflow_run_events
	WHERE tenant_id = $1 AND run_id = $2 ORDER BY id`

// InsertRunEvent appends an event to a run's timeline.
func InsertRunEvent(ctx context.Context, q Querier, tenant, runID string, ev RunEvent) error {
	_, err := q.Exec(ctx, `INSERT INTO workflow_run_events (tenant_id, run_id, type, message, data)
		VALUES ($1, $2, $3, $4, $5)`, tenant, runID, ev.Type, ev.Message, ev.Data)
	return wrap("insert run event", err)
}

// GetRunEvents returns a run's events, oldest first.
func GetRunEvents(ctx context.Context, q Querier, tenant, runID string) ([]RunEvent, error) {
	rows, err := q.Query(ctx, runEventsSQL, tenant, runID)
	if err != nil {
		return nil, wrap("load run events", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunEvent])
	return out, wrap("load run events", err)
}
