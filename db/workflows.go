package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Workflow is a row of workflows.
type Workflow struct {
	TenantID          string     `db:"tenant_id"`
	ID                string     `db:"id"`
	Name              string     `db:"name"`
	State             string     `db:"state"`
	Version           int32      `db:"version"`
	Schedule          *string    `db:"schedule"` // JSON; nil: none
	MisfirePolicy     string     `db:"misfire_policy"`
	MaxActiveRuns     int32      `db:"max_active_runs"`
	AlertEndpointID   *string    `db:"alert_endpoint_id"`
	SLAFinishWithinMS *int64     `db:"sla_finish_within_ms"`
	NextRunAt         *time.Time `db:"next_run_at"`
	CreatedAt         time.Time  `db:"created_at"`
	UpdatedAt         time.Time  `db:"updated_at"`
	// ExcludeCalendars are the schedule's calendars (also in Schedule).
	ExcludeCalendars []string `db:"exclude_calendars"`
	// ScheduleVersion moves on with each change of the schedule or of its
	// calendars (the scheduler's cache key).
	ScheduleVersion int32 `db:"schedule_version"`
	// Nodes is the JSON document of the current version (workflow_versions).
	Nodes string `db:"nodes"`
	// Inputs is the current version's inputs with their defaults (a JSON
	// object).
	Inputs string `db:"inputs"`
}

const workflowColumns = `w.tenant_id, w.id::text, w.name, w.state, w.version, w.schedule::text AS schedule, w.misfire_policy,
	w.max_active_runs, w.alert_endpoint_id::text, w.sla_finish_within_ms, w.next_run_at, w.created_at, w.updated_at,
	w.exclude_calendars::text[] AS exclude_calendars, w.schedule_version, v.nodes::text AS nodes, v.inputs::text AS inputs`

const workflowFrom = ` FROM workflows w
	JOIN workflow_versions v ON v.tenant_id = w.tenant_id AND v.workflow_id = w.id AND v.version = w.version`

// InsertWorkflow inserts w (its version row comes with InsertWorkflowVersion).
func InsertWorkflow(ctx context.Context, q Querier, w Workflow) error {
	cals, err := uuidArray(w.ExcludeCalendars)
	if err != nil {
		return wrap("insert workflow", err)
	}
	_, err = q.Exec(ctx, `INSERT INTO workflows (tenant_id, id, name, state, version, schedule, misfire_policy,
			max_active_runs, alert_endpoint_id, sla_finish_within_ms, next_run_at, created_at, updated_at, exclude_calendars)
		VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7, $8, $9, $10, $11, $12, $12, $13::uuid[])`,
		w.TenantID, w.ID, w.Name, w.State, w.Version, w.Schedule, w.MisfirePolicy, w.MaxActiveRuns,
		w.AlertEndpointID, w.SLAFinishWithinMS, w.NextRunAt, w.CreatedAt, cals)
	return wrap("insert workflow", err)
}

// UpdateWorkflow writes w's mutable fields.
func UpdateWorkflow(ctx context.Context, q Querier, w Workflow) error {
	cals, err := uuidArray(w.ExcludeCalendars)
	if err != nil {
		return wrap("update workflow", err)
	}
	_, err = q.Exec(ctx, `UPDATE workflows SET name = $3, state = $4, version = $5, schedule = $6::text::jsonb,
			misfire_policy = $7, max_active_runs = $8, alert_endpoint_id = $9, sla_finish_within_ms = $10,
			next_run_at = $11, updated_at = now(), exclude_calendars = $12::uuid[], schedule_version = $13
		WHERE tenant_id = $1 AND id = $2`,
		w.TenantID, w.ID, w.Name, w.State, w.Version, w.Schedule, w.MisfirePolicy, w.MaxActiveRuns,
		w.AlertEndpointID, w.SLAFinishWithinMS, w.NextRunAt, cals, w.ScheduleVersion)
	return wrap("update workflow", err)
}

// InsertWorkflowVersion stores a version's nodes and inputs (JSON).
func InsertWorkflowVersion(ctx context.Context, q Querier, tenant, workflowID string, version int32, nodes, inputs []byte) error {
	_, err := q.Exec(ctx, `INSERT INTO workflow_versions (tenant_id, workflow_id, version, nodes, inputs)
		VALUES ($1, $2, $3, $4::text::jsonb, $5::text::jsonb)`, tenant, workflowID, version, string(nodes), string(inputs))
	return wrap("insert workflow version", err)
}

// GetWorkflowVersion reads a version's nodes (JSON).
func GetWorkflowVersion(ctx context.Context, q Querier, tenant, workflowID string, version int32) ([]byte, error) {
	var nodes string
	err := q.QueryRow(ctx, `SELECT nodes::text FROM workflow_versions WHERE tenant_id = $1 AND workflow_id = $2 AND version = $3`,
		tenant, workflowID, version).Scan(&nodes)
	if err != nil {
		return nil, wrap("load workflow version", err)
	}
	return []byte(nodes), nil
}

// GetWorkflow reads a workflow with its current version's nodes; forUpdate
// locks the workflow row.
func GetWorkflow(ctx context.Context, q Querier, tenant, id string, forUpdate bool) (Workflow, error) {
	sql := `SELECT ` + workflowColumns + workflowFrom + ` WHERE w.tenant_id = $1 AND w.id = $2`
	if forUpdate {
		sql += ` FOR UPDATE OF w`
	}
	rows, err := q.Query(ctx, sql, tenant, id)
	return collectOne[Workflow](rows, err)
}

// RowLock is how a statement locks the rows it reads (PostgreSQL's
// row-level lock modes).
type RowLock string

// The row locks of GetWorkflowLocked. A trigger holds its workflow's
// KeyShare while it inserts a run, so that no change of the workflow's
// version or its delete comes between its read and its run (those take
// FOR UPDATE), while other triggers, and the promote of pending runs,
// proceed; promote holds NoKeyUpdate, which serializes promotes (and
// changes of the workflow) but not triggers.
const (
	LockKeyShare    RowLock = "FOR KEY SHARE"
	LockNoKeyUpdate RowLock = "FOR NO KEY UPDATE"
)

// GetWorkflowLocked is GetWorkflow locking the workflow's row in mode.
func GetWorkflowLocked(ctx context.Context, q Querier, tenant, id string, mode RowLock) (Workflow, error) {
	if mode != LockKeyShare && mode != LockNoKeyUpdate {
		return Workflow{}, fmt.Errorf("get workflow: unknown row lock %q", mode)
	}
	rows, err := q.Query(ctx, `SELECT `+workflowColumns+workflowFrom+` WHERE w.tenant_id = $1 AND w.id = $2 `+string(mode)+` OF w`,
		tenant, id)
	return collectOne[Workflow](rows, err)
}

// ListWorkflows returns a tenant's workflows newest first, ids below
// before ("" for the first page).
func ListWorkflows(ctx context.Context, q Querier, tenant, before string, limit int) ([]Workflow, error) {
	rows, err := q.Query(ctx, `SELECT `+workflowColumns+workflowFrom+`
		WHERE w.tenant_id = $1 AND ($2 = '' OR w.id < NULLIF($2, '')::uuid)
		ORDER BY w.id DESC LIMIT $3`, tenant, before, limit)
	if err != nil {
		return nil, wrap("list workflows", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Workflow])
	return out, wrap("list workflows", err)
}

// DeleteWorkflow deletes a workflow with its versions, runs and node
// tasks (a node execution not started yet is then cancelled by its
// start: its task is gone) and reports whether it existed.
func DeleteWorkflow(ctx context.Context, q Querier, tenant, id string) (bool, error) {
	if _, err := q.Exec(ctx, `DELETE FROM tasks WHERE tenant_id = $1 AND workflow_id = $2`, tenant, id); err != nil {
		return false, wrap("delete workflow tasks", err)
	}
	tag, err := q.Exec(ctx, `DELETE FROM workflows WHERE tenant_id = $1 AND id = $2`, tenant, id)
	if err != nil {
		return false, wrap("delete workflow", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DropUnstartedScheduledRuns deletes a workflow's scheduled runs whose
// slot is still ahead and none of whose executions has started: the
// scheduler made them ahead of their slot (its look-ahead), and a pause
// must not let them fire. Their executions go with them (a deliver job
// of a missing execution does nothing), so that a resume materialises
// the slots again. It returns how many runs it deleted.
func DropUnstartedScheduledRuns(ctx context.Context, q Querier, tenant, workflowID string) (int64, error) {
	tag, err := q.Exec(ctx, `WITH doomed AS (
			SELECT r.id FROM workflow_runs r
			WHERE r.tenant_id = $1 AND r.workflow_id = $2 AND r.trigger = 'schedule'
			  -- Unfinished: pending or running, as a blocked run has an
			  -- execution that ended, which the test below rules out.
			  AND r.scheduled_for > now() AND r.state IN `+runUnfinished+`
			  AND NOT EXISTS (SELECT 1 FROM executions e
				WHERE e.workflow_run_id = r.id AND e.tenant_id = r.tenant_id
				  AND (e.state <> `+execPending+` OR e.first_started_at IS NOT NULL))
			FOR UPDATE OF r),
		execs AS (
			DELETE FROM executions e USING doomed d
			WHERE e.workflow_run_id = d.id AND e.tenant_id = $1
			RETURNING e.tenant_id, e.id),
		unfinished AS (
			DELETE FROM unfinished_executions u USING execs x
			WHERE u.tenant_id = x.tenant_id AND u.id = x.id)
		DELETE FROM workflow_runs r USING doomed d WHERE r.tenant_id = $1 AND r.id = d.id`, tenant, workflowID)
	if err != nil {
		return 0, wrap("drop unstarted scheduled runs", err)
	}
	return tag.RowsAffected(), nil
}

// ClaimDueWorkflows locks up to limit active workflows whose next_run_at
// is at most lookAhead after now (SKIP LOCKED, as ClaimDueTasks).
func ClaimDueWorkflows(ctx context.Context, tx pgx.Tx, lookAhead time.Duration, limit int) ([]Workflow, error) {
	// Cross-tenant by design: the scheduler serves every tenant.
	rows, err := tx.Query(ctx, `SELECT `+workflowColumns+workflowFrom+`
		WHERE w.state = `+workflowActive+` AND w.next_run_at IS NOT NULL AND w.next_run_at <= now() + make_interval(secs => $1)
		ORDER BY w.next_run_at
		LIMIT $2
		FOR UPDATE OF w SKIP LOCKED`, lookAhead.Seconds(), limit)
	if err != nil {
		return nil, wrap("claim due workflows", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Workflow])
	return out, wrap("claim due workflows", err)
}

// SetWorkflowNextRun moves a workflow's next slot.
func SetWorkflowNextRun(ctx context.Context, q Querier, tenant, id string, next *time.Time) error {
	_, err := q.Exec(ctx, `UPDATE workflows SET next_run_at = $3 WHERE tenant_id = $1 AND id = $2`, tenant, id, next)
	return wrap("advance workflow", err)
}

// WorkflowRun is a row of workflow_runs.
type WorkflowRun struct {
	TenantID     string     `db:"tenant_id"`
	ID           string     `db:"id"`
	WorkflowID   string     `db:"workflow_id"`
	Version      int32      `db:"version"`
	ScheduledFor time.Time  `db:"scheduled_for"`
	Round        int32      `db:"round"`
	Trigger      string     `db:"trigger"`
	DedupKey     *string    `db:"dedup_key"`
	State        string     `db:"state"`
	CreatedAt    time.Time  `db:"created_at"`
	StartedAt    *time.Time `db:"started_at"`
	FinishedAt   *time.Time `db:"finished_at"`
	UpdatedAt    time.Time  `db:"updated_at"`
	// SLAMissedAt is when the run was recorded as missing its workflow's
	// SLA (nil: it has not).
	SLAMissedAt *time.Time `db:"sla_missed_at"`
	// BackfillID is the backfill that started the run (trigger backfill).
	BackfillID *string `db:"backfill_id"`
	// Inputs is the run's inputs (a JSON object). On insert it holds the
	// overrides of its trigger or backfill ("": none), which
	// InsertWorkflowRun merges into its version's defaults.
	Inputs string `db:"inputs"`
	// EventID is the event that started the run (trigger event).
	EventID *string `db:"event_id"`
}

const runColumns = `r.tenant_id, r.id::text, r.workflow_id::text, r.version, r.scheduled_for, r.round, r.trigger,
	r.dedup_key, r.state, r.created_at, r.started_at, r.finished_at, r.updated_at, r.sla_missed_at, r.backfill_id::text,
	r.inputs::text AS inputs, r.event_id::text AS event_id`

// InsertWorkflowRun inserts a pending run unless its slot (a scheduled
// run) or its dedup key already has one; it reports whether it did. The
// run's inputs are its version's defaults overridden by r.Inputs (a JSON
// object; "": none), of which a name the version does not declare is
// left out (a backfill's overrides may meet a later version).
func InsertWorkflowRun(ctx context.Context, q Querier, r WorkflowRun) (bool, error) {
	var overrides *string
	if r.Inputs != "" {
		overrides = &r.Inputs
	}
	tag, err := q.Exec(ctx, `INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, round,
			trigger, dedup_key, state, backfill_id, inputs, event_id)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, `+runPending+`, $9,
			coalesce(v.inputs, '{}') || coalesce((SELECT jsonb_object_agg(o.key, o.value) FROM jsonb_each($10::text::jsonb) o
				WHERE v.inputs ? o.key), '{}'), $11
		FROM (VALUES (1)) one
		LEFT JOIN workflow_versions v ON v.tenant_id = $1 AND v.workflow_id = $3 AND v.version = $4
		ON CONFLICT DO NOTHING`,
		r.TenantID, r.ID, r.WorkflowID, r.Version, r.ScheduledFor, max(r.Round, 1), r.Trigger, r.DedupKey, r.BackfillID, overrides, r.EventID)
	if err != nil {
		return false, wrap("insert workflow run", err)
	}
	return tag.RowsAffected() == 1, nil
}

// GetWorkflowRunByDedup finds the run a trigger with dedup key made.
func GetWorkflowRunByDedup(ctx context.Context, q Querier, tenant, workflowID, key string) (WorkflowRun, error) {
	rows, err := q.Query(ctx, `SELECT `+runColumns+` FROM workflow_runs r
		WHERE r.tenant_id = $1 AND r.workflow_id = $2 AND r.dedup_key = $3`, tenant, workflowID, key)
	return collectOne[WorkflowRun](rows, err)
}

// GetWorkflowRun reads a run; forUpdate locks it.
func GetWorkflowRun(ctx context.Context, q Querier, tenant, id string, forUpdate bool) (WorkflowRun, error) {
	sql := `SELECT ` + runColumns + ` FROM workflow_runs r WHERE r.tenant_id = $1 AND r.id = $2`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, tenant, id)
	return collectOne[WorkflowRun](rows, err)
}

// ListWorkflowRuns returns a workflow's runs newest first.
func ListWorkflowRuns(ctx context.Context, q Querier, tenant, workflowID, before string, limit int) ([]WorkflowRun, error) {
	rows, err := q.Query(ctx, `SELECT `+runColumns+` FROM workflow_runs r
		WHERE r.tenant_id = $1 AND r.workflow_id = $2 AND ($3 = '' OR r.id < NULLIF($3, '')::uuid)
		ORDER BY r.id DESC LIMIT $4`, tenant, workflowID, before, limit)
	if err != nil {
		return nil, wrap("list workflow runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[WorkflowRun])
	return out, wrap("list workflow runs", err)
}

// SetWorkflowRunState moves a run to state; started sets started_at (once),
// and a final state sets finished_at.
func SetWorkflowRunState(ctx context.Context, q Querier, tenant, id, state string) error {
	_, err := q.Exec(ctx, `UPDATE workflow_runs SET state = $3, updated_at = now(), advanced_at = now(),
			started_at = CASE WHEN $3 <> `+runPending+` THEN coalesce(started_at, now()) END,
			finished_at = CASE WHEN $3 IN `+runFinal+` THEN coalesce(finished_at, now()) END
		WHERE tenant_id = $1 AND id = $2`, tenant, id, state)
	return wrap("set workflow run state", err)
}

// CountActiveRuns counts a workflow's started, unfinished runs.
func CountActiveRuns(ctx context.Context, q Querier, tenant, workflowID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM workflow_runs
		WHERE workflow_id = $2 AND state IN `+runUnfinished+` AND tenant_id = $1 AND state <> `+runPending,
		tenant, workflowID).Scan(&n)
	return n, wrap("count active runs", err)
}

// WorkflowQueue is what the end of a run needs to know of its workflow
// before it takes the workflow's row lock: its current version and
// whether a pending run waits for room.
type WorkflowQueue struct {
	Version int32 `db:"version"`
	// Waiting: the workflow has a pending run, and its started runs, the
	// ending one among them, are at least max_active_runs.
	Waiting bool `db:"waiting"`
}

// GetWorkflowQueue reads a workflow's current version and whether a
// pending run waits for room (workflow_runs_unfinished_idx), without
// locking anything; it is called by the transaction that ends a run,
// after the run's final state, which it counts as started still.
func GetWorkflowQueue(ctx context.Context, q Querier, tenant, workflowID string) (WorkflowQueue, error) {
	rows, err := q.Query(ctx, `SELECT w.version, EXISTS (SELECT 1 FROM workflow_runs r
			WHERE r.workflow_id = w.id AND r.state IN `+runUnfinished+` AND r.tenant_id = w.tenant_id AND r.state = `+runPending+`)
		AND (SELECT count(*) FROM workflow_runs r WHERE r.workflow_id = w.id AND r.state IN `+runUnfinished+`
			AND r.tenant_id = w.tenant_id AND r.state <> `+runPending+`) + 1 >= w.max_active_runs AS waiting
		FROM workflows w WHERE w.tenant_id = $1 AND w.id = $2`, tenant, workflowID)
	return collectOne[WorkflowQueue](rows, err)
}

// GetWorkflowRunState reads a run's state, without locking it.
func GetWorkflowRunState(ctx context.Context, q Querier, tenant, id string) (string, error) {
	var state string
	err := q.QueryRow(ctx, `SELECT state FROM workflow_runs WHERE tenant_id = $1 AND id = $2`, tenant, id).Scan(&state)
	return state, wrap("load workflow run state", err)
}

// NotifyJobQueues tells the River clients listening on queues that jobs
// were inserted there, as River's own insert does (a NOTIFY on
// <schema>.river_insert with {"queue": …}, sent at commit). River sends
// its own at most once per FetchCooldown per queue and process, so a job
// inserted just after another transaction's notification, but committed
// after that notification's fetch, waited for its queue's next poll.
func NotifyJobQueues(ctx context.Context, q Querier, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `SELECT pg_notify(current_schema() || '.river_insert', json_build_object('queue', queue)::text)
		FROM (SELECT DISTINCT queue FROM unnest($1::text[]) queue) q`, queues)
	return wrap("notify job queues", err)
}

// PendingRuns locks up to limit of a workflow's pending runs, oldest slot
// first (SKIP LOCKED).
func PendingRuns(ctx context.Context, q Querier, tenant, workflowID string, limit int) ([]WorkflowRun, error) {
	rows, err := q.Query(ctx, `SELECT `+runColumns+` FROM workflow_runs r
		WHERE r.workflow_id = $2 AND r.state IN `+runUnfinished+` AND r.tenant_id = $1 AND r.state = `+runPending+`
		ORDER BY r.scheduled_for, r.id LIMIT $3 FOR UPDATE SKIP LOCKED`, tenant, workflowID, limit)
	if err != nil {
		return nil, wrap("pending workflow runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[WorkflowRun])
	return out, wrap("pending workflow runs", err)
}

// RunNode is a row of workflow_run_nodes.
type RunNode struct {
	Key       string     `db:"key"`
	State     string     `db:"state"`
	RuleMetAt *time.Time `db:"rule_met_at"`
	UpdatedAt time.Time  `db:"updated_at"`
	// The wait of a wait_for node (nil before its rule is met, and for
	// other nodes): see db/waits.go.
	WaitEvent    *string    `db:"wait_event"`
	WaitKey      *string    `db:"wait_key"`
	WaitSince    *time.Time `db:"wait_since"`
	WaitDeadline *time.Time `db:"wait_deadline"`
	EventID      *string    `db:"event_id"`
	ErrorClass   *string    `db:"error_class"`
	LastError    *string    `db:"last_error"`
	FinishedAt   *time.Time `db:"finished_at"`
}

// OpenRuns starts pending runs of a tenant in one statement: each run's
// nodes are inserted waiting (nodeRuns[i] is the run of nodeKeys[i]) and
// the runs become running (SetWorkflowRunState's columns). It returns how
// many nodes it inserted per run: a run that had none before has all its
// nodes fresh.
func OpenRuns(ctx context.Context, q Querier, tenant string, runIDs, nodeRuns, nodeKeys []string) (map[string]int, error) {
	ids, err := uuidArray(runIDs)
	if err != nil {
		return nil, wrap("open workflow runs", err)
	}
	of, err := uuidArray(nodeRuns)
	if err != nil {
		return nil, wrap("open workflow runs", err)
	}
	rows, err := q.Query(ctx, `WITH n AS (
			INSERT INTO workflow_run_nodes (tenant_id, run_id, key)
			SELECT $1, r, k FROM unnest($3::uuid[], $4::text[]) AS i(r, k) ON CONFLICT DO NOTHING
			RETURNING run_id
		), s AS (
			UPDATE workflow_runs SET state = `+runRunning+`, updated_at = now(), advanced_at = now(),
				started_at = coalesce(started_at, now()), finished_at = NULL
			WHERE tenant_id = $1 AND id = ANY($2::uuid[])
		)
		SELECT run_id::text, count(*)::int FROM n GROUP BY run_id`, tenant, ids, of, nodeKeys)
	if err != nil {
		return nil, wrap("open workflow runs", err)
	}
	out := map[string]int{}
	var id string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		out[id] = n
		return nil
	})
	return out, wrap("open workflow runs", err)
}

const runNodesSQL = `SELECT key, state, rule_met_at, updated_at, wait_event, wait_key, wait_since, wait_deadline,
		event_id::text AS event_id, error_class, last_error, finished_at
	FROM workflow_run_nodes WHERE tenant_id = $1 AND run_id = $2`

// GetRunNodes reads a run's nodes.
func GetRunNodes(ctx context.Context, q Querier, tenant, runID string) ([]RunNode, error) {
	rows, err := q.Query(ctx, runNodesSQL, tenant, runID)
	if err != nil {
		return nil, wrap("load run nodes", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunNode])
	return out, wrap("load run nodes", err)
}

// SetRunNodeStates moves nodes of a run to states (keys[i] → states[i]);
// a node that becomes fired records when (rule_met_at).
func SetRunNodeStates(ctx context.Context, q Querier, tenant, runID string, keys, states []string) error {
	_, err := q.Exec(ctx, setRunNodeStatesSQL, tenant, runID, keys, states)
	return wrap("set run node states", err)
}

var setRunNodeStatesSQL = `UPDATE workflow_run_nodes n SET state = c.state, updated_at = now(),
		rule_met_at = CASE WHEN c.state = ` + nodeFired + ` THEN coalesce(n.rule_met_at, now()) ELSE n.rule_met_at END
	FROM unnest($3::text[], $4::text[]) AS c(key, state)
	WHERE n.tenant_id = $1 AND n.run_id = $2 AND n.key = c.key`

// RunNodeStates moves nodes of a run to states (SetRunNodeStates).
type RunNodeStates struct {
	TenantID, RunID string
	Keys, States    []string
}

// SetRunsNodeStates is SetRunNodeStates for each of runs, in one round
// trip (one statement per run).
func SetRunsNodeStates(ctx context.Context, tx Tx, runs []RunNodeStates) error {
	b := &pgx.Batch{}
	for _, r := range runs {
		b.Queue(setRunNodeStatesSQL, r.TenantID, r.RunID, r.Keys, r.States)
	}
	return wrap("set run node states", tx.SendBatch(ctx, b).Close())
}

// RunExecution is one execution of a run's node.
type RunExecution struct {
	ID         string     `db:"id"`
	Node       string     `db:"node"`
	Shard      int32      `db:"shard"`
	State      string     `db:"state"`
	StartedAt  *time.Time `db:"started_at"`
	FinishedAt *time.Time `db:"finished_at"`
}

const runExecutionsSQL = `SELECT id::text, node, shard, state, started_at, finished_at FROM executions
	WHERE workflow_run_id = $2 AND tenant_id = $1 ORDER BY node, shard`

// GetRunExecutions reads the executions of a run (executions_node_idx).
func GetRunExecutions(ctx context.Context, q Querier, tenant, runID string) ([]RunExecution, error) {
	rows, err := q.Query(ctx, runExecutionsSQL, tenant, runID)
	if err != nil {
		return nil, wrap("load run executions", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunExecution])
	return out, wrap("load run executions", err)
}

// LockRunForAdvance locks a run's row and reads it with its nodes and
// executions (GetWorkflowRun, GetRunNodes, GetRunExecutions) in one round
// trip: the reads run after the lock is granted, so they see every change
// committed by the run's previous holder. A run that is gone is
// ErrNotFound.
func LockRunForAdvance(ctx context.Context, tx Tx, tenant, runID string) (WorkflowRun, []RunNode, []RunExecution, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+runColumns+` FROM workflow_runs r WHERE r.tenant_id = $1 AND r.id = $2 FOR UPDATE`, tenant, runID)
	b.Queue(runNodesSQL, tenant, runID)
	b.Queue(runExecutionsSQL, tenant, runID)
	br := tx.SendBatch(ctx, b)
	run, nodes, execs, err := readRunForAdvance(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = wrap("lock workflow run", cerr)
	}
	if err != nil {
		return WorkflowRun{}, nil, nil, err
	}
	return run, nodes, execs, nil
}

// RunForAdvance is a run with its nodes and executions as an advance
// reads them (ReadRunsForAdvance); Found is false for a run that is gone.
type RunForAdvance struct {
	Run   WorkflowRun
	Nodes []RunNode
	Execs []RunExecution
	Found bool
}

// ReadRunsForAdvance is LockRunForAdvance's reads for each of runs, all in
// one round trip, without taking the locks: the caller holds them
// (LockRuns).
func ReadRunsForAdvance(ctx context.Context, tx Tx, runs []RunRef) ([]RunForAdvance, error) {
	b := &pgx.Batch{}
	for _, r := range runs {
		b.Queue(`SELECT `+runColumns+` FROM workflow_runs r WHERE r.tenant_id = $1 AND r.id = $2`, r.TenantID, r.ID)
		b.Queue(runNodesSQL, r.TenantID, r.ID)
		b.Queue(runExecutionsSQL, r.TenantID, r.ID)
	}
	br := tx.SendBatch(ctx, b)
	out := make([]RunForAdvance, len(runs))
	for i := range runs {
		run, nodes, execs, err := readRunForAdvance(br)
		switch {
		case errors.Is(err, ErrNotFound):
			// the nodes' and executions' reads are still to be consumed
			for range 2 {
				if _, err := br.Exec(); err != nil {
					_ = br.Close()
					return nil, wrap("load workflow runs", err)
				}
			}
			continue
		case err != nil:
			_ = br.Close()
			return nil, err
		}
		out[i] = RunForAdvance{Run: run, Nodes: nodes, Execs: execs, Found: true}
	}
	return out, wrap("load workflow runs", br.Close())
}

// readRunForAdvance reads LockRunForAdvance's three results.
func readRunForAdvance(br pgx.BatchResults) (WorkflowRun, []RunNode, []RunExecution, error) {
	rows, err := br.Query()
	run, err := collectOne[WorkflowRun](rows, err)
	if err != nil {
		return WorkflowRun{}, nil, nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return WorkflowRun{}, nil, nil, wrap("load run nodes", err)
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunNode])
	if err != nil {
		return WorkflowRun{}, nil, nil, wrap("load run nodes", err)
	}
	rows, err = br.Query()
	if err != nil {
		return WorkflowRun{}, nil, nil, wrap("load run executions", err)
	}
	execs, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunExecution])
	if err != nil {
		return WorkflowRun{}, nil, nil, wrap("load run executions", err)
	}
	return run, nodes, execs, nil
}

// NewNodeExecution is one shard of a node to fire.
type NewNodeExecution struct {
	ID         string
	TaskID     string
	Trigger    string
	Node       string
	Shard      int32
	ShardCount int32
	// Payload is the execution's own rendered payload (nil: its node's).
	Payload []byte
}

// InsertNodeExecutions inserts the executions of a run's nodes (and their
// rows of unfinished_executions), skipping shards that already have one
// (executions_node_idx), and returns the inserted ones. They carry the
// run's slot and round (a root's execution of a scheduled or backfill run
// is on the slot key: the round keeps re-runs of a slot apart). Their
// fired event is implied (ImplicitFired, at created_at).
func InsertNodeExecutions(ctx context.Context, q Querier, tenant, workflowID, runID string, slot time.Time, round int32,
	execs []NewNodeExecution,
) ([]InsertedExecution, error) {
	rows := make([]RunNodeExecution, len(execs))
	for i, e := range execs {
		rows[i] = RunNodeExecution{WorkflowID: workflowID, RunID: runID, Slot: slot, Round: round, NewNodeExecution: e}
	}
	return InsertRunsNodeExecutions(ctx, q, tenant, rows)
}

// RunNodeExecution is a shard of a node to fire with its run.
type RunNodeExecution struct {
	WorkflowID, RunID string
	// Slot and Round are the run's (InsertNodeExecutions).
	Slot  time.Time
	Round int32
	NewNodeExecution
}

// InsertRunsNodeExecutions is InsertNodeExecutions for nodes of several
// runs of a tenant in one statement.
func InsertRunsNodeExecutions(ctx context.Context, q Querier, tenant string, execs []RunNodeExecution) ([]InsertedExecution, error) {
	n := len(execs)
	if n == 0 {
		return nil, nil
	}
	ids, tasks, triggers, nodes := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	workflows, runs, slots, rounds := make([]string, n), make([]string, n), make([]time.Time, n), make([]int32, n)
	shards, counts := make([]int32, n), make([]int32, n)
	payloads := make([][]byte, n)
	for i, e := range execs {
		ids[i], tasks[i], triggers[i], nodes[i], shards[i], counts[i] = e.ID, e.TaskID, e.Trigger, e.Node, e.Shard, e.ShardCount
		workflows[i], runs[i], slots[i], rounds[i] = e.WorkflowID, e.RunID, e.Slot, max(e.Round, 1)
		payloads[i] = e.Payload
	}
	var uuids [4][][16]byte
	for i, a := range [][]string{ids, tasks, workflows, runs} {
		u, err := uuidArray(a)
		if err != nil {
			return nil, wrap("insert node executions", err)
		}
		uuids[i] = u
	}
	rows, err := q.Query(ctx, `WITH ins AS (
			INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, implicit_events, workflow_id,
				workflow_run_id, node, shard, shard_count, round, payload)
			SELECT $1, id, task_id, slot, trigger, 1, workflow_id, run_id, node, shard, shard_count, round, payload
			FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::int[], $7::int[], $8::bytea[],
					$9::uuid[], $10::uuid[], $11::timestamptz[], $12::int[])
				AS i(id, task_id, trigger, node, shard, shard_count, payload, workflow_id, run_id, slot, round)
			ON CONFLICT DO NOTHING
			RETURNING tenant_id, id, task_id, scheduled_for
		), u AS (
			INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
			SELECT tenant_id, task_id, scheduled_for, id FROM ins
		)
		SELECT tenant_id, id::text, task_id::text, scheduled_for FROM ins`,
		tenant, uuids[0], uuids[1], triggers, nodes, shards, counts, payloads, uuids[2], uuids[3], slots, rounds)
	if err != nil {
		return nil, wrap("insert node executions", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[InsertedExecution])
	return out, wrap("insert node executions", err)
}

// CancelRunExecutions cancels the pending and retrying executions of a
// run (as CancelPendingExecutions does for a task), and the running ones
// that wait for a callback (no job carries them: their wait ends with the
// cancel, and their token can no longer act), asks its other running ones
// to stop, and returns how many it cancelled. It skips executions another
// transaction holds, never waiting while the caller holds the run's lock
// (a Finish holding an execution waits for that lock): those are being
// started or finished, and their run's advance finds the run cancelled.
func CancelRunExecutions(ctx context.Context, q Querier, tenant, runID, reason string) (int64, error) {
	tag, err := q.Exec(ctx, `WITH l AS (
			SELECT e.tenant_id, e.id, e.state, e.state = `+execRunning+` AND `+WaitingForCallback+` AS waiting
			FROM executions e
			WHERE e.workflow_run_id = $2 AND e.tenant_id = $1 AND e.state IN `+execUnfinished+`
			FOR UPDATE SKIP LOCKED
		), c AS (
			UPDATE executions e SET state = `+execCancelled+`, finished_at = now(), last_error = $3, next_attempt_at = NULL
			FROM l WHERE e.tenant_id = l.tenant_id AND e.id = l.id AND (l.state IN `+execIdle+` OR l.waiting)
			RETURNING e.tenant_id, e.id, e.task_id, e.scheduled_for
		), d AS (
			DELETE FROM unfinished_executions u USING c
			WHERE u.tenant_id = c.tenant_id AND u.task_id = c.task_id AND u.scheduled_for = c.scheduled_for AND u.id = c.id
		), cb AS (
			UPDATE callback_attempts w SET ended_at = now(), expires_at = NULL
			FROM l WHERE l.waiting AND w.tenant_id = l.tenant_id AND w.execution_id = l.id AND w.ended_at IS NULL
		), r AS (
			UPDATE executions e SET cancel_requested = true
			FROM l WHERE e.tenant_id = l.tenant_id AND e.id = l.id AND l.state = `+execRunning+` AND NOT l.waiting
		)
		INSERT INTO execution_events (tenant_id, execution_id, type, message)
		SELECT tenant_id, id, 'cancelled', $3 FROM c`, tenant, runID, reason)
	if err != nil {
		return 0, wrap("cancel run executions", err)
	}
	return tag.RowsAffected(), nil
}

// RunRef names a run.
type RunRef struct {
	TenantID string `db:"tenant_id"`
	ID       string `db:"id"`
}

// StalledRuns returns up to limit running runs that nothing in flight will
// advance: no unfinished execution, not advanced for at least age. They
// are the backstop sweep's work (a transition committed without its
// run's advance: a crash between them is impossible inside one
// transaction, but an older worker's success, or an admission whose
// roots did not fire, leaves one). It reads only the candidates: the
// running runs not advanced for age (advanced_at, which every advance
// that leaves its run running keeps within a second: MarkRunsAdvanced)
// with no node counted awaiting (workflow_runs_stalled_idx), so that
// neither a run advancing nor an idle wait costs the sweep a read of
// its executions. A run with a node awaiting its event is not stalled:
// that node's event, expiry or resolution by hand advances it;
// CountRunWaits keeps awaiting_nodes (a wait started since the last
// count may make a run a candidate, its advance then changes nothing; a
// wait ended since keeps its run out until the count, which the sweep
// makes first).
func StalledRuns(ctx context.Context, q Querier, age time.Duration, limit int) ([]RunRef, error) {
	// Cross-tenant by design: the sweep serves every tenant.
	rows, err := q.Query(ctx, `SELECT r.tenant_id, r.id::text FROM workflow_runs r
		WHERE r.state = `+runRunning+` AND r.awaiting_nodes = 0
		  AND r.advanced_at < now() - make_interval(secs => $1)
		  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.workflow_run_id = r.id AND e.tenant_id = r.tenant_id
			AND e.state IN `+execUnfinished+`)
		ORDER BY r.advanced_at LIMIT $2`, age.Seconds(), limit)
	if err != nil {
		return nil, wrap("stalled runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunRef])
	return out, wrap("stalled runs", err)
}

// RunAdvancedEvery is how far behind its last advance a running run's
// advanced_at may be: MarkRunsAdvanced does not write a run it marked
// more recently (a run's row is written at most once a second for it).
const RunAdvancedEvery = time.Second

// MarkRunsAdvanced records that the advance of a tenant's running runs
// (locked by the caller) brought them up to date (advanced_at, which
// StalledRuns reads), skipping those marked within RunAdvancedEvery. The
// caller writes no run twice in its transaction: a second write of a run
// row checks its workflow's key (FOR KEY SHARE), and so a run whose
// state the transaction changes (SetWorkflowRunState, OpenRuns: they
// set advanced_at themselves) is not marked.
func MarkRunsAdvanced(ctx context.Context, q Querier, tenant string, ids []string) error {
	uids, err := uuidArray(ids)
	if err != nil {
		return wrap("mark workflow runs advanced", err)
	}
	_, err = q.Exec(ctx, `UPDATE workflow_runs SET advanced_at = now()
		WHERE tenant_id = $1 AND id = ANY($2::uuid[]) AND state = `+runRunning+`
		  AND advanced_at < now() - make_interval(secs => $3)`, tenant, uids, RunAdvancedEvery.Seconds())
	return wrap("mark workflow runs advanced", err)
}

// WorkflowsWithQueuedRuns returns up to limit workflows that have a
// pending run and fewer started runs than max_active_runs.
func WorkflowsWithQueuedRuns(ctx context.Context, q Querier, limit int) ([]RunRef, error) {
	// Cross-tenant by design: the sweep serves every tenant.
	// It starts from the pending runs alone (workflow_runs_pending_idx, a
	// materialised CTE so that no plan starts elsewhere) and counts the
	// started runs only of workflows that have one: with none pending it
	// reads no run.
	rows, err := q.Query(ctx, `WITH queued AS MATERIALIZED (
			SELECT DISTINCT r.tenant_id, r.workflow_id FROM workflow_runs r
			WHERE r.state IN `+runUnfinished+` AND r.state = `+runPending+`
		)
		SELECT w.tenant_id, w.id::text FROM queued p
		JOIN workflows w ON w.tenant_id = p.tenant_id AND w.id = p.workflow_id
		WHERE (SELECT count(*) FROM workflow_runs r WHERE r.workflow_id = w.id AND r.tenant_id = w.tenant_id
			AND r.state IN `+runUnfinished+` AND r.state <> `+runPending+`) < w.max_active_runs
		LIMIT $1`, limit)
	if err != nil {
		return nil, wrap("queued workflow runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunRef])
	return out, wrap("queued workflow runs", err)
}

// CountRunsByState counts a tenant's workflow runs per state.
func CountRunsByState(ctx context.Context, q Querier, tenant string) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT state, count(*) FROM workflow_runs WHERE tenant_id = $1 GROUP BY state`, tenant)
	if err != nil {
		return nil, wrap("count workflow runs", err)
	}
	out := map[string]int64{}
	var (
		state string
		n     int64
	)
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		out[state] = n
		return nil
	})
	return out, wrap("count workflow runs", err)
}

// ExistingEndpoints returns which of ids are endpoints of the tenant.
func ExistingEndpoints(ctx context.Context, q Querier, tenant string, ids []string) (map[string]bool, error) {
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("find endpoints", err)
	}
	rows, err := q.Query(ctx, `SELECT id::text FROM endpoints WHERE tenant_id = $1 AND id = ANY($2::uuid[]) FOR SHARE`, tenant, uids)
	if err != nil {
		return nil, wrap("find endpoints", err)
	}
	out := map[string]bool{}
	var id string
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		out[id] = true
		return nil
	})
	return out, wrap("find endpoints", err)
}
