package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/schedule"
)

// callbackFixture makes executions of callback-mode tasks that wait for
// their completion, as the deliver worker leaves them.
type callbackFixture struct {
	*wfFixture
	tasks map[string]string // tenant → its callback task
}

func newCallbackFixture(t *testing.T) *callbackFixture {
	t.Helper()
	ctx := context.Background()
	f := &callbackFixture{wfFixture: newWFFixture(t), tasks: map[string]string{}}
	require.NoError(t, service.NewTenants(f.pool).Ensure(ctx, "other"))
	ep, err := service.NewEndpoints(f.pool).Create(ctx, "other", service.EndpointInput{Name: "e", URL: "https://example.com/hook"})
	require.NoError(t, err)
	f.exec(t, `UPDATE endpoints SET enabled = true`)
	for tenant, endpoint := range map[string]string{f.tenant: f.endpoint, "other": ep.ID} {
		x, err := f.fixture.tasks.Create(ctx, tenant, service.TaskInput{
			Name: "cb", EndpointID: endpoint, Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 3600},
			Retry:      service.RetryPolicy{MaxAttempts: 3},
			Completion: service.Completion{Mode: service.CompletionCallback, Timeout: time.Hour},
		})
		require.NoError(t, err)
		f.tasks[tenant] = x.ID
	}
	return f
}

// waiting fires an execution of tenant's callback task, sends and
// accepts its first attempt, and returns its id and its token's grant.
func (f *callbackFixture) waiting(t *testing.T, tenant string) (string, *service.CallbackGrant) {
	t.Helper()
	ctx := context.Background()
	x, err := f.ex.Trigger(ctx, tenant, f.tasks[tenant], service.TriggerInput{})
	require.NoError(t, err)
	return x.ID, f.accept(t, tenant, x.ID)
}

// accept sends and accepts the next attempt of execution id.
func (f *callbackFixture) accept(t *testing.T, tenant, id string) *service.CallbackGrant {
	t.Helper()
	ctx := context.Background()
	d, err := f.del.Begin(ctx, tenant, id, f.count(t, `SELECT lease_attempt + 1 FROM executions WHERE id = $1`, id))
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action, d.Reason)
	token, err := f.del.PrepareCallback(ctx, d)
	require.NoError(t, err)
	state, err := f.del.Accept(ctx, d, 202, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, service.ExecRunning, state)
	g, err := f.del.CallbackGrant(ctx, token)
	require.NoError(t, err)
	return &g
}

// recorded is what a completion left in the database of one execution,
// its timestamps left out.
func (f *callbackFixture) recorded(t *testing.T, id string) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT concat_ws('|', state, attempts, last_status_code, last_error, last_error_class, late, cancel_requested,
			finished_at IS NOT NULL, next_attempt_at IS NULL) FROM executions WHERE id = $1`,
		`SELECT count(*)::text FROM unfinished_executions WHERE id = $1`,
		`SELECT string_agg(concat_ws('|', type, attempt, status_code, latency_ms, error_class, message, data::text), E'\n' ORDER BY seq)
			FROM execution_events WHERE execution_id = $1`,
		`SELECT string_agg(concat_ws('|', attempt, lease, ended_at IS NOT NULL, expires_at IS NULL, output::text), E'\n' ORDER BY attempt)
			FROM callback_attempts WHERE execution_id = $1`,
		`SELECT string_agg(concat_ws('|', subject, operator, action, resource_type, request_id, changes::text), E'\n' ORDER BY id)
			FROM audit_log WHERE resource_id = $1::text`,
	} {
		var s *string
		require.NoError(t, f.pool.QueryRow(context.Background(), q, id).Scan(&s))
		if s != nil {
			b.WriteString(*s)
		}
		b.WriteString("\n--\n")
	}
	return b.String()
}

// TestCompletionsOfOneBatchAnswerEach: completions offered to one batched
// statement together each get their own answer — the good ones succeeded,
// an execution finished already or completed twice in the batch a
// conflict, an unknown id or another tenant's a 404, a stale token or an
// expired wait a conflict, a bad body a validation error — and the batch
// records a success exactly as the row-by-row path does. A failure and a
// workflow node's success, which the statement leaves, take the row-by-row
// path: the node's run advances.
func TestCompletionsOfOneBatchAnswerEach(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{Subject: "callback:attempt-1", RequestID: "req-1"})
	output := json.RawMessage(`{"rows": 12}`)

	// The row-by-row path's record of a success, to compare with.
	byRow, byRowGrant := f.waiting(t, f.tenant)
	_, err := f.del.CompleteRow(ctx, f.tenant, service.CompletionRequest{
		ExecutionID: byRow, Grant: byRowGrant, In: service.CompletionInput{Status: service.ExecSucceeded, Output: output},
	})
	require.NoError(t, err)

	good, goodGrant := f.waiting(t, f.tenant)
	byTenant, _ := f.waiting(t, f.tenant)
	finished, finishedGrant := f.waiting(t, f.tenant)
	_, err = f.del.Complete(ctx, f.tenant, finished, finishedGrant, service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
	others, _ := f.waiting(t, "other")
	stale, staleGrant := f.waiting(t, f.tenant)
	staleGrant.Attempt = 2
	expired, _ := f.waiting(t, f.tenant)
	f.exec(t, `UPDATE callback_attempts SET expires_at = now() - interval '1 second' WHERE execution_id = $1`, expired)
	failed, failedGrant := f.waiting(t, f.tenant)
	twice, twiceGrant := f.waiting(t, f.tenant)

	cb := f.node("a")
	cb.Completion = service.Completion{Mode: service.CompletionCallback, Timeout: time.Hour}
	run := f.trigger(t, f.create(t, "flow", cb, f.node("b", "a")))
	node := f.execsOf(t, run.ID, "a")[0]
	f.accept(t, f.tenant, node)

	// The task's failure streak ends with the batch's success.
	f.exec(t, `UPDATE tasks SET consecutive_failures = 2 WHERE id = $1`, f.tasks[f.tenant])

	ok := service.CompletionInput{Status: service.ExecSucceeded}
	reqs := []service.CompletionRequest{
		{ExecutionID: good, Grant: goodGrant, In: service.CompletionInput{Status: service.ExecSucceeded, Output: output}},
		{ExecutionID: byTenant, In: ok},
		{ExecutionID: finished, Grant: finishedGrant, In: ok},
		{ExecutionID: service.NewID(), In: ok},
		{ExecutionID: others, In: ok},
		{ExecutionID: stale, Grant: staleGrant, In: ok},
		{ExecutionID: expired, In: ok},
		{ExecutionID: failed, Grant: failedGrant, In: service.CompletionInput{Status: service.ExecFailed, Error: "gave up"}},
		{ExecutionID: node, In: ok},
		{ExecutionID: twice, Grant: twiceGrant, In: ok},
		{ExecutionID: twice, Grant: twiceGrant, In: ok},
		{ExecutionID: byTenant, In: service.CompletionInput{Status: "done"}},
	}
	got, errs, batched, err := f.del.CompleteTogether(ctx, f.tenant, reqs)
	require.NoError(t, err)
	require.Len(t, batched, 3, "the statement took the two successes and one of the twice completed: %v", batched)
	require.Equal(t, []int{0, 1}, batched[:2])
	require.Contains(t, []int{9, 10}, batched[2])

	state := func(i int) string {
		if errs[i] != nil {
			return "error"
		}
		return got[i].State
	}
	require.NoError(t, errs[0])
	require.Equal(t, service.ExecSucceeded, state(0))
	require.Equal(t, 1, got[0].Attempt)
	require.JSONEq(t, string(output), string(got[0].Output))
	require.Equal(t, service.ExecSucceeded, state(1), "a tenant token completes the current attempt")
	require.ErrorIs(t, errs[2], service.ErrConflict, "finished already")
	require.ErrorIs(t, errs[3], service.ErrNotFound, "an unknown id")
	require.ErrorIs(t, errs[4], service.ErrNotFound, "another tenant's execution")
	require.ErrorIs(t, errs[5], service.ErrConflict, "a token of another attempt")
	require.ErrorIs(t, errs[6], service.ErrConflict, "a wait that expired")
	require.Equal(t, service.ExecRetrying, state(7), "a failure is retried by the task's policy")
	require.Equal(t, service.ExecSucceeded, state(8), "a node's success")
	require.ElementsMatch(t, []string{service.ExecSucceeded, "error"}, []string{state(9), state(10)}, "one of two completions wins")
	for _, i := range []int{9, 10} {
		if errs[i] != nil {
			require.ErrorIs(t, errs[i], service.ErrConflict)
		}
	}
	var ve *service.ValidationError
	require.ErrorAs(t, errs[11], &ve)

	// What the batch recorded is what the row-by-row path records.
	require.Equal(t, strings.ReplaceAll(f.recorded(t, byRow), byRow, "X"), strings.ReplaceAll(f.recorded(t, good), good, "X"))
	require.Equal(t, 0, f.count(t, `SELECT consecutive_failures FROM tasks WHERE id = $1`, f.tasks[f.tenant]))
	// The others changed nothing.
	for _, id := range []string{others, stale, expired} {
		require.Equal(t, service.ExecRunning, f.stateOf(t, id), id)
		require.Equal(t, 0, f.count(t, `SELECT count(*) FROM execution_events WHERE execution_id = $1 AND type = 'completed'`, id))
	}
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM execution_events WHERE execution_id = $1 AND type = 'completed'`, finished))
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM execution_events WHERE execution_id = $1 AND type = 'completed'`, twice))
	// The node's run advanced: its next node fired.
	nodes, _ := f.nodes(t, run.ID)
	require.Equal(t, service.ExecSucceeded, nodes["a"])
	require.Len(t, f.execsOf(t, run.ID, "b"), 1)
}

// TestConcurrentCompletionsOfOneExecution: completions of one execution
// racing one another (batched together or not) — exactly one wins, the
// others are conflicts, and the timeline has one completion.
func TestConcurrentCompletionsOfOneExecution(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	ctx := context.Background()
	const executions, each = 6, 8
	ids := make([]string, executions)
	grants := make([]*service.CallbackGrant, executions)
	for i := range ids {
		ids[i], grants[i] = f.waiting(t, f.tenant)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins = map[string]int{}
		errs []error
	)
	for i := range executions * each {
		wg.Go(func() {
			x := i % executions
			grant := grants[x]
			if i%3 == 0 {
				grant = nil // a tenant token
			}
			_, err := f.del.Complete(ctx, f.tenant, ids[x], grant, service.CompletionInput{Status: service.ExecSucceeded})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins[ids[x]]++
			case !errors.Is(err, service.ErrConflict):
				errs = append(errs, fmt.Errorf("%s: %w", ids[x], err))
			}
		})
	}
	wg.Wait()
	require.Empty(t, errs)
	for _, id := range ids {
		require.Equal(t, 1, wins[id], "one completion of %s wins", id)
		require.Equal(t, service.ExecSucceeded, f.stateOf(t, id))
		require.Equal(t, 1, f.count(t, `SELECT count(*) FROM execution_events WHERE execution_id = $1 AND type = 'completed'`, id))
		require.Equal(t, 1, f.count(t, `SELECT count(*) FROM execution_events WHERE execution_id = $1 AND type = 'succeeded'`, id))
	}
	require.Positive(t, f.del.BatchStats().Batched, "the batched statement recorded completions")
}

func (f *callbackFixture) stateOf(t *testing.T, id string) string {
	t.Helper()
	var s string
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT state FROM executions WHERE id = $1`, id).Scan(&s))
	return s
}

// TestCompletionBatchAgreesWithTheRow: every combination of what decides
// a completion — whose token (the attempt's, a tenant's, another
// attempt's, the attempt's kept after the attempt was given a new one),
// the wait (open, ended, expired), the execution (running
// under the attempt, its lease moved on, a cancel requested) — completed
// in one database through one batch and in another through the row-by-row
// path alone gives the same answers and leaves the same rows, events and
// audit records; and the batched statement takes exactly the completions
// the row-by-row path records (db.CompletesWithoutDecision with
// db.SucceedsWithoutDecision is callback.Current's mirror for a success).
func TestCompletionBatchAgreesWithTheRow(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Subject: "callback:attempt-1", RequestID: "req-2"})
	type combo struct{ grant, wait, exec string }
	var combos []combo
	for _, g := range []string{"token", "tenant", "other-attempt", "replaced-token"} {
		for _, w := range []string{"open", "ended", "expired"} {
			for _, e := range []string{"current", "lease-moved", "cancel-requested"} {
				combos = append(combos, combo{g, w, e})
			}
		}
	}
	// prepare makes one waiting execution per combination in f.
	prepare := func(f *callbackFixture) ([]string, []service.CompletionRequest) {
		ids := make([]string, len(combos))
		reqs := make([]service.CompletionRequest, len(combos))
		for i, c := range combos {
			id, grant := f.waiting(t, f.tenant)
			switch c.grant {
			case "tenant":
				grant = nil
			case "other-attempt":
				grant.Attempt++
			case "replaced-token":
				require.True(t, grant.Kept, "the grant of a token this replica handed out is kept")
				f.exec(t, `UPDATE callback_attempts SET token_hash = sha256(convert_to('axcb_new_' || $1, 'UTF8')) WHERE execution_id = $1`, id)
			}
			switch c.wait {
			case "ended":
				f.exec(t, `UPDATE callback_attempts SET ended_at = now(), expires_at = NULL WHERE execution_id = $1`, id)
			case "expired":
				f.exec(t, `UPDATE callback_attempts SET expires_at = now() - interval '1 second' WHERE execution_id = $1`, id)
			}
			switch c.exec {
			case "lease-moved":
				f.exec(t, `UPDATE executions SET lease_attempt = lease_attempt + 1 WHERE id = $1`, id)
			case "cancel-requested":
				f.exec(t, `UPDATE executions SET cancel_requested = true WHERE id = $1`, id)
			}
			ids[i] = id
			reqs[i] = service.CompletionRequest{
				ExecutionID: id, Grant: grant,
				In: service.CompletionInput{Status: service.ExecSucceeded, Output: json.RawMessage(`{"i": ` + strconv.Itoa(i) + `}`)},
			}
		}
		return ids, reqs
	}
	answer := func(c service.Completed, err error) string {
		switch {
		case err == nil:
			return "ok " + c.State + " " + strconv.Itoa(c.Attempt) + " " + string(c.Output)
		case errors.Is(err, service.ErrConflict):
			return "conflict"
		case errors.Is(err, service.ErrNotFound):
			return "not found"
		}
		return err.Error()
	}

	batchDB, rowDB := newCallbackFixture(t), newCallbackFixture(t)
	batchIDs, batchReqs := prepare(batchDB)
	rowIDs, rowReqs := prepare(rowDB)
	got, errs, batched, err := batchDB.del.CompleteTogether(ctx, batchDB.tenant, batchReqs)
	require.NoError(t, err)
	var recorded []int
	for i, c := range combos {
		want, wantErr := rowDB.del.CompleteRow(ctx, rowDB.tenant, rowReqs[i])
		if wantErr == nil {
			recorded = append(recorded, i)
		}
		require.Equal(t, answer(want, wantErr), answer(got[i], errs[i]), "%+v", c)
		require.Equal(t,
			strings.ReplaceAll(rowDB.recorded(t, rowIDs[i]), rowIDs[i], "X"),
			strings.ReplaceAll(batchDB.recorded(t, batchIDs[i]), batchIDs[i], "X"), "%+v", c)
	}
	require.Equal(t, recorded, batched, "the batch takes exactly the completions the row-by-row path records")
	require.NotEmpty(t, batched)
}

// TestBatchedCompletionAnswersWithTheDetail: a completion the batch
// records answers with its execution as the batch's transaction left it,
// which is what reading it after the commit returns (Executions.Get: the
// state, the whole timeline with the batch's events, the output, the last
// heartbeat's progress), for each completion of the batch.
func TestBatchedCompletionAnswersWithTheDetail(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	ctx := audit.WithActor(context.Background(), audit.Actor{Subject: "callback:attempt-1", RequestID: "req-1"})

	withOutput, withOutputGrant := f.waiting(t, f.tenant)
	byTenant, _ := f.waiting(t, f.tenant)
	withProgress, withProgressGrant := f.waiting(t, f.tenant)
	require.NoError(t, f.del.Heartbeat(ctx, f.tenant, withProgress, withProgressGrant, json.RawMessage(`{"done": 3}`)))
	stale, staleGrant := f.waiting(t, f.tenant)
	staleGrant.Attempt = 2

	got, errs, batched, err := f.del.CompleteTogether(ctx, f.tenant, []service.CompletionRequest{
		{ExecutionID: withOutput, Grant: withOutputGrant, In: service.CompletionInput{
			Status: service.ExecSucceeded, Output: json.RawMessage(`{"rows": 12}`),
		}},
		{ExecutionID: byTenant, In: service.CompletionInput{Status: service.ExecSucceeded}},
		{ExecutionID: withProgress, Grant: withProgressGrant, In: service.CompletionInput{Status: service.ExecSucceeded}},
		{ExecutionID: stale, Grant: staleGrant, In: service.CompletionInput{Status: service.ExecSucceeded}},
	})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2}, batched)
	for i, id := range []string{withOutput, byTenant, withProgress} {
		require.NoError(t, errs[i])
		require.NotNil(t, got[i].Detail, "the batch read the answer of %s", id)
		want, err := f.ex.Get(ctx, f.tenant, id)
		require.NoError(t, err)
		require.Equal(t, want, *got[i].Detail, id)
		require.Equal(t, service.ExecSucceeded, got[i].Detail.State)
	}
	require.JSONEq(t, `{"rows": 12}`, string(got[0].Detail.Output))
	require.JSONEq(t, `{"done": 3}`, string(got[2].Detail.Progress))
	require.ErrorIs(t, errs[3], service.ErrConflict)
	require.Nil(t, got[3].Detail)
}

// waitingToken is waiting, returning the attempt's callback token.
func (f *callbackFixture) waitingToken(t *testing.T, tenant string) (string, string) {
	t.Helper()
	ctx := context.Background()
	x, err := f.ex.Trigger(ctx, tenant, f.tasks[tenant], service.TriggerInput{})
	require.NoError(t, err)
	d, err := f.del.Begin(ctx, tenant, x.ID, 1)
	require.NoError(t, err)
	require.Equal(t, service.ActionSend, d.Action, d.Reason)
	token, err := f.del.PrepareCallback(ctx, d)
	require.NoError(t, err)
	state, err := f.del.Accept(ctx, d, 202, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, service.ExecRunning, state)
	return x.ID, token
}

// TestTokenLookupsOfOneBatchAnswerEach: tokens looked up together in one
// statement (callback.GrantsOf) each get their own grant — of its tenant,
// execution and attempt, kept while the attempt may act — or
// ErrInvalidToken for a token no attempt was given (forged, malformed,
// replaced by the attempt's new token); a replica that did not hand a
// token out looks it up once and then keeps it.
func TestTokenLookupsOfOneBatchAnswerEach(t *testing.T) {
	t.Parallel()
	f := newCallbackFixture(t)
	ctx := context.Background()
	x, tx := f.waitingToken(t, f.tenant)
	y, ty := f.waitingToken(t, "other")
	over, tover := f.waitingToken(t, f.tenant)
	_, err := f.del.Complete(ctx, f.tenant, over, nil, service.CompletionInput{Status: service.ExecSucceeded})
	require.NoError(t, err)
	replaced, treplaced := f.waitingToken(t, f.tenant)
	f.exec(t, `UPDATE callback_attempts SET token_hash = sha256('axcb_elsewhere'::bytea) WHERE execution_id = $1`, replaced)

	tokens := []string{tx, service.CallbackTokenPrefix + "forged", ty, "not-a-token", tover, treplaced, tx}
	got, err := callback.GrantsOf(ctx, f.pool, tokens)
	require.NoError(t, err)
	require.Len(t, got, len(tokens))
	grant := func(i int) [3]any {
		return [3]any{got[i].Grant.TenantID, got[i].Grant.ExecutionID, got[i].Grant.Attempt}
	}
	require.NoError(t, got[0].Err)
	require.Equal(t, [3]any{f.tenant, x, 1}, grant(0))
	require.False(t, got[0].Until.IsZero(), "a waiting attempt's grant is kept until its deadline")
	require.ErrorIs(t, got[1].Err, service.ErrInvalidCallbackToken)
	require.NoError(t, got[2].Err)
	require.Equal(t, [3]any{"other", y, 1}, grant(2))
	require.ErrorIs(t, got[3].Err, service.ErrInvalidCallbackToken)
	require.NoError(t, got[4].Err, "the token of an attempt over still names it")
	require.Equal(t, [3]any{f.tenant, over, 1}, grant(4))
	require.True(t, got[4].Until.IsZero(), "an attempt over is not worth keeping")
	require.ErrorIs(t, got[5].Err, service.ErrInvalidCallbackToken)
	require.Equal(t, grant(0), grant(6))

	// Another replica: looks the token up, then keeps it.
	other := service.NewDeliveries(f.delivery, f.enq, service.DeliveriesConfig{})
	g, err := other.CallbackGrant(ctx, tx)
	require.NoError(t, err)
	require.False(t, g.Kept)
	g, err = other.CallbackGrant(ctx, tx)
	require.NoError(t, err)
	require.True(t, g.Kept)
	require.Equal(t, x, g.ExecutionID)
	_, err = other.CallbackGrant(ctx, treplaced)
	require.ErrorIs(t, err, service.ErrInvalidCallbackToken)
}
