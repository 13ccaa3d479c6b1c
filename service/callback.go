package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/execution"
)

// Long-running work (docs/architecture.md, "Callbacks"): a task in
// completion mode "callback" treats a 2xx as accepted. The execution stays
// running, but no River job and no worker carries it while ax waits: the
// attempt's row in callback_attempts does, with its deadlines, and the
// callback sweeper (SweepCallbacks) fails the attempt when one passes. The
// receiver reports with the attempt's callback token, an opaque random
// capability whose SHA-256 is all ax keeps.

// Completion modes, callbacks' error classes, events and bounds
// (service/callback), as service's files and callers name them.
const (
	CompletionResponse         = callback.ModeResponse
	CompletionCallback         = callback.ModeCallback
	ErrorClassHeartbeatTimeout = callback.ErrorClassHeartbeatTimeout
	ErrorClassCallbackTimeout  = callback.ErrorClassCallbackTimeout
	ErrorClassCallbackFailed   = callback.ErrorClassCallbackFailed
	EventAccepted              = callback.EventAccepted
	EventCompleted             = callback.EventCompleted
	CallbackTokenPrefix        = callback.TokenPrefix
	OutputMax                  = callback.OutputMax
	// EventSLAMissed: the execution was not succeeded by its task's SLA.
	EventSLAMissed = "sla_missed"
	// SLAMax bounds finish_within_ms: 30 days.
	SLAMax = 30 * 24 * time.Hour
)

type (
	// Completion is how an attempt of a task ends (TaskInput.Completion).
	Completion = callback.Completion
	// CallbackSpec is what a delivery in callback mode needs.
	CallbackSpec = callback.Spec
	// CallbackGrant is what a callback token allows.
	CallbackGrant = callback.Grant
	// CompletionInput is the body of a completion.
	CompletionInput = callback.Input
	// CallbackSweep is what one SweepCallbacks pass did.
	CallbackSweep = callback.Sweep
)

// ErrInvalidCallbackToken: no attempt was ever given the token.
var ErrInvalidCallbackToken = callback.ErrInvalidToken

// SLA is a task's service level (TaskInput.SLA): FinishWithin after its
// slot, an execution should have succeeded. Zero: none.
type SLA struct {
	FinishWithin time.Duration
}

func validateCompletion(ve *ValidationError, c Completion) { c.Check(ve) }

func validateSLA(ve *ValidationError, s SLA) {
	if s.FinishWithin != 0 && (s.FinishWithin < time.Second || s.FinishWithin > SLAMax) {
		ve.Add("sla.finish_within_ms", fmt.Sprintf("must be 1000 to %d, or sla absent for none", SLAMax.Milliseconds()))
	}
}

// PrepareCallback records attempt d (in callback mode, just begun) and
// returns the X-Ax-Callback-Token it is sent with: the token's hash and
// the attempt's deadline are stored before the request leaves, so that a
// receiver may complete it before it even answers.
func (s *Deliveries) PrepareCallback(ctx context.Context, d Delivery) (string, error) {
	if d.Callback == nil {
		return "", errors.New("prepare callback: the delivery is not in callback mode")
	}
	return s.grants.Prepare(ctx, s.pool, d.TenantID, d.ExecutionID, d.Attempt, d.Lease, *d.Callback)
}

// Accept records that the receiver accepted callback attempt d with a 2xx
// (statusCode, after latency): ax now waits for its completion, and the
// River job that sent it may end. It returns the execution's state:
// running (waiting), cancelled (a cancel was requested while the attempt
// was in flight: the attempt is cut short, as a failed one would be), or
// "" when the attempt is no longer current (the receiver completed it
// before its answer arrived), which changes nothing.
func (s *Deliveries) Accept(ctx context.Context, d Delivery, statusCode int, latency time.Duration) (string, error) {
	var (
		state string
		fin   Finished
		done  ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		row, err := db.GetDeliveryOutcome(ctx, tx, d.TenantID, d.ExecutionID)
		if err != nil {
			return err
		}
		if row.State != ExecRunning || row.LeaseAttempt != d.Lease || row.Attempts != d.Attempt {
			return nil
		}
		if row.CancelRequested {
			fin, err = s.finish(ctx, tx, d.TenantID, d.ExecutionID, d.Lease, row, Outcome{
				Kind: OutcomePermanent, CutByCancel: true, StatusCode: statusCode, Latency: latency,
				ErrorClass: "canceled", Error: "cancel requested while the attempt was being accepted",
			})
			if err != nil {
				return err
			}
			state, done = fin.State, fin.ended
			return db.EndCallback(ctx, tx, d.TenantID, d.ExecutionID, d.Attempt, nil)
		}
		ok, err := db.AcceptCallback(ctx, tx, d.TenantID, d.ExecutionID, d.Attempt, d.Lease, statusCode)
		if err != nil || !ok {
			return err
		}
		state = ExecRunning
		return db.InsertDeliveryEvents(ctx, tx, d.TenantID, d.ExecutionID, []db.DeliveryEvent{
			callback.AcceptedEvent(d.Attempt, statusCode, latency, *d.Callback),
		})
	})
	if err != nil {
		return "", storeError(err, "accept callback attempt")
	}
	s.released(fin)
	done.report(s.cfg.Metrics)
	return state, nil
}

// CallbackGrant returns what token allows. A token that no attempt was
// given is ErrInvalidCallbackToken; a token of an attempt that is no
// longer current is still returned (acting with it is a conflict). The
// grant of a token this replica handed out or looked up is kept
// (callback.Grants) and may be stale (CallbackGrant.Kept): the acts check
// its token, and a request it authorised that fails is to be checked with
// VerifyCallbackGrant before its answer.
func (s *Deliveries) CallbackGrant(ctx context.Context, token string) (CallbackGrant, error) {
	if g, ok := s.grants.Kept(token); ok {
		return g, nil
	}
	return s.VerifyCallbackGrant(ctx, token)
}

// VerifyCallbackGrant is CallbackGrant by the database, whatever this
// replica kept. Concurrent lookups share one statement
// (callback.GrantsOf).
func (s *Deliveries) VerifyCallbackGrant(ctx context.Context, token string) (CallbackGrant, error) {
	if !callback.WellFormed(token) {
		return CallbackGrant{}, ErrInvalidCallbackToken
	}
	l, err := s.lookups.Do(ctx, token)
	if err != nil {
		return CallbackGrant{}, storeError(err, "find callback token")
	}
	s.grants.Learn(token, l)
	return l.Grant, l.Err
}

// lookUpGrants runs one batch of VerifyCallbackGrant's lookups.
func (s *Deliveries) lookUpGrants(ctx context.Context, tokens []string) ([]callback.Looked, error) {
	return callback.GrantsOf(ctx, s.pool, tokens)
}

// Completed is the execution after a completion.
type Completed struct {
	Finished
	Output json.RawMessage
	// Detail is the execution as the completion's transaction left it,
	// when the completion read it (a batched one); nil: not read.
	Detail *ExecutionDetail
}

// Heartbeat extends the heartbeat deadline of the execution's current
// callback attempt and keeps progress (when given). A stale attempt's
// token, an expired wait or an execution that is not running is a
// conflict, and changes nothing.
func (s *Deliveries) Heartbeat(ctx context.Context, tenant, executionID string, grant *CallbackGrant, progress json.RawMessage) error {
	if !validID(executionID) {
		return ErrNotFound
	}
	if err := callback.CheckProgress(progress); err != nil {
		return err
	}
	return storeError(db.InTx(ctx, s.pool, func(tx db.Tx) error {
		_, cb, err := callback.Current(ctx, tx, tenant, executionID, grant)
		if err != nil {
			return err
		}
		ok, err := db.HeartbeatCallback(ctx, tx, tenant, executionID, cb.Attempt, progress)
		if err != nil {
			return storeError(err, "record heartbeat")
		}
		if !ok { // the rows are locked: cannot happen
			return conflictf("attempt %d changed; try again", cb.Attempt)
		}
		return nil
	}), "record heartbeat")
}

// Complete ends the execution's current callback attempt as the receiver
// reports: succeeded, or failed (retried by the task's retry policy unless
// not retryable or out of attempts), through the same decision as any
// outcome (decideFinish). A stale attempt's token, an expired wait or a
// finished execution is a conflict, and changes nothing.
//
// Successes are batched with concurrent ones into one statement
// (db.CompleteCallbacks, under db.CompletesWithoutDecision); a completion
// the batch did not record (or a failed batch) takes the row-by-row path,
// which decides it and reports its own conflict or error.
func (s *Deliveries) Complete(ctx context.Context, tenant, executionID string, grant *CallbackGrant, in CompletionInput) (Completed, error) {
	if !validID(executionID) {
		return Completed{}, ErrNotFound
	}
	if err := in.Validate(); err != nil {
		return Completed{}, err
	}
	data := completionData(grant, in)
	if in.Status == ExecSucceeded {
		c, ok, err := s.completeBatched(ctx, tenant, executionID, grant, in, data)
		if err != nil {
			return Completed{}, err
		}
		if ok {
			s.grants.Forget(grant)
			return c, nil
		}
	}
	c, err := s.completeRow(ctx, tenant, executionID, grant, in, data)
	if err == nil {
		s.grants.Forget(grant)
	}
	return c, err
}

// completionData is the data of a completion's completed event, and of
// its audit record.
func completionData(grant *CallbackGrant, in CompletionInput) map[string]any {
	data := map[string]any{"status": in.Status, "by": "api"}
	if grant != nil {
		data["by"] = "callback_token"
	}
	if in.Status == ExecFailed {
		data["retryable"] = in.Retryable == nil || *in.Retryable
	}
	if len(in.Output) > 0 {
		data["output_bytes"] = len(in.Output)
	}
	return data
}

// completionAudit is the audit record's changes of a completion that
// moved the execution to state.
func completionAudit(state string, data map[string]any) map[string]any {
	return map[string]any{"state": map[string]any{"old": ExecRunning, "new": state}, "completion": data}
}

// completionOutput is the output a completion returns: in's, unless none.
func completionOutput(in CompletionInput) json.RawMessage {
	if len(in.Output) > 0 && string(in.Output) != "null" {
		return in.Output
	}
	return nil
}

// completeBatched offers a success to the batched completion: ok when the
// statement recorded it. A completion it left alone (ok false, no error)
// needs the row-by-row path; so does one whose batch failed, which is
// counted (BatchStats) and not returned as an error.
func (s *Deliveries) completeBatched(ctx context.Context, tenant, executionID string, grant *CallbackGrant, in CompletionInput,
	data map[string]any,
) (Completed, bool, error) {
	c, err := completionOf(ctx, tenant, executionID, grant, in, data)
	if err != nil {
		return Completed{}, false, err
	}
	r, err := s.completions.Do(ctx, c)
	if err != nil && ctx.Err() != nil { // not run: the request is gone
		return Completed{}, false, err
	}
	if !s.count(r.ok, err) {
		return Completed{}, false, nil
	}
	return batchedCompletion(in, r), true, nil
}

// completionOf is a success as the batched completion takes it, with its
// audit record (made for ctx's actor).
func completionOf(ctx context.Context, tenant, executionID string, grant *CallbackGrant, in CompletionInput, data map[string]any,
) (db.CallbackCompletion, error) {
	event, err := json.Marshal(data)
	if err != nil {
		return db.CallbackCompletion{}, err
	}
	c := db.CallbackCompletion{TenantID: tenant, ExecutionID: executionID, Output: in.Output, Event: event}
	if grant != nil {
		c.Attempt, c.TokenHash = grant.Attempt, grant.TokenHash
	}
	rec, audited, err := auditRecord(ctx, tenant, AuditUpdate, ResourceExecution, executionID, completionAudit(ExecSucceeded, data))
	if err != nil {
		return db.CallbackCompletion{}, err
	}
	if audited {
		c.Audit = &rec
	}
	return c, nil
}

// batchedCompletion is what Complete returns for a success the batch
// recorded (its metrics were reported with the batch).
func batchedCompletion(in CompletionInput, r completionResult) Completed {
	return Completed{Finished: Finished{State: ExecSucceeded, Attempt: r.attempt}, Output: completionOutput(in), Detail: r.detail}
}

// completionFlushers bounds the batched completions in flight at once.
// One lets them gather: with two, each statement carried half as many
// completions for the same fixed cost (its transaction, its commit, the
// read of its answers), and one statement keeps up with thousands a
// second.
const completionFlushers = 1

// lookupFlushers bounds the batched token lookups in flight at once (a
// read: one lets them gather).
const lookupFlushers = 1

type completionResult struct {
	attempt int
	ok      bool
	// detail is the execution as the batch's transaction left it (nil:
	// the answer reads it).
	detail *ExecutionDetail
}

// completionEvents are the events a batched completion writes, as the
// row-by-row path writes them (completeRow, then finish's success).
var completionEvents = db.CompletionEvents{
	Completed: EventCompleted, AttemptSucceeded: EventAttemptSucceeded, Succeeded: EventSucceeded,
}

// completeMany runs one batched completion: the completions
// db.CompletesWithoutDecision and db.SucceedsWithoutDecision admit end
// succeeded, in one transaction with the failure streaks they end and
// those streaks' recovered alerts (as recordSuccesses); the others are
// left for the row-by-row path. Each recorded completion's answer, the
// execution's detail, is read in the same transaction: two statements for
// the batch rather than a round trip per request.
func (s *Deliveries) completeMany(ctx context.Context, cs []db.CallbackCompletion) ([]completionResult, error) {
	var (
		res  []completionResult
		done map[int]int
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		var recovered []db.Recovered
		var err error
		done, recovered, err = db.CompleteCallbacks(ctx, tx, cs, completionEvents)
		if err != nil {
			return err
		}
		for _, r := range recovered {
			c := cs[r.Index]
			if _, err := queueRecovered(ctx, tx, s.enqueuer, s.cfg.AlertMaxAttempts, c.TenantID, c.ExecutionID, r.Recovery); err != nil {
				return err
			}
		}
		res, err = completedDetails(ctx, tx, cs, done)
		return err
	})
	if err != nil {
		return nil, storeError(err, "complete callback attempts")
	}
	s.cfg.Metrics.ExecutionsFinished(ExecSucceeded, len(done))
	return res, nil
}

// completedDetails is completeMany's result: for each completion in cs
// that the batch recorded (done: its attempt by index), its attempt and
// its execution's detail, read in tx.
func completedDetails(ctx context.Context, tx db.Tx, cs []db.CallbackCompletion, done map[int]int) ([]completionResult, error) {
	res := make([]completionResult, len(cs))
	tenants, ids, at := make([]string, 0, len(done)), make([]string, 0, len(done)), make([]int, 0, len(done))
	for i := range cs {
		if attempt, ok := done[i]; ok {
			res[i].attempt, res[i].ok = attempt, true
			tenants, ids, at = append(tenants, cs[i].TenantID), append(ids, cs[i].ExecutionID), append(at, i)
		}
	}
	if len(ids) == 0 {
		return res, nil
	}
	details, found, err := db.GetExecutionDetails(ctx, tx, tenants, ids)
	if err != nil {
		return nil, storeError(err, "read completed executions")
	}
	for k, i := range at {
		if !found[k] {
			continue
		}
		if d, whole := execution.OfDetail(details[k]); whole {
			res[i].detail = &d
		}
	}
	return res, nil
}

// completeRow is Complete's row-by-row path: it locks the execution and
// its latest attempt, checks that grant may act on it (callback.Current)
// and finishes the attempt through decideFinish.
func (s *Deliveries) completeRow(ctx context.Context, tenant, executionID string, grant *CallbackGrant, in CompletionInput,
	data map[string]any,
) (Completed, error) {
	var out Completed
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, cb, err := callback.Current(ctx, tx, tenant, executionID, grant)
		if err != nil {
			return err
		}
		o := Outcome{Kind: OutcomeSucceeded, Detached: true}
		if in.Status == ExecFailed {
			o.Kind, o.ErrorClass, o.Error = OutcomeRetry, ErrorClassCallbackFailed, cmpOr(in.Error, "the receiver reported a failure")
			if retryable := in.Retryable == nil || *in.Retryable; !retryable {
				o.Kind = OutcomePermanent
			}
		}
		attempt := cb.Attempt
		if err := db.InsertDeliveryEvents(ctx, tx, tenant, executionID, []db.DeliveryEvent{{
			Type: EventCompleted, Attempt: &attempt, Data: data,
		}}); err != nil {
			return err
		}
		// The output first: the finish advances a workflow node's run, and
		// the nodes it fires may read the output (runData).
		if err := db.EndCallback(ctx, tx, tenant, executionID, cb.Attempt, in.Output); err != nil {
			return err
		}
		fin, err := s.finish(ctx, tx, tenant, executionID, cb.Lease, row, o)
		if err != nil {
			return err
		}
		out.Output = completionOutput(in)
		out.Finished = fin
		return recordAudit(ctx, tx, tenant, AuditUpdate, ResourceExecution, executionID, completionAudit(fin.State, data))
	})
	if err != nil {
		return Completed{}, storeError(err, "complete callback attempt")
	}
	s.released(out.Finished)
	out.ended.report(s.cfg.Metrics)
	return out, nil
}

// SweepCallbacks fails the callback attempts whose wait expired by the
// database clock (heartbeat_timeout or callback_timeout): each in its own
// transaction, through decideFinish, so that a failure is retried with a
// new deliver job (the same idempotency key, a new attempt and token)
// under the task's retry policy. A completion that commits first wins:
// the sweep then finds the attempt over and leaves it.
func (s *Deliveries) SweepCallbacks(ctx context.Context) (CallbackSweep, error) {
	res := CallbackSweep{TimedOut: map[string]int{}, Finished: map[string]int{}}
	refs, err := db.FindExpiredCallbacks(ctx, s.pool, callback.SweepBatch)
	if err != nil {
		return res, storeError(err, "find expired callbacks")
	}
	res.More = len(refs) == callback.SweepBatch
	// released: a committed outcome gave a permit back (the dispatcher
	// is woken once the pass is over).
	released := false
	defer func() {
		if released {
			s.cfg.Limits.Wake()
		}
	}()
	for _, r := range refs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var done ended
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			done = nil
			row, err := db.GetDeliveryOutcome(ctx, tx, r.TenantID, r.ExecutionID)
			if err != nil {
				return storeError(err, "load execution "+r.ExecutionID)
			}
			cb, err := db.GetCallbackForUpdate(ctx, tx, r.TenantID, r.ExecutionID, r.Attempt)
			if err != nil {
				return storeError(err, "load callback attempt")
			}
			if !cb.Current {
				// Ended otherwise (a cancel, a task deleted): only the wait
				// goes.
				return db.EndCallback(ctx, tx, r.TenantID, r.ExecutionID, r.Attempt, nil)
			}
			if !cb.Expired { // a heartbeat moved it meanwhile
				return nil
			}
			o := Outcome{Kind: OutcomeRetry, ErrorClass: cb.ExpiredClass, Detached: true}
			if cb.ExpiredClass == ErrorClassHeartbeatTimeout {
				o.Error = fmt.Sprintf("no heartbeat within %s", time.Duration(zeroIfNil(cb.HeartbeatTimeoutMS))*time.Millisecond)
			} else {
				o.Error = "no completion by the attempt's deadline (completion.timeout_ms)"
			}
			fin, err := s.finish(ctx, tx, r.TenantID, r.ExecutionID, cb.Lease, row, o)
			if err != nil {
				return err
			}
			if err := db.EndCallback(ctx, tx, r.TenantID, r.ExecutionID, r.Attempt, nil); err != nil {
				return err
			}
			res.TimedOut[cb.ExpiredClass]++
			released = released || fin.released
			done = fin.ended
			if fin.State == ExecRetrying {
				res.Retrying++
			} else {
				res.Finished[fin.State]++
			}
			return nil
		})
		if err = storeError(err, "time out callback attempt"); err != nil && !errors.Is(err, ErrNotFound) {
			return res, err
		}
		if err == nil {
			done.report(s.cfg.Metrics)
		}
	}
	return res, nil
}

// NextCallbackExpiry returns how long until the earliest waiting attempt
// expires by the database clock (ok false: none waits).
func (s *Deliveries) NextCallbackExpiry(ctx context.Context) (time.Duration, bool, error) {
	return callback.NextExpiry(ctx, s.pool)
}

// retryDetached gives a retrying execution that no River job carries any
// more a new deliver job, due at, whose leases are above lease
// (callback.RetryDetached).
func (s *Deliveries) retryDetached(ctx context.Context, tx db.Tx, tenant, executionID string, lease, priority int, at time.Time) error {
	return callback.RetryDetached(ctx, tx, s.enqueuer.Enqueuer, tenant, executionID, lease, priority, handOffMaxAttempts, at)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
