package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// FairTick is the unit of a fair order: the n-th due job of a tenant is
// placed n ticks after the queue's head (ShareQueues).
const FairTick = time.Microsecond

// FairSlack is how many ticks a tenant's due jobs may be off their fair
// place before ShareQueues rewrites them (all of that tenant's, so that
// its own order is kept): while another tenant's job waits at the head,
// the head does not move, and the jobs River takes meanwhile would
// otherwise shift every other tenant's backlog by as many ticks each
// pass.
const FairSlack = 64

// ShareQueues makes River start the due jobs of queues round-robin across
// tenants, within each priority, where a backlog has formed: a (queue,
// priority) whose oldest due available job has been due for more than
// after. River takes available jobs by (priority, scheduled_at, id), and
// a due job's scheduled_at matters for nothing but that order, so each
// due job of such a queue is given the scheduled_at "head + n ticks",
// where head is the oldest due job's and n the job's rank among its
// tenant's due jobs (by scheduled_at, id): the first job of every tenant,
// then the second of every tenant, and so on. A tenant's own order is
// kept, and a tenant that arrives behind another's backlog is placed at
// the head. Only the jobs of tenants whose jobs are more than FairSlack
// ticks off their places are rewritten, and the keys are stable: as River
// takes jobs from the head, the ranks and the head move together, so a
// later pass rewrites only a tenant whose jobs arrived since (a job's key
// is never later than now, so it stays due). Nothing is rewritten while a
// single tenant has due jobs there.
//
// Whether a second tenant has available jobs in a queue and priority is
// asked first, in two probes of river_job_available_tenant_idx (the
// last tenant, from its newest job, then any before it): a backlog of
// one tenant alone, a burst's, costs no read of its jobs.
//
// A job's tenant (jobTenant) is its args' tenant_id, or a batch's first tenant
// (DeliverBatchArgs, packed: "tenants"; or its first execution's in the
// older object array); the scheduler keeps batches to one tenant.
// Rows locked by a fetch are skipped, never waited for. It returns the
// jobs reordered. When no backlog has formed, or one tenant alone has
// available jobs, it costs one statement of index probes (the oldest due
// job and the first two tenants of each queue and priority).
func ShareQueues(ctx context.Context, q Querier, queues []string, after time.Duration) (int64, error) {
	rows, err := q.Query(ctx, `SELECT q, p FROM unnest($1::text[]) q, generate_series(1, 4) p
		WHERE (SELECT min(scheduled_at) FROM river_job
			WHERE state = `+jobAvailable+` AND queue = q AND priority = p AND scheduled_at <= now()) < now() - $2::interval
		AND EXISTS (SELECT FROM river_job j
			WHERE state = `+jobAvailable+` AND queue = q AND priority = p AND `+jobTenant+` < (
				SELECT `+jobTenant+` FROM river_job j
				WHERE state = `+jobAvailable+` AND queue = q AND priority = p ORDER BY 1 DESC LIMIT 1))`,
		queues, after)
	if err != nil {
		return 0, wrap("find backlogs", err)
	}
	type backlog struct {
		queue    string
		priority int16
	}
	var (
		b        backlog
		backlogs []backlog
	)
	if _, err := pgx.ForEachRow(rows, []any{&b.queue, &b.priority}, func() error {
		backlogs = append(backlogs, b)
		return nil
	}); err != nil {
		return 0, wrap("find backlogs", err)
	}
	var n int64
	for _, b := range backlogs {
		tag, err := q.Exec(ctx, `WITH due AS (
				SELECT id, scheduled_at, `+jobTenant+` AS tenant
				FROM river_job j
				WHERE state = `+jobAvailable+` AND queue = $1 AND priority = $2 AND scheduled_at <= now()
			), head AS MATERIALIZED (
				SELECT min(scheduled_at) AS at, count(DISTINCT tenant) AS tenants FROM due
			), keyed AS (
				SELECT d.id, d.tenant, d.scheduled_at AS was,
					least(h.at + (row_number() OVER (PARTITION BY d.tenant ORDER BY d.scheduled_at, d.id) - 1) * $3::interval, now()) AS at
				FROM due d, head h
				WHERE h.tenants > 1
			), off AS (
				SELECT tenant FROM keyed GROUP BY tenant HAVING max(abs(extract(epoch FROM was - at))) > $4
			), moved AS (
				SELECT j.id, k.at FROM river_job j JOIN keyed k ON k.id = j.id JOIN off o ON o.tenant = k.tenant
				WHERE j.state = `+jobAvailable+` AND j.scheduled_at <> k.at
				FOR UPDATE OF j SKIP LOCKED
			)
			UPDATE river_job j SET scheduled_at = m.at FROM moved m WHERE j.id = m.id`, b.queue, b.priority, FairTick,
			(FairSlack * FairTick).Seconds())
		if err != nil {
			return n, wrap("share queue "+b.queue, err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
