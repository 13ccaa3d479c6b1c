package db

import (
	"context"
	"time"
)

// An operator's hold on a pending execution (executions.held_at, migration
// 0025): HoldExecution sets it, ReleaseExecution clears it and records the
// execution's new deliver job. The start decision reads it
// (DeliveryRow.Held; StartsWithoutDecision leaves a held row to the
// row-by-row path), the overlap count and the reconciler leave a held
// execution out.

// HoldExecution holds pending execution id: it will not start until it is
// released. It appends a held event and reports false, writing nothing,
// when the execution is not pending or is held already.
func HoldExecution(ctx context.Context, q Querier, tenant, id string) (bool, error) {
	tag, err := q.Exec(ctx, `WITH h AS (
			UPDATE executions SET held_at = now()
			WHERE tenant_id = $1 AND id = $2 AND state = `+execPending+` AND held_at IS NULL
			RETURNING tenant_id, id)
		INSERT INTO execution_events (tenant_id, execution_id, type, message)
		SELECT tenant_id, id, 'held', 'held through the API: it will not start until it is released' FROM h`, tenant, id)
	if err != nil {
		return false, wrap("hold execution", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseCarrier is what the new deliver job of a released execution is
// made from, read from the execution the caller has locked.
type ReleaseCarrier struct {
	ScheduledFor time.Time `db:"scheduled_for"`
	// Now is the database's clock.
	Now time.Time `db:"now"`
	// LeaseCeiling is the highest lease the execution's earlier jobs may
	// use (as OrphanedExecution's): the new job's leases start above it.
	LeaseCeiling int `db:"lease_ceiling"`
	// Priority is its task's priority (1 when the task is gone);
	// EndpointID its task's endpoint ("" when the task is gone).
	Priority   int    `db:"priority"`
	EndpointID string `db:"endpoint_id"`
}

// GetReleaseCarrier reads the ReleaseCarrier of execution id;
// leaseCeiling is the last lease a job inserted with an execution may use
// (FindOrphanedExecutions).
func GetReleaseCarrier(ctx context.Context, q Querier, tenant, id string, leaseCeiling int) (ReleaseCarrier, error) {
	rows, err := q.Query(ctx, `SELECT e.scheduled_for, now() AS now,
			greatest(e.lease_attempt, CASE WHEN e.river_job_id IS NULL THEN $3
				ELSE coalesce((j.args->>'lease_base')::int, 0) + coalesce(j.max_attempts, 0) END) AS lease_ceiling,
			coalesce(t.priority, 1)::int AS priority, coalesce(t.endpoint_id::text, '') AS endpoint_id
		FROM executions e
		LEFT JOIN river_job j ON j.id = e.river_job_id
		LEFT JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
		WHERE e.tenant_id = $1 AND e.id = $2`, tenant, id, leaseCeiling)
	return collectOne[ReleaseCarrier](rows, err)
}

// ReleaseExecution releases held pending execution id: River job jobID
// delivers it from now on (a job that carried it before finds it another
// job's), and a released event with data is appended. It reports false,
// writing nothing, when the execution is not a held pending one.
func ReleaseExecution(ctx context.Context, q Querier, tenant, id string, jobID int64, data map[string]any) (bool, error) {
	tag, err := q.Exec(ctx, `WITH r AS (
			UPDATE executions SET held_at = NULL, river_job_id = $3
			WHERE tenant_id = $1 AND id = $2 AND state = `+execPending+` AND held_at IS NOT NULL
			RETURNING tenant_id, id)
		INSERT INTO execution_events (tenant_id, execution_id, type, message, data)
		SELECT tenant_id, id, 'released', 'released through the API', $4 FROM r`, tenant, id, jobID, data)
	if err != nil {
		return false, wrap("release execution", err)
	}
	return tag.RowsAffected() == 1, nil
}
