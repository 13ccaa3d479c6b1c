package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Calendar is a row of calendars. Dates are local dates ("2027-01-01"),
// sorted and without duplicates.
type Calendar struct {
	TenantID  string    `db:"tenant_id"`
	ID        string    `db:"id"`
	Name      string    `db:"name"`
	Timezone  string    `db:"timezone"`
	Dates     []string  `db:"dates"`
	Version   int32     `db:"version"`
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

const calendarColumns = `tenant_id, id::text, name, timezone, dates::text[] AS dates, version, created_at, updated_at`

// InsertCalendar stores a new calendar and returns the stored row.
func InsertCalendar(ctx context.Context, q Querier, c Calendar) (Calendar, error) {
	rows, err := q.Query(ctx, `INSERT INTO calendars (tenant_id, id, name, timezone, dates)
		VALUES ($1, $2, $3, $4, $5::text[]::date[]) RETURNING `+calendarColumns, c.TenantID, c.ID, c.Name, c.Timezone, c.Dates)
	return collectOne[Calendar](rows, err)
}

// GetCalendar returns one calendar; with forUpdate it locks the row.
func GetCalendar(ctx context.Context, q Querier, tenant, id string, forUpdate bool) (Calendar, error) {
	sql := `SELECT ` + calendarColumns + ` FROM calendars WHERE tenant_id = $1 AND id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, tenant, id)
	return collectOne[Calendar](rows, err)
}

// GetCalendars returns the tenant's calendars of ids that exist, in no
// particular order. With share it locks them against a concurrent delete
// or change until the transaction ends (a task that names them is being
// written).
func GetCalendars(ctx context.Context, q Querier, tenant string, ids []string, share bool) ([]Calendar, error) {
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("load calendars", err)
	}
	sql := `SELECT ` + calendarColumns + ` FROM calendars WHERE tenant_id = $1 AND id = ANY ($2::uuid[])`
	if share {
		sql += ` FOR SHARE`
	}
	rows, err := q.Query(ctx, sql, tenant, uids)
	if err != nil {
		return nil, wrap("load calendars", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Calendar])
	return out, wrap("load calendars", err)
}

// ListCalendars returns up to limit calendars with ids below before ("" for
// the first page), newest first.
func ListCalendars(ctx context.Context, q Querier, tenant, before string, limit int) ([]Calendar, error) {
	rows, err := q.Query(ctx, `SELECT `+calendarColumns+` FROM calendars
		WHERE tenant_id = $1 AND ($2 = '' OR id < NULLIF($2, '')::uuid) ORDER BY id DESC LIMIT $3`, tenant, before, limit)
	if err != nil {
		return nil, wrap("list calendars", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Calendar])
	return out, wrap("list calendars", err)
}

// UpdateCalendar writes c's mutable fields, bumps its version and returns
// the stored row.
func UpdateCalendar(ctx context.Context, q Querier, c Calendar) (Calendar, error) {
	rows, err := q.Query(ctx, `UPDATE calendars SET name = $3, timezone = $4, dates = $5::text[]::date[],
		version = version + 1, updated_at = now()
		WHERE tenant_id = $1 AND id = $2 RETURNING `+calendarColumns, c.TenantID, c.ID, c.Name, c.Timezone, c.Dates)
	return collectOne[Calendar](rows, err)
}

// DeleteCalendar deletes a calendar and reports whether it existed.
func DeleteCalendar(ctx context.Context, q Querier, tenant, id string) (bool, error) {
	tag, err := q.Exec(ctx, `DELETE FROM calendars WHERE tenant_id = $1 AND id = $2`, tenant, id)
	if err != nil {
		return false, wrap("delete calendar", err)
	}
	return tag.RowsAffected() == 1, nil
}

// CalendarUser is a task or a workflow whose schedule excludes a calendar.
type CalendarUser struct {
	// Kind is "task" or "workflow".
	Kind     string
	ID, Name string
}

// CalendarUsers returns up to limit of the tenant's tasks and workflows
// whose schedule excludes calendar id, tasks first, each kind by name, and
// how many tasks and workflows do in all. A workflow's hidden node tasks
// have no calendars of their own.
func CalendarUsers(ctx context.Context, q Querier, tenant, id string, limit int) (users []CalendarUser, tasks, workflows int64, err error) {
	rows, err := q.Query(ctx, `SELECT kind, id::text, name,
			count(*) FILTER (WHERE kind = 'task') OVER (), count(*) FILTER (WHERE kind = 'workflow') OVER ()
		FROM (
			SELECT 'task' AS kind, id, name FROM tasks
			WHERE tenant_id = $1 AND workflow_id IS NULL AND exclude_calendars @> ARRAY[$2::uuid]
			UNION ALL
			SELECT 'workflow', id, name FROM workflows
			WHERE tenant_id = $1 AND exclude_calendars @> ARRAY[$2::uuid]
		) u
		ORDER BY kind, name LIMIT $3`, tenant, id, limit)
	if err != nil {
		return nil, 0, 0, wrap("list a calendar's users", err)
	}
	defer rows.Close()
	for rows.Next() {
		var u CalendarUser
		if err := rows.Scan(&u.Kind, &u.ID, &u.Name, &tasks, &workflows); err != nil {
			return nil, 0, 0, wrap("list a calendar's users", err)
		}
		users = append(users, u)
	}
	return users, tasks, workflows, wrap("list a calendar's users", rows.Err())
}

// TasksUsingCalendar returns the ids of the tenant's tasks whose schedule
// excludes the calendar, locked for update, at most limit of them.
func TasksUsingCalendar(ctx context.Context, q Querier, tenant, id string, limit int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id::text FROM tasks
		WHERE tenant_id = $1 AND exclude_calendars @> ARRAY[$2::uuid] AND exclude_calendars <> '{}'
		ORDER BY id LIMIT $3 FOR UPDATE`, tenant, id, limit)
	if err != nil {
		return nil, wrap("find tasks using a calendar", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap("find tasks using a calendar", err)
}
