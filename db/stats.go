package db

import (
	"context"
	"fmt"
	"time"
)

// idSkewMargin widens the id range of a stats window: execution ids are
// UUIDv7 minted by ax's clock, created_at is the database's, and the two
// may disagree a little.
const idSkewMargin = 5 * time.Minute

// uuidV7Floor returns the smallest UUIDv7 minted at or after t: its first
// 48 bits are t's Unix milliseconds. Execution ids are UUIDv7, so "id >=
// floor" turns a time window into a range of the (tenant_id, id) primary
// key, where a filter on created_at alone would read the tenant's whole
// history.
func uuidV7Floor(t time.Time) string {
	ms := max(t.UnixMilli(), 0)
	return fmt.Sprintf("%08x-%04x-0000-0000-000000000000", uint64(ms)>>16, uint64(ms)&0xffff)
}

// OnTimeFire and FiringLatenessMS are service.FiringLateness in SQL over
// an executions row (unqualified columns): the executions that have a
// firing lateness — scheduled fires (trigger schedule), not misfire
// catch-ups (late), whose first attempt started — and that lateness in
// milliseconds, first attempt start − slot, never below 0. A table test
// runs every case through both.
const (
	OnTimeFire       = `(trigger = 'schedule' AND NOT late AND first_started_at IS NOT NULL)`
	FiringLatenessMS = `greatest(extract(epoch FROM first_started_at - scheduled_for) * 1000, 0)`
)

// ExecutionStats summarises a tenant's executions created in a window.
type ExecutionStats struct {
	// ByState counts executions per state; states without any are absent.
	ByState map[string]int64
	// Late counts misfire catch-ups (late = true).
	Late int64
	// Latency is the duration of delivery attempts (attempt_succeeded and
	// attempt_failed events, stored or implied by the execution row) in
	// milliseconds.
	Latency Percentiles
	// Lateness is the firing lateness (FiringLatenessMS) of the on-time
	// fires (OnTimeFire).
	Lateness Percentiles
}

// Percentiles are the 50th and 99th percentiles (interpolated) of Count
// samples; nil without samples.
type Percentiles struct {
	Count    int64
	P50, P99 *float64
}

// GetExecutionStats summarises the executions of tenant created at or
// after since. Each query is a range scan of a primary key bounded by the
// window (see uuidV7Floor).
func GetExecutionStats(ctx context.Context, q Querier, tenant string, since time.Time) (ExecutionStats, error) {
	floor := uuidV7Floor(since.Add(-idSkewMargin))
	out := ExecutionStats{ByState: map[string]int64{}}
	rows, err := q.Query(ctx, `SELECT state, count(*), count(*) FILTER (WHERE late)
		FROM executions WHERE tenant_id = $1 AND id >= $2::uuid AND created_at >= $3
		GROUP BY state`, tenant, floor, since)
	if err != nil {
		return out, wrap("count executions", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			state   string
			n, late int64
		)
		if err := rows.Scan(&state, &n, &late); err != nil {
			return out, wrap("count executions", err)
		}
		out.ByState[state], out.Late = n, out.Late+late
	}
	if err := rows.Err(); err != nil {
		return out, wrap("count executions", err)
	}

	out.Lateness, err = percentiles(ctx, q, `SELECT count(*),
			percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY `+FiringLatenessMS+`)
		FROM executions WHERE tenant_id = $1 AND id >= $2::uuid AND created_at >= $3
		  AND `+OnTimeFire, tenant, floor, since)
	if err != nil {
		return out, wrap("firing lateness", err)
	}
	// The events' primary key (tenant_id, execution_id, seq) is ranged by
	// the same floor. A success implied by its execution row
	// (ImplicitSucceeded) keeps its latency in last_latency_ms.
	out.Latency, err = percentiles(ctx, q, `SELECT count(*),
			percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY latency_ms)
		FROM (
			SELECT v.latency_ms
			FROM executions e
			JOIN execution_events v ON v.tenant_id = e.tenant_id AND v.execution_id = e.id
			WHERE e.tenant_id = $1 AND e.id >= $2::uuid AND e.created_at >= $3
			  AND v.execution_id >= $2::uuid
			  AND v.type IN ('attempt_succeeded', 'attempt_failed') AND v.latency_ms IS NOT NULL
			UNION ALL
			SELECT e.last_latency_ms FROM executions e
			WHERE e.tenant_id = $1 AND e.id >= $2::uuid AND e.created_at >= $3
			  AND e.implicit_events & 4 <> 0 AND e.last_latency_ms IS NOT NULL
		) l`, tenant, floor, since)
	if err != nil {
		return out, wrap("delivery latency", err)
	}
	return out, nil
}

func percentiles(ctx context.Context, q Querier, sql string, args ...any) (Percentiles, error) {
	var (
		p  Percentiles
		ps []float64
	)
	if err := q.QueryRow(ctx, sql, args...).Scan(&p.Count, &ps); err != nil {
		return p, translate(err)
	}
	if len(ps) == 2 {
		p.P50, p.P99 = &ps[0], &ps[1]
	}
	return p, nil
}

// CountTasksByState counts a tenant's tasks per state; states without any
// are absent.
func CountTasksByState(ctx context.Context, q Querier, tenant string) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT state, count(*) FROM tasks WHERE tenant_id = $1 AND workflow_id IS NULL GROUP BY state`, tenant)
	if err != nil {
		return nil, wrap("count tasks", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			state string
			n     int64
		)
		if err := rows.Scan(&state, &n); err != nil {
			return nil, wrap("count tasks", err)
		}
		out[state] = n
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("count tasks", err)
	}
	return out, nil
}

// CountEndpoints counts a tenant's enabled and disabled endpoints.
func CountEndpoints(ctx context.Context, q Querier, tenant string) (enabled, disabled int64, err error) {
	err = q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE enabled), count(*) FILTER (WHERE NOT enabled)
		FROM endpoints WHERE tenant_id = $1`, tenant).Scan(&enabled, &disabled)
	if err != nil {
		return 0, 0, wrap("count endpoints", err)
	}
	return enabled, disabled, nil
}

// JobCount is the number of River jobs of a queue in a state.
type JobCount struct {
	Queue, State string
	Count        int64
}

// CountUnfinishedJobs counts River's jobs that are not finished (available,
// pending, retryable, running, scheduled) by queue and state, across
// tenants (River's jobs carry no tenant column). Finished jobs are left
// out: counting them would scan a day of history.
func CountUnfinishedJobs(ctx context.Context, q Querier) ([]JobCount, error) {
	rows, err := q.Query(ctx, `SELECT queue, state::text, count(*) FROM river_job
		WHERE state IN `+liveJobStates+` GROUP BY 1, 2`)
	if err != nil {
		return nil, wrap("count river jobs", err)
	}
	defer rows.Close()
	var out []JobCount
	for rows.Next() {
		var c JobCount
		if err := rows.Scan(&c.Queue, &c.State, &c.Count); err != nil {
			return nil, wrap("count river jobs", err)
		}
		out = append(out, c)
	}
	return out, wrap("count river jobs", rows.Err())
}

// SeriesBucket is one step of a tenant's executions over time: those
// created in [since + Index*step, since + (Index+1)*step).
type SeriesBucket struct {
	Index int
	// Executions counts them all; Succeeded and Failed those in that
	// state now; Late the misfire catch-ups.
	Executions, Succeeded, Failed, Late int64
	// Lateness is the firing lateness of the step's on-time fires (as in
	// ExecutionStats).
	Lateness Percentiles
}

// ExecutionSeries counts the executions of tenant created in [since,
// since + n*step) per step, oldest first; steps without any are absent.
// One range scan of the primary key bounded by the window (see
// uuidV7Floor), grouped by step.
func ExecutionSeries(ctx context.Context, q Querier, tenant string, since time.Time, step time.Duration, n int) ([]SeriesBucket, error) {
	floor := uuidV7Floor(since.Add(-idSkewMargin))
	until := since.Add(time.Duration(n) * step)
	rows, err := q.Query(ctx, `SELECT floor(extract(epoch FROM created_at - $3::timestamptz) / $5::float8)::int,
			count(*), count(*) FILTER (WHERE state = `+execSucceeded+`), count(*) FILTER (WHERE state = `+execFailed+`),
			count(*) FILTER (WHERE late),
			count(*) FILTER (WHERE `+OnTimeFire+`),
			percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY `+FiringLatenessMS+`)
				FILTER (WHERE `+OnTimeFire+`)
		FROM executions WHERE tenant_id = $1 AND id >= $2::uuid AND created_at >= $3 AND created_at < $4
		GROUP BY 1 ORDER BY 1`, tenant, floor, since, until, step.Seconds())
	if err != nil {
		return nil, wrap("execution series", err)
	}
	defer rows.Close()
	var out []SeriesBucket
	for rows.Next() {
		var (
			b  SeriesBucket
			ps []float64
		)
		if err := rows.Scan(&b.Index, &b.Executions, &b.Succeeded, &b.Failed, &b.Late, &b.Lateness.Count, &ps); err != nil {
			return nil, wrap("execution series", err)
		}
		if len(ps) == 2 {
			b.Lateness.P50, b.Lateness.P99 = &ps[0], &ps[1]
		}
		if b.Index >= 0 && b.Index < n { // created_at < until bounds it; the guard keeps the caller's slice safe
			out = append(out, b)
		}
	}
	return out, wrap("execution series", rows.Err())
}
