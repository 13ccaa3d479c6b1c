package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The deliver worker's common case — a pending execution of an active task
// that allows overlap, sent to an enabled endpoint, and then a 2xx — runs
// as one statement per batch of deliveries for each of its two steps. The
// conditions are named predicates (StartsWithoutDecision,
// SucceedsWithoutDecision) that hold exactly when the row-by-row path
// (GetDeliveryForUpdate, StartDelivery, GetDeliveryOutcome, EndDelivery,
// with service's decision functions) would reach the same outcome; an
// execution a batch leaves alone takes that path. Results are keyed by their request's position (WITH ORDINALITY):
// neither a stale attempt batched with the current one nor an id spelled in
// upper case can take or miss a result. Pending rows another transaction
// holds are skipped by the start (SKIP LOCKED) and left to the row-by-row
// path, so a start never waits on a pause or a cancel.
//
// Each execution, its task and its endpoint are found by primary key in
// LATERAL subqueries the planner may not flatten (OFFSET 0); the start
// locks the execution there (FOR UPDATE yields its newest version, which
// the conditions then check) and updates it by its ctid, without a second
// look-up in the primary key. A row updated and committed after the
// statement's snapshot is locked in its new version, which that snapshot
// cannot see: the update then leaves it alone, and it takes the row-by-row
// path. A join the planner were free to reorder would,
// with the statistics of a table that grew within seconds, start from an
// index on state and visit every pending execution of the tenant for each
// one of the batch. The pool these run on keeps generic plans and rules
// out sequential scans, hash and merge joins (cmd/server), so the plan is
// the same whatever the statistics said when it was made.

// StartsWithoutDecision is the condition under which the batched start
// (StartPendingDeliveries) takes an attempt: the SQL mirror of
// service.startDecision.Batch, over the execution e, its task t, its endpoint
// ep (the inner joins require both to exist) and the request i (its job_id,
// 0 when not checked; tenant_limited, whether the tenant's deliveries
// pass its gate). It admits exactly the first sends of pending
// executions that service.decideStart would send without reading more
// than these rows; every other attempt takes the row-by-row path, which
// asks decideStart itself. A rule added to decideStart is added here too
// (service.TestStartDecisionAgreesWithTheBatch fails until it is).
// m.cut is the misfire cut (MisfiredFirstFire). A misfire is taken only
// when SendsLateWithoutDecision holds; the CASE keeps its probe off every
// on-time start.
var StartsWithoutDecision = `e.state = ` + execPending + ` AND NOT e.cancel_requested AND e.held_at IS NULL
	AND (i.job_id = 0 OR e.river_job_id IS NULL OR e.river_job_id = i.job_id)
	AND (t.state <> ` + taskPaused + ` OR e.trigger = 'manual')
	AND t.overlap_policy = 'allow'
	AND e.attempts - e.attempts_base < t.max_attempts
	AND CASE WHEN ` + MisfiredFirstFire + ` THEN ` + SendsLateWithoutDecision + ` ELSE true END
	AND ep.enabled
	AND ep.max_concurrency IS NULL AND ep.rate_limit_per_second IS NULL AND NOT i.tenant_limited`

// SendsLateWithoutDecision is the condition under which the batched start
// sends a misfire (MisfiredFirstFire) late, over the execution e and its
// task t: the SQL mirror of service's startRules.batchesLate. The task is
// a one-shot (schedule once) fire_once task, so the late send stands for
// no other slot: it takes no task row lock and records no catch-up. No
// catch-up of the task started at or after its slot (caughtUp) and no
// later misfire of the task waits to be decided (laterMisfire), either of
// which would miss it.
var SendsLateWithoutDecision = `(t.misfire_policy = 'fire_once' AND t.schedule_type = 'once'
	AND NOT coalesce(` + caughtUp + `, false) AND NOT ` + laterMisfire + `)`

// SucceedsWithoutDecision is the condition under which the batched
// success (SucceedDeliveries) records a 2xx: the SQL mirror of
// service.finishDecision.Batch, over the execution e and the request i
// (its lease): the attempt owns the running execution, it is no workflow
// node's (a node's success advances its run, in the row-by-row path), and
// it holds no permit of the delivery limits (its release is the row-by-row
// path's). Every other outcome takes the row-by-row path
// (service.TestFinishDecisionAgreesWithTheBatch).
var SucceedsWithoutDecision = `e.state = ` + execRunning + ` AND e.lease_attempt = i.lease AND e.workflow_run_id IS NULL
	AND NOT EXISTS (SELECT 1 FROM flow_permits p WHERE p.tenant_id = e.tenant_id AND p.execution_id = e.id)`

// ExecutionRef names an execution.
type ExecutionRef struct {
	TenantID string
	ID       string
}

// DeliveryKey names one River attempt of an execution.
type DeliveryKey struct {
	ExecutionRef
	Lease int
	// JobID is the River job making the attempt: an execution whose
	// river_job_id names another job is not its to start. 0: not checked.
	JobID int64
	// TenantLimited: the tenant's deliveries pass its gate (its delivery
	// limits), which only the row-by-row path admits through; the
	// batched start leaves it alone.
	TenantLimited bool
}

// StartPendingDeliveries moves each pending execution whose delivery needs
// no decision (not cancel-requested; not a misfire; its task exists, is
// not paused unless the execution was triggered manually, allows overlap
// and has an attempt left; its endpoint exists and is enabled) to running
// under its lease as its next attempt — its attempt_started event implied
// by the row (ImplicitStarted) for the execution's first start ever,
// stored for a start after an API retry — and returns the started rows as
// GetDeliveryForUpdate would have read them, keyed by their index in keys.
// A misfire SendsLateWithoutDecision admits is started as a late fire, as
// StartDelivery's late does: marked late, its attempt_started event stored
// with the late fire's data (late, lateness_ms, misfire_policy, as
// service's Begin writes them), never implied; its row comes back with
// Late set.
// misfire.Threshold is the misfire threshold (misfire.CountMax is unused:
// no fire_all misfire is batched).
// The others — including any another transaction has locked — are
// untouched and absent from the map.
func StartPendingDeliveries(ctx context.Context, q Querier, keys []DeliveryKey, misfire Misfire) (map[int]DeliveryRow, error) {
	tenants, ids, leases := make([]string, len(keys)), make([]string, len(keys)), make([]int32, len(keys))
	jobs, limited := make([]int64, len(keys)), make([]bool, len(keys))
	for i, k := range keys {
		tenants[i], ids[i], leases[i], jobs[i] = k.TenantID, k.ID, int32(k.Lease), k.JobID // River attempts are small
		limited[i] = k.TenantLimited
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("start deliveries", err)
	}
	rows, err := q.Query(ctx, `WITH input AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::int[], $4::bigint[], $6::bool[]) WITH ORDINALITY
				AS i(tenant_id, id, lease, job_id, tenant_limited, ord)
		), m AS (
			-- The start may commit without waiting for the WAL flush
			-- (deliverySessionParams says why).
			SELECT now() - make_interval(secs => $5) AS cut, set_config('synchronous_commit', 'off', true) AS async_commit
		), cur AS (
			SELECT i.ord, e.row, e.tenant_id, e.id, i.lease, e.first_started_at AS prev_first_started_at,
				`+MisfiredFirstFire+` AS late,
				floor(extract(epoch FROM now() - e.scheduled_for) * 1000)::bigint AS lateness_ms,
				t.schedule_type = 'once' AS single_slot,
				t.name AS task_name, t.state AS task_state, t.payload AS task_payload, t.timeout_ms AS task_timeout_ms,
				t.max_attempts, t.initial_backoff_ms, t.max_backoff_ms, t.overlap_policy, t.misfire_policy,
				ep.id AS endpoint_id, ep.url AS endpoint_url, ep.method AS endpoint_method, nullif(ep.headers, '{}') AS endpoint_headers,
				ep.secret, ep.previous_secret, ep.previous_secret_expires_at, ep.timeout_ms AS endpoint_timeout_ms,
				ep.enabled AS endpoint_enabled, t.completion_timeout_ms, t.heartbeat_timeout_ms,
				ep.max_concurrency AS endpoint_max_concurrency, ep.rate_limit_per_second AS endpoint_rate_limit
			FROM input i
			CROSS JOIN m
			CROSS JOIN LATERAL (
				SELECT e.ctid AS row, e.tenant_id, e.id, e.task_id, e.scheduled_for, e.trigger, e.state, e.cancel_requested,
					e.first_started_at, e.river_job_id, e.attempts, e.attempts_base, e.held_at
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
			WHERE `+StartsWithoutDecision+`
		), started AS (
			UPDATE executions e SET state = `+execRunning+`, attempts = e.attempts + 1, lease_attempt = c.lease,
				started_at = coalesce(e.started_at, now()), next_attempt_at = NULL,
				first_started_at = coalesce(e.first_started_at, now()), late = e.late OR c.late,
				implicit_events = e.implicit_events | CASE WHEN c.prev_first_started_at IS NULL AND NOT c.late THEN 2 ELSE 0 END
			FROM cur c
			WHERE e.ctid = c.row AND e.tenant_id = c.tenant_id AND e.id = c.id
			RETURNING c.ord, e.tenant_id, e.id, e.task_id, e.scheduled_for, e.trigger, e.state, e.attempts, e.attempts_base,
				e.lease_attempt, e.cancel_requested, e.payload, e.river_job_id, e.round,
				e.workflow_id, e.workflow_run_id, e.node, e.shard, e.shard_count, e.event_id, e.created_at, c.task_name, c.task_state, c.task_payload,
				c.task_timeout_ms, c.max_attempts, c.initial_backoff_ms, c.max_backoff_ms, c.overlap_policy, c.misfire_policy,
				c.endpoint_id, c.endpoint_url,
				c.endpoint_method, c.endpoint_headers, c.secret, c.previous_secret, c.previous_secret_expires_at,
				c.endpoint_timeout_ms, c.endpoint_enabled, c.completion_timeout_ms, c.heartbeat_timeout_ms,
				c.endpoint_max_concurrency, c.endpoint_rate_limit, c.prev_first_started_at, c.late, c.lateness_ms, c.single_slot
		), events AS (
			-- A late start's event says so, and which policy let it
			-- through (lateness_ms by the statement's clock, as Begin's
			-- by the row's now()).
			INSERT INTO execution_events (tenant_id, execution_id, type, attempt, data)
			SELECT tenant_id, id, 'attempt_started', attempts, CASE WHEN late THEN
					jsonb_build_object('late', true, 'lateness_ms', lateness_ms, 'misfire_policy', misfire_policy) END
			FROM started WHERE prev_first_started_at IS NOT NULL OR late
		)
		SELECT ord, late, tenant_id, id::text, task_id::text, scheduled_for, trigger, state, attempts, attempts_base,
			lease_attempt, cancel_requested, payload, river_job_id, round,
			workflow_id::text, workflow_run_id::text, node, shard, shard_count, event_id::text, created_at,
			prev_first_started_at IS NULL AS never_started, false AS held,
			true AS task_found, task_name, task_state, task_payload, task_timeout_ms, max_attempts,
			initial_backoff_ms, max_backoff_ms, overlap_policy, misfire_policy, 0 AS earlier_unfinished, 0 AS later_missed,
			false AS later_misfire, false AS caught_up, false AS catch_up_shard, single_slot,
			true AS endpoint_found, endpoint_id::text, endpoint_url, endpoint_method, endpoint_headers, secret,
			previous_secret, previous_secret_expires_at, endpoint_timeout_ms, endpoint_enabled,
			completion_timeout_ms, heartbeat_timeout_ms, false AS waiting, endpoint_max_concurrency, endpoint_rate_limit,
			now() AS now
		FROM started`, tenants, uids, leases, jobs, misfire.Threshold.Seconds(), limited)
	if err != nil {
		return nil, wrap("start deliveries", err)
	}
	out := make(map[int]DeliveryRow, len(keys))
	var (
		ord  int
		late bool
		r    DeliveryRow
	)
	// Scanned by position into the fields in their order (the SELECT lists
	// them so): named struct scanning was a twentieth of ax's CPU here.
	_, err = pgx.ForEachRow(rows, append([]any{&ord, &late}, r.fields()...), func() error {
		r.Late = late
		out[ord-1] = r
		r = DeliveryRow{}
		return nil
	})
	if err != nil {
		return nil, wrap("start deliveries", err)
	}
	return out, nil
}

// DeliverySuccess is a 2xx answer to a River attempt of an execution.
type DeliverySuccess struct {
	DeliveryKey
	StatusCode int
	LatencyMS  int
}

// SucceedDeliveries records 2xx outcomes: each execution still running
// under its lease becomes succeeded (the fence of EndDelivery) and leaves
// unfinished_executions, its attempt_succeeded and succeeded events
// implied by the row (ImplicitSucceeded, with last_latency_ms). It returns
// the attempt count of each execution it changed, keyed by its index in
// ok; the others (a newer attempt owns them, or they ended) are untouched
// and absent. Unlike the start it takes no lock ahead of its update (a
// lock is a write of its own, a fifth of the statement's cost): it may
// wait for a running execution's lock, but no statement holding one waits
// in turn — API commands and the row-by-row path lock one execution, and
// the cancel of a task's pending executions, which may keep the lock of a
// row it found running, skips every locked row (CancelPendingExecutions)
// — so it cannot deadlock. Tasks with a failure streak (a consecutive
// failure count that is not zero, or an alerted failure) are reset
// afterwards, in a statement of their own that locks them in id order,
// and each one whose streak was alerted is returned as a Recovery with
// the index in ok of its success (Recovered): the caller queues its
// recovered alert in the same transaction. A batch of tasks without a
// streak runs no second statement. Run both in one transaction (q a pgx.Tx), so that no
// success is visible before its task's reset: a failure of the task's next
// execution recorded in between would count on from the old count. The
// transaction then holds the succeeded executions' locks while it locks
// tasks; no statement holds a task's lock while it waits for an
// execution's (the cancel of pending executions skips locked rows, the
// row-by-row path locks its execution before its task, the scheduler
// claims tasks with SKIP LOCKED and only inserts executions), so this
// cannot deadlock either.
func SucceedDeliveries(ctx context.Context, q Querier, ok []DeliverySuccess) (map[int]int, []Recovered, error) {
	n := len(ok)
	tenants, ids, leases := make([]string, n), make([]string, n), make([]int32, n)
	codes, latencies := make([]int32, n), make([]int32, n)
	for i, s := range ok {
		tenants[i], ids[i], leases[i] = s.TenantID, s.ID, int32(s.Lease)               // small
		codes[i], latencies[i] = int32(s.StatusCode), int32(min(s.LatencyMS, 1<<31-1)) // bounded
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, nil, wrap("record successes", err)
	}
	rows, err := q.Query(ctx, `WITH input AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::int[], $4::int[], $5::int[]) WITH ORDINALITY
				AS i(tenant_id, id, lease, status_code, latency_ms, ord)
		), done AS (
			UPDATE executions e SET state = `+execSucceeded+`, finished_at = now(), next_attempt_at = NULL,
				last_status_code = i.status_code, last_latency_ms = i.latency_ms, last_error = NULL,
				last_error_class = NULL, implicit_events = e.implicit_events | 4
			FROM input i
			WHERE e.tenant_id = i.tenant_id AND e.id = i.id AND `+SucceedsWithoutDecision+`
			RETURNING i.ord, e.tenant_id, e.task_id, e.attempts, e.scheduled_for, e.id
		), closed AS (
			DELETE FROM unfinished_executions u USING done d
			WHERE u.tenant_id = d.tenant_id AND u.task_id = d.task_id AND u.scheduled_for = d.scheduled_for AND u.id = d.id
		)
		SELECT d.ord, d.attempts, t.id::text AS failing_task
		FROM done d
		LEFT JOIN LATERAL (
			SELECT t.id FROM tasks t
			WHERE t.tenant_id = d.tenant_id AND t.id = d.task_id AND (t.consecutive_failures <> 0 OR t.failure_alerted) OFFSET 0
		) t ON true`, tenants, uids, leases, codes, latencies)
	if err != nil {
		return nil, nil, wrap("record successes", err)
	}
	out := make(map[int]int, n)
	var reset []taskRef
	first := map[taskRef]int{} // a task's first success in ok
	var ord, attempts int
	var failing *string
	_, err = pgx.ForEachRow(rows, []any{&ord, &attempts, &failing}, func() error {
		out[ord-1] = attempts
		if failing != nil {
			ref := taskRef{tenant: ok[ord-1].TenantID, id: *failing}
			if _, seen := first[ref]; !seen {
				first[ref] = ord - 1
				reset = append(reset, ref)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("record successes", err)
	}
	if len(reset) == 0 {
		return out, nil, nil
	}
	alerted, err := resetTasksFailures(ctx, q, reset)
	if err != nil {
		return nil, nil, err
	}
	recovered := make([]Recovered, len(alerted))
	for i, r := range alerted {
		recovered[i] = Recovered{Recovery: r.Recovery, Index: first[taskRef{tenant: r.tenant, id: r.TaskID}]}
	}
	return out, recovered, nil
}

// Recovered is the alerted failure streak of a task that a success of a
// batch ended: Index is that success's index in the batch.
type Recovered struct {
	Recovery
	Index int
}

// taskRef names a task.
type taskRef struct{ tenant, id string }

// resetTasksFailures ends the failure streaks of tasks (ResetTaskFailures),
// locking them in (tenant, id) order so that concurrent resets cannot
// deadlock. It returns the streaks that were alerted, and only those: a
// task whose streak was not alerted costs no row of the answer.
func resetTasksFailures(ctx context.Context, q Querier, tasks []taskRef) ([]tenantRecovery, error) {
	tenants, ids := make([]string, len(tasks)), make([]string, len(tasks))
	for i, t := range tasks {
		tenants[i], ids[i] = t.tenant, t.id
	}
	rows, err := q.Query(ctx, `WITH locked AS (
			SELECT t.tenant_id, t.id, t.consecutive_failures, t.failure_alerted FROM unnest($1::text[], $2::uuid[]) AS i(tenant_id, id)
			CROSS JOIN LATERAL (
				SELECT t.tenant_id, t.id, t.consecutive_failures, t.failure_alerted FROM tasks t
				WHERE t.tenant_id = i.tenant_id AND t.id = i.id OFFSET 0
			) t
			ORDER BY t.tenant_id, t.id
			FOR UPDATE OF t
		), reset AS (
			UPDATE tasks t SET consecutive_failures = 0, failure_alerted = false FROM locked l
			WHERE t.tenant_id = l.tenant_id AND t.id = l.id AND (l.consecutive_failures <> 0 OR l.failure_alerted)
			RETURNING t.tenant_id, t.id::text AS task_id, l.consecutive_failures AS failures, l.failure_alerted AS alerted,
				t.alert_endpoint_id::text AS alert_endpoint_id
		)
		SELECT tenant_id, task_id, failures, alerted, alert_endpoint_id FROM reset WHERE alerted`, tenants, ids)
	if err != nil {
		return nil, wrap("reset task failures", err)
	}
	var out []tenantRecovery
	var r tenantRecovery
	_, err = pgx.ForEachRow(rows, []any{&r.tenant, &r.TaskID, &r.Failures, &r.Alerted, &r.AlertEndpointID}, func() error {
		out = append(out, r)
		r = tenantRecovery{}
		return nil
	})
	return out, wrap("reset task failures", err)
}

// tenantRecovery is a Recovery with its task's tenant.
type tenantRecovery struct {
	Recovery
	tenant string
}

// CancelRequested returns the ids of those of refs that are running with a
// cancel requested (RequestExecutionCancel).
func CancelRequested(ctx context.Context, q Querier, refs []ExecutionRef) ([]string, error) {
	tenants, ids := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		tenants[i], ids[i] = r.TenantID, r.ID
	}
	rows, err := q.Query(ctx, `SELECT e.id::text FROM unnest($1::text[], $2::uuid[]) AS i(tenant_id, id)
		CROSS JOIN LATERAL (
			SELECT e.id FROM executions e
			WHERE e.tenant_id = i.tenant_id AND e.id = i.id AND e.state = `+execRunning+` AND e.cancel_requested OFFSET 0
		) e`, tenants, ids)
	if err != nil {
		return nil, wrap("read cancel requests", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap("read cancel requests", err)
	}
	return out, nil
}

// SetExecutionJobs records the River job that delivers each execution
// (river_job_id), from now on the only one whose Begin may start it.
func SetExecutionJobs(ctx context.Context, q Querier, refs []ExecutionRef, jobIDs []int64) error {
	tenants, ids := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		tenants[i], ids[i] = r.TenantID, r.ID
	}
	_, err := q.Exec(ctx, `UPDATE executions e SET river_job_id = i.job_id
		FROM unnest($1::text[], $2::uuid[], $3::bigint[]) AS i(tenant_id, id, job_id)
		WHERE e.tenant_id = i.tenant_id AND e.id = i.id`, tenants, ids, jobIDs)
	if err != nil {
		return wrap("record execution jobs", err)
	}
	return nil
}
