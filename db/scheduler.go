package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DueTask is what the scheduler needs of a claimed task.
type DueTask struct {
	TenantID        string     `db:"tenant_id"`
	ID              string     `db:"id"`
	ScheduleType    string     `db:"schedule_type"`
	Cron            *string    `db:"cron"`
	Timezone        string     `db:"timezone"`
	IntervalSeconds *int64     `db:"interval_seconds"`
	RunAt           *time.Time `db:"run_at"`
	StartAt         *time.Time `db:"start_at"`
	EndAt           *time.Time `db:"end_at"`
	Priority        int16      `db:"priority"`
	EndpointID      string     `db:"endpoint_id"`
	MaxAttempts     int32      `db:"max_attempts"`
	MisfirePolicy   string     `db:"misfire_policy"`
	NextRunAt       time.Time  `db:"next_run_at"`
	Version         int32      `db:"version"`
	CreatedAt       time.Time  `db:"created_at"`
	ScheduleDialect string     `db:"schedule_dialect"`
	DSTPolicy       string     `db:"dst_policy"`
	// ExcludeCalendars names the calendars whose dates the schedule skips.
	ExcludeCalendars []string `db:"exclude_calendars"`
	// Shards is how many executions each slot fires.
	Shards int32 `db:"shards"`
	// PayloadTemplate: the task's payload is a template, which the
	// scheduler renders for each execution. Name and Payload are read
	// only then (empty otherwise: an untemplated fire reads no more).
	PayloadTemplate bool   `db:"payload_template"`
	Name            string `db:"name"`
	Payload         []byte `db:"payload"`
	// ScheduleUnion is a union schedule as JSON (nil for other types).
	ScheduleUnion *string `db:"schedule_union"`
}

// ClaimDueTasks locks up to limit active tasks whose next_run_at is at or
// before horizon, oldest first. Rows locked by another scheduler are
// skipped, so concurrent schedulers share the work without waiting.
func ClaimDueTasks(ctx context.Context, tx pgx.Tx, horizon time.Time, limit int) ([]DueTask, error) {
	rows, err := tx.Query(ctx, `SELECT tenant_id, id::text, schedule_type, cron, timezone, interval_seconds, run_at,
			start_at, end_at, priority, max_attempts, misfire_policy, next_run_at, version, created_at,
			schedule_dialect, dst_policy, exclude_calendars::text[], shards, endpoint_id::text, payload_template,
			CASE WHEN payload_template THEN name ELSE '' END AS name, CASE WHEN payload_template THEN payload END AS payload,
			schedule_union::text AS schedule_union
		FROM tasks
		WHERE state = `+taskActive+` AND next_run_at IS NOT NULL AND next_run_at <= $1
		ORDER BY next_run_at
		LIMIT $2
		FOR UPDATE SKIP LOCKED`, horizon, limit)
	if err != nil {
		return nil, wrap("claim due tasks", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[DueTask])
}

// CountTasksDueBetween counts the active tasks whose next slot is after
// from and no later than to, up to limit: a walk of at most limit entries
// of tasks_due_idx.
func CountTasksDueBetween(ctx context.Context, q Querier, from, to time.Time, limit int) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM (SELECT FROM tasks
		WHERE state = `+taskActive+` AND next_run_at IS NOT NULL AND next_run_at > $1 AND next_run_at <= $2
		ORDER BY next_run_at LIMIT $3) d`, from, to, limit).Scan(&n)
	if err != nil {
		return 0, wrap("count tasks due soon", err)
	}
	return n, nil
}

// NewExecution is a scheduled fire to insert.
type NewExecution struct {
	TenantID     string
	ID           string
	TaskID       string
	ScheduledFor time.Time
	Late         bool
	// Event data for the fired event (JSON object).
	EventData map[string]any
	// Missed, when positive, adds a missed event: that many slots before
	// this one were not fired (misfire policy).
	Missed int64
	// Shard of ShardCount (0 of 1: the task is not sharded).
	Shard, ShardCount int32
	// Payload is the rendered payload of a templated task (nil: the
	// task's payload is sent).
	Payload []byte
}

// InsertedExecution is an execution the insert actually created.
type InsertedExecution struct {
	TenantID     string    `db:"tenant_id"`
	ID           string    `db:"id"`
	TaskID       string    `db:"task_id"`
	ScheduledFor time.Time `db:"scheduled_for"`
}

// InsertScheduledExecutions inserts scheduled executions (and their rows
// of unfinished_executions), skipping slots that already have one (the
// permanent (task_id, scheduled_for, round) key, round 1; an execution cancelled by a
// schedule change does not hold it: CancelRescheduledExecutions). An on-time fire's fired event is
// implied by the row (ImplicitFired); a late one, or one after missed
// slots, stores its fired event, with the data the scheduler gave, after a
// missed event. It returns the inserted rows.
func InsertScheduledExecutions(ctx context.Context, tx pgx.Tx, execs []NewExecution) ([]InsertedExecution, error) {
	if len(execs) == 0 {
		return nil, nil
	}
	n := len(execs)
	tenants, ids, tasks := make([]string, n), make([]string, n), make([]string, n)
	slots, implicit := make([]time.Time, n), make([]int16, n)
	late := make([]bool, n)
	shards, counts := make([]int32, n), make([]int32, n)
	var (
		noted    []int    // executions with stored events
		payloads [][]byte // nil (a NULL array) unless a task is templated
	)
	for i, e := range execs {
		tenants[i], ids[i], tasks[i], slots[i], late[i] = e.TenantID, e.ID, e.TaskID, e.ScheduledFor, e.Late
		shards[i], counts[i] = e.Shard, max(e.ShardCount, 1)
		if e.Payload != nil {
			if payloads == nil {
				payloads = make([][]byte, n)
			}
			payloads[i] = e.Payload
		}
		if e.Late || e.Missed > 0 {
			noted = append(noted, i)
		} else {
			implicit[i] = ImplicitFired
		}
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("insert executions", err)
	}
	taskIDs, err := uuidArray(tasks)
	if err != nil {
		return nil, wrap("insert executions", err)
	}
	args := []any{tenants, uids, taskIDs, slots, late, implicit, shards, counts, payloads}
	out, err := insertExecutionsPlain(ctx, tx, n, args)
	if errors.Is(err, errSlotTaken) {
		out, err = insertExecutions(ctx, tx, insertExecutionsOnConflict, n, args)
	}
	if err != nil {
		return nil, wrap("insert executions", err)
	}
	if len(noted) > 0 {
		if err := insertFireEvents(ctx, tx, execs, noted, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// The claim's insert of executions, without and with the arbiter of
// executions_slot_idx: %s is the conflict clause.
const insertExecutionsSQL = `WITH ins AS (
		INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, late, implicit_events, shard, shard_count, payload)
		SELECT tenant_id, id, task_id, scheduled_for, 'schedule', late, implicit, shard, shard_count, payload
		FROM unnest($1::text[], $2::uuid[], $3::uuid[], $4::timestamptz[], $5::bool[], $6::int2[], $7::int[], $8::int[],
				$9::bytea[])
			AS i(tenant_id, id, task_id, scheduled_for, late, implicit, shard, shard_count, payload)
		%s
		RETURNING tenant_id, id, task_id, scheduled_for
	), u AS (
		INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
		SELECT tenant_id, task_id, scheduled_for, id FROM ins
	)
	SELECT tenant_id, id::text, task_id::text, scheduled_for FROM ins`

var (
	insertExecutionsNoConflict = fmt.Sprintf(insertExecutionsSQL, "")
	insertExecutionsOnConflict = fmt.Sprintf(insertExecutionsSQL,
		"ON CONFLICT (task_id, scheduled_for, round, shard) WHERE trigger IN ('schedule', 'backfill') AND NOT rescheduled DO NOTHING")
)

// errSlotTaken: a plain insert of a claim's executions met an execution
// holding one of their slots.
var errSlotTaken = errors.New("a slot has its execution already")

// insertExecutionsPlain inserts a claim's executions without an arbiter,
// in a savepoint; when one of their slots has an execution already it
// rolls the savepoint back and returns errSlotTaken (the caller inserts
// them again with ON CONFLICT DO NOTHING). A claim's slots are new but
// for rare cases (a schedule change that kept a pending execution, a skip
// of a slot ahead, an API retry that took a slot back), and an insert
// with ON CONFLICT pays for its arbiter on every row: a probe of
// executions_slot_idx before the row, a speculative insertion lock taken
// and released, and a second WAL record for the row once its index
// entries are in, about a tenth of the statement's time. The savepoint
// costs two short statements per claim.
func insertExecutionsPlain(ctx context.Context, tx pgx.Tx, n int, args []any) ([]InsertedExecution, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	out, err := insertExecutions(ctx, sp, insertExecutionsNoConflict, n, args)
	if err != nil {
		if ConstraintName(err) == ConstraintExecutionSlot {
			if rerr := sp.Rollback(ctx); rerr != nil {
				return nil, rerr
			}
			return nil, errSlotTaken
		}
		return nil, err
	}
	return out, sp.Commit(ctx)
}

// insertExecutions runs one of the claim's inserts of executions.
func insertExecutions(ctx context.Context, q Querier, sql string, n int, args []any) ([]InsertedExecution, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out := make([]InsertedExecution, 0, n)
	var r InsertedExecution
	_, err = pgx.ForEachRow(rows, []any{&r.TenantID, &r.ID, &r.TaskID, &r.ScheduledFor}, func() error {
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertFireEvents stores the missed and fired events of those of
// execs[noted] that were inserted.
func insertFireEvents(ctx context.Context, tx pgx.Tx, execs []NewExecution, noted []int, inserted []InsertedExecution) error {
	got := make(map[string]bool, len(inserted))
	for _, e := range inserted {
		got[e.ID] = true
	}
	var (
		tenants, ids []string
		data         []map[string]any
		missed       []int64
	)
	for _, i := range noted {
		if e := execs[i]; got[e.ID] {
			tenants, ids, data, missed = append(tenants, e.TenantID), append(ids, e.ID), append(data, e.EventData), append(missed, e.Missed)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return wrap("insert fire events", err)
	}
	_, err = tx.Exec(ctx, `WITH input AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::jsonb[], $4::bigint[]) WITH ORDINALITY AS i(tenant_id, id, data, missed, ord)
		)
		INSERT INTO execution_events (tenant_id, execution_id, type, message, data)
		SELECT tenant_id, id, type, message, data FROM (
			SELECT tenant_id, id, ord, 1 AS n, 'missed' AS type, missed || ' earlier slot(s) were not fired (misfire policy)' AS message,
				jsonb_build_object('count', missed) AS data
			FROM input WHERE missed > 0
			UNION ALL
			SELECT tenant_id, id, ord, 2, 'fired', NULL, data FROM input
		) ev ORDER BY ord, n`, tenants, uids, data, missed)
	if err != nil {
		return wrap("insert fire events", err)
	}
	return nil
}

// TaskAdvance is a claimed task's new position.
type TaskAdvance struct {
	TenantID  string
	ID        string
	NextRunAt *time.Time // nil: the task will not fire again (completed)
	Missed    int64
}

// AdvanceTasks sets next_run_at (completing tasks that have none left) and
// adds to their missed counters.
func AdvanceTasks(ctx context.Context, tx pgx.Tx, adv []TaskAdvance) error {
	if len(adv) == 0 {
		return nil
	}
	n := len(adv)
	tenants, ids, next, missed := make([]string, n), make([]string, n), make([]*time.Time, n), make([]int64, n)
	for i, a := range adv {
		tenants[i], ids[i], next[i], missed[i] = a.TenantID, a.ID, a.NextRunAt, a.Missed
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return wrap("advance tasks", err)
	}
	_, err = tx.Exec(ctx, `UPDATE tasks t SET next_run_at = u.next_run_at,
			state = CASE WHEN u.next_run_at IS NULL THEN `+taskCompleted+` ELSE t.state END,
			missed_count = t.missed_count + u.missed
		FROM unnest($1::text[], $2::uuid[], $3::timestamptz[], $4::bigint[]) AS u(tenant_id, id, next_run_at, missed)
		WHERE t.tenant_id = u.tenant_id AND t.id = u.id`, tenants, uids, next, missed)
	if err != nil {
		return wrap("advance tasks", err)
	}
	return nil
}

// NextDueIn returns how long until the earliest next_run_at of an active
// task, by the database clock (negative when overdue), and that clock's
// reading (clock_timestamp(), taken during the statement); ok is false when
// no task is scheduled.
func NextDueIn(ctx context.Context, q Querier) (due time.Duration, ok bool, dbNow time.Time, err error) {
	var secs *float64
	err = q.QueryRow(ctx, `SELECT extract(epoch FROM (SELECT next_run_at FROM tasks
		WHERE state = `+taskActive+` AND next_run_at IS NOT NULL ORDER BY next_run_at LIMIT 1) - now())::float8,
		clock_timestamp()`).Scan(&secs, &dbNow)
	if err != nil {
		return 0, false, time.Time{}, wrap("next due task", err)
	}
	if secs == nil {
		return 0, false, dbNow, nil
	}
	return time.Duration(*secs * float64(time.Second)), true, dbNow, nil
}

// NextDueInTimed is NextDueIn on a connection of pool held for the query,
// with this process's clock just before the query is sent and just after
// its answer (a wait for a free connection is in neither).
func NextDueInTimed(ctx context.Context, pool *Pool) (due time.Duration, ok bool, dbNow, sent, received time.Time, err error) {
	err = pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		sent = time.Now()
		var err error
		due, ok, dbNow, err = NextDueIn(ctx, c)
		received = time.Now()
		return err
	})
	return due, ok, dbNow, sent, received, err
}

// inTurn runs fn in a transaction holding advisory lock key, or does
// nothing when another session holds it: maintenance that replicas take
// turns at. It never stalls its caller behind a lock (an index build, an
// anti-wraparound vacuum): waits end after 200 ms, statements after
// statementTimeout, and the caller tries again later.
func inTurn(ctx context.Context, q TxBeginner, key int64, statementTimeout string, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', '200ms', true), set_config('statement_timeout', $1, true)`,
			statementTimeout); err != nil {
			return err
		}
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, key).Scan(&got); err != nil || !got {
			return err
		}
		return fn(tx)
	})
}

// youngTablesAnalyzeLock is the advisory lock key that keeps replicas from
// analyzing the same tables at once.
const youngTablesAnalyzeLock = 0x61785f616e616c // "ax_anal"

// AnalyzeYoungTables runs ANALYZE on the hot tables that are still small
// (under 100,000 rows by their statistics, or never analyzed) and have more
// than doubled since their last ANALYZE (or hold 100 rows and never had
// one), and returns their names. Tables ax's role does not own are left to
// autovacuum. Plans cached while a table was empty or tiny pick whatever index
// ties first (the delivery pool keeps generic plans); ANALYZE invalidates
// them. Autovacuum does the same, but only once a minute at best and never
// before 50 rows have changed; past 100,000 rows its thresholds suffice.
// Replicas take turns (an advisory lock); one that finds it taken skips.
func AnalyzeYoungTables(ctx context.Context, q TxBeginner) ([]string, error) {
	var analyzed []string
	err := inTurn(ctx, q, youngTablesAnalyzeLock, "10s", func(tx pgx.Tx) error {
		// Growth, not churn: a small table whose rows are updated all the
		// time (tasks advance on every fire) keeps its row count.
		rows, err := tx.Query(ctx, `SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
			WHERE s.schemaname = current_schema()
			  AND s.relname IN ('executions', 'tasks', 'endpoints', 'river_job')
			  AND pg_has_role(current_user, c.relowner, 'USAGE')
			  AND c.reltuples < 100000
			  AND s.n_live_tup > CASE WHEN c.reltuples < 0 THEN 100 ELSE 2 * greatest(c.reltuples, 100) END`)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range names {
			if _, err := tx.Exec(ctx, "ANALYZE "+pgx.Identifier{name}.Sanitize()); err != nil {
				return err
			}
			analyzed = append(analyzed, name)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("analyze young tables", err)
	}
	return analyzed, nil
}
