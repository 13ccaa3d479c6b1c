package db

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// OrphanedExecution is an unfinished execution that no live River job
// carries: nothing would ever finish it.
type OrphanedExecution struct {
	TenantID     string    `db:"tenant_id"`
	ID           string    `db:"id"`
	State        string    `db:"state"`
	ScheduledFor time.Time `db:"scheduled_for"`
	// RiverJobID is the job recorded as the execution's (nil: the job it
	// was inserted with, a deliver or deliver_batch job naming it).
	RiverJobID *int64 `db:"river_job_id"`
	// JobState is that job's state; nil when it is gone.
	JobState *string `db:"job_state"`
	// LeaseCeiling is the highest lease any run of the execution's jobs
	// may have used: the execution's own lease_attempt, or the recorded
	// job's last possible lease when that is higher (its lease_base plus
	// its River max_attempts).
	LeaseCeiling int `db:"lease_ceiling"`
	// Priority is its task's priority (1 when the task is gone).
	Priority int `db:"priority"`
}

// orphanJoin is the liveness test of an unfinished execution e: the job
// recorded in river_job_id is live, or (none recorded) a live deliver job
// names it, or a live deliver_batch job lists it (batch_members), or it
// waits for a callback.
var orphanJoin = `LEFT JOIN river_job j ON j.id = e.river_job_id
	WHERE CASE WHEN e.river_job_id IS NOT NULL THEN j.id IS NULL OR j.state NOT IN ` + liveJobStates + `
		ELSE NOT EXISTS (
			SELECT 1 FROM river_job d
			WHERE d.kind = 'deliver' AND d.state IN ` + liveJobStates + `
			  AND d.args @> jsonb_build_object('tenant_id', e.tenant_id, 'execution_id', e.id::text))
		  AND e.id NOT IN (SELECT id FROM batch_members)
		END
		-- An execution waiting for its callback has no job by design: the
		-- callback sweeper carries it (FindExpiredCallbacks).
		AND NOT (e.state = ` + execRunning + ` AND ` + WaitingForCallback + `)
		-- A held execution has no job by design once its job parked it: its
		-- release gives it one (ReleaseExecution).
		AND NOT (e.state = ` + execPending + ` AND e.held_at IS NOT NULL)`

// liveBatchMembers lists the executions of live deliver_batch jobs (their
// args read by batchMembers).
var liveBatchMembers = `batch_members AS MATERIALIZED (
		SELECT m.id FROM river_job j, ` + batchMembers + `
		WHERE j.kind = 'deliver_batch' AND j.state IN ` + liveJobStates + `)`

// FindOrphanedExecutions returns up to limit unfinished executions whose
// slot is more than olderThan ago (database clock) and that no live River
// job carries, oldest slot first. Such an execution is left by a fault:
// a job finished without the outcome it carried (an outcome lost in a
// database crash, a job cancelled or deleted by hand, a job discarded
// while the database was unreachable). leaseCeiling is the last lease a
// job inserted with an execution may use (deliver_batch and deliver jobs
// alike).
//
// It is orphanJoin's test for many executions at once, written so that
// its cost follows the overdue executions and never the planner's guess:
//   - old reads unfinished_executions (only unfinished rows) by slot and
//     reaches executions by primary key. Joined freely, a planner with
//     stale statistics (a table analysed while nearly empty, then filled
//     by a burst) walked executions and probed unfinished_executions by
//     tenant alone for each row, quadratic: 34 s for 10,000 executions
//     none of which was overdue.
//   - The executions no recorded job carries are matched against the live
//     jobs' executions with EXCEPT (a hashed or sorted set operation), not
//     an anti-join a planner may run as a nested loop, rescanning every
//     live job for each overdue execution; the live jobs are read only
//     when such an execution exists.
//   - A live job naming the execution's id counts whatever tenant it
//     names (ids are unique): doubt leaves an execution alone, never
//     resumes it beside its job.
func FindOrphanedExecutions(ctx context.Context, q Querier, olderThan time.Duration, limit, leaseCeiling int) ([]OrphanedExecution, error) {
	rows, err := q.Query(ctx, `WITH old AS MATERIALIZED (
			SELECT u.tenant_id, u.id FROM unfinished_executions u
			WHERE u.scheduled_for < now() - make_interval(secs => $1)
		), due AS MATERIALIZED (
			SELECT e.tenant_id, e.id, e.state, e.scheduled_for, e.river_job_id, e.lease_attempt, e.task_id
			FROM old u
			JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
			WHERE e.state IN `+execUnfinished+`
			  -- An execution waiting for its callback has no job by design:
			  -- the callback sweeper carries it (FindExpiredCallbacks).
			  AND NOT (e.state = `+execRunning+` AND `+WaitingForCallback+`)
			  -- A held execution has no job by design once its job parked
			  -- it: its release gives it one (ReleaseExecution).
			  AND NOT (e.state = `+execPending+` AND e.held_at IS NOT NULL)
		), unrecorded AS MATERIALIZED (
			SELECT d.id FROM due d WHERE d.river_job_id IS NULL
		), uncarried AS MATERIALIZED (
			SELECT id::text AS id FROM unrecorded
			EXCEPT
			SELECT j.args->>'execution_id' FROM river_job j
			WHERE j.kind = 'deliver' AND j.state IN `+liveJobStates+` AND EXISTS (SELECT 1 FROM unrecorded)
			EXCEPT
			SELECT m.id::text FROM river_job j, `+batchMembers+`
			WHERE j.kind = 'deliver_batch' AND j.state IN `+liveJobStates+` AND EXISTS (SELECT 1 FROM unrecorded)
		), orphans AS (
			SELECT d.*, j.state AS job_state, j.args AS job_args, j.max_attempts AS job_max_attempts
			FROM due d
			LEFT JOIN river_job j ON j.id = d.river_job_id
			WHERE d.river_job_id IS NOT NULL AND (j.id IS NULL OR j.state NOT IN `+liveJobStates+`)
			UNION ALL
			SELECT d.*, NULL, NULL, NULL
			FROM uncarried c
			JOIN due d ON d.id = c.id::uuid
			WHERE d.river_job_id IS NULL
		)
		SELECT o.tenant_id, o.id::text, o.state, o.scheduled_for, o.river_job_id, o.job_state::text AS job_state,
			greatest(o.lease_attempt, CASE WHEN o.river_job_id IS NULL THEN $3
				ELSE coalesce((o.job_args->>'lease_base')::int, 0) + coalesce(o.job_max_attempts, 0) END) AS lease_ceiling,
			coalesce((SELECT t.priority FROM tasks t WHERE t.tenant_id = o.tenant_id AND t.id = o.task_id), 1)::int AS priority
		FROM orphans o
		ORDER BY o.scheduled_for
		LIMIT $2`, olderThan.Seconds(), limit, leaseCeiling)
	if err != nil {
		return nil, wrap("find orphaned executions", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[OrphanedExecution])
	return out, wrap("find orphaned executions", err)
}

// GetOrphanedExecution returns the execution (locked by the caller's
// transaction) as FindOrphanedExecutions would, and whether it is
// orphaned: unfinished, and carried by no live River job.
func GetOrphanedExecution(ctx context.Context, q Querier, tenant, id string, leaseCeiling int) (OrphanedExecution, bool, error) {
	rows, err := q.Query(ctx, `WITH `+liveBatchMembers+`
		SELECT e.tenant_id, e.id::text, e.state, e.scheduled_for, e.river_job_id, j.state::text AS job_state,
			greatest(e.lease_attempt, CASE WHEN e.river_job_id IS NULL THEN $3
				ELSE coalesce((j.args->>'lease_base')::int, 0) + coalesce(j.max_attempts, 0) END) AS lease_ceiling,
			coalesce((SELECT t.priority FROM tasks t WHERE t.tenant_id = e.tenant_id AND t.id = e.task_id), 1)::int AS priority
		FROM executions e
		`+orphanJoin+`
		  AND e.tenant_id = $1 AND e.id = $2 AND e.state IN `+execUnfinished, tenant, id, leaseCeiling)
	if err != nil {
		return OrphanedExecution{}, false, wrap("check the execution's job", err)
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[OrphanedExecution])
	if errors.Is(err, pgx.ErrNoRows) {
		return OrphanedExecution{}, false, nil
	}
	if err != nil {
		return OrphanedExecution{}, false, wrap("check the execution's job", err)
	}
	return o, true, nil
}

// ResumeOrphaned records River job jobID as the carrier of an orphaned
// execution that is still unfinished and still recorded with previousJob
// (nil: none), and appends an event of type event (reconciled, or retried
// for an API retry) with message and data. It reports false when the
// execution changed meanwhile (it finished, or another job took it over),
// in which case nothing is written.
func ResumeOrphaned(ctx context.Context, q Querier, tenant, id string, previousJob *int64, jobID int64, event, message string,
	data map[string]any,
) (bool, error) {
	tag, err := q.Exec(ctx, `WITH r AS (
			UPDATE executions SET river_job_id = $4
			WHERE tenant_id = $1 AND id = $2 AND state IN `+execUnfinished+`
			  AND river_job_id IS NOT DISTINCT FROM $3
			RETURNING tenant_id, id)
		INSERT INTO execution_events (tenant_id, execution_id, type, message, data)
		SELECT tenant_id, id, $5, $6, $7 FROM r`, tenant, id, previousJob, jobID, event, message, data)
	if err != nil {
		return false, wrap("resume orphaned execution", err)
	}
	return tag.RowsAffected() == 1, nil
}

// reconcileLock is the advisory lock key that keeps replicas from
// reconciling at once.
const reconcileLock = 0x61785f7265636f6e // "ax_recon"

// InReconcileTurn runs fn in a transaction that holds the reconciler's
// turn; a replica that finds it taken skips (fn is not called) and gets
// nil.
func InReconcileTurn(ctx context.Context, q TxBeginner, fn func(Tx) error) error {
	return inTurn(ctx, q, reconcileLock, "60s", fn)
}
