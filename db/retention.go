package db

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/jackc/pgx/v5"
)

// retentionLock is the advisory lock key that keeps replicas from removing
// expired history at once.
const retentionLock = 0x61785f726574 // "ax_ret"

// retentionTimeout bounds one retention statement: a batch that takes
// longer is cancelled (and rolled back) rather than left holding its locks.
const retentionTimeout = "30s"

// nilUUID is below every id.
const nilUUID = "00000000-0000-0000-0000-000000000000"

// ExpiredExecutions is what one batch of DeleteExpiredExecutions did.
type ExpiredExecutions struct {
	// Turn: the batch ran; false when another session held the
	// retention's turn (then nothing was looked at).
	Turn bool
	// Examined is how many executions the batch looked at; fewer than the
	// limit means the tenant's expired history has been walked to its end.
	Examined int
	// Last is the id of the last execution looked at: the next batch's
	// after.
	Last string
	// Executions and Events are the rows removed.
	Executions, Events int64
}

// DeleteExpiredExecutions looks at the next limit executions of tenant,
// by primary key after the id after (the first batch: ""), among those
// created more than olderThan ago (their UUIDv7 ids are below the id of
// that instant), and deletes, with their events, those that are final
// (succeeded, failed, cancelled, skipped) and finished more than olderThan
// ago, except the latest scheduled execution of each task that still
// exists (whose slot stays taken; docs/architecture.md, "Retention"). An
// unfinished execution is never deleted, nor one another transaction
// holds (an API retry reopening it): it is skipped, and a row that changed
// since the statement's snapshot is looked at again as it is now.
//
// The batch walks the primary key (tenant_id, id): no index of a column
// that a delivery changes is needed. Replicas take turns (an advisory
// lock); one that finds it taken does nothing and reports Turn false.
func DeleteExpiredExecutions(ctx context.Context, q TxBeginner, tenant, after string, olderThan time.Duration, limit int) (ExpiredExecutions, error) {
	if after == "" {
		after = nilUUID
	}
	// The horizon is a constant of the statement, so that the batch is a
	// range of the primary key: the scan stops at the horizon.
	cutoff := time.Now().Add(-olderThan)
	var out ExpiredExecutions
	err := inTurn(ctx, q, retentionLock, retentionTimeout, func(tx pgx.Tx) error {
		out.Turn = true
		return tx.QueryRow(ctx, `WITH batch AS (
				SELECT e.id FROM executions e
				WHERE e.tenant_id = $1 AND e.id > $2::uuid AND e.id < $3::uuid
				ORDER BY e.id LIMIT $4
			), doomed AS (
				SELECT e.tenant_id, e.id FROM executions e JOIN batch b ON e.id = b.id
				WHERE e.tenant_id = $1 AND e.state IN `+execFinal+`
				  AND coalesce(e.finished_at, e.created_at) < $5
				  AND (e.trigger <> 'schedule' OR e.rescheduled
				    OR EXISTS (SELECT 1 FROM executions n
				        WHERE n.tenant_id = e.tenant_id AND n.task_id = e.task_id AND n.trigger = 'schedule'
				          AND NOT n.rescheduled AND n.scheduled_for > e.scheduled_for)
				    OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.tenant_id = e.tenant_id AND t.id = e.task_id))
				  -- A workflow node's execution goes with its run (DeleteExpiredRuns).
				  AND (e.workflow_run_id IS NULL
				    OR NOT EXISTS (SELECT 1 FROM workflow_runs r WHERE r.tenant_id = e.tenant_id AND r.id = e.workflow_run_id))
				FOR UPDATE OF e SKIP LOCKED
			), gone AS (
				DELETE FROM executions e USING doomed d WHERE e.tenant_id = d.tenant_id AND e.id = d.id
				RETURNING e.tenant_id, e.id
			), events AS (
				DELETE FROM execution_events v USING gone g WHERE v.tenant_id = g.tenant_id AND v.execution_id = g.id
				RETURNING 1
			)
			SELECT coalesce((SELECT b.id::text FROM batch b ORDER BY b.id DESC LIMIT 1), ''), (SELECT count(*) FROM batch),
				(SELECT count(*) FROM gone), (SELECT count(*) FROM events)`,
			tenant, after, idFloor(cutoff), limit, cutoff).Scan(&out.Last, &out.Examined, &out.Executions, &out.Events)
	})
	if err != nil {
		return ExpiredExecutions{}, wrap("delete expired executions", err)
	}
	return out, nil
}

// ExpiredRuns is what one batch of DeleteExpiredRuns did.
type ExpiredRuns struct {
	// Turn, Examined and Last: as ExpiredExecutions'.
	Turn     bool
	Examined int
	Last     string
	// Runs, Executions and Events are the rows removed.
	Runs, Executions, Events int64
}

// DeleteExpiredRuns is DeleteExpiredExecutions for workflow runs: it looks
// at the next limit runs of tenant by primary key after the id after,
// among those created more than olderThan ago, and deletes those that are
// final and finished more than olderThan ago, with no unfinished
// execution, together with their node executions, the executions' events
// and the run's nodes (ON DELETE CASCADE). It keeps the latest scheduled
// run of each workflow (its slot stays taken, as a task's latest
// scheduled execution does), so a slot never starts twice because its
// history expired.
func DeleteExpiredRuns(ctx context.Context, q TxBeginner, tenant, after string, olderThan time.Duration, limit int) (ExpiredRuns, error) {
	if after == "" {
		after = nilUUID
	}
	cutoff := time.Now().Add(-olderThan)
	var out ExpiredRuns
	err := inTurn(ctx, q, retentionLock, retentionTimeout, func(tx pgx.Tx) error {
		out.Turn = true
		return tx.QueryRow(ctx, `WITH batch AS (
				SELECT r.id FROM workflow_runs r
				WHERE r.tenant_id = $1 AND r.id > $2::uuid AND r.id < $3::uuid
				ORDER BY r.id LIMIT $4
			), doomed AS (
				SELECT r.tenant_id, r.id FROM workflow_runs r JOIN batch b ON r.id = b.id
				WHERE r.tenant_id = $1 AND r.state IN `+runFinal+`
				  AND coalesce(r.finished_at, r.created_at) < $5
				  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.workflow_run_id = r.id AND e.tenant_id = r.tenant_id
				    AND e.state IN `+execUnfinished+`)
				  AND (r.trigger <> 'schedule' OR r.rescheduled
				    OR EXISTS (SELECT 1 FROM workflow_runs n
				        WHERE n.tenant_id = r.tenant_id AND n.workflow_id = r.workflow_id AND n.trigger = 'schedule'
				          AND NOT n.rescheduled AND n.scheduled_for > r.scheduled_for))
				FOR UPDATE OF r SKIP LOCKED
			), execs AS (
				DELETE FROM executions e USING doomed d WHERE e.workflow_run_id = d.id AND e.tenant_id = d.tenant_id
				RETURNING e.tenant_id, e.id
			), events AS (
				DELETE FROM execution_events v USING execs x WHERE v.tenant_id = x.tenant_id AND v.execution_id = x.id
				RETURNING 1
			), gone AS (
				DELETE FROM workflow_runs r USING doomed d WHERE r.tenant_id = d.tenant_id AND r.id = d.id
				RETURNING 1
			)
			SELECT coalesce((SELECT b.id::text FROM batch b ORDER BY b.id DESC LIMIT 1), ''), (SELECT count(*) FROM batch),
				(SELECT count(*) FROM gone), (SELECT count(*) FROM execs), (SELECT count(*) FROM events)`,
			tenant, after, idFloor(cutoff), limit, cutoff).Scan(&out.Last, &out.Examined, &out.Runs, &out.Executions, &out.Events)
	})
	if err != nil {
		return ExpiredRuns{}, wrap("delete expired workflow runs", err)
	}
	return out, nil
}

// idFloor is the smallest UUIDv7 minted at t (to the millisecond): every
// id minted before t is below it.
func idFloor(t time.Time) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], uint64(t.UnixMilli())<<16) // times after 1970
	return id
}

// DeleteExpiredAudit removes up to limit audit records older than
// olderThan, oldest first (by audit_log_at_idx), and returns how many it
// removed (turn false: another session held the retention's turn, and
// nothing was removed); call it again while it returns limit.
func DeleteExpiredAudit(ctx context.Context, q TxBeginner, olderThan time.Duration, limit int) (n int64, turn bool, err error) {
	err = inTurn(ctx, q, retentionLock, retentionTimeout, func(tx pgx.Tx) error {
		turn = true
		tag, err := tx.Exec(ctx, `DELETE FROM audit_log WHERE (tenant_id, id) IN (
				SELECT tenant_id, id FROM audit_log WHERE at < now() - make_interval(secs => $1)
				ORDER BY at LIMIT $2)`, olderThan.Seconds(), limit)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, false, wrap("delete expired audit records", err)
	}
	return n, turn, nil
}

// ListTenantIDs returns up to limit tenant ids after the id after, in
// order.
func ListTenantIDs(ctx context.Context, q Querier, after string, limit int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM tenants WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, wrap("list tenants", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, wrap("list tenants", err)
}
