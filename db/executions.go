package db

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Execution is a row of executions (without the payload override, which
// only the deliver worker reads).
type Execution struct {
	TenantID        string     `db:"tenant_id"`
	ID              string     `db:"id"`
	TaskID          string     `db:"task_id"`
	ScheduledFor    time.Time  `db:"scheduled_for"`
	Trigger         string     `db:"trigger"`
	DedupKey        *string    `db:"dedup_key"`
	State           string     `db:"state"`
	Attempts        int32      `db:"attempts"`
	Late            bool       `db:"late"`
	CancelRequested bool       `db:"cancel_requested"`
	LastStatusCode  *int32     `db:"last_status_code"`
	LastError       *string    `db:"last_error"`
	LastErrorClass  *string    `db:"last_error_class"`
	RiverJobID      *int64     `db:"river_job_id"`
	NextAttemptAt   *time.Time `db:"next_attempt_at"`
	CreatedAt       time.Time  `db:"created_at"`
	StartedAt       *time.Time `db:"started_at"`
	FinishedAt      *time.Time `db:"finished_at"`
	// ImplicitEvents and LastLatencyMS carry the timeline events the row
	// stands for (ImplicitFired, ImplicitStarted, ImplicitSucceeded).
	ImplicitEvents int16      `db:"implicit_events"`
	LastLatencyMS  *int32     `db:"last_latency_ms"`
	FirstStartedAt *time.Time `db:"first_started_at"`
	// Round numbers the executions of one slot: 1 for its first fire, +1
	// for each backfill that re-ran it.
	Round      int32   `db:"round"`
	BackfillID *string `db:"backfill_id"`
	// The workflow run and node of a node's execution (nil otherwise), and
	// the shard (0 of 1 unless the task or node is sharded).
	WorkflowID    *string `db:"workflow_id"`
	WorkflowRunID *string `db:"workflow_run_id"`
	Node          *string `db:"node"`
	Shard         int32   `db:"shard"`
	ShardCount    int32   `db:"shard_count"`
	// HeldAt is when an operator held the execution (nil: not held). It
	// holds back a pending execution only (migration 0025).
	HeldAt *time.Time `db:"held_at"`
	// EventID is the event that fired it (trigger event; nil otherwise).
	EventID *string `db:"event_id"`
}

// fields returns pointers to e's fields in their order, which is that of
// executionColumns: a list scans by position, without pgx's per-row
// matching of names (a quarter of a list request's CPU).
func (e *Execution) fields() []any {
	return []any{
		&e.TenantID, &e.ID, &e.TaskID, &e.ScheduledFor, &e.Trigger, &e.DedupKey, &e.State, &e.Attempts,
		&e.Late, &e.CancelRequested, &e.LastStatusCode, &e.LastError, &e.LastErrorClass, &e.RiverJobID,
		&e.NextAttemptAt, &e.CreatedAt, &e.StartedAt, &e.FinishedAt, &e.ImplicitEvents, &e.LastLatencyMS,
		&e.FirstStartedAt, &e.Round, &e.BackfillID, &e.WorkflowID, &e.WorkflowRunID, &e.Node, &e.Shard, &e.ShardCount,
		&e.HeldAt,
		&e.EventID,
	}
}

// Bits of executions.implicit_events: timeline events the row implies
// instead of storing (migration 0004).
const (
	// ImplicitFired: fired, on time, at created_at.
	ImplicitFired = 1
	// ImplicitStarted: attempt 1 started at first_started_at, after the fired
	// (and missed) events and before every other stored event.
	ImplicitStarted = 2
	// ImplicitSucceeded: attempt_succeeded (attempts, last_status_code,
	// last_latency_ms) then succeeded, at finished_at; always last.
	ImplicitSucceeded = 4
)

// executionColumns are Execution's columns of executions aliased e.
const executionColumns = `e.tenant_id, e.id::text, e.task_id::text, e.scheduled_for, e.trigger, e.dedup_key, e.state,
	e.attempts, e.late, e.cancel_requested, e.last_status_code, e.last_error, e.last_error_class, e.river_job_id,
	e.next_attempt_at, e.created_at, e.started_at, e.finished_at, e.implicit_events, e.last_latency_ms,
	e.first_started_at, e.round, e.backfill_id::text, e.workflow_id::text, e.workflow_run_id::text, e.node, e.shard,
	e.shard_count, e.held_at, e.event_id::text`

// ExecutionEvent is a row of execution_events.
type ExecutionEvent struct {
	Type       string         `db:"type"`
	At         time.Time      `db:"at"`
	Attempt    *int32         `db:"attempt"`
	StatusCode *int32         `db:"status_code"`
	LatencyMS  *int32         `db:"latency_ms"`
	ErrorClass *string        `db:"error_class"`
	Message    *string        `db:"message"`
	Data       map[string]any `db:"data"`
}

// ExecutionFilter narrows ListExecutions.
type ExecutionFilter struct {
	TaskID string // "" for any
	State  string // "" for any
	// Since and Until bound scheduled_for: Since <= scheduled_for < Until.
	Since, Until *time.Time
	Before       string // id cursor: only ids below it; "" for the first page
	Limit        int
	// Held: only held pending executions (HeldAt set).
	Held bool
}

// ListExecutions returns executions newest first (ids are UUIDv7). No
// index of executions holds state (migration 0005), so a state filter
// reads a narrower set than the tenant's history where it can: pending and
// running through unfinished_executions (the rows not final: a few seconds
// of fires on a busy tenant), sorted there before each is looked up;
// retrying through executions_retrying_idx (the rows with a
// next_attempt_at); failed, cancelled and skipped through
// executions_last_error_idx (every one has a last_error). Succeeded, the
// common state, walks the primary key like no filter.
func ListExecutions(ctx context.Context, q Querier, tenant string, f ExecutionFilter) ([]Execution, error) {
	filters := `($4 = '' OR e.state = $4)
		  AND ($5::timestamptz IS NULL OR e.scheduled_for >= $5) AND ($6::timestamptz IS NULL OR e.scheduled_for < $6)
		  AND (NOT $8 OR (e.held_at IS NOT NULL AND e.state = ` + execPending + `))`
	sql := `SELECT ` + executionColumns + ` FROM executions e
		WHERE e.tenant_id = $1 AND ($2 = '' OR e.id < NULLIF($2, '')::uuid)
		  AND ($3 = '' OR e.task_id = NULLIF($3, '')::uuid) AND ` + filters + `
		ORDER BY e.id DESC LIMIT $7`
	state := f.State
	if f.Held { // held executions are pending
		state = "pending"
	}
	switch state {
	case "pending", "running":
		sql = `SELECT ` + executionColumns + ` FROM (
				SELECT u.tenant_id, u.id FROM unfinished_executions u
				WHERE u.tenant_id = $1 AND ($2 = '' OR u.id < NULLIF($2, '')::uuid)
				  AND ($3 = '' OR u.task_id = NULLIF($3, '')::uuid)
				ORDER BY u.id DESC OFFSET 0
			) u
			CROSS JOIN LATERAL (
				SELECT * FROM executions e WHERE e.tenant_id = u.tenant_id AND e.id = u.id OFFSET 0
			) e
			WHERE ` + filters + `
			ORDER BY u.id DESC LIMIT $7`
	case "retrying":
		sql = strings.Replace(sql, `WHERE e.tenant_id = $1`, `WHERE e.tenant_id = $1 AND e.next_attempt_at IS NOT NULL`, 1)
	case "failed", "cancelled", "skipped":
		sql = strings.Replace(sql, `WHERE e.tenant_id = $1`, `WHERE e.tenant_id = $1 AND e.last_error IS NOT NULL`, 1)
	}
	rows, err := q.Query(ctx, sql, tenant, f.Before, f.TaskID, f.State, f.Since, f.Until, f.Limit, f.Held)
	if err != nil {
		return nil, wrap("list executions", err)
	}
	out, err := collectRows[Execution](rows, f.Limit)
	if err != nil {
		return nil, wrap("list executions", err)
	}
	return out, nil
}

// GetExecution reads one execution; forUpdate locks it until the
// transaction ends.
func GetExecution(ctx context.Context, q Querier, tenant, id string, forUpdate bool) (Execution, error) {
	sql := `SELECT ` + executionColumns + ` FROM executions e WHERE e.tenant_id = $1 AND e.id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, tenant, id)
	return collectOneRow[Execution](rows, err)
}

// ListExecutionEvents returns an execution's timeline in order: its stored
// events with the ones the row implies put back in place.
func ListExecutionEvents(ctx context.Context, q Querier, row Execution) ([]ExecutionEvent, error) {
	rows, err := q.Query(ctx, `SELECT type, at, attempt, status_code, latency_ms, error_class, message, data
		FROM execution_events WHERE tenant_id = $1 AND execution_id = $2 ORDER BY seq`, row.TenantID, row.ID)
	if err != nil {
		return nil, wrap("list execution events", err)
	}
	stored, err := pgx.CollectRows(rows, pgx.RowToStructByName[ExecutionEvent])
	if err != nil {
		return nil, wrap("list execution events", err)
	}
	return Timeline(row, stored), nil
}

// Timeline merges an execution's stored events (in seq order) with the
// events its row implies. The places are fixed by the state machine: an
// implied fired event is the first (a fire that stores a missed or late
// fired event implies none); an implied start of attempt 1 follows the
// fired and missed events and precedes everything stored after them (it
// is only implied for a start before anything else happened to the
// execution: an API retry sets first_started_at, so the next start is
// stored), and follows the hold and release events that come before
// everything else stored (an execution starts only once it is released);
// an implied success is
// the last (a succeeded execution is final).
func Timeline(row Execution, stored []ExecutionEvent) []ExecutionEvent {
	out := make([]ExecutionEvent, 0, len(stored)+4)
	if row.ImplicitEvents&ImplicitFired != 0 {
		out = append(out, ExecutionEvent{
			Type: "fired", At: row.CreatedAt,
			Data: map[string]any{"scheduled_for": row.ScheduledFor.UTC().Format(time.RFC3339Nano)},
		})
	}
	i := 0
	for i < len(stored) && (stored[i].Type == "fired" || stored[i].Type == "missed" ||
		stored[i].Type == "held" || stored[i].Type == "released") {
		out = append(out, stored[i])
		i++
	}
	if row.ImplicitEvents&ImplicitStarted != 0 && row.FirstStartedAt != nil {
		one := int32(1)
		out = append(out, ExecutionEvent{Type: "attempt_started", At: *row.FirstStartedAt, Attempt: &one})
	}
	out = append(out, stored[i:]...)
	if row.ImplicitEvents&ImplicitSucceeded != 0 && row.FinishedAt != nil {
		attempt := row.Attempts
		out = append(out,
			ExecutionEvent{
				Type: "attempt_succeeded", At: *row.FinishedAt, Attempt: &attempt, StatusCode: row.LastStatusCode,
				LatencyMS: row.LastLatencyMS,
			},
			ExecutionEvent{Type: "succeeded", At: *row.FinishedAt, Attempt: &attempt, StatusCode: row.LastStatusCode})
	}
	return out
}

// ManualExecution is a manual fire to insert.
type ManualExecution struct {
	TenantID string
	ID       string
	TaskID   string
	DedupKey *string
	Payload  []byte // nil: the task's payload
	// ShardIDs, for a sharded task, are the ids of shards 1.. (ID is
	// shard 0's).
	ShardIDs []string
	// ShardPayloads, when set, are the payloads of shards 0.. (a
	// templated task's, rendered for each shard), in place of Payload.
	ShardPayloads [][]byte
}

// InsertManualExecution inserts a pending manual execution scheduled for
// now (the database clock), one per shard, with its fired event. With a
// dedup key already used for the task it inserts nothing and reports
// false: shard 0 decides (its insert waits for a concurrent one of the
// key and then conflicts), so a key first used when the task had fewer
// shards adds none to that trigger.
func InsertManualExecution(ctx context.Context, q Querier, e ManualExecution) (bool, error) {
	ids, err := uuidArray(append([]string{e.ID}, e.ShardIDs...))
	if err != nil {
		return false, wrap("insert manual execution", err)
	}
	tag, err := q.Exec(ctx, `WITH x0 AS (
			INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, dedup_key, payload, shard, shard_count)
			VALUES ($1, ($2::uuid[])[1], $3, now(), 'manual', $4, coalesce(($6::bytea[])[1], $5), 0, cardinality($2::uuid[]))
			ON CONFLICT (tenant_id, task_id, dedup_key, shard) WHERE dedup_key IS NOT NULL DO NOTHING
			RETURNING tenant_id, id, task_id, scheduled_for
		), xs AS (
			INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, dedup_key, payload, shard, shard_count)
			SELECT $1, i.id, $3, now(), 'manual', $4, coalesce(($6::bytea[])[i.ord], $5), i.ord - 1, cardinality($2::uuid[])
			FROM unnest($2::uuid[]) WITH ORDINALITY AS i(id, ord)
			WHERE i.ord > 1 AND EXISTS (SELECT 1 FROM x0)
			RETURNING tenant_id, id, task_id, scheduled_for
		), x AS (
			SELECT * FROM x0 UNION ALL SELECT * FROM xs
		), u AS (
			INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
			SELECT tenant_id, task_id, scheduled_for, id FROM x)
		INSERT INTO execution_events (tenant_id, execution_id, type, data)
		SELECT tenant_id, id, 'fired', '{"trigger":"manual"}' FROM x`,
		e.TenantID, ids, e.TaskID, e.DedupKey, e.Payload, e.ShardPayloads)
	if err != nil {
		return false, wrap("insert manual execution", err)
	}
	return tag.RowsAffected() > 0, nil
}

// SetExecutionPayload stores the payload an execution sends (a templated
// task's, rendered anew by an API retry of an execution whose template
// failed) and reports whether the execution exists.
func SetExecutionPayload(ctx context.Context, q Querier, tenant, id string, payload []byte) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE executions SET payload = $3 WHERE tenant_id = $1 AND id = $2`, tenant, id, payload)
	if err != nil {
		return false, wrap("set execution payload", err)
	}
	return tag.RowsAffected() == 1, nil
}

// UnfinishedWithoutPayload returns a task's unfinished executions that
// carry no payload of their own (their next attempt sends the task's
// payload), locked until the transaction ends: those to render when the
// task's payload becomes a template.
func UnfinishedWithoutPayload(ctx context.Context, q Querier, tenant, taskID string) ([]Execution, error) {
	rows, err := q.Query(ctx, `SELECT `+executionColumns+` FROM unfinished_executions u
		JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
		WHERE u.tenant_id = $1 AND u.task_id = $2 AND e.state IN `+execUnfinished+` AND e.payload IS NULL
		ORDER BY u.scheduled_for
		FOR UPDATE OF e`, tenant, taskID)
	if err != nil {
		return nil, wrap("list unsent executions", err)
	}
	return collectRows[Execution](rows, 0)
}

// GetExecutionByDedupKey reads the execution of a task with dedup key.
func GetExecutionByDedupKey(ctx context.Context, q Querier, tenant, taskID, key string) (Execution, error) {
	rows, err := q.Query(ctx, `SELECT `+executionColumns+` FROM executions e
		WHERE e.tenant_id = $1 AND e.task_id = $2 AND e.dedup_key = $3 AND e.shard = 0`, tenant, taskID, key)
	return collectOneRow[Execution](rows, err)
}

// CancelExecution moves an execution in one of the states from (pending,
// retrying; running when no job carries it) to cancelled and appends a
// cancelled event with message, which also becomes its last_error unless
// it has one (a retrying execution keeps its last failure). It reports
// false when the execution is in another state.
func CancelExecution(ctx context.Context, q Querier, tenant, id, message string, from []string) (bool, error) {
	tag, err := q.Exec(ctx, `WITH c AS (
			UPDATE executions SET state = `+execCancelled+`, finished_at = now(), next_attempt_at = NULL,
				last_error = coalesce(last_error, $3)
			WHERE tenant_id = $1 AND id = $2 AND state = ANY($4) AND state IN `+execUnfinished+`
			RETURNING tenant_id, id, task_id, scheduled_for
		), u AS (
			DELETE FROM unfinished_executions u USING c
			WHERE u.tenant_id = c.tenant_id AND u.task_id = c.task_id AND u.scheduled_for = c.scheduled_for AND u.id = c.id)
		INSERT INTO execution_events (tenant_id, execution_id, type, message)
		SELECT tenant_id, id, 'cancelled', $3 FROM c`, tenant, id, message, from)
	if err != nil {
		return false, wrap("cancel execution", err)
	}
	return tag.RowsAffected() == 1, nil
}

// RequestExecutionCancel flags a running execution so that its worker
// finishes it as cancelled. It reports false when the execution is not
// running.
func RequestExecutionCancel(ctx context.Context, q Querier, tenant, id string) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE executions SET cancel_requested = true
		WHERE tenant_id = $1 AND id = $2 AND state = `+execRunning, tenant, id)
	if err != nil {
		return false, wrap("request execution cancel", err)
	}
	return tag.RowsAffected() == 1, nil
}

// RetryExecution moves a failed or cancelled execution back to pending,
// delivered by River job jobID, with its last outcome cleared and its
// retry budget restarted: its attempts keep counting (the next is one
// more than the last), the budget counts from attempts_base. It appends
// a retried event that records the state it left (from), and reports
// false when the execution is not in state from.
func RetryExecution(ctx context.Context, q Querier, tenant, id, from string, jobID int64) (bool, error) {
	tag, err := q.Exec(ctx, `WITH r AS (
			UPDATE executions SET state = `+execPending+`, attempts_base = attempts, lease_attempt = 0, cancel_requested = false,
				last_status_code = NULL, last_error = NULL, last_error_class = NULL, next_attempt_at = NULL,
				started_at = NULL, finished_at = NULL, river_job_id = $4, held_at = NULL,
				-- A slot a schedule change gave up is taken back, unless
				-- another execution holds it (a unique violation of
				-- ConstraintExecutionSlot).
				rescheduled = false,
				-- Stored events follow the fire now: a later first start
				-- must be stored after them, not implied before them.
				first_started_at = coalesce(first_started_at, now())
			WHERE tenant_id = $1 AND id = $2 AND state = $3 AND state IN `+execRetryable+`
			RETURNING tenant_id, id, task_id, scheduled_for
		), u AS (
			INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
			SELECT tenant_id, task_id, scheduled_for, id FROM r
			ON CONFLICT DO NOTHING)
		INSERT INTO execution_events (tenant_id, execution_id, type, data)
		SELECT tenant_id, id, 'retried', jsonb_build_object('previous_state', $3::text) FROM r`, tenant, id, from, jobID)
	if err != nil {
		return false, wrap("retry execution", err)
	}
	return tag.RowsAffected() == 1, nil
}

// RiverJob is the part of a River job row that execution commands need.
type RiverJob struct {
	ID    int64  `db:"id"`
	State string `db:"state"`
}

// ExecutionJobs returns the River jobs of kind that deliver an execution
// and are not cancelled or discarded: the job recorded in river_job_id
// (jobID, when set) and any whose args name the execution.
func ExecutionJobs(ctx context.Context, q Querier, kind, tenant, executionID string, jobID *int64) ([]RiverJob, error) {
	rows, err := q.Query(ctx, `SELECT id, state::text FROM river_job
		WHERE (id = $4 OR (kind = $1 AND args @> jsonb_build_object('tenant_id', $2::text, 'execution_id', $3::text)))
		  AND state NOT IN `+endedJobStates+`
		ORDER BY id`, kind, tenant, executionID, jobID)
	if err != nil {
		return nil, wrap("list execution jobs", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[RiverJob])
}

// unfinishedSweepLock is the advisory lock key that keeps replicas from
// sweeping unfinished_executions at once.
const unfinishedSweepLock = 0x61785f7377656570 // "ax_sweep"

// SweepUnfinishedAge is how long after its slot a row of
// unfinished_executions is first looked at by SweepUnfinished.
const SweepUnfinishedAge = time.Minute

// SweepUnfinished deletes the rows of unfinished_executions whose execution
// is final or gone, and returns how many it deleted. ax's own statements
// keep the table exact, so it finds nothing unless something else wrote
// executions (an earlier version of ax running beside this one, a hand
// edit); readers confirm the state in executions, so such a row only costs
// space until it goes. It looks only at rows whose slot is more than
// SweepUnfinishedAge ago: on a busy server nearly every row is a fire
// materialised ahead of its slot or delivered within seconds of it, and
// probing each of them in executions, every minute, cost more of the
// database than anything the sweep could find (at 8,000 fires a second,
// about 100,000 rows ahead: seconds of statement time a minute). A stale row of a
// younger slot goes at a later sweep. An execution another transaction
// holds is left for the next sweep, and one reopened since this sweep's
// snapshot (an API retry) is seen reopened: the row lock makes the sweep
// look again. Replicas take turns (an advisory lock); one that finds it
// taken skips.
func SweepUnfinished(ctx context.Context, q TxBeginner) (int64, error) {
	var n int64
	err := inTurn(ctx, q, unfinishedSweepLock, "30s", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `WITH stale AS (
				SELECT u.tenant_id, u.task_id, u.scheduled_for, u.id
				FROM unfinished_executions u
				JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
				WHERE u.scheduled_for < now() - make_interval(secs => $1) AND e.state NOT IN `+execUnfinished+`
				FOR UPDATE OF e SKIP LOCKED
			)
			DELETE FROM unfinished_executions u USING stale s
			WHERE u.tenant_id = s.tenant_id AND u.task_id = s.task_id AND u.scheduled_for = s.scheduled_for AND u.id = s.id`,
			SweepUnfinishedAge.Seconds())
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		tag, err = tx.Exec(ctx, `DELETE FROM unfinished_executions u
			WHERE u.scheduled_for < now() - make_interval(secs => $1)
			  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.tenant_id = u.tenant_id AND e.id = u.id)`,
			SweepUnfinishedAge.Seconds())
		if err != nil {
			return err
		}
		n += tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, wrap("sweep unfinished executions", err)
	}
	return n, nil
}

// HurryRetry makes a retrying execution's next attempt due now and appends
// a retried event that records it; it reports false when the execution
// is not retrying.
func HurryRetry(ctx context.Context, q Querier, tenant, id string) (bool, error) {
	tag, err := q.Exec(ctx, `WITH r AS (
			UPDATE executions SET next_attempt_at = now()
			WHERE tenant_id = $1 AND id = $2 AND state = `+execRetrying+`
			RETURNING tenant_id, id)
		INSERT INTO execution_events (tenant_id, execution_id, type, data)
		SELECT tenant_id, id, 'retried', jsonb_build_object('previous_state', `+execRetrying+`) FROM r`, tenant, id)
	if err != nil {
		return false, wrap("retry now", err)
	}
	return tag.RowsAffected() == 1, nil
}

// RetryCandidates returns the ids of tenant's executions in state whose
// slot (scheduled_for) lies in [from, to), of task taskID and of workflow
// workflowID when those are set, oldest slot first, at most limit.
func RetryCandidates(ctx context.Context, q Querier, tenant, state, taskID, workflowID string, from, to time.Time, limit int) ([]string, error) {
	rows, err := q.Query(ctx, `
		SELECT id::text FROM executions
		WHERE tenant_id = $1 AND state = $2 AND scheduled_for >= $3 AND scheduled_for < $4
		  AND ($5 = '' OR task_id = nullif($5, '')::uuid) AND ($6 = '' OR workflow_id = nullif($6, '')::uuid)
		ORDER BY scheduled_for, id
		LIMIT $7`, tenant, state, from, to, taskID, workflowID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
