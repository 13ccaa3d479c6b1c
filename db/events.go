package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is a row of posted_events.
type Event struct {
	TenantID string  `db:"tenant_id"`
	ID       string  `db:"id"`
	Name     string  `db:"name"`
	Key      *string `db:"key"`
	// Payload is a JSON value (nil: none).
	Payload    []byte    `db:"payload"`
	DedupKey   *string   `db:"dedup_key"`
	ReceivedAt time.Time `db:"received_at"`
	// The counts of what the event fired, and the list (a JSON array).
	MatchedTasks     int32  `db:"matched_tasks"`
	MatchedWorkflows int32  `db:"matched_workflows"`
	MatchedWaits     int32  `db:"matched_waits"`
	Matched          []byte `db:"matched"`
}

const eventColumns = `tenant_id, id::text, name, key, payload, dedup_key, received_at,
	matched_tasks, matched_workflows, matched_waits, matched`

func (e *Event) fields() []any {
	return []any{
		&e.TenantID, &e.ID, &e.Name, &e.Key, &e.Payload, &e.DedupKey, &e.ReceivedAt,
		&e.MatchedTasks, &e.MatchedWorkflows, &e.MatchedWaits, &e.Matched,
	}
}

// ClaimEventDedup claims dedup key for event id for ttl and returns the
// event that owns the key: id when the claim won (the key was free or its
// previous claim expired), else the earlier event's. Concurrent claims of
// one key get one winner: the loser's insert waits on the unique key until
// the winner's transaction ends, and then reads the winner's claim in a
// statement of its own (under READ COMMITTED a new statement sees what
// committed meanwhile; the insert's own snapshot does not).
func ClaimEventDedup(ctx context.Context, q Querier, tenant, key, id string, ttl time.Duration) (string, error) {
	tag, err := q.Exec(ctx, `INSERT INTO event_dedup (tenant_id, dedup_key, event_id, expires_at)
		VALUES ($1, $2, $3, now() + make_interval(secs => $4))
		ON CONFLICT (tenant_id, dedup_key) DO UPDATE SET event_id = EXCLUDED.event_id, expires_at = EXCLUDED.expires_at
			WHERE event_dedup.expires_at <= now()`,
		tenant, key, id, ttl.Seconds())
	if err != nil {
		return "", wrap("claim event dedup key", err)
	}
	if tag.RowsAffected() == 1 {
		return id, nil
	}
	var owner string
	err = q.QueryRow(ctx, `SELECT event_id::text FROM event_dedup WHERE tenant_id = $1 AND dedup_key = $2`,
		tenant, key).Scan(&owner)
	if err != nil {
		return "", wrap("read event dedup key", err)
	}
	return owner, nil
}

// InsertEvent stores e, received at the database's now(), and returns
// the stored row.
func InsertEvent(ctx context.Context, q Querier, e Event) (Event, error) {
	var payload *string
	if e.Payload != nil {
		s := string(e.Payload)
		payload = &s
	}
	matched := string(e.Matched)
	if matched == "" {
		matched = "[]"
	}
	rows, err := q.Query(ctx, `INSERT INTO posted_events (tenant_id, id, name, key, payload, dedup_key, received_at,
			matched_tasks, matched_workflows, matched_waits, matched)
		VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7, $8, $9, $10, $11::text::jsonb)
		RETURNING `+eventColumns,
		e.TenantID, e.ID, e.Name, e.Key, payload, e.DedupKey, e.ReceivedAt, e.MatchedTasks, e.MatchedWorkflows,
		e.MatchedWaits, matched)
	if err != nil {
		return Event{}, wrap("insert event", err)
	}
	out, err := collectRows[Event](rows, 1)
	if err != nil {
		return Event{}, wrap("insert event", err)
	}
	if len(out) != 1 {
		return Event{}, wrap("insert event", ErrNotFound)
	}
	return out[0], nil
}

// EventMatched is what an event fired: the counts and the list (a JSON
// array).
type EventMatched struct {
	Tasks, Workflows, Waits int32
	List                    []byte
}

// SetEventMatched records what event id fired and returns the stored row.
func SetEventMatched(ctx context.Context, q Querier, tenant, id string, m EventMatched) (Event, error) {
	rows, err := q.Query(ctx, `UPDATE posted_events SET matched_tasks = $3, matched_workflows = $4, matched_waits = $5,
			matched = $6::text::jsonb
		WHERE tenant_id = $1 AND id = $2 RETURNING `+eventColumns,
		tenant, id, m.Tasks, m.Workflows, m.Waits, string(m.List))
	if err != nil {
		return Event{}, wrap("record what an event fired", err)
	}
	out, err := collectRows[Event](rows, 1)
	if err != nil {
		return Event{}, wrap("record what an event fired", err)
	}
	if len(out) != 1 {
		return Event{}, ErrNotFound
	}
	return out[0], nil
}

// GetEvent reads one event.
func GetEvent(ctx context.Context, q Querier, tenant, id string) (Event, error) {
	rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM posted_events WHERE tenant_id = $1 AND id = $2`, tenant, id)
	if err != nil {
		return Event{}, wrap("get event", err)
	}
	out, err := collectRows[Event](rows, 1)
	if err != nil {
		return Event{}, wrap("get event", err)
	}
	if len(out) == 0 {
		return Event{}, ErrNotFound
	}
	return out[0], nil
}

// EventFilter narrows ListEvents.
type EventFilter struct {
	Name   string // "" for any
	Before string // id cursor: only ids below it; "" for the first page
	Limit  int
}

// ListEvents returns a tenant's events newest first.
func ListEvents(ctx context.Context, q Querier, tenant string, f EventFilter) ([]Event, error) {
	rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM posted_events
		WHERE tenant_id = $1 AND ($2 = '' OR id < NULLIF($2, '')::uuid) AND ($3 = '' OR name = $3)
		ORDER BY id DESC LIMIT $4`, tenant, f.Before, f.Name, f.Limit)
	if err != nil {
		return nil, wrap("list events", err)
	}
	out, err := collectRows[Event](rows, f.Limit)
	return out, wrap("list events", err)
}

// EventTasks returns the tenant's active tasks whose schedule is event
// name (tasks_event_idx).
func EventTasks(ctx context.Context, q Querier, tenant, name string) ([]Task, error) {
	rows, err := q.Query(ctx, `SELECT `+taskColumns+` FROM tasks
		WHERE tenant_id = $1 AND schedule_event = $2 AND state = `+taskActive+` AND workflow_id IS NULL
		ORDER BY id`, tenant, name)
	if err != nil {
		return nil, wrap("list event tasks", err)
	}
	out, err := collectRows[Task](rows, 0)
	return out, wrap("list event tasks", err)
}

// EventWorkflowIDs returns the ids of the tenant's active workflows
// whose schedule is event name (workflows_event_idx).
func EventWorkflowIDs(ctx context.Context, q Querier, tenant, name string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id::text FROM workflows
		WHERE tenant_id = $1 AND schedule->>'Type' = 'event' AND schedule->>'Event' = $2 AND state = `+workflowActive+`
		ORDER BY id`, tenant, name)
	if err != nil {
		return nil, wrap("list event workflows", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, wrap("list event workflows", err)
}

// EventExecution is one execution an event fires: a shard of a task's
// fire, with its payload (nil: the task's).
type EventExecution struct {
	ID, TaskID        string
	Shard, ShardCount int32
	Payload           []byte
}

// InsertEventExecutions inserts the pending executions event fires,
// trigger event, scheduled for at (the event's arrival), each with its
// unfinished row and a fired event naming the event. An execution whose
// (task, event, shard) exists already is not inserted; the ids of those
// inserted are returned.
func InsertEventExecutions(ctx context.Context, q Querier, tenant, event string, at time.Time, execs []EventExecution) ([]string, error) {
	if len(execs) == 0 {
		return nil, nil
	}
	n := len(execs)
	ids, tasks := make([]string, n), make([]string, n)
	shards, counts := make([]int32, n), make([]int32, n)
	payloads := make([][]byte, n)
	for i, e := range execs {
		ids[i], tasks[i], shards[i], counts[i], payloads[i] = e.ID, e.TaskID, e.Shard, max(e.ShardCount, 1), e.Payload
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("insert event executions", err)
	}
	taskIDs, err := uuidArray(tasks)
	if err != nil {
		return nil, wrap("insert event executions", err)
	}
	rows, err := q.Query(ctx, `WITH ins AS (
			INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, event_id, shard, shard_count, payload)
			SELECT $1, i.id, i.task_id, $3, 'event', $2, i.shard, i.shard_count, i.payload
			FROM unnest($4::uuid[], $5::uuid[], $6::int[], $7::int[], $8::bytea[]) AS i(id, task_id, shard, shard_count, payload)
			ON CONFLICT (task_id, event_id, shard) WHERE event_id IS NOT NULL DO NOTHING
			RETURNING tenant_id, id, task_id, scheduled_for
		), u AS (
			INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
			SELECT tenant_id, task_id, scheduled_for, id FROM ins
		), ev AS (
			INSERT INTO execution_events (tenant_id, execution_id, type, data)
			SELECT tenant_id, id, 'fired', jsonb_build_object('trigger', 'event', 'event_id', $2::text) FROM ins
		)
		SELECT id::text FROM ins`,
		tenant, event, at, uids, taskIDs, shards, counts, payloads)
	if err != nil {
		return nil, wrap("insert event executions", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap("insert event executions", err)
}

// DeleteExpiredEvents removes up to limit events of every tenant received
// more than olderThan ago, oldest first (events_received_idx), and the
// expired dedup keys; replicas take turns (turn false: another held it).
func DeleteExpiredEvents(ctx context.Context, q TxBeginner, olderThan time.Duration, limit int) (n int64, turn bool, err error) {
	err = inTurn(ctx, q, retentionLock, retentionTimeout, func(tx pgx.Tx) error {
		turn = true
		tag, err := tx.Exec(ctx, `DELETE FROM posted_events WHERE (tenant_id, id) IN (
				SELECT tenant_id, id FROM posted_events WHERE received_at < now() - make_interval(secs => $1)
				ORDER BY received_at LIMIT $2)`, olderThan.Seconds(), limit)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `DELETE FROM event_dedup WHERE (tenant_id, dedup_key) IN (
				SELECT tenant_id, dedup_key FROM event_dedup WHERE expires_at < now() ORDER BY expires_at LIMIT $1)`, limit)
		return err
	})
	if err != nil {
		return 0, false, wrap("delete expired events", err)
	}
	return n, turn, nil
}
