package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// GetExecutionDetail reads what an execution's detail shows in one round
// trip (the three statements pipelined): the execution (GetExecution),
// its timeline (ListExecutionEvents) and its latest callback attempt's
// progress and output (GetExecutionCallback; zero when it has none). A
// completion answers with it, so each one's answer costs one round trip,
// not three. ErrNotFound: no such execution.
func GetExecutionDetail(ctx context.Context, q Querier, tenant, id string) (Execution, []ExecutionEvent, ExecutionCallback, error) {
	bq, ok := q.(batcher)
	if !ok {
		return executionDetailOneByOne(ctx, q, tenant, id)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+executionColumns+` FROM executions e WHERE e.tenant_id = $1 AND e.id = $2`, tenant, id)
	b.Queue(`SELECT type, at, attempt, status_code, latency_ms, error_class, message, data
		FROM execution_events WHERE tenant_id = $1 AND execution_id = $2 ORDER BY seq`, tenant, id)
	b.Queue(`SELECT progress, output FROM callback_attempts
		WHERE tenant_id = $1 AND execution_id = $2 ORDER BY attempt DESC LIMIT 1`, tenant, id)
	br := bq.SendBatch(ctx, b)
	row, events, cb, err := readExecutionDetail(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = wrap("read execution", cerr)
	}
	if err != nil {
		return Execution{}, nil, ExecutionCallback{}, err
	}
	return row, Timeline(row, events), cb, nil
}

// readExecutionDetail reads GetExecutionDetail's three results.
func readExecutionDetail(br pgx.BatchResults) (Execution, []ExecutionEvent, ExecutionCallback, error) {
	row, err := collectOneRow[Execution](br.Query())
	if err != nil {
		return row, nil, ExecutionCallback{}, err
	}
	rows, err := br.Query()
	if err != nil {
		return row, nil, ExecutionCallback{}, wrap("list execution events", err)
	}
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[ExecutionEvent])
	if err != nil {
		return row, nil, ExecutionCallback{}, wrap("list execution events", err)
	}
	cb, err := collectOne[ExecutionCallback](br.Query())
	if errors.Is(err, ErrNotFound) {
		err = nil
	}
	return row, events, cb, err
}

// executionDetailOneByOne is GetExecutionDetail for a Querier that cannot
// pipeline.
func executionDetailOneByOne(ctx context.Context, q Querier, tenant, id string) (Execution, []ExecutionEvent, ExecutionCallback, error) {
	row, err := GetExecution(ctx, q, tenant, id, false)
	if err != nil {
		return row, nil, ExecutionCallback{}, err
	}
	events, err := ListExecutionEvents(ctx, q, row)
	if err != nil {
		return row, nil, ExecutionCallback{}, err
	}
	cb, err := GetExecutionCallback(ctx, q, tenant, id)
	if errors.Is(err, ErrNotFound) {
		err = nil
	}
	return row, events, cb, err
}
