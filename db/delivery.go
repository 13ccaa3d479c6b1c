package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeliveryRow is what the deliver worker needs to decide and send one
// attempt: the execution, its task and the task's endpoint (both may be
// gone), how many of the task's executions before it are unfinished (only
// counted for a pending execution whose task does not allow overlap) and
// the database clock.
type DeliveryRow struct {
	TenantID        string    `db:"tenant_id"`
	ID              string    `db:"id"`
	TaskID          string    `db:"task_id"`
	ScheduledFor    time.Time `db:"scheduled_for"`
	Trigger         string    `db:"trigger"`
	State           string    `db:"state"`
	Attempts        int       `db:"attempts"`
	AttemptsBase    int       `db:"attempts_base"`
	LeaseAttempt    int       `db:"lease_attempt"`
	CancelRequested bool      `db:"cancel_requested"`
	Payload         []byte    `db:"payload"` // the execution's override; nil: the task's
	RiverJobID      *int64    `db:"river_job_id"`
	// Round: X-Ax-Round (1 for a slot's first fire).
	Round int `db:"round"`
	// The workflow run and node the execution belongs to (nil: a task's
	// own fire) and its shard (0 of 1 when the task is not sharded).
	WorkflowID    *string `db:"workflow_id"`
	WorkflowRunID *string `db:"workflow_run_id"`
	Node          *string `db:"node"`
	Shard         int     `db:"shard"`
	ShardCount    int     `db:"shard_count"`
	// EventID is the event that fired the execution (trigger event).
	EventID *string `db:"event_id"`
	// CreatedAt is when the execution was created (a workflow node's: when
	// its rule was met).
	CreatedAt time.Time `db:"created_at"`
	// NeverStarted: no attempt of the execution ever started, and the API
	// never retried it (first_started_at is NULL).
	NeverStarted bool `db:"never_started"`
	// Held: an operator holds the execution (executions.held_at).
	Held bool `db:"held"`

	TaskFound         bool    `db:"task_found"`
	TaskName          *string `db:"task_name"`
	TaskState         *string `db:"task_state"`
	TaskPayload       []byte  `db:"task_payload"`
	TaskTimeoutMS     *int32  `db:"task_timeout_ms"`
	MaxAttempts       *int32  `db:"max_attempts"`
	InitialBackoffMS  *int64  `db:"initial_backoff_ms"`
	MaxBackoffMS      *int64  `db:"max_backoff_ms"`
	OverlapPolicy     *string `db:"overlap_policy"`
	MisfirePolicy     *string `db:"misfire_policy"`
	EarlierUnfinished int     `db:"earlier_unfinished"`
	// LaterMissed counts the task's scheduled executions after this one
	// whose slots are also misfires, up to Misfire.CountMax; it is only
	// counted for a misfired first fire (MisfiredFirstFire) of a task whose
	// policy is fire_all.
	LaterMissed int `db:"later_missed"`
	// The facts of a misfired first fire of a fire_once task (false for
	// any other execution). LaterMisfire: one of the task's scheduled
	// executions after this one is a misfired first fire too, not decided
	// yet. CaughtUp: the task's latest catch-up (tasks.caught_up_at)
	// started at or after this slot. CatchUpShard: another shard of this
	// slot has been sent late (the slot is that catch-up).
	LaterMisfire bool `db:"later_misfire"`
	CaughtUp     bool `db:"caught_up"`
	CatchUpShard bool `db:"catch_up_shard"`
	// SingleSlot: the task's schedule has one slot only (once), so a
	// misfire of it has no other slot to stand for.
	SingleSlot bool `db:"single_slot"`
	// Late: the batched start (StartPendingDeliveries) sent the execution
	// as a late fire, a misfire its task's policy still sends. Not read by
	// GetDeliveryForUpdate: the row-by-row path decides that itself.
	Late bool `db:"-"`
	JoinedEndpoint
	// CompletionTimeoutMS is set for a task in callback completion mode
	// (nil: a 2xx ends the attempt); HeartbeatTimeoutMS may be set then.
	CompletionTimeoutMS *int64 `db:"completion_timeout_ms"`
	HeartbeatTimeoutMS  *int64 `db:"heartbeat_timeout_ms"`
	// Waiting: the running execution's current attempt was accepted and
	// ax waits for its callback (WaitingForCallback).
	Waiting bool `db:"waiting"`
	// The endpoint's limits (NULL: none); a delivery to an endpoint with
	// either is admitted through its gate (service/limits).
	EndpointMaxConcurrency *int32    `db:"endpoint_max_concurrency"`
	EndpointRateLimit      *float64  `db:"endpoint_rate_limit"`
	Now                    time.Time `db:"now"`
}

// fields returns pointers to r's fields in their order: a statement that
// selects every column of the struct in that order scans into them.
func (r *DeliveryRow) fields() []any {
	e := &r.JoinedEndpoint
	return []any{
		&r.TenantID, &r.ID, &r.TaskID, &r.ScheduledFor, &r.Trigger, &r.State, &r.Attempts, &r.AttemptsBase,
		&r.LeaseAttempt, &r.CancelRequested, &r.Payload, &r.RiverJobID, &r.Round,
		&r.WorkflowID, &r.WorkflowRunID, &r.Node, &r.Shard, &r.ShardCount, &r.EventID, &r.CreatedAt, &r.NeverStarted, &r.Held, &r.TaskFound, &r.TaskName,
		&r.TaskState, &r.TaskPayload, &r.TaskTimeoutMS, &r.MaxAttempts, &r.InitialBackoffMS, &r.MaxBackoffMS,
		&r.OverlapPolicy, &r.MisfirePolicy, &r.EarlierUnfinished, &r.LaterMissed, &r.LaterMisfire, &r.CaughtUp, &r.CatchUpShard,
		&r.SingleSlot,
		&e.EndpointFound, &e.EndpointID, &e.EndpointURL, &e.EndpointMethod, &e.EndpointHeaders, &e.Secret,
		&e.PreviousSecret, &e.PreviousSecretExp, &e.EndpointTimeoutMS, &e.EndpointEnabled, &r.CompletionTimeoutMS,
		&r.HeartbeatTimeoutMS, &r.Waiting, &r.EndpointMaxConcurrency, &r.EndpointRateLimit, &r.Now,
	}
}

// JoinedEndpoint is an endpoint LEFT JOINed to an execution's task: every
// column may be NULL when the endpoint is gone.
type JoinedEndpoint struct {
	EndpointFound  bool    `db:"endpoint_found"`
	EndpointID     *string `db:"endpoint_id"`
	EndpointURL    *string `db:"endpoint_url"`
	EndpointMethod *string `db:"endpoint_method"`
	// EndpointHeaders is nil when the endpoint has none (no JSON to
	// decode for most deliveries).
	EndpointHeaders   map[string]string `db:"endpoint_headers"`
	Secret            *string           `db:"secret"`
	PreviousSecret    *string           `db:"previous_secret"`
	PreviousSecretExp *time.Time        `db:"previous_secret_expires_at"`
	EndpointTimeoutMS *int32            `db:"endpoint_timeout_ms"`
	EndpointEnabled   *bool             `db:"endpoint_enabled"`
}

// Misfire is when a first fire picked up late is a misfire (its task's
// misfire_policy decides whether it is still sent): a pending execution of
// a scheduled slot that never started, picked up more than Threshold after
// its slot by the database clock.
type Misfire struct {
	Threshold time.Duration
	// CountMax bounds DeliveryRow.LaterMissed.
	CountMax int
}

// MisfiredFirstFire is the SQL of Misfire's condition over execution e,
// with m.cut (now() minus the threshold) in scope.
var MisfiredFirstFire = `(e.state = ` + execPending + ` AND e.trigger = 'schedule' AND e.first_started_at IS NULL
	AND e.scheduled_for < m.cut)`

// laterMisfire is the SQL of DeliveryRow.LaterMisfire over execution e
// (a misfired first fire of a fire_once task), with m.cut in scope: a
// later scheduled execution of its task is a misfired first fire too, not
// decided yet. One probe of the task's slot index.
var laterMisfire = `EXISTS (
	SELECT 1 FROM executions x
	WHERE x.task_id = e.task_id AND x.trigger = 'schedule' AND NOT x.rescheduled AND x.tenant_id = e.tenant_id
	  AND x.scheduled_for > e.scheduled_for AND x.scheduled_for < m.cut
	  AND x.state = ` + execPending + ` AND x.first_started_at IS NULL)`

// caughtUp is the SQL of DeliveryRow.CaughtUp over execution e (a
// misfired first fire of a fire_once task) and its task t: the task's
// latest catch-up started at or after e's slot (NULL: it has none).
var caughtUp = `t.caught_up_at >= e.scheduled_for`

// GetDeliveryForUpdate reads an execution with its task and endpoint and
// locks the execution row until the transaction ends. The overlap count
// looks only at the task's unfinished executions ordered before this one by
// (scheduled_for, id), found in unfinished_executions (and confirmed in
// executions, should a row there be stale: see SweepUnfinished), and stops
// at two (neither counted for nor counting a backfill's executions:
// max_concurrency bounds those); it leaves out the earlier misfires that the task's misfire
// policy will miss whatever happens (all of them with skip; with fire_once,
// all of them when this execution is a misfire too), which would otherwise
// make an overlap policy skip the one fire they leave. The count of later misfired slots (for a misfired first fire of
// a fire_all task) looks at the task's scheduled executions in any state,
// by the slot index, and stops at m.CountMax. A misfired first fire of a
// fire_once task reads instead whether a later one is still pending, the
// task's latest catch-up (caught_up_at) and whether a shard of its own
// slot was sent late, each one probe of the slot index or the task row.
func GetDeliveryForUpdate(ctx context.Context, q Querier, tenant, id string, m Misfire) (DeliveryRow, error) {
	rows, err := q.Query(ctx, `SELECT `+deliveryColumns+`
		FROM executions e
		CROSS JOIN (SELECT now() - make_interval(secs => $3) AS cut) m
		LEFT JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
		LEFT JOIN endpoints ep ON ep.tenant_id = t.tenant_id AND ep.id = t.endpoint_id
		WHERE e.tenant_id = $1 AND e.id = $2
		FOR UPDATE OF e`, tenant, id, m.Threshold.Seconds(), m.CountMax)
	return collectOne[DeliveryRow](rows, err)
}

// deliveryColumns is GetDeliveryForUpdate's select list: a DeliveryRow's
// columns in the order of its fields (DeliveryRow.fields), over the
// execution e, its task t and endpoint ep (LEFT JOINed), m.cut, $3 (the
// misfire threshold) and $4 (Misfire.CountMax). GetDeliveriesForUpdate
// reads the same columns for many executions at once.
var deliveryColumns = `e.tenant_id, e.id::text, e.task_id::text, e.scheduled_for, e.trigger, e.state,
			e.attempts, e.attempts_base, e.lease_attempt, e.cancel_requested, e.payload, e.river_job_id, e.round,
			e.workflow_id::text, e.workflow_run_id::text, e.node, e.shard, e.shard_count, e.event_id::text, e.created_at,
			e.first_started_at IS NULL AS never_started, e.held_at IS NOT NULL AS held,
			t.id IS NOT NULL AS task_found, t.name AS task_name, t.state AS task_state, t.payload AS task_payload,
			t.timeout_ms AS task_timeout_ms, t.max_attempts, t.initial_backoff_ms, t.max_backoff_ms, t.overlap_policy,
			t.misfire_policy,
			CASE WHEN e.state = ` + execPending + ` AND t.overlap_policy IN ('skip', 'queue') AND e.trigger <> 'backfill' THEN (
				SELECT count(*) FROM (
					SELECT 1 FROM unfinished_executions o
					JOIN executions x ON x.tenant_id = o.tenant_id AND x.id = o.id
					WHERE o.tenant_id = e.tenant_id AND o.task_id = e.task_id
					  AND (o.scheduled_for, o.id) < (e.scheduled_for, e.id)
					  AND x.state IN ` + execUnfinished + `
					  -- A backfill's executions are bounded by its
					  -- max_concurrency, not by the overlap policy.
					  AND x.trigger <> 'backfill'
					  -- A held execution is parked until it is released: it
					  -- holds no later one back.
					  AND x.held_at IS NULL
					  -- An earlier misfire its policy will miss for sure does
					  -- not hold this one back: with skip every misfire is
					  -- missed, with fire_once every misfire before another.
					  AND NOT (x.state = ` + execPending + ` AND x.trigger = 'schedule' AND x.first_started_at IS NULL
						AND x.scheduled_for < m.cut
						AND (t.misfire_policy = 'skip' OR (t.misfire_policy = 'fire_once' AND ` + MisfiredFirstFire + `)))
					LIMIT 2) earlier)
			ELSE 0 END::int AS earlier_unfinished,
			CASE WHEN ` + MisfiredFirstFire + ` AND t.misfire_policy = 'fire_all' THEN (
				SELECT count(*) FROM (
					SELECT 1 FROM executions x
					WHERE x.task_id = e.task_id AND x.trigger = 'schedule' AND NOT x.rescheduled
					  AND x.tenant_id = e.tenant_id
					  AND x.scheduled_for > e.scheduled_for AND x.scheduled_for < m.cut
					  AND x.state <> ` + execCancelled + `
					LIMIT $4) later)
			ELSE 0 END::int AS later_missed,
			coalesce(` + MisfiredFirstFire + ` AND t.misfire_policy = 'fire_once' AND ` + laterMisfire + `, false) AS later_misfire,
			coalesce(` + MisfiredFirstFire + ` AND t.misfire_policy = 'fire_once' AND ` + caughtUp + `, false) AS caught_up,
			coalesce(` + MisfiredFirstFire + ` AND t.misfire_policy = 'fire_once' AND EXISTS (
				SELECT 1 FROM executions x
				WHERE x.task_id = e.task_id AND x.trigger = 'schedule' AND NOT x.rescheduled AND x.tenant_id = e.tenant_id
				  AND x.scheduled_for = e.scheduled_for AND x.round = e.round AND x.id <> e.id
				  AND x.late AND x.first_started_at IS NOT NULL), false) AS catch_up_shard,
			coalesce(t.schedule_type = 'once', false) AS single_slot,
			ep.id IS NOT NULL AS endpoint_found, ep.id::text AS endpoint_id, ep.url AS endpoint_url,
			ep.method AS endpoint_method, nullif(ep.headers, '{}') AS endpoint_headers, ep.secret, ep.previous_secret,
			ep.previous_secret_expires_at, ep.timeout_ms AS endpoint_timeout_ms, ep.enabled AS endpoint_enabled,
			t.completion_timeout_ms, t.heartbeat_timeout_ms,
			CASE WHEN e.state = ` + execRunning + ` THEN ` + WaitingForCallback + ` ELSE false END AS waiting,
			ep.max_concurrency AS endpoint_max_concurrency, ep.rate_limit_per_second AS endpoint_rate_limit,
			now() AS now`

// WaitingForCallback is the SQL condition that running execution e waits
// for the callback of its current attempt: the attempt was accepted (a
// 2xx in callback completion mode) and neither completed nor timed out.
const WaitingForCallback = `EXISTS (SELECT 1 FROM callback_attempts w
	WHERE w.tenant_id = e.tenant_id AND w.execution_id = e.id AND w.attempt = e.attempts
	  AND w.lease = e.lease_attempt AND w.expires_at IS NOT NULL)`

// StartDelivery moves an execution to running for River attempt lease and
// returns its attempt count (one more than before: attempts keep counting
// across API retries). late marks it a late fire (a misfire the task's
// policy still sends). The transition is fenced: a pending row, a retrying
// row whose lease is older, or a running row whose lease is not newer (a
// run interrupted by a crash or a shutdown). ok is false when no row
// matched.
func StartDelivery(ctx context.Context, q Querier, tenant, id string, lease int, late bool) (attempts int, ok bool, err error) {
	err = q.QueryRow(ctx, `UPDATE executions SET state = `+execRunning+`, attempts = attempts + 1,
			lease_attempt = $3, started_at = coalesce(started_at, now()), next_attempt_at = NULL,
			first_started_at = coalesce(first_started_at, now()), late = late OR $4
		WHERE tenant_id = $1 AND id = $2
		  AND (state = `+execPending+` OR (state = `+execRetrying+` AND lease_attempt < $3)
			OR (state = `+execRunning+` AND lease_attempt <= $3))
		RETURNING attempts`, tenant, id, lease, late).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrap("start delivery", err)
	}
	return attempts, true, nil
}

// DeliveryEnd is a transition of an execution to a final state, or to
// retrying.
type DeliveryEnd struct {
	TenantID string
	ID       string
	// From lists the states the row may be in; the transition matches no
	// row otherwise.
	From []string
	// MaxLease, when set, also requires lease_attempt <= *MaxLease for a
	// running row; Lease requires lease_attempt = *Lease for any row.
	MaxLease *int
	Lease    *int
	To       string
	// Attempts, when set, is stored as the attempt count.
	Attempts       *int
	StatusCode     *int
	Error          *string
	ErrorClass     *string
	NextAttemptIn  *time.Duration // retrying only
	KeepStatusCode bool           // leave last_status_code as it is
}

// EndDelivery applies a conditional transition and reports whether a row
// matched. Final states set finished_at and take the execution out of
// unfinished_executions; retrying sets next_attempt_at.
func EndDelivery(ctx context.Context, q Querier, e DeliveryEnd) (bool, error) {
	var nextIn *float64
	if e.NextAttemptIn != nil {
		s := e.NextAttemptIn.Seconds()
		nextIn = &s
	}
	var n int
	err := q.QueryRow(ctx, `WITH x AS (
			UPDATE executions SET state = $3,
				finished_at = CASE WHEN $3 = `+execRetrying+` THEN NULL ELSE now() END,
				next_attempt_at = CASE WHEN $3 = `+execRetrying+` THEN now() + make_interval(secs => $8) END,
				attempts = coalesce($7, attempts),
				last_status_code = CASE WHEN $10 THEN last_status_code ELSE $4 END,
				last_error = $5, last_error_class = $6
			WHERE tenant_id = $1 AND id = $2 AND state = ANY($9)
			  AND ($11::int IS NULL OR state <> `+execRunning+` OR lease_attempt <= $11)
			  AND ($12::int IS NULL OR lease_attempt = $12)
			RETURNING tenant_id, task_id, scheduled_for, id
		), u AS (
			DELETE FROM unfinished_executions u USING x
			WHERE $3 IN `+execFinal+`
			  AND u.tenant_id = x.tenant_id AND u.task_id = x.task_id AND u.scheduled_for = x.scheduled_for AND u.id = x.id)
		SELECT count(*) FROM x`,
		e.TenantID, e.ID, e.To, e.StatusCode, e.Error, e.ErrorClass, e.Attempts, nextIn, e.From, e.KeepStatusCode,
		e.MaxLease, e.Lease).Scan(&n)
	if err != nil {
		return false, wrap(fmt.Sprintf("execution %s → %s", e.ID, e.To), err)
	}
	return n == 1, nil
}

// NodeSuccess is a workflow node's success for EndNodeSuccesses: the end
// EndDelivery would apply to its running execution (to succeeded, fenced
// on its lease), with the events InsertDeliveryEvents would append (in
// order) and the output SetExecutionOutput would keep (nil: none).
type NodeSuccess struct {
	ExecutionRef
	Lease          int
	StatusCode     *int
	KeepStatusCode bool
	Events         []DeliveryEvent
	Output         json.RawMessage
}

// EndNodeSuccesses records successes in one statement, each exactly as
// EndDelivery to succeeded, InsertDeliveryEvents and SetExecutionOutput
// would one by one (the same rows, the events of each execution in
// order), and returns the indexes in ok of those whose execution was
// still running under its lease. The others are untouched but their
// events and output are written all the same: the caller holds the
// executions' locks (GetDeliveryOutcomes), so the update waits for none
// and finds every one, and rolls the transaction back when one is
// missing.
func EndNodeSuccesses(ctx context.Context, q Querier, ok []NodeSuccess) ([]int, error) {
	n := len(ok)
	tenants, ids, leases := make([]string, n), make([]string, n), make([]int32, n)
	codes, keep := make([]*int32, n), make([]bool, n)
	var (
		evTenant, evID                 []string
		evType                         []string
		evAttempt, evStatus, evLatency []*int32
		evClass, evMessage, evData     []*string
		outTenant, outID, outputs      []string
	)
	for i, s := range ok {
		tenants[i], ids[i], leases[i], keep[i] = s.TenantID, s.ID, int32(s.Lease), s.KeepStatusCode // attempts are small
		codes[i] = int32Ptr(s.StatusCode)
		for _, ev := range s.Events {
			var data *string
			if ev.Data != nil {
				b, err := json.Marshal(ev.Data)
				if err != nil {
					return nil, wrap("record node successes", err)
				}
				d := string(b)
				data = &d
			}
			evTenant, evID, evType = append(evTenant, s.TenantID), append(evID, s.ID), append(evType, ev.Type)
			evAttempt, evStatus = append(evAttempt, int32Ptr(ev.Attempt)), append(evStatus, int32Ptr(ev.StatusCode))
			evLatency, evClass = append(evLatency, int32Ptr(ev.LatencyMS)), append(evClass, ev.ErrorClass)
			evMessage, evData = append(evMessage, ev.Message), append(evData, data)
		}
		if s.Output != nil {
			outTenant, outID, outputs = append(outTenant, s.TenantID), append(outID, s.ID), append(outputs, string(s.Output))
		}
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("record node successes", err)
	}
	evUIDs, err := uuidArray(evID)
	if err != nil {
		return nil, wrap("record node successes", err)
	}
	outUIDs, err := uuidArray(outID)
	if err != nil {
		return nil, wrap("record node successes", err)
	}
	rows, err := q.Query(ctx, `WITH input AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::int[], $4::int[], $5::bool[]) WITH ORDINALITY
				AS i(tenant_id, id, lease, status_code, keep_status, ord)
		), cur AS (
			-- Each execution by its primary key, then updated by its
			-- ctid (as StartPendingDeliveries does): a join the planner
			-- may reorder could start from the table's side.
			SELECT i.ord, e.row, e.tenant_id, e.id, i.status_code, i.keep_status
			FROM input i
			CROSS JOIN LATERAL (
				SELECT e.ctid AS row, e.tenant_id, e.id FROM executions e
				WHERE e.tenant_id = i.tenant_id AND e.id = i.id AND e.state = `+execRunning+` AND e.lease_attempt = i.lease
				OFFSET 0
			) e
		), done AS (
			UPDATE executions e SET state = `+execSucceeded+`, finished_at = now(), next_attempt_at = NULL,
				last_status_code = CASE WHEN c.keep_status THEN e.last_status_code ELSE c.status_code END,
				last_error = NULL, last_error_class = NULL
			FROM cur c
			WHERE e.ctid = c.row AND e.tenant_id = c.tenant_id AND e.id = c.id
			RETURNING c.ord, e.tenant_id, e.task_id, e.scheduled_for, e.id
		), closed AS (
			DELETE FROM unfinished_executions u USING done d
			WHERE u.tenant_id = d.tenant_id AND u.task_id = d.task_id AND u.scheduled_for = d.scheduled_for AND u.id = d.id
		), events AS (
			-- Written whether or not their execution was: a caller that
			-- finds one missing from the answer rolls the transaction
			-- back (a join on done would run the input per row of done).
			INSERT INTO execution_events (tenant_id, execution_id, type, attempt, status_code, latency_ms,
				error_class, message, data)
			SELECT v.tenant_id, v.id, v.type, v.attempt, v.status_code, v.latency_ms, v.error_class, v.message, v.data::jsonb
			FROM unnest($6::text[], $7::uuid[], $8::text[], $9::int[], $10::int[], $11::int[], $12::text[], $13::text[],
				$14::text[]) WITH ORDINALITY AS v(tenant_id, id, type, attempt, status_code, latency_ms, error_class, message, data, k)
			ORDER BY v.k
		), outputs AS (
			INSERT INTO execution_outputs (tenant_id, execution_id, output)
			SELECT o.tenant_id, o.id, o.output::jsonb FROM unnest($15::text[], $16::uuid[], $17::text[]) AS o(tenant_id, id, output)
			ON CONFLICT (tenant_id, execution_id) DO UPDATE SET output = excluded.output, created_at = now()
		)
		SELECT ord FROM done`, tenants, uids, leases, codes, keep,
		evTenant, evUIDs, evType, evAttempt, evStatus, evLatency, evClass, evMessage, evData, outTenant, outUIDs, outputs)
	if err != nil {
		return nil, wrap("record node successes", err)
	}
	ords, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, wrap("record node successes", err)
	}
	for i := range ords {
		ords[i]--
	}
	slices.Sort(ords)
	return ords, nil
}

// int32Ptr narrows an optional int for an int4 array (status codes,
// attempts and latencies fit).
func int32Ptr(v *int) *int32 {
	if v == nil {
		return nil
	}
	n := int32(min(*v, 1<<31-1))
	return &n
}

// DeliveryOutcome is an execution locked to record an attempt's outcome,
// with what that needs from its task (service.decideFinish).
type DeliveryOutcome struct {
	TaskID           string `db:"task_id"`
	State            string `db:"state"`
	LeaseAttempt     int    `db:"lease_attempt"`
	Attempts         int    `db:"attempts"`
	AttemptsBase     int    `db:"attempts_base"`
	CancelRequested  bool   `db:"cancel_requested"`
	TaskFound        bool   `db:"task_found"`
	MaxAttempts      *int32 `db:"max_attempts"`
	InitialBackoffMS *int64 `db:"initial_backoff_ms"`
	MaxBackoffMS     *int64 `db:"max_backoff_ms"`
	// TaskFailures is the task's consecutive failure count (0 without a task).
	TaskFailures int32 `db:"task_failures"`
	// TaskFailureAlerted: a failure alert of the task was queued since its
	// last success (tasks.failure_alerted).
	TaskFailureAlerted bool `db:"task_failure_alerted"`
	// WorkflowRunID is the workflow run of a node's execution (nil: none).
	WorkflowRunID *string `db:"workflow_run_id"`
	// Priority is the task's River priority (nil without a task).
	Priority *int16 `db:"priority"`
	// Permitted: the execution holds a permit of the delivery limits
	// (flow_permits).
	Permitted bool `db:"permitted"`
}

const deliveryOutcomeSQL = `SELECT e.task_id::text, e.state, e.lease_attempt, e.attempts, e.attempts_base, e.cancel_requested,
		t.id IS NOT NULL AS task_found, t.max_attempts, t.initial_backoff_ms, t.max_backoff_ms,
		coalesce(t.consecutive_failures, 0) AS task_failures, coalesce(t.failure_alerted, false) AS task_failure_alerted,
		e.workflow_run_id::text, t.priority,
		EXISTS (SELECT 1 FROM flow_permits p WHERE p.tenant_id = e.tenant_id AND p.execution_id = e.id) AS permitted
	FROM executions e
	LEFT JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
	WHERE e.tenant_id = $1 AND e.id = $2
	FOR UPDATE OF e`

// GetDeliveryOutcome reads an execution with its task and locks the
// execution until the transaction ends. ErrNotFound: no such execution.
func GetDeliveryOutcome(ctx context.Context, q Querier, tenant, id string) (DeliveryOutcome, error) {
	rows, err := q.Query(ctx, deliveryOutcomeSQL, tenant, id)
	return collectOne[DeliveryOutcome](rows, err)
}

// GetDeliveryOutcomes is GetDeliveryOutcome for each of refs, in one
// statement, locking them in the order given (the nested loop over the
// input takes each execution's lock in its LATERAL subquery, as
// StartPendingDeliveries does; the pool's plans keep that shape); an
// execution that does not exist is nil.
func GetDeliveryOutcomes(ctx context.Context, tx Tx, refs []ExecutionRef) ([]*DeliveryOutcome, error) {
	tenants, ids := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		tenants[i], ids[i] = r.TenantID, r.ID
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("load executions", err)
	}
	rows, err := tx.Query(ctx, `SELECT i.ord, e.task_id::text, e.state, e.lease_attempt, e.attempts, e.attempts_base,
			e.cancel_requested, t.id IS NOT NULL AS task_found, t.max_attempts, t.initial_backoff_ms, t.max_backoff_ms,
			coalesce(t.consecutive_failures, 0) AS task_failures, coalesce(t.failure_alerted, false) AS task_failure_alerted,
			e.workflow_run_id::text, t.priority,
			EXISTS (SELECT 1 FROM flow_permits p WHERE p.tenant_id = e.tenant_id AND p.execution_id = e.id) AS permitted
		FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS i(tenant_id, id, ord)
		CROSS JOIN LATERAL (
			SELECT e.tenant_id, e.id, e.task_id, e.state, e.lease_attempt, e.attempts, e.attempts_base,
				e.cancel_requested, e.workflow_run_id
			FROM executions e WHERE e.tenant_id = i.tenant_id AND e.id = i.id
			OFFSET 0 FOR UPDATE
		) e
		LEFT JOIN LATERAL (
			SELECT t.id, t.max_attempts, t.initial_backoff_ms, t.max_backoff_ms, t.consecutive_failures,
				t.failure_alerted, t.priority
			FROM tasks t WHERE t.tenant_id = e.tenant_id AND t.id = e.task_id OFFSET 0
		) t ON true
		ORDER BY i.ord`, tenants, uids)
	if err != nil {
		return nil, wrap("load executions", err)
	}
	type outcomeAt struct {
		Ord int `db:"ord"`
		DeliveryOutcome
	}
	read, err := pgx.CollectRows(rows, pgx.RowToStructByName[outcomeAt])
	if err != nil {
		return nil, wrap("load executions", err)
	}
	out := make([]*DeliveryOutcome, len(refs))
	for _, r := range read {
		out[r.Ord-1] = &r.DeliveryOutcome
	}
	return out, nil
}

// DeliveryEvent is one timeline entry to append.
type DeliveryEvent struct {
	Type       string
	Attempt    *int
	StatusCode *int
	LatencyMS  *int
	ErrorClass *string
	Message    *string
	Data       map[string]any
}

// InsertDeliveryEvents appends events to an execution's timeline in order.
func InsertDeliveryEvents(ctx context.Context, q Querier, tenant, executionID string, events []DeliveryEvent) error {
	if len(events) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	for _, ev := range events {
		batch.Queue(`INSERT INTO execution_events (tenant_id, execution_id, type, attempt, status_code, latency_ms,
			error_class, message, data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			tenant, executionID, ev.Type, ev.Attempt, ev.StatusCode, ev.LatencyMS, ev.ErrorClass, ev.Message, ev.Data)
	}
	if err := sendBatch(ctx, q, batch); err != nil {
		return wrap("append events to execution "+executionID, err)
	}
	return nil
}

// batcher is implemented by pgx.Tx, *pgx.Conn and *pgxpool.Pool.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func sendBatch(ctx context.Context, q Querier, b *pgx.Batch) error {
	if bq, ok := q.(batcher); ok {
		return bq.SendBatch(ctx, b).Close()
	}
	for _, qq := range b.QueuedQueries {
		if _, err := q.Exec(ctx, qq.SQL, qq.Arguments...); err != nil {
			return err
		}
	}
	return nil
}

// LockTask takes a task's row lock until the transaction ends (a deleted
// task: nothing to lock). A fire_once misfire is decided under it: the
// decision reads what the task's other misfires decided (caught_up_at),
// and both of its outcomes write the task row anyway.
func LockTask(ctx context.Context, q Querier, tenant, taskID string) error {
	_, err := q.Exec(ctx, `SELECT 1 FROM tasks WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE`, tenant, taskID)
	return wrap("lock task", err)
}

// RecordCatchUp records that a fire_once task's catch-up (a late fire)
// starts now: the task's misfires due by now are missed.
func RecordCatchUp(ctx context.Context, q Querier, tenant, taskID string) error {
	_, err := q.Exec(ctx, `UPDATE tasks SET caught_up_at = now() WHERE tenant_id = $1 AND id = $2`, tenant, taskID)
	return wrap("record a catch-up", err)
}

// AddMissedSlot counts one more slot of a task that its misfire policy did
// not fire.
func AddMissedSlot(ctx context.Context, q Querier, tenant, taskID string) error {
	_, err := q.Exec(ctx, `UPDATE tasks SET missed_count = missed_count + 1 WHERE tenant_id = $1 AND id = $2`, tenant, taskID)
	return wrap("count a missed slot", err)
}

// Recovery is a task's failure streak that a success ended: how many
// failed executions it counted and whether one of them was alerted, with
// the task's alert endpoint now (nil: none).
type Recovery struct {
	TaskID          string  `db:"task_id"`
	Failures        int     `db:"failures"`
	Alerted         bool    `db:"alerted"`
	AlertEndpointID *string `db:"alert_endpoint_id"`
}

// ResetTaskFailures ends a task's failure streak: it zeroes its consecutive
// failure count and clears failure_alerted, and returns the streak as it
// was (read under the task's row lock, so that a failure committed
// meanwhile is in it). ErrNotFound: the task is gone or had no streak.
func ResetTaskFailures(ctx context.Context, q Querier, tenant, taskID string) (Recovery, error) {
	rows, err := q.Query(ctx, `WITH old AS (
			SELECT tenant_id, id, consecutive_failures, failure_alerted FROM tasks
			WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE
		)
		UPDATE tasks t SET consecutive_failures = 0, failure_alerted = false FROM old o
		WHERE t.tenant_id = o.tenant_id AND t.id = o.id AND (o.consecutive_failures <> 0 OR o.failure_alerted)
		RETURNING t.id::text AS task_id, o.consecutive_failures AS failures, o.failure_alerted AS alerted,
			t.alert_endpoint_id::text AS alert_endpoint_id`, tenant, taskID)
	return collectOne[Recovery](rows, err)
}

// TaskFailures is a task's failure count after one more failure.
type TaskFailures struct {
	Consecutive        int     `db:"consecutive_failures"`
	PauseAfterFailures *int32  `db:"pause_after_failures"`
	State              string  `db:"state"`
	AlertEndpointID    *string `db:"alert_endpoint_id"`
	AlertAfterFailures int     `db:"alert_after_failures"`
	// FailureAlerted: a failure of the streak was alerted already.
	FailureAlerted bool `db:"failure_alerted"`
}

// AddTaskFailure counts one more consecutive failure of a task.
// ErrNotFound means the task is gone.
func AddTaskFailure(ctx context.Context, q Querier, tenant, taskID string) (TaskFailures, error) {
	rows, err := q.Query(ctx, `UPDATE tasks SET consecutive_failures = consecutive_failures + 1
		WHERE tenant_id = $1 AND id = $2
		RETURNING consecutive_failures, pause_after_failures, state, alert_endpoint_id::text, alert_after_failures,
			failure_alerted`, tenant, taskID)
	return collectOne[TaskFailures](rows, err)
}

// MarkFailureAlerted records that a failure of the task's current streak
// was alerted (tasks.failure_alerted), in the transaction that queues the
// alert.
func MarkFailureAlerted(ctx context.Context, q Querier, tenant, taskID string) error {
	_, err := q.Exec(ctx, `UPDATE tasks SET failure_alerted = true WHERE tenant_id = $1 AND id = $2`, tenant, taskID)
	return wrap("mark task failure alerted", err)
}

// AutoPauseTask pauses an active task and reports whether it did.
func AutoPauseTask(ctx context.Context, q Querier, tenant, taskID string) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE tasks SET state = `+taskPaused+`, version = version + 1, updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND state = `+taskActive, tenant, taskID)
	if err != nil {
		return false, wrap("pause task", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DisableEndpoint disables an enabled endpoint with reason and reports
// whether it did.
func DisableEndpoint(ctx context.Context, q Querier, tenant, id, reason string) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE endpoints SET enabled = false, disabled_reason = $3, disabled_at = now(),
			updated_at = now()
		WHERE tenant_id = $1 AND id = $2 AND enabled`, tenant, id, reason)
	if err != nil {
		return false, wrap("disable endpoint", err)
	}
	return tag.RowsAffected() == 1, nil
}

// AlertRow is what a failure alert reports, with the alert endpoint.
type AlertRow struct {
	ExecutionID    string     `db:"id"`
	TaskID         string     `db:"task_id"`
	ScheduledFor   time.Time  `db:"scheduled_for"`
	Trigger        string     `db:"trigger"`
	State          string     `db:"state"`
	Attempts       int        `db:"attempts"`
	LastStatusCode *int       `db:"last_status_code"`
	LastError      *string    `db:"last_error"`
	LastErrorClass *string    `db:"last_error_class"`
	FinishedAt     *time.Time `db:"finished_at"`
	TaskName       *string    `db:"task_name"`
	TaskState      *string    `db:"task_state"`
	JoinedEndpoint
	// EndpointFormat is the alert endpoint's format (ax, slack).
	EndpointFormat *string `db:"endpoint_format"`
	// SLAFinishWithinMS and SLADueAt: the task's SLA and, when the
	// execution missed it, its deadline.
	SLAFinishWithinMS *int64     `db:"sla_finish_within_ms"`
	SLADueAt          *time.Time `db:"sla_due_at"`
	Now               time.Time  `db:"now"`
}

// GetAlert reads a failed execution with its task and the task's alert
// endpoint (both may be gone).
func GetAlert(ctx context.Context, q Querier, tenant, executionID string) (AlertRow, error) {
	rows, err := q.Query(ctx, `SELECT e.id::text, e.task_id::text, e.scheduled_for, e.trigger, e.state, e.attempts,
			e.last_status_code, e.last_error, e.last_error_class, e.finished_at,
			t.name AS task_name, t.state AS task_state,
			ep.id IS NOT NULL AS endpoint_found, ep.id::text AS endpoint_id, ep.url AS endpoint_url,
			ep.method AS endpoint_method, nullif(ep.headers, '{}') AS endpoint_headers, ep.secret, ep.previous_secret,
			ep.previous_secret_expires_at, ep.timeout_ms AS endpoint_timeout_ms, ep.enabled AS endpoint_enabled,
			ep.format AS endpoint_format, t.sla_finish_within_ms,
			(SELECT s.due_at FROM sla_misses s WHERE s.tenant_id = e.tenant_id AND s.execution_id = e.id) AS sla_due_at,
			now() AS now
		FROM executions e
		LEFT JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
		LEFT JOIN endpoints ep ON ep.tenant_id = t.tenant_id AND ep.id = t.alert_endpoint_id
		WHERE e.tenant_id = $1 AND e.id = $2`, tenant, executionID)
	return collectOne[AlertRow](rows, err)
}
