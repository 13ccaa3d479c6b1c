package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// SetExecutionOutput keeps output as the output of a workflow node's
// execution in response mode (execution_outputs).
func SetExecutionOutput(ctx context.Context, q Querier, tenant, executionID string, output json.RawMessage) error {
	_, err := q.Exec(ctx, `INSERT INTO execution_outputs (tenant_id, execution_id, output) VALUES ($1, $2, $3::text::jsonb)
		ON CONFLICT (tenant_id, execution_id) DO UPDATE SET output = excluded.output, created_at = now()`,
		tenant, executionID, string(output))
	return wrap("store execution output", err)
}

// GetExecutionOutput returns the output a node's response-mode execution
// kept (nil: none).
func GetExecutionOutput(ctx context.Context, q Querier, tenant, executionID string) (json.RawMessage, error) {
	var out string
	err := q.QueryRow(ctx, `SELECT output::text FROM execution_outputs WHERE tenant_id = $1 AND execution_id = $2`,
		tenant, executionID).Scan(&out)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("load execution output", err)
	}
	return json.RawMessage(out), nil
}

// NodeOutput is the output of a run's node: its execution's (shard 0's),
// from its response (execution_outputs) or else from its latest callback
// attempt's completion. Output is nil when it has none.
type NodeOutput struct {
	Node   string  `db:"node"`
	Output *string `db:"output"`
}

const runOutputsSQL = `SELECT e.node, coalesce(o.output,
		(SELECT c.output FROM callback_attempts c WHERE c.tenant_id = e.tenant_id AND c.execution_id = e.id
		 ORDER BY c.attempt DESC LIMIT 1))::text AS output
	FROM executions e
	LEFT JOIN execution_outputs o ON o.tenant_id = e.tenant_id AND o.execution_id = e.id
	WHERE e.workflow_run_id = $2 AND e.tenant_id = $1 AND e.shard = 0
	UNION ALL
	SELECT n.key, n.output::text FROM workflow_run_nodes n
	WHERE n.tenant_id = $1 AND n.run_id = $2 AND n.output IS NOT NULL`

// GetRunOutputs returns the outputs of a run's nodes that fired
// (executions_node_idx), one per node, and of its wait_for nodes that
// have one (workflow_run_nodes.output).
func GetRunOutputs(ctx context.Context, q Querier, tenant, runID string) ([]NodeOutput, error) {
	rows, err := q.Query(ctx, runOutputsSQL, tenant, runID)
	if err != nil {
		return nil, wrap("load run outputs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[NodeOutput])
	return out, wrap("load run outputs", err)
}

// SetRunNodeLineage keeps, for nodes of a run, what their templates were
// rendered from (keys[i] → docs[i], each a JSON object).
func SetRunNodeLineage(ctx context.Context, q Querier, tenant, runID string, keys, docs []string) error {
	_, err := q.Exec(ctx, `UPDATE workflow_run_nodes n SET rendered_from = c.doc::jsonb
		FROM unnest($3::text[], $4::text[]) AS c(key, doc)
		WHERE n.tenant_id = $1 AND n.run_id = $2 AND n.key = c.key`, tenant, runID, keys, docs)
	return wrap("store run node lineage", err)
}

// NodeLineage is what a run's node was rendered from (rendered_from).
type NodeLineage struct {
	Key          string `db:"key"`
	RenderedFrom string `db:"rendered_from"`
}

// GetRunLineage returns the lineage of a run's nodes that have one.
func GetRunLineage(ctx context.Context, q Querier, tenant, runID string) ([]NodeLineage, error) {
	rows, err := q.Query(ctx, `SELECT key, rendered_from::text AS rendered_from FROM workflow_run_nodes
		WHERE tenant_id = $1 AND run_id = $2 AND rendered_from IS NOT NULL`, tenant, runID)
	if err != nil {
		return nil, wrap("load run node lineage", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[NodeLineage])
	return out, wrap("load run node lineage", err)
}

// RunView is a run as its API view reads it (ReadRunView).
type RunView struct {
	Run        WorkflowRun
	Nodes      []RunNode
	Executions []RunExecution
	Events     []RunEvent
	Outputs    []NodeOutput
	// SLAFinishWithinMS is the run's workflow's SLA (nil: none).
	SLAFinishWithinMS *int64
	// Now is the database's clock (the SLA's reference).
	Now time.Time
}

// batchSender is a Querier that pipelines (a pool, a connection, a
// transaction).
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ReadRunView reads a run with its nodes, executions, timeline, outputs,
// its workflow's SLA and the database's clock (GetWorkflowRun,
// GetRunNodes, GetRunExecutions, GetRunEvents, GetRunOutputs, Now) in
// one round trip when q pipelines (every Querier of ax does), one
// statement after another otherwise. A run that is not there is
// ErrNotFound.
func ReadRunView(ctx context.Context, q Querier, tenant, runID string) (RunView, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT `+runColumns+` FROM workflow_runs r WHERE r.tenant_id = $1 AND r.id = $2`, tenant, runID)
	b.Queue(runNodesSQL, tenant, runID)
	b.Queue(runExecutionsSQL, tenant, runID)
	b.Queue(runEventsSQL, tenant, runID)
	b.Queue(runOutputsSQL, tenant, runID)
	b.Queue(`SELECT (SELECT w.sla_finish_within_ms FROM workflow_runs r
			JOIN workflows w ON w.tenant_id = r.tenant_id AND w.id = r.workflow_id
			WHERE r.tenant_id = $1 AND r.id = $2), now()`, tenant, runID)
	next := func() (pgx.Rows, error) {
		qq := b.QueuedQueries[0]
		b.QueuedQueries = b.QueuedQueries[1:]
		return q.Query(ctx, qq.SQL, qq.Arguments...)
	}
	if s, ok := q.(batchSender); ok {
		br := s.SendBatch(ctx, b)
		v, err := readRunView(br.Query)
		if cerr := br.Close(); err == nil && cerr != nil {
			err = wrap("load workflow run", cerr)
		}
		return v, err
	}
	return readRunView(next)
}

// readRunView reads ReadRunView's results, each from next in turn.
func readRunView(next func() (pgx.Rows, error)) (RunView, error) {
	var v RunView
	rows, err := next()
	if v.Run, err = collectOne[WorkflowRun](rows, err); err != nil {
		return RunView{}, err
	}
	if v.Nodes, err = collectAll[RunNode](next, "load run nodes"); err != nil {
		return RunView{}, err
	}
	if v.Executions, err = collectAll[RunExecution](next, "load run executions"); err != nil {
		return RunView{}, err
	}
	if v.Events, err = collectAll[RunEvent](next, "load run events"); err != nil {
		return RunView{}, err
	}
	if v.Outputs, err = collectAll[NodeOutput](next, "load run outputs"); err != nil {
		return RunView{}, err
	}
	rows, err = next()
	if err != nil {
		return RunView{}, wrap("read the database clock", err)
	}
	_, err = pgx.ForEachRow(rows, []any{&v.SLAFinishWithinMS, &v.Now}, func() error { return nil })
	return v, wrap("read the database clock", err)
}

// collectAll collects the rows of next's result by name.
func collectAll[T any](next func() (pgx.Rows, error), what string) ([]T, error) {
	rows, err := next()
	if err != nil {
		return nil, wrap(what, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[T])
	return out, wrap(what, err)
}
