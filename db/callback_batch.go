package db

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/jackc/pgx/v5"
)

// The API's common completion — a callback attempt reported succeeded
// while ax waits for it — runs as one statement per batch of concurrent
// completions (CompleteCallbacks), as the deliver worker's successes do
// (SucceedDeliveries). Its condition is CompletesWithoutDecision: the
// attempt may act now (the row-by-row path's checks of its callback row:
// service/callback.Current) and its success needs no decision
// (SucceedsWithoutDecision). A completion the statement leaves alone —
// a stale token, an attempt over or timed out, an execution that is a
// workflow node's or holds a permit, an unknown id or another tenant's —
// takes the row-by-row path, which decides it and gives its answer.

// CompletesWithoutDecision is the condition under which the batched
// completion (CompleteCallbacks) takes a completion, over the request i
// (attempt: the attempt the callback token was given for, 0 for a tenant
// token, which acts on the current attempt; token_hash: the token's hash,
// null for a tenant token) and the execution's latest callback attempt w:
// the SQL mirror of service/callback.Current's checks (the token's attempt
// is the latest, still given that token, which has not ended nor timed
// out by the database clock). The execution's side — running under that
// attempt and its lease, and a success the batched statement may record —
// is SucceedsWithoutDecision, with w's lease as i.lease, and e.attempts =
// w.attempt.
var CompletesWithoutDecision = `(i.attempt = 0 OR i.attempt = w.attempt)
	AND (i.token_hash IS NULL OR i.token_hash = w.token_hash) AND w.ended_at IS NULL
	AND (w.expires_at IS NULL OR w.expires_at > now())`

// CallbackCompletion is a callback attempt reported succeeded, offered to
// the batched completion.
type CallbackCompletion struct {
	TenantID    string
	ExecutionID string
	// Attempt is the attempt the callback token was given for; 0: a
	// tenant token, which completes the current attempt.
	Attempt int
	// TokenHash is the callback token's hash (nil: a tenant token): the
	// attempt must still have that token.
	TokenHash []byte
	// Output is kept as the attempt's output (nil or null: none).
	Output json.RawMessage
	// Event is the data of the attempt's completed event.
	Event []byte
	// Audit is the completion's audit record (nil: none). Its changes
	// are written as given.
	Audit *AuditRecord
}

// CompletionEvents names the events a recorded completion writes, in
// this order: the completion (with CallbackCompletion.Event as its data),
// the attempt's success (latency 0: the attempt's send was recorded when
// it was accepted), the execution's success.
type CompletionEvents struct {
	Completed, AttemptSucceeded, Succeeded string
}

// CompleteCallbacks records the completions that CompletesWithoutDecision
// and SucceedsWithoutDecision admit, in one statement, as the row-by-row
// path records them: the execution succeeded (its last status code the
// 2xx that accepted the attempt), out of unfinished_executions; the
// attempt's wait ended with its output; the events completed,
// attempt_succeeded and succeeded; the audit record. It returns the
// attempt of each completion it recorded, keyed by its index in cs, and,
// as SucceedDeliveries does, resets the failure streaks those successes
// ended (the alerted ones are returned for the caller to queue their
// recovered alerts in the same transaction: run it in one, q a pgx.Tx).
// Two completions of one execution in a batch record at most one; the
// others, and every completion left alone, are absent from the map.
//
// Locks: the statement locks each execution (its update) before its
// callback row (the wait's end), the row-by-row path's order.
func CompleteCallbacks(ctx context.Context, q Querier, cs []CallbackCompletion, types CompletionEvents,
) (map[int]int, []Recovered, error) {
	n := len(cs)
	// In (tenant, id) order: concurrent batches lock the executions they
	// share in the same order (the plan follows the input's), and do not
	// deadlock. by[k] is the index in cs of the k-th.
	by := make([]int, n)
	for i := range by {
		by[i] = i
	}
	sort.SliceStable(by, func(a, b int) bool {
		x, y := cs[by[a]], cs[by[b]]
		return x.TenantID < y.TenantID || x.TenantID == y.TenantID && x.ExecutionID < y.ExecutionID
	})
	tenants, ids, attempts, hashes := make([]string, n), make([]string, n), make([]int32, n), make([][]byte, n)
	outputs, events := make([]*string, n), make([]string, n)
	auditIDs, actions, kinds, changes := make([]*string, n), make([]string, n), make([]string, n), make([]*string, n)
	subjects, requests, operators := make([]string, n), make([]string, n), make([]bool, n)
	for i, k := range by {
		c := cs[k]
		tenants[i], ids[i], attempts[i], hashes[i] = c.TenantID, c.ExecutionID, int32(c.Attempt), c.TokenHash // attempts are small
		outputs[i], events[i] = jsonOrNull(c.Output), string(c.Event)
		if a := c.Audit; a != nil {
			auditIDs[i], subjects[i], operators[i], requests[i], changes[i] = &a.ID, a.Subject, a.Operator, a.RequestID, nullJSON(a.Changes)
			actions[i], kinds[i] = a.Action, a.ResourceType
		}
	}
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, nil, wrap("complete callbacks", err)
	}
	rows, err := q.Query(ctx, `WITH input AS (
			SELECT * FROM unnest($1::text[], $2::uuid[], $3::int[], $4::jsonb[], $5::jsonb[],
				$6::text[], $7::text[], $8::bool[], $9::text[], $10::jsonb[], $11::text[], $12::text[], $14::bytea[]) WITH ORDINALITY
				AS i(tenant_id, id, attempt, output, event, audit_id, subject, operator, request_id, changes, action, resource_type,
					token_hash, ord)
		), cw AS (
			SELECT i.*, w.attempt AS current_attempt, w.lease
			FROM input i
			JOIN LATERAL (
				SELECT w.attempt, w.lease, w.token_hash, w.ended_at, w.expires_at FROM callback_attempts w
				WHERE w.tenant_id = i.tenant_id AND w.execution_id = i.id
				ORDER BY w.attempt DESC LIMIT 1
			) w ON true
			WHERE `+CompletesWithoutDecision+`
		), done AS (
			UPDATE executions e SET state = `+execSucceeded+`, finished_at = now(), next_attempt_at = NULL,
				last_error = NULL, last_error_class = NULL
			FROM cw i
			WHERE e.tenant_id = i.tenant_id AND e.id = i.id AND e.attempts = i.current_attempt AND `+SucceedsWithoutDecision+`
			RETURNING i.ord, e.tenant_id, e.task_id, e.attempts, e.scheduled_for, e.id, i.output, i.event,
				i.audit_id, i.subject, i.operator, i.request_id, i.changes, i.action, i.resource_type
		), closed AS (
			DELETE FROM unfinished_executions u USING done d
			WHERE u.tenant_id = d.tenant_id AND u.task_id = d.task_id AND u.scheduled_for = d.scheduled_for AND u.id = d.id
		), ended AS (
			UPDATE callback_attempts w SET ended_at = coalesce(w.ended_at, now()), expires_at = NULL,
				output = coalesce(d.output, w.output)
			FROM done d
			WHERE w.tenant_id = d.tenant_id AND w.execution_id = d.id AND w.attempt = d.attempts
		), timeline AS (
			INSERT INTO execution_events (tenant_id, execution_id, type, attempt, latency_ms, data)
			SELECT tenant_id, id, type, attempts, latency_ms, data FROM (
				SELECT d.tenant_id, d.id, d.ord, d.attempts, k.n, k.type,
					CASE WHEN k.n = 2 THEN 0 END AS latency_ms, CASE WHEN k.n = 1 THEN d.event END AS data
				FROM done d CROSS JOIN unnest($13::text[]) WITH ORDINALITY AS k(type, n)
			) ev ORDER BY ord, n
		), audited AS (
			INSERT INTO audit_log (tenant_id, id, subject, operator, action, resource_type, resource_id, request_id, changes)
			SELECT d.tenant_id, d.audit_id::uuid, d.subject, d.operator, d.action, d.resource_type, d.id::text, d.request_id, d.changes
			FROM done d
			WHERE d.audit_id IS NOT NULL
		)
		SELECT d.ord, d.attempts, t.id::text AS failing_task
		FROM done d
		LEFT JOIN LATERAL (
			SELECT t.id FROM tasks t
			WHERE t.tenant_id = d.tenant_id AND t.id = d.task_id AND (t.consecutive_failures <> 0 OR t.failure_alerted) OFFSET 0
		) t ON true`, tenants, uids, attempts, outputs, events, auditIDs, subjects, operators, requests, changes, actions, kinds,
		[]string{types.Completed, types.AttemptSucceeded, types.Succeeded}, hashes)
	if err != nil {
		return nil, nil, wrap("complete callbacks", err)
	}
	out := make(map[int]int, n)
	var reset []taskRef
	first := map[taskRef]int{} // a task's first completion in cs
	var ord, attempt int
	var failing *string
	_, err = pgx.ForEachRow(rows, []any{&ord, &attempt, &failing}, func() error {
		i := by[ord-1]
		out[i] = attempt
		if failing != nil {
			ref := taskRef{tenant: cs[i].TenantID, id: *failing}
			if _, seen := first[ref]; !seen || i < first[ref] {
				first[ref] = i
				if !seen {
					reset = append(reset, ref)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, wrap("complete callbacks", err)
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
