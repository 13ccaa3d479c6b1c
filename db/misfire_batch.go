package db

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The batched misfire decision: when deliveries fall behind (a backlog,
// an outage, overload), the first fires of recurring tasks are misfires,
// which the batched start (StartPendingDeliveries) leaves alone. Rather
// than one transaction per execution on the row-by-row path, the attempts
// the start left are decided in one transaction per batch: LockMisfires
// locks the misfires DecidesMisfireInBatch admits and their tasks,
// GetDeliveriesForUpdate reads their facts as GetDeliveryForUpdate does
// (after the locks, in a statement of its own, so that it sees what a
// concurrent decision of the task committed), service decides each one
// (decideStart, in the order of the task's slots) and ApplyMisfireDecisions
// writes the verdicts: late starts, misses, and each task's row once.

// DecidesMisfireInBatch is the condition under which the batched misfire
// decision takes an attempt, over the execution e, its task t, its
// endpoint ep (the inner joins require both to exist) and the request i
// (as in StartsWithoutDecision), with m.cut in scope: the SQL mirror of
// service's startRules.batchesMisfire. It admits a misfire
// (MisfiredFirstFire) that decideStart sends late or misses, from the
// execution, task and endpoint rows and the facts GetDeliveryForUpdate
// reads, with no other write than the ones ApplyMisfireDecisions makes:
// a pending execution, not held nor cancel-requested, of a task that is
// not paused, allows overlap and has an attempt left, to an enabled
// endpoint without limits; not a one-shot fire_once task's (the batched
// start sends those, or the row-by-row path decides them) and not a
// sharded execution (its shards' catch-up is the row-by-row path's).
var DecidesMisfireInBatch = `e.state = ` + execPending + ` AND NOT e.cancel_requested AND e.held_at IS NULL
	AND (i.job_id = 0 OR e.river_job_id IS NULL OR e.river_job_id = i.job_id)
	AND t.state <> ` + taskPaused + `
	AND t.overlap_policy = 'allow'
	AND e.attempts - e.attempts_base < t.max_attempts
	AND ` + MisfiredFirstFire + `
	AND NOT (t.misfire_policy = 'fire_once' AND t.schedule_type = 'once')
	AND e.shard_count = 1
	AND ep.enabled
	AND ep.max_concurrency IS NULL AND ep.rate_limit_per_second IS NULL AND NOT i.tenant_limited`

// LockMisfires locks those of keys that DecidesMisfireInBatch admits,
// then their tasks in (tenant_id, id) order, and returns the indexes in
// keys of those whose task it locked. Run it in a transaction (q a
// pgx.Tx) that reads and decides them next. It waits for no lock: an
// execution or a task another transaction holds is skipped (SKIP LOCKED),
// and its misfires are left to the row-by-row path, which waits for the
// task. A batch waiting for every one of its tasks would wait for the
// slowest holder — the scheduler claims a thousand tasks at a time for
// as long as it takes to materialise their slots — and stall all of its
// executions meanwhile.
func LockMisfires(ctx context.Context, q Querier, keys []DeliveryKey, misfire Misfire) ([]int, error) {
	tenants, ids := make([]string, len(keys)), make([]string, len(keys))
	jobs, limited := make([]int64, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		tenants[i], ids[i], jobs[i], limited[i] = k.TenantID, k.ID, k.JobID, k.TenantLimited
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("lock misfires", err)
	}
	rows, err := q.Query(ctx, `WITH input AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::bigint[], $4::bool[]) WITH ORDINALITY
				AS i(tenant_id, id, job_id, tenant_limited, ord)
		), m AS (
			SELECT now() - make_interval(secs => $5) AS cut
		), cand AS (
			SELECT i.ord, e.tenant_id, e.task_id
			FROM input i
			CROSS JOIN m
			CROSS JOIN LATERAL (
				SELECT e.tenant_id, e.id, e.task_id, e.scheduled_for, e.trigger, e.state, e.cancel_requested,
					e.first_started_at, e.river_job_id, e.attempts, e.attempts_base, e.held_at, e.shard_count
				FROM executions e
				WHERE e.tenant_id = i.tenant_id AND e.id = i.id
				OFFSET 0 FOR UPDATE SKIP LOCKED
			) e
			CROSS JOIN LATERAL (
				SELECT * FROM tasks t WHERE t.tenant_id = e.tenant_id AND t.id = e.task_id OFFSET 0
			) t
			CROSS JOIN LATERAL (
				SELECT * FROM endpoints ep WHERE ep.tenant_id = e.tenant_id AND ep.id = t.endpoint_id OFFSET 0
			) ep
			WHERE `+DecidesMisfireInBatch+`
		), locked AS (
			SELECT t.tenant_id, t.id FROM (SELECT DISTINCT tenant_id, task_id FROM cand) c
			CROSS JOIN LATERAL (
				SELECT t.tenant_id, t.id FROM tasks t WHERE t.tenant_id = c.tenant_id AND t.id = c.task_id OFFSET 0
			) t
			ORDER BY t.tenant_id, t.id
			FOR NO KEY UPDATE OF t SKIP LOCKED
		)
		SELECT c.ord FROM cand c
		WHERE EXISTS (SELECT 1 FROM locked l WHERE l.tenant_id = c.tenant_id AND l.id = c.task_id)
		ORDER BY c.ord`, tenants, uids, jobs, limited, misfire.Threshold.Seconds())
	if err != nil {
		return nil, wrap("lock misfires", err)
	}
	ords, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, wrap("lock misfires", err)
	}
	for i := range ords {
		ords[i]-- // WITH ORDINALITY counts from 1
	}
	return ords, nil
}

// GetDeliveriesForUpdate reads executions as GetDeliveryForUpdate does,
// each with its task, endpoint and facts, in the order of refs (an
// execution that does not exist is left out: check each row's ID). It
// takes no lock: the caller holds the executions' (LockMisfires).
func GetDeliveriesForUpdate(ctx context.Context, q Querier, refs []ExecutionRef, m Misfire) ([]DeliveryRow, error) {
	tenants, ids := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		tenants[i], ids[i] = r.TenantID, r.ID
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("read deliveries", err)
	}
	rows, err := q.Query(ctx, `SELECT `+deliveryColumns+`
		FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS i(tenant_id, id, ord)
		CROSS JOIN (SELECT now() - make_interval(secs => $3) AS cut) m
		JOIN executions e ON e.tenant_id = i.tenant_id AND e.id = i.id
		LEFT JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
		LEFT JOIN endpoints ep ON ep.tenant_id = t.tenant_id AND ep.id = t.endpoint_id
		ORDER BY i.ord`, tenants, uids, m.Threshold.Seconds(), m.CountMax)
	if err != nil {
		return nil, wrap("read deliveries", err)
	}
	var (
		out []DeliveryRow
		r   DeliveryRow
	)
	_, err = pgx.ForEachRow(rows, r.fields(), func() error {
		out = append(out, r)
		r = DeliveryRow{}
		return nil
	})
	if err != nil {
		return nil, wrap("read deliveries", err)
	}
	return out, nil
}

// MisfireDecisions are the verdicts of a batched misfire decision
// (service's decideStart), applied by ApplyMisfireDecisions.
type MisfireDecisions struct {
	// Starts are late fires: each moves to running under its lease, as
	// StartDelivery's late does, with its attempt_started event.
	Starts []MisfireStart
	// Misses end skipped, as EndDelivery does from pending (no attempt,
	// the status code kept), with their skipped event.
	Misses []MisfireMiss
	// Tasks are the tasks' rows to write: each once.
	Tasks []MisfireTask
}

// MisfireStart is a late fire to start.
type MisfireStart struct {
	ExecutionRef
	Lease int
	// Data is its attempt_started event's data.
	Data map[string]any
}

// MisfireMiss is a misfire to miss.
type MisfireMiss struct {
	ExecutionRef
	// Reason is its last_error and its skipped event's message; Data the
	// event's data.
	Reason string
	Data   map[string]any
}

// MisfireTask is what a batch decided for a task: CatchUp records its
// catch-up's start (RecordCatchUp), Missed adds to its missed_count
// (AddMissedSlot).
type MisfireTask struct {
	TenantID, ID string
	CatchUp      bool
	Missed       int
}

// ApplyMisfireDecisions writes d in one statement: the starts (their
// attempt counts are returned, in the order of d.Starts), the misses (out
// of unfinished_executions), their events, and the tasks' rows. The
// executions must be pending and locked by the transaction
// (LockMisfires); one that is not makes it fail, and the transaction
// must be rolled back.
func ApplyMisfireDecisions(ctx context.Context, q Querier, d MisfireDecisions) ([]int, error) {
	sTenants, sIDs, sLeases, sData := make([]string, len(d.Starts)), make([]string, len(d.Starts)),
		make([]int32, len(d.Starts)), make([]string, len(d.Starts))
	for i, s := range d.Starts {
		data, err := json.Marshal(s.Data)
		if err != nil {
			return nil, wrap("apply misfire decisions", err)
		}
		sTenants[i], sIDs[i], sLeases[i], sData[i] = s.TenantID, s.ID, int32(s.Lease), string(data) // River attempts are small
	}
	mTenants, mIDs, mReasons, mData := make([]string, len(d.Misses)), make([]string, len(d.Misses)),
		make([]string, len(d.Misses)), make([]string, len(d.Misses))
	for i, m := range d.Misses {
		data, err := json.Marshal(m.Data)
		if err != nil {
			return nil, wrap("apply misfire decisions", err)
		}
		mTenants[i], mIDs[i], mReasons[i], mData[i] = m.TenantID, m.ID, m.Reason, string(data)
	}
	tTenants, tIDs, tCatchUps, tMissed := make([]string, len(d.Tasks)), make([]string, len(d.Tasks)),
		make([]bool, len(d.Tasks)), make([]int32, len(d.Tasks))
	for i, t := range d.Tasks {
		tTenants[i], tIDs[i], tCatchUps[i], tMissed[i] = t.TenantID, t.ID, t.CatchUp, int32(t.Missed) // at most a batch
	}
	sUIDs, err := uuidArray(sIDs)
	if err != nil {
		return nil, wrap("apply misfire decisions", err)
	}
	mUIDs, err := uuidArray(mIDs)
	if err != nil {
		return nil, wrap("apply misfire decisions", err)
	}
	tUIDs, err := uuidArray(tIDs)
	if err != nil {
		return nil, wrap("apply misfire decisions", err)
	}
	rows, err := q.Query(ctx, `WITH s AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::int[], $4::text[]) WITH ORDINALITY AS s(tenant_id, id, lease, data, ord)
		), k AS (
			SELECT * FROM unnest($5::text[], $6::uuid[], $7::text[], $8::text[]) AS k(tenant_id, id, reason, data)
		), sent AS (
			UPDATE executions e SET state = `+execRunning+`, attempts = e.attempts + 1, lease_attempt = s.lease,
				started_at = coalesce(e.started_at, now()), next_attempt_at = NULL,
				first_started_at = coalesce(e.first_started_at, now()), late = true
			FROM s
			WHERE e.tenant_id = s.tenant_id AND e.id = s.id AND e.state = `+execPending+`
			RETURNING s.ord, e.tenant_id, e.id, e.attempts, s.data
		), missed AS (
			UPDATE executions e SET state = `+execSkipped+`, finished_at = now(), next_attempt_at = NULL,
				last_error = k.reason, last_error_class = NULL
			FROM k
			WHERE e.tenant_id = k.tenant_id AND e.id = k.id AND e.state = `+execPending+`
			RETURNING e.tenant_id, e.task_id, e.scheduled_for, e.id, k.reason, k.data
		), closed AS (
			DELETE FROM unfinished_executions u USING missed d
			WHERE u.tenant_id = d.tenant_id AND u.task_id = d.task_id AND u.scheduled_for = d.scheduled_for AND u.id = d.id
		), events AS (
			INSERT INTO execution_events (tenant_id, execution_id, type, attempt, message, data)
			SELECT tenant_id, id, 'attempt_started', attempts, NULL, data::jsonb FROM sent
			UNION ALL
			SELECT tenant_id, id, 'skipped', NULL, reason, data::jsonb FROM missed
		), tasks_written AS (
			UPDATE tasks t SET caught_up_at = CASE WHEN x.catch_up THEN now() ELSE t.caught_up_at END,
				missed_count = t.missed_count + x.missed
			FROM unnest($9::text[], $10::uuid[], $11::bool[], $12::int[]) AS x(tenant_id, id, catch_up, missed)
			WHERE t.tenant_id = x.tenant_id AND t.id = x.id
		)
		SELECT ord, attempts FROM sent
		UNION ALL
		SELECT 0, 0 FROM missed`,
		sTenants, sUIDs, sLeases, sData, mTenants, mUIDs, mReasons, mData, tTenants, tUIDs, tCatchUps, tMissed)
	if err != nil {
		return nil, wrap("apply misfire decisions", err)
	}
	attempts := make([]int, len(d.Starts))
	var ord, n, misses int
	_, err = pgx.ForEachRow(rows, []any{&ord, &n}, func() error {
		if ord == 0 {
			misses++
			return nil
		}
		attempts[ord-1] = n
		return nil
	})
	if err != nil {
		return nil, wrap("apply misfire decisions", err)
	}
	started := 0
	for _, a := range attempts {
		if a > 0 {
			started++
		}
	}
	if started != len(d.Starts) || misses != len(d.Misses) {
		return nil, wrap("apply misfire decisions", fmt.Errorf("%d of %d starts and %d of %d misses matched a pending execution",
			started, len(d.Starts), misses, len(d.Misses)))
	}
	return attempts, nil
}
