package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backfill is a row of backfills (without its slots).
type Backfill struct {
	TenantID string `db:"tenant_id"`
	ID       string `db:"id"`
	// TaskID or WorkflowID names what the backfill runs ("" for the other).
	TaskID         string     `db:"task_id"`
	WorkflowID     string     `db:"workflow_id"`
	From           time.Time  `db:"range_from"`
	To             time.Time  `db:"range_to"`
	Rerun          string     `db:"rerun"`
	MaxConcurrency int32      `db:"max_concurrency"`
	State          string     `db:"state"`
	NextIndex      int32      `db:"next_index"`
	Total          int32      `db:"total"`
	Created        int32      `db:"created"`
	Succeeded      int32      `db:"succeeded"`
	Failed         int32      `db:"failed"`
	CreatedAt      time.Time  `db:"created_at"`
	FinishedAt     *time.Time `db:"finished_at"`
	// Inputs are the input overrides of a workflow backfill's runs (a
	// JSON object; "": none).
	Inputs string `db:"inputs"`
}

const backfillColumns = `tenant_id, id::text, coalesce(task_id::text, '') AS task_id,
	coalesce(workflow_id::text, '') AS workflow_id, range_from, range_to, rerun, max_concurrency, state,
	next_index, total, created, succeeded, failed, created_at, finished_at, coalesce(inputs::text, '') AS inputs`

// SlotState is the latest execution of a slot (the highest round).
type SlotState struct {
	ScheduledFor time.Time
	Round        int32
	State        string
}

// LatestSlotStates returns, for each slot of the task in [from, to) that
// has a scheduled or backfill execution, the latest one (its highest
// round), by the slot index.
func LatestSlotStates(ctx context.Context, q Querier, tenant, taskID string, from, to time.Time) ([]SlotState, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (scheduled_for) scheduled_for, round, state FROM executions
		WHERE task_id = $2 AND trigger IN ('schedule', 'backfill') AND NOT rescheduled
			AND scheduled_for >= $3 AND scheduled_for < $4 AND tenant_id = $1
		ORDER BY scheduled_for, round DESC`, tenant, taskID, from, to)
	if err != nil {
		return nil, wrap("read slots", err)
	}
	var out []SlotState
	var s SlotState
	_, err = pgx.ForEachRow(rows, []any{&s.ScheduledFor, &s.Round, &s.State}, func() error {
		out = append(out, s)
		return nil
	})
	return out, wrap("read slots", err)
}

// InsertBackfill stores a new backfill of slots; one with no slot is
// stored as succeeded.
func InsertBackfill(ctx context.Context, q Querier, b Backfill, slots []time.Time) (Backfill, error) {
	if slots == nil {
		slots = []time.Time{} // NULL would break the NOT NULL
	}
	rows, err := q.Query(ctx, `INSERT INTO backfills (tenant_id, id, task_id, workflow_id, range_from, range_to, rerun,
			max_concurrency, state, slots, total, finished_at, inputs)
		VALUES ($1, $2, NULLIF($3, '')::uuid, NULLIF($10, '')::uuid, $4, $5, $6, $7,
			CASE WHEN $9 = 0 THEN `+backfillSucceeded+` ELSE `+backfillRunning+` END, $8, $9, CASE WHEN $9 = 0 THEN now() END,
			NULLIF($11, '')::jsonb)
		RETURNING `+backfillColumns,
		b.TenantID, b.ID, b.TaskID, b.From, b.To, b.Rerun, b.MaxConcurrency, slots, len(slots), b.WorkflowID, b.Inputs)
	return collectOne[Backfill](rows, err)
}

// GetBackfill reads one backfill; with lock it takes the row's lock,
// skipping (ErrNotFound) a row another transaction holds.
func GetBackfill(ctx context.Context, q Querier, tenant, id string, lock bool) (Backfill, error) {
	sql := `SELECT ` + backfillColumns + ` FROM backfills WHERE tenant_id = $1 AND id = $2`
	if lock {
		sql += ` FOR UPDATE SKIP LOCKED`
	}
	rows, err := q.Query(ctx, sql, tenant, id)
	return collectOne[Backfill](rows, err)
}

// GetBackfillForUpdate reads one backfill and locks it, waiting for a
// pump that holds it.
func GetBackfillForUpdate(ctx context.Context, q Querier, tenant, id string) (Backfill, error) {
	rows, err := q.Query(ctx, `SELECT `+backfillColumns+` FROM backfills WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, tenant, id)
	return collectOne[Backfill](rows, err)
}

// BackfillFilter narrows ListBackfills.
type BackfillFilter struct {
	TaskID     string // "" for any
	WorkflowID string // "" for any
	State      string // "" for any
	Before     string // id cursor
	Limit      int
}

// ListBackfills returns backfills newest first.
func ListBackfills(ctx context.Context, q Querier, tenant string, f BackfillFilter) ([]Backfill, error) {
	rows, err := q.Query(ctx, `SELECT `+backfillColumns+` FROM backfills
		WHERE tenant_id = $1 AND ($2 = '' OR id < NULLIF($2, '')::uuid) AND ($3 = '' OR task_id = NULLIF($3, '')::uuid)
			AND ($4 = '' OR state = $4) AND ($6 = '' OR workflow_id = NULLIF($6, '')::uuid)
		ORDER BY id DESC LIMIT $5`, tenant, f.Before, f.TaskID, f.State, f.Limit, f.WorkflowID)
	if err != nil {
		return nil, wrap("list backfills", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Backfill])
	return out, wrap("list backfills", err)
}

// RunningBackfills returns up to limit running backfills, oldest first.
func RunningBackfills(ctx context.Context, q Querier, limit int) ([]ExecutionRef, error) {
	rows, err := q.Query(ctx, `SELECT tenant_id, id::text FROM backfills WHERE state = `+backfillRunning+`
		ORDER BY created_at LIMIT $1`, limit)
	if err != nil {
		return nil, wrap("list running backfills", err)
	}
	var out []ExecutionRef
	var r ExecutionRef
	_, err = pgx.ForEachRow(rows, []any{&r.TenantID, &r.ID}, func() error {
		out = append(out, r)
		return nil
	})
	return out, wrap("list running backfills", err)
}

// BackfillSlots returns up to n of a backfill's slots from index from.
func BackfillSlots(ctx context.Context, q Querier, tenant, id string, from, n int) ([]time.Time, error) {
	var out []time.Time
	err := q.QueryRow(ctx, `SELECT coalesce(slots[$3 + 1 : $3 + $4], '{}') FROM backfills WHERE tenant_id = $1 AND id = $2`,
		tenant, id, from, n).Scan(&out)
	return out, wrap("read backfill slots", err)
}

// BackfillCounts are a backfill's executions by outcome.
type BackfillCounts struct {
	Unfinished, Succeeded, Failed int32
}

// CountBackfill counts a backfill's executions by outcome: unfinished
// (pending, running, retrying), succeeded, and failed (failed, cancelled,
// skipped).
func CountBackfill(ctx context.Context, q Querier, tenant, id string) (BackfillCounts, error) {
	var c BackfillCounts
	err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN `+execUnfinished+`),
			count(*) FILTER (WHERE state = `+execSucceeded+`), count(*) FILTER (WHERE state IN `+execUnsuccessful+`)
		FROM executions WHERE tenant_id = $1 AND backfill_id = $2`, tenant, id).Scan(&c.Unfinished, &c.Succeeded, &c.Failed)
	return c, wrap("count backfill executions", err)
}

// CountBackfillUnfinished counts a backfill's unfinished executions: those
// of its task in unfinished_executions (a few) that it created.
func CountBackfillUnfinished(ctx context.Context, q Querier, tenant, taskID, id string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM unfinished_executions u
		JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
		WHERE u.tenant_id = $1 AND u.task_id = $2 AND e.backfill_id = $3
			AND e.state IN `+execUnfinished, tenant, taskID, id).Scan(&n)
	return n, wrap("count unfinished backfill executions", err)
}

// NewBackfillExecution is a slot a backfill fires as round Round.
type NewBackfillExecution struct {
	ID           string
	ScheduledFor time.Time
	Round        int32
	// Payload is the rendered payload of a templated task (nil: the
	// task's payload is sent).
	Payload []byte
}

// InsertBackfillExecution inserts a pending backfill execution of the
// task's slot with its fired event, unless that round of the slot exists
// (another backfill made it): then it reports false.
func InsertBackfillExecution(ctx context.Context, q Querier, tenant, taskID, backfillID string, e NewBackfillExecution) (bool, error) {
	tag, err := q.Exec(ctx, `WITH x AS (
			INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, round, backfill_id, payload)
			VALUES ($1, $2, $3, $4, 'backfill', $5, $6, $7)
			ON CONFLICT (task_id, scheduled_for, round, shard) WHERE trigger IN ('schedule', 'backfill') AND NOT rescheduled DO NOTHING
			RETURNING tenant_id, id, task_id, scheduled_for
		), u AS (
			INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
			SELECT tenant_id, task_id, scheduled_for, id FROM x)
		INSERT INTO execution_events (tenant_id, execution_id, type, data)
		SELECT tenant_id, id, 'fired', jsonb_build_object('trigger', 'backfill', 'backfill_id', $6::text, 'round', $5::int,
			'scheduled_for', $4::timestamptz) FROM x`,
		tenant, e.ID, taskID, e.ScheduledFor, e.Round, backfillID, e.Payload)
	if err != nil {
		return false, wrap("insert backfill execution", err)
	}
	return tag.RowsAffected() == 1, nil
}

// AdvanceBackfill records a pump's progress: the next slot index, the
// executions it created, and the slots it found no longer needing a run
// (which leave the total).
func AdvanceBackfill(ctx context.Context, q Querier, tenant, id string, nextIndex, created, dropped int) error {
	_, err := q.Exec(ctx, `UPDATE backfills SET next_index = $3, created = created + $4, total = total - $5
		WHERE tenant_id = $1 AND id = $2`, tenant, id, nextIndex, created, dropped)
	return wrap("advance backfill", err)
}

// FinishBackfill ends a running backfill in state with its final counts.
func FinishBackfill(ctx context.Context, q Querier, tenant, id, state string, c BackfillCounts) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE backfills SET state = $3, succeeded = $4, failed = $5, finished_at = now()
		WHERE tenant_id = $1 AND id = $2 AND state = `+backfillRunning, tenant, id, state, c.Succeeded, c.Failed)
	if err != nil {
		return false, wrap("finish backfill", err)
	}
	return tag.RowsAffected() == 1, nil
}

// CancelBackfillPending cancels a backfill's executions that have not
// started (as CancelPendingExecutions does) and returns how many.
func CancelBackfillPending(ctx context.Context, q Querier, tenant, taskID, id, reason string) (int64, error) {
	tag, err := q.Exec(ctx, `WITH p AS (
			SELECT e.tenant_id, e.id FROM unfinished_executions u
			JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
			WHERE u.tenant_id = $1 AND u.task_id = $2 AND e.backfill_id = $3 AND e.state = `+execPending+`
			FOR UPDATE OF e SKIP LOCKED
		), c AS (
			UPDATE executions e SET state = `+execCancelled+`, finished_at = now(), last_error = $4
			FROM p WHERE e.tenant_id = p.tenant_id AND e.id = p.id
			RETURNING e.tenant_id, e.id, e.task_id, e.scheduled_for
		), d AS (
			DELETE FROM unfinished_executions u USING c
			WHERE u.tenant_id = c.tenant_id AND u.task_id = c.task_id AND u.scheduled_for = c.scheduled_for AND u.id = c.id)
		INSERT INTO execution_events (tenant_id, execution_id, type, message)
		SELECT tenant_id, id, 'cancelled', $4 FROM c`, tenant, taskID, id, reason)
	if err != nil {
		return 0, wrap("cancel backfill executions", err)
	}
	return tag.RowsAffected(), nil
}

// skipSlotTries bounds SkipSlot's statements: each one after the first
// follows a concurrent insert of the slot that committed meanwhile.
const skipSlotTries = 10

// SkipSlot records a task's future slot as skipped, every shard of it (one
// id of newIDs per shard, shard 0 first): a new skipped round-1 execution
// with a skipped event for each shard that has none, and the pending ones
// already materialised that never started moved to skipped. It returns
// shard 0's execution id, or "" when one of the slot's executions exists
// in another state (all are left alone then), and how many executions this
// call skipped (0: the slot was skipped already).
//
// The scheduler may be inserting the slot at the same time (its claim
// materialises future slots): a statement that finds no execution and
// whose insert then meets the claim's, committed meanwhile, inserts
// nothing. It runs again then — in READ COMMITTED a new statement sees
// the committed row, and moves it — so the answer is never "" for a slot
// that nothing has started. A claim that comes after the skip's insert
// waits for it and inserts nothing.
func SkipSlot(ctx context.Context, q Querier, tenant, taskID string, newIDs []string, slot time.Time, reason string) (string, int, error) {
	ids, err := uuidArray(newIDs)
	if err != nil {
		return "", 0, wrap("skip slot", err)
	}
	for range skipSlotTries {
		var (
			id        string
			changed   int
			conflicts bool
		)
		err := q.QueryRow(ctx, `WITH cur AS (
				SELECT e.tenant_id, e.id, e.shard, e.state, e.state = `+execPending+` AND e.first_started_at IS NULL AS idle
				FROM executions e
				WHERE e.task_id = $2 AND e.scheduled_for = $4 AND e.round = 1 AND e.trigger IN ('schedule', 'backfill')
					AND NOT e.rescheduled AND e.tenant_id = $1
				FOR UPDATE
			), taken AS (
				SELECT EXISTS (SELECT 1 FROM cur WHERE NOT idle AND state <> `+execSkipped+`) AS taken
			), moved AS (
				UPDATE executions e SET state = `+execSkipped+`, finished_at = now(), last_error = $5
				FROM cur WHERE e.tenant_id = cur.tenant_id AND e.id = cur.id AND cur.idle AND NOT (SELECT taken FROM taken)
				RETURNING e.tenant_id, e.id, e.task_id, e.scheduled_for, e.shard
			), gone AS (
				DELETE FROM unfinished_executions u USING moved m
				WHERE u.tenant_id = m.tenant_id AND u.task_id = m.task_id AND u.scheduled_for = m.scheduled_for AND u.id = m.id
			), ins AS (
				INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error, finished_at, shard, shard_count)
				SELECT $1, n.id, $2, $4, 'schedule', `+execSkipped+`, $5, now(), n.ord - 1, cardinality($3::uuid[])
				FROM unnest($3::uuid[]) WITH ORDINALITY AS n(id, ord)
				WHERE NOT (SELECT taken FROM taken) AND NOT EXISTS (SELECT 1 FROM cur WHERE cur.shard = n.ord - 1)
				ON CONFLICT (task_id, scheduled_for, round, shard) WHERE trigger IN ('schedule', 'backfill') AND NOT rescheduled DO NOTHING
				RETURNING tenant_id, id, shard
			), ev AS (
				INSERT INTO execution_events (tenant_id, execution_id, type, message)
				SELECT tenant_id, id, 'skipped', $5 FROM moved UNION ALL SELECT tenant_id, id, 'skipped', $5 FROM ins
			), skipped AS (
				SELECT id, shard FROM moved UNION ALL SELECT id, shard FROM ins
				UNION ALL SELECT id, shard FROM cur WHERE state = `+execSkipped+`
			)
			SELECT coalesce((SELECT id::text FROM skipped WHERE NOT (SELECT taken FROM taken) ORDER BY shard LIMIT 1), ''),
				(SELECT count(*) FROM moved) + (SELECT count(*) FROM ins),
				-- A shard neither found nor inserted: its insert met one
				-- that committed after this statement's snapshot.
				NOT (SELECT taken FROM taken) AND EXISTS (
					SELECT 1 FROM generate_series(0, cardinality($3::uuid[]) - 1) g(shard)
					WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.shard = g.shard)
					  AND NOT EXISTS (SELECT 1 FROM ins WHERE ins.shard = g.shard))`,
			tenant, taskID, ids, slot, reason).Scan(&id, &changed, &conflicts)
		if err != nil || !conflicts {
			return id, changed, wrap("skip slot", err)
		}
	}
	return "", 0, wrap("skip slot", fmt.Errorf("the slot %s kept being inserted concurrently", slot.UTC().Format(time.RFC3339Nano)))
}

// LatestRunSlotStates is LatestSlotStates for a workflow's runs: for each
// slot in [from, to) with a scheduled or backfill run, the latest one.
func LatestRunSlotStates(ctx context.Context, q Querier, tenant, workflowID string, from, to time.Time) ([]SlotState, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (scheduled_for) scheduled_for, round, state FROM workflow_runs
		WHERE workflow_id = $2 AND trigger IN ('schedule', 'backfill') AND NOT rescheduled
			AND scheduled_for >= $3 AND scheduled_for < $4 AND tenant_id = $1
		ORDER BY scheduled_for, round DESC`, tenant, workflowID, from, to)
	if err != nil {
		return nil, wrap("read run slots", err)
	}
	var out []SlotState
	var s SlotState
	_, err = pgx.ForEachRow(rows, []any{&s.ScheduledFor, &s.Round, &s.State}, func() error {
		out = append(out, s)
		return nil
	})
	return out, wrap("read run slots", err)
}

// CountBackfillRuns counts a workflow backfill's runs by outcome:
// unfinished (pending, running, blocked), succeeded, and failed (failed,
// cancelled).
func CountBackfillRuns(ctx context.Context, q Querier, tenant, id string) (BackfillCounts, error) {
	var c BackfillCounts
	err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN `+runUnfinished+`),
			count(*) FILTER (WHERE state = `+runSucceeded+`), count(*) FILTER (WHERE state IN `+runUnsuccessful+`)
		FROM workflow_runs WHERE tenant_id = $1 AND backfill_id = $2`, tenant, id).Scan(&c.Unfinished, &c.Succeeded, &c.Failed)
	return c, wrap("count backfill runs", err)
}

// CancelBackfillRuns cancels a workflow backfill's runs that have not
// started (pending: waiting for max_active_runs) and returns how many.
// A run being started meanwhile is re-checked after its start commits
// and left alone.
func CancelBackfillRuns(ctx context.Context, q Querier, tenant, id string) (int64, error) {
	tag, err := q.Exec(ctx, `UPDATE workflow_runs SET state = `+runCancelled+`, finished_at = now(), updated_at = now()
		WHERE tenant_id = $1 AND backfill_id = $2 AND state = `+runPending, tenant, id)
	if err != nil {
		return 0, wrap("cancel backfill runs", err)
	}
	return tag.RowsAffected(), nil
}
