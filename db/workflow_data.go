package db

import (
	"context"
	"encoding/json"
	"errors"

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

// GetRunOutputs returns the outputs of a run's nodes that fired
// (executions_node_idx), one per node, and of its wait_for nodes that
// have one (workflow_run_nodes.output).
func GetRunOutputs(ctx context.Context, q Querier, tenant, runID string) ([]NodeOutput, error) {
	rows, err := q.Query(ctx, `SELECT e.node, coalesce(o.output,
			(SELECT c.output FROM callback_attempts c WHERE c.tenant_id = e.tenant_id AND c.execution_id = e.id
			 ORDER BY c.attempt DESC LIMIT 1))::text AS output
		FROM executions e
		LEFT JOIN execution_outputs o ON o.tenant_id = e.tenant_id AND o.execution_id = e.id
		WHERE e.workflow_run_id = $2 AND e.tenant_id = $1 AND e.shard = 0
		UNION ALL
		SELECT n.key, n.output::text FROM workflow_run_nodes n
		WHERE n.tenant_id = $1 AND n.run_id = $2 AND n.output IS NOT NULL`, tenant, runID)
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
