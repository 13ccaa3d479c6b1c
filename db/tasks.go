package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Task is a row of tasks.
type Task struct {
	TenantID            string            `db:"tenant_id"`
	ID                  string            `db:"id"`
	Name                string            `db:"name"`
	EndpointID          string            `db:"endpoint_id"`
	ScheduleType        string            `db:"schedule_type"`
	Cron                *string           `db:"cron"`
	Timezone            string            `db:"timezone"`
	IntervalSeconds     *int64            `db:"interval_seconds"`
	RunAt               *time.Time        `db:"run_at"`
	StartAt             *time.Time        `db:"start_at"`
	EndAt               *time.Time        `db:"end_at"`
	Payload             []byte            `db:"payload"`
	Priority            int16             `db:"priority"`
	TimeoutMS           *int32            `db:"timeout_ms"`
	MaxAttempts         int32             `db:"max_attempts"`
	InitialBackoffMS    int64             `db:"initial_backoff_ms"`
	MaxBackoffMS        int64             `db:"max_backoff_ms"`
	OverlapPolicy       string            `db:"overlap_policy"`
	MisfirePolicy       string            `db:"misfire_policy"`
	State               string            `db:"state"`
	NextRunAt           *time.Time        `db:"next_run_at"`
	Labels              map[string]string `db:"labels"`
	AlertEndpointID     *string           `db:"alert_endpoint_id"`
	PauseAfterFailures  *int32            `db:"pause_after_failures"`
	ConsecutiveFailures int32             `db:"consecutive_failures"`
	MissedCount         int64             `db:"missed_count"`
	Version             int32             `db:"version"`
	CreatedAt           time.Time         `db:"created_at"`
	UpdatedAt           time.Time         `db:"updated_at"`
	ScheduleDialect     string            `db:"schedule_dialect"`
	DSTPolicy           string            `db:"dst_policy"`
	// ExcludeCalendars: the calendars whose dates the schedule skips.
	ExcludeCalendars []string `db:"exclude_calendars"`
	// Shards is how many executions each slot fires (1: not sharded).
	Shards int32 `db:"shards"`
	// WorkflowID is set on the hidden task that delivers a workflow node
	// (the API neither lists nor serves it).
	WorkflowID *string `db:"workflow_id"`
	// CompletionMode is response (a 2xx ends the attempt) or callback (a
	// 2xx accepts it; the receiver completes it later).
	CompletionMode      string `db:"completion_mode"`
	CompletionTimeoutMS *int64 `db:"completion_timeout_ms"`
	HeartbeatTimeoutMS  *int64 `db:"heartbeat_timeout_ms"`
	// SLAFinishWithinMS: an execution not succeeded this long after its
	// slot missed the task's SLA (nil: no SLA).
	SLAFinishWithinMS *int64 `db:"sla_finish_within_ms"`
	// PayloadTemplate: each JSON string of Payload is a template, rendered
	// when an execution is created (executions.payload keeps the result).
	PayloadTemplate bool `db:"payload_template"`
	// ScheduleUnion is a union schedule, whole, as JSON (nil for every
	// other schedule type).
	ScheduleUnion *string `db:"schedule_union"`
	// AlertAfterFailures: failure alerts start at the task's Nth failed
	// execution in a row (at least 1; 0 is stored as 1).
	AlertAfterFailures int32 `db:"alert_after_failures"`
	// ScheduleEvent is the event name of an event schedule
	// (ScheduleType "event"), nil otherwise.
	ScheduleEvent *string `db:"schedule_event"`
}

// fields returns pointers to t's fields in their order, which is that of
// taskColumns.
func (t *Task) fields() []any {
	return []any{
		&t.TenantID, &t.ID, &t.Name, &t.EndpointID, &t.ScheduleType, &t.Cron, &t.Timezone, &t.IntervalSeconds,
		&t.RunAt, &t.StartAt, &t.EndAt, &t.Payload, &t.Priority, &t.TimeoutMS, &t.MaxAttempts, &t.InitialBackoffMS,
		&t.MaxBackoffMS, &t.OverlapPolicy, &t.MisfirePolicy, &t.State, &t.NextRunAt, &t.Labels, &t.AlertEndpointID,
		&t.PauseAfterFailures, &t.ConsecutiveFailures, &t.MissedCount, &t.Version, &t.CreatedAt, &t.UpdatedAt,
		&t.ScheduleDialect, &t.DSTPolicy, &t.ExcludeCalendars, &t.Shards, &t.WorkflowID, &t.CompletionMode,
		&t.CompletionTimeoutMS, &t.HeartbeatTimeoutMS, &t.SLAFinishWithinMS, &t.PayloadTemplate, &t.ScheduleUnion,
		&t.AlertAfterFailures, &t.ScheduleEvent,
	}
}

const taskColumns = `tenant_id, id::text, name, endpoint_id::text, schedule_type, cron, timezone, interval_seconds,
	run_at, start_at, end_at, payload, priority, timeout_ms, max_attempts, initial_backoff_ms, max_backoff_ms,
	overlap_policy, misfire_policy, state, next_run_at, labels, alert_endpoint_id::text, pause_after_failures,
	consecutive_failures, missed_count, version, created_at, updated_at, schedule_dialect, dst_policy,
	exclude_calendars::text[], shards, workflow_id::text, completion_mode, completion_timeout_ms, heartbeat_timeout_ms,
	sla_finish_within_ms, payload_template, schedule_union::text, alert_after_failures, schedule_event`

// InsertTask inserts t, created (and updated) at t.CreatedAt, and returns
// the stored row. With wake, it signals TaskChangedChannel in the same
// statement (one round trip; the notification goes out only if the row is
// stored).
func InsertTask(ctx context.Context, q Querier, t Task, wake bool) (Task, error) {
	return insertTask(ctx, q, t, wake, nil)
}

// InsertTaskAudited is InsertTask that records audit in the same
// statement: one round trip, atomic without a transaction of its own.
// audit's changes are computed beforehand from StoredTask(t), which is
// what the insert returns.
func InsertTaskAudited(ctx context.Context, q Querier, t Task, wake bool, audit AuditRecord) (Task, error) {
	return insertTask(ctx, q, t, wake, &audit)
}

// StoredTask is t as InsertTask stores and returns it: defaults the
// table applies filled in, times at the database's microsecond precision
// (pgx truncates, as here).
func StoredTask(t Task) Task {
	t.Shards = max(t.Shards, 1)
	t.CompletionMode = completionMode(t.CompletionMode)
	t.AlertAfterFailures = max(t.AlertAfterFailures, 1)
	for _, p := range []**time.Time{&t.RunAt, &t.StartAt, &t.EndAt, &t.NextRunAt} {
		if *p != nil {
			v := (*p).Truncate(time.Microsecond)
			*p = &v
		}
	}
	cals := make([]string, len(t.ExcludeCalendars))
	for i, id := range t.ExcludeCalendars {
		cals[i] = id
		if u, err := uuid.Parse(id); err == nil {
			cals[i] = u.String()
		}
	}
	t.ExcludeCalendars = cals
	t.CreatedAt = t.CreatedAt.Truncate(time.Microsecond)
	t.UpdatedAt = t.CreatedAt
	return t
}

func insertTask(ctx context.Context, q Querier, t Task, wake bool, audit *AuditRecord) (Task, error) {
	t = StoredTask(t)
	const insert = `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, cron, timezone,
			interval_seconds, run_at, start_at, end_at, payload, priority, timeout_ms, max_attempts, initial_backoff_ms,
			max_backoff_ms, overlap_policy, misfire_policy, state, next_run_at, labels, alert_endpoint_id,
			pause_after_failures, created_at, updated_at, schedule_dialect, dst_policy, exclude_calendars, shards,
			workflow_id, completion_mode, completion_timeout_ms, heartbeat_timeout_ms, sla_finish_within_ms, payload_template,
			schedule_union, alert_after_failures, schedule_event)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,
			$23, $24, $25, $25, $26, $27, $28, $29, $30, $31, $32, $33, $34, $35, $36::jsonb, $37, $38)
		RETURNING ` + taskColumns
	args := []any{
		t.TenantID, t.ID, t.Name, t.EndpointID, t.ScheduleType, t.Cron, t.Timezone, t.IntervalSeconds, t.RunAt,
		t.StartAt, t.EndAt, t.Payload, t.Priority, t.TimeoutMS, t.MaxAttempts, t.InitialBackoffMS, t.MaxBackoffMS,
		t.OverlapPolicy, t.MisfirePolicy, t.State, t.NextRunAt, t.Labels, t.AlertEndpointID, t.PauseAfterFailures,
		t.CreatedAt, t.ScheduleDialect, t.DSTPolicy, nil, max(t.Shards, 1), t.WorkflowID, completionMode(t.CompletionMode),
		t.CompletionTimeoutMS, t.HeartbeatTimeoutMS, t.SLAFinishWithinMS, t.PayloadTemplate, t.ScheduleUnion, t.AlertAfterFailures, t.ScheduleEvent,
	}
	cals, err := uuidArray(t.ExcludeCalendars)
	if err != nil {
		return Task{}, wrap("insert task", err)
	}
	args[27] = cals
	sql := insert
	if wake || audit != nil {
		sql = `WITH t AS (` + insert + `)`
		from := `t`
		if audit != nil {
			sql += `, a AS (INSERT INTO audit_log (tenant_id, id, subject, operator, action, resource_type, resource_id, request_id, changes)
				SELECT t.tenant_id, $39, $40, $41, $42, $43, t.id::text, $44, $45::jsonb FROM t)`
			args = append(args, audit.ID, audit.Subject, audit.Operator, audit.Action, audit.ResourceType, audit.RequestID, nullJSON(audit.Changes))
		}
		if wake {
			from += fmt.Sprintf(`, (SELECT pg_notify($%d, '')) n`, len(args)+1)
			args = append(args, TaskChangedChannel)
		}
		sql += ` SELECT t.* FROM ` + from
	}
	rows, err := q.Query(ctx, sql, args...)
	return collectOneRow[Task](rows, err)
}

// GetTask reads one task; forUpdate locks it until the transaction ends.
func GetTask(ctx context.Context, q Querier, tenant, id string, forUpdate bool) (Task, error) {
	sql := `SELECT ` + taskColumns + ` FROM tasks WHERE tenant_id = $1 AND id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, tenant, id)
	return collectOneRow[Task](rows, err)
}

// TaskFilter narrows ListTasks.
type TaskFilter struct {
	State  string            // "" for any
	Labels map[string]string // every pair must match
	// NamePrefix keeps names that start with it; "" for any.
	NamePrefix string
	Before     string // id cursor: only ids below it; "" for the first page
	Limit      int
}

// ListTasks returns tasks newest first.
func ListTasks(ctx context.Context, q Querier, tenant string, f TaskFilter) ([]Task, error) {
	labels := f.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	rows, err := q.Query(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE tenant_id = $1 AND ($2 = '' OR id < NULLIF($2, '')::uuid) AND ($3 = '' OR state = $3) AND labels @> $4
		  AND workflow_id IS NULL
		AND ($6 = '' OR starts_with(name, $6))
		ORDER BY tasks.id DESC LIMIT $5`, tenant, f.Before, f.State, labels, f.Limit, f.NamePrefix)
	if err != nil {
		return nil, wrap("list tasks", err)
	}
	return collectRows[Task](rows, f.Limit)
}

// UpdateTask writes t's mutable fields, bumps its version and returns the
// stored row.
func UpdateTask(ctx context.Context, q Querier, t Task) (Task, error) {
	cals, err := uuidArray(t.ExcludeCalendars)
	if err != nil {
		return Task{}, wrap("update task", err)
	}
	rows, err := q.Query(ctx, `UPDATE tasks SET name = $3, endpoint_id = $4, schedule_type = $5, cron = $6,
		timezone = $7, interval_seconds = $8, run_at = $9, start_at = $10, end_at = $11, payload = $12,
		priority = $13, timeout_ms = $14, max_attempts = $15, initial_backoff_ms = $16, max_backoff_ms = $17,
		overlap_policy = $18, misfire_policy = $19, state = $20, next_run_at = $21, labels = $22,
		alert_endpoint_id = $23, pause_after_failures = $24, consecutive_failures = $25,
		schedule_dialect = $26, dst_policy = $27, exclude_calendars = $28, shards = $29, completion_mode = $30,
		completion_timeout_ms = $31, heartbeat_timeout_ms = $32, sla_finish_within_ms = $33, payload_template = $34,
		schedule_union = $35::jsonb, alert_after_failures = $36, schedule_event = $37, version = version + 1, updated_at = now()
		WHERE tenant_id = $1 AND id = $2 RETURNING `+taskColumns,
		t.TenantID, t.ID, t.Name, t.EndpointID, t.ScheduleType, t.Cron, t.Timezone, t.IntervalSeconds, t.RunAt,
		t.StartAt, t.EndAt, t.Payload, t.Priority, t.TimeoutMS, t.MaxAttempts, t.InitialBackoffMS, t.MaxBackoffMS,
		t.OverlapPolicy, t.MisfirePolicy, t.State, t.NextRunAt, t.Labels, t.AlertEndpointID, t.PauseAfterFailures,
		t.ConsecutiveFailures, t.ScheduleDialect, t.DSTPolicy, cals, max(t.Shards, 1), completionMode(t.CompletionMode),
		t.CompletionTimeoutMS, t.HeartbeatTimeoutMS, t.SLAFinishWithinMS, t.PayloadTemplate, t.ScheduleUnion,
		max(t.AlertAfterFailures, 1), t.ScheduleEvent)
	return collectOneRow[Task](rows, err)
}

// completionMode is mode, or response when it is unset.
func completionMode(mode string) string {
	if mode == "" {
		return "response"
	}
	return mode
}

// DeleteTask deletes a task and reports whether it existed.
func DeleteTask(ctx context.Context, q Querier, tenant, id string) (bool, error) {
	tag, err := q.Exec(ctx, `DELETE FROM tasks WHERE tenant_id = $1 AND id = $2 AND workflow_id IS NULL`, tenant, id)
	if err != nil {
		return false, wrap("delete task", err)
	}
	return tag.RowsAffected() == 1, nil
}

// CancelPendingExecutions cancels a task's executions that have not started
// (pending; with dueOnly, only those whose slot has come), appends a
// cancelled event to each with reason, and returns how many it cancelled.
// Running and retrying executions are left to finish. An execution another
// transaction holds is skipped, never waited for: it is being started or
// cancelled, and a start of a paused or deleted task's execution cancels it
// itself (service.Deliveries.Begin). So this statement, which keeps the
// lock of a row it found no longer pending, never waits while holding one,
// and the batched success that may wait for such a lock cannot deadlock
// with it.
func CancelPendingExecutions(ctx context.Context, q Querier, tenant, taskID string, dueOnly bool, reason string) (int64, error) {
	return cancelPending(ctx, q, tenant, taskID, dueOnly, false, reason)
}

// CancelRescheduledExecutions is CancelPendingExecutions of every pending
// execution of a task whose schedule changed, except those of keep: the
// cancelled ones are marked rescheduled, which gives their slots up (the
// unique slot index leaves them out), so that the new schedule fires an
// instant it shares with the old one. They were never sent.
func CancelRescheduledExecutions(ctx context.Context, q Querier, tenant, taskID string, keep []string, reason string) (int64, error) {
	ids, err := uuidArray(keep)
	if err != nil {
		return 0, wrap("cancel rescheduled executions", err)
	}
	return cancelPending(ctx, q, tenant, taskID, false, true, reason, ids...)
}

func cancelPending(ctx context.Context, q Querier, tenant, taskID string, dueOnly, rescheduled bool, reason string,
	keep ...[16]byte,
) (int64, error) {
	if keep == nil {
		keep = [][16]byte{} // NULL would match no row
	}
	tag, err := q.Exec(ctx, `WITH p AS (
			SELECT e.tenant_id, e.id FROM unfinished_executions u
			JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
			WHERE u.tenant_id = $1 AND u.task_id = $2 AND e.state = `+execPending+` AND (NOT $3 OR e.scheduled_for <= now())
				AND e.id <> ALL ($6::uuid[])
			FOR UPDATE OF e SKIP LOCKED
		), c AS (
			UPDATE executions e SET state = `+execCancelled+`, finished_at = now(), last_error = $4,
				rescheduled = e.rescheduled OR ($5 AND e.trigger = 'schedule')
			FROM p WHERE e.tenant_id = p.tenant_id AND e.id = p.id
			RETURNING e.tenant_id, e.id, e.task_id, e.scheduled_for
		), d AS (
			DELETE FROM unfinished_executions u USING c
			WHERE u.tenant_id = c.tenant_id AND u.task_id = c.task_id AND u.scheduled_for = c.scheduled_for AND u.id = c.id)
		INSERT INTO execution_events (tenant_id, execution_id, type, message)
		SELECT tenant_id, id, 'cancelled', $4 FROM c`, tenant, taskID, dueOnly, reason, rescheduled, keep)
	if err != nil {
		return 0, wrap("cancel pending executions", err)
	}
	return tag.RowsAffected(), nil
}

// PendingSlot is a pending scheduled execution of a task.
type PendingSlot struct {
	ID           string
	ScheduledFor time.Time
}

// PendingScheduledExecutions returns a task's pending executions of
// scheduled slots.
func PendingScheduledExecutions(ctx context.Context, q Querier, tenant, taskID string) ([]PendingSlot, error) {
	rows, err := q.Query(ctx, `SELECT e.id::text, e.scheduled_for FROM unfinished_executions u
		JOIN executions e ON e.tenant_id = u.tenant_id AND e.id = u.id
		WHERE u.tenant_id = $1 AND u.task_id = $2 AND e.state = `+execPending+` AND e.trigger = 'schedule'
		ORDER BY u.scheduled_for`, tenant, taskID)
	if err != nil {
		return nil, wrap("list pending executions", err)
	}
	var out []PendingSlot
	var p PendingSlot
	_, err = pgx.ForEachRow(rows, []any{&p.ID, &p.ScheduledFor}, func() error {
		out = append(out, p)
		return nil
	})
	return out, wrap("list pending executions", err)
}

// Now returns the database clock: due-ness is always judged by it.
func Now(ctx context.Context, q Querier) (time.Time, error) {
	var t time.Time
	err := q.QueryRow(ctx, `SELECT now()`).Scan(&t)
	return t, wrap("read the database clock", err)
}

// NowTimed is Now on a connection of pool held for the query, with this
// process's clock just before the query is sent and just after its answer
// (a wait for a free connection is in neither): a reading to estimate the
// database's clock from.
func NowTimed(ctx context.Context, pool *Pool) (now, sent, received time.Time, err error) {
	err = pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		sent = time.Now()
		var err error
		now, err = Now(ctx, c)
		received = time.Now()
		return err
	})
	return now, sent, received, wrap("read the database clock", err)
}

// TaskRef names a task.
type TaskRef struct {
	ID   string
	Name string
}

// EndpointUsers returns up to limit tasks (by name) that use an endpoint as
// their target or alert endpoint, and how many do in all.
func EndpointUsers(ctx context.Context, q Querier, tenant, endpointID string, limit int) ([]TaskRef, int64, error) {
	rows, err := q.Query(ctx, `SELECT id::text, name, count(*) OVER () FROM tasks
		WHERE tenant_id = $1 AND (endpoint_id = $2 OR alert_endpoint_id = $2)
		ORDER BY name LIMIT $3`, tenant, endpointID, limit)
	if err != nil {
		return nil, 0, wrap("list endpoint users", err)
	}
	defer rows.Close()
	var (
		out   []TaskRef
		total int64
	)
	for rows.Next() {
		var r TaskRef
		if err := rows.Scan(&r.ID, &r.Name, &total); err != nil {
			return nil, 0, wrap("list endpoint users", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, wrap("list endpoint users", err)
	}
	return out, total, nil
}
