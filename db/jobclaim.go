package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
)

// jobCompleted is River's completed state, as a SQL literal.
var jobCompleted = stateLit(string(rivertype.JobStateCompleted))

// ClaimJobs takes the available River jobs among ids for River client
// client, as River's fetch takes a job for a worker: running, its
// attempt one higher, attempted now by client (the replica's River
// client, so that a dead replica's claims are resumed like its fetches:
// ResumeJobsOf). It returns the ids it took; a job River fetched first,
// or one that is gone, is not among them.
func ClaimJobs(ctx context.Context, q Querier, ids []int64, client string) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `UPDATE river_job SET state = `+jobRunning+`, attempt = attempt + 1, attempted_at = now(),
			attempted_by = array_append(attempted_by, $2::text)
		WHERE id = ANY ($1::bigint[]) AND state = `+jobAvailable+`
		RETURNING id`, ids, client)
	if err != nil {
		return nil, wrap("claim jobs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, wrap("claim jobs", err)
}

// EndClaimedJobs ends River jobs ClaimJobs took, still running: completed
// ones completed (River's cleaner removes them in time), released ones
// made available again at the attempt they had before the claim, so that
// River's next run of each is the run the claim stood for, with a
// notification of their queues (River fetches them at once). It commits
// without waiting for the flush: a lost end leaves the job running under
// its client, which the stranded-job release (ResumeJobsOf) or a dead
// replica's resume makes available again, and the job's next run finds
// its execution as the claim left it.
func EndClaimedJobs(ctx context.Context, q Querier, completed, released []int64) error {
	if len(completed) == 0 && len(released) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `WITH sync AS (SELECT set_config('synchronous_commit', 'off', true)),
		done AS (
			UPDATE river_job SET state = `+jobCompleted+`, finalized_at = now()
			WHERE id = ANY ($1::bigint[]) AND state = `+jobRunning+` AND (SELECT true FROM sync)
			RETURNING id),
		back AS (
			UPDATE river_job SET state = `+jobAvailable+`, attempt = greatest(attempt - 1, 0), scheduled_at = now()
			WHERE id = ANY ($2::bigint[]) AND state = `+jobRunning+` AND (SELECT true FROM sync)
			RETURNING queue)
		SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', queue)::text)
		FROM (SELECT DISTINCT queue FROM back) b`, completed, released)
	return wrap("end claimed jobs", err)
}
