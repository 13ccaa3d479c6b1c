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

// ExecutionDetail is what an execution's detail shows (GetExecutionDetail's
// three parts): the execution, its timeline, its latest callback attempt's
// progress and output.
type ExecutionDetail struct {
	Row      Execution
	Events   []ExecutionEvent
	Callback ExecutionCallback
}

// GetExecutionDetails reads the details of many executions, the i-th of
// tenants[i] and ids[i], in two statements whatever their number (the
// executions with their latest callback attempts, then their events): a
// batched completion answers each completion it recorded with its detail,
// read in its own transaction. found is false for an execution that does
// not exist.
func GetExecutionDetails(ctx context.Context, q Querier, tenants, ids []string) (details []ExecutionDetail, found []bool, err error) {
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, nil, wrap("read executions", err)
	}
	rows, err := q.Query(ctx, `SELECT i.ord, `+executionColumns+`, w.progress, w.output
		FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS i(tenant_id, id, ord)
		JOIN executions e ON e.tenant_id = i.tenant_id AND e.id = i.id
		LEFT JOIN LATERAL (
			SELECT w.progress, w.output FROM callback_attempts w
			WHERE w.tenant_id = e.tenant_id AND w.execution_id = e.id
			ORDER BY w.attempt DESC LIMIT 1
		) w ON true`, tenants, uids)
	if err != nil {
		return nil, nil, wrap("read executions", err)
	}
	details, found = make([]ExecutionDetail, len(ids)), make([]bool, len(ids))
	var (
		ord int
		row Execution
		cb  ExecutionCallback
	)
	_, err = pgx.ForEachRow(rows, append([]any{&ord}, append(row.fields(), &cb.Progress, &cb.Output)...), func() error {
		details[ord-1] = ExecutionDetail{Row: row, Callback: cb}
		found[ord-1] = true
		row, cb = Execution{}, ExecutionCallback{}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("read executions", err)
	}
	rows, err = q.Query(ctx, `SELECT i.ord, v.type, v.at, v.attempt, v.status_code, v.latency_ms, v.error_class, v.message, v.data
		FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS i(tenant_id, id, ord)
		JOIN execution_events v ON v.tenant_id = i.tenant_id AND v.execution_id = i.id
		ORDER BY i.ord, v.seq`, tenants, uids)
	if err != nil {
		return nil, nil, wrap("list execution events", err)
	}
	var ev ExecutionEvent
	scan := []any{&ord, &ev.Type, &ev.At, &ev.Attempt, &ev.StatusCode, &ev.LatencyMS, &ev.ErrorClass, &ev.Message, &ev.Data}
	_, err = pgx.ForEachRow(rows, scan, func() error {
		details[ord-1].Events = append(details[ord-1].Events, ev)
		ev = ExecutionEvent{}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("list execution events", err)
	}
	for i := range details {
		if found[i] {
			details[i].Events = Timeline(details[i].Row, details[i].Events)
		}
	}
	return details, found, nil
}
