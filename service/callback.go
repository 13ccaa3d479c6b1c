package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
)

// Long-running work (docs/architecture.md, "Callbacks"): a task in
// completion mode "callback" treats a 2xx as accepted. The execution stays
// running, but no River job and no worker carries it while ax waits: the
// attempt's row in callback_attempts does, with its deadlines, and the
// callback sweeper (SweepCallbacks) fails the attempt when one passes. The
// receiver reports with the attempt's callback token, an opaque random
// capability whose SHA-256 is all ax keeps.

// Completion modes.
const (
	// CompletionResponse: a 2xx ends the attempt (the default).
	CompletionResponse = "response"
	// CompletionCallback: a 2xx accepts the attempt; the receiver
	// completes it later (POST /v1/executions/{id}/complete).
	CompletionCallback = "callback"
)

// Error classes of a callback attempt that failed.
const (
	// ErrorClassHeartbeatTimeout: no heartbeat (or completion) within the
	// heartbeat timeout of the acceptance or of the last heartbeat.
	ErrorClassHeartbeatTimeout = "heartbeat_timeout"
	// ErrorClassCallbackTimeout: no completion within the completion
	// timeout of the attempt's send.
	ErrorClassCallbackTimeout = "callback_timeout"
	// ErrorClassCallbackFailed: the receiver completed the attempt as
	// failed.
	ErrorClassCallbackFailed = "callback_failed"
)

// Timeline events of callbacks and SLAs.
const (
	// EventAccepted: the receiver answered a callback attempt with a 2xx;
	// ax waits for its completion.
	EventAccepted = "accepted"
	// EventCompleted: the receiver (or a tenant token) completed the
	// attempt; data says how.
	EventCompleted = "completed"
	// EventSLAMissed: the execution was not succeeded by its task's SLA.
	EventSLAMissed = "sla_missed"
)

// Callback limits.
const (
	// CallbackTokenPrefix starts every callback token, so that the API
	// tells one from a JWT without parsing it.
	CallbackTokenPrefix = "axcb_"
	// OutputMax caps a completion's output (JSON bytes).
	OutputMax = 64 << 10
	// ProgressMax caps a heartbeat's progress (JSON bytes).
	ProgressMax = 16 << 10
	// CompletionTimeoutMax bounds a callback attempt: 7 days.
	CompletionTimeoutMax = 7 * 24 * time.Hour
	// CompletionTimeoutMin and HeartbeatTimeoutMin: 1 s.
	CompletionTimeoutMin = time.Second
	HeartbeatTimeoutMin  = time.Second
	// SLAMax bounds finish_within_ms: 30 days.
	SLAMax = 30 * 24 * time.Hour
)

// Completion is how an attempt of a task ends (TaskInput.Completion).
type Completion struct {
	// Mode is CompletionResponse ("" too) or CompletionCallback.
	Mode string
	// Timeout bounds a callback attempt, from its send to its completion.
	Timeout time.Duration
	// HeartbeatTimeout, when set, fails a callback attempt that neither
	// heartbeats nor completes within it of its acceptance or of its
	// last heartbeat.
	HeartbeatTimeout time.Duration
}

// Callback reports whether c is callback mode.
func (c Completion) Callback() bool { return c.Mode == CompletionCallback }

// SLA is a task's service level (TaskInput.SLA): FinishWithin after its
// slot, an execution should have succeeded. Zero: none.
type SLA struct {
	FinishWithin time.Duration
}

// CallbackSpec is what a delivery in callback mode needs.
type CallbackSpec struct {
	Timeout          time.Duration
	HeartbeatTimeout time.Duration
}

func validateCompletion(ve *ValidationError, c Completion) {
	switch c.Mode {
	case "", CompletionResponse:
		if c.Timeout != 0 || c.HeartbeatTimeout != 0 {
			ve.Add("completion.mode", "timeout_ms and heartbeat_timeout_ms need mode callback")
		}
	case CompletionCallback:
		if c.Timeout < CompletionTimeoutMin || c.Timeout > CompletionTimeoutMax {
			ve.Add("completion.timeout_ms", fmt.Sprintf("must be %d to %d", CompletionTimeoutMin.Milliseconds(),
				CompletionTimeoutMax.Milliseconds()))
		}
		if c.HeartbeatTimeout != 0 && (c.HeartbeatTimeout < HeartbeatTimeoutMin || c.HeartbeatTimeout > c.Timeout) {
			ve.Add("completion.heartbeat_timeout_ms", fmt.Sprintf("must be %d to completion.timeout_ms, or absent for none",
				HeartbeatTimeoutMin.Milliseconds()))
		}
	default:
		ve.Add("completion.mode", "must be response or callback")
	}
}

func validateSLA(ve *ValidationError, s SLA) {
	if s.FinishWithin != 0 && (s.FinishWithin < time.Second || s.FinishWithin > SLAMax) {
		ve.Add("sla.finish_within_ms", fmt.Sprintf("must be 1000 to %d, or sla absent for none", SLAMax.Milliseconds()))
	}
}

// newCallbackToken returns a new token and the hash ax keeps of it.
func newCallbackToken() (string, []byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	token := CallbackTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(token))
	return token, h[:], nil
}

// PrepareCallback records attempt d (in callback mode, just begun) and
// returns the X-Ax-Callback-Token it is sent with: the token's hash and
// the attempt's deadline are stored before the request leaves, so that a
// receiver may complete it before it even answers.
func (s *Deliveries) PrepareCallback(ctx context.Context, d Delivery) (string, error) {
	if d.Callback == nil {
		return "", errors.New("prepare callback: the delivery is not in callback mode")
	}
	token, hash, err := newCallbackToken()
	if err != nil {
		return "", err
	}
	var hb *time.Duration
	if d.Callback.HeartbeatTimeout > 0 {
		hb = &d.Callback.HeartbeatTimeout
	}
	ok, err := db.InsertCallbackAttempt(ctx, s.pool, d.TenantID, d.ExecutionID, d.Attempt, d.Lease, hash, d.Callback.Timeout, hb)
	if err != nil {
		return "", storeError(err, "record callback attempt")
	}
	if !ok {
		return "", conflictf("execution %s is not running under attempt %d", d.ExecutionID, d.Attempt)
	}
	return token, nil
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
		ms := int(latency.Milliseconds())
		data := map[string]any{"completion_timeout_ms": d.Callback.Timeout.Milliseconds()}
		if d.Callback.HeartbeatTimeout > 0 {
			data["heartbeat_timeout_ms"] = d.Callback.HeartbeatTimeout.Milliseconds()
		}
		return db.InsertDeliveryEvents(ctx, tx, d.TenantID, d.ExecutionID, []db.DeliveryEvent{{
			Type: EventAccepted, Attempt: &d.Attempt, StatusCode: &statusCode, LatencyMS: &ms,
			Message: refTo("accepted; waiting for the receiver to complete the attempt"), Data: data,
		}})
	})
	if err != nil {
		return "", storeError(err, "accept callback attempt")
	}
	s.released(fin)
	done.report(s.cfg.Metrics)
	return state, nil
}

// CallbackGrant is what a callback token allows: acting on one attempt
// of one execution of one tenant.
type CallbackGrant struct {
	TenantID    string
	ExecutionID string
	Attempt     int
}

// ErrInvalidCallbackToken: no attempt was ever given the token.
var ErrInvalidCallbackToken = newError("invalid callback token")

// CallbackGrant returns what token allows. A token that no attempt was
// given is ErrInvalidCallbackToken; a token of an attempt that is no
// longer current is still returned (acting with it is a conflict).
func (s *Deliveries) CallbackGrant(ctx context.Context, token string) (CallbackGrant, error) {
	if !strings.HasPrefix(token, CallbackTokenPrefix) || len(token) > 128 {
		return CallbackGrant{}, ErrInvalidCallbackToken
	}
	h := sha256.Sum256([]byte(token))
	cb, err := db.GetCallbackByToken(ctx, s.pool, h[:])
	if err = storeError(err, "find callback token"); errors.Is(err, ErrNotFound) {
		return CallbackGrant{}, ErrInvalidCallbackToken
	}
	if err != nil {
		return CallbackGrant{}, err
	}
	// The index found the row by the hash; compare it again in constant
	// time, so that nothing of the answer depends on how much matched.
	if subtle.ConstantTimeCompare(cb.TokenHash, h[:]) != 1 {
		return CallbackGrant{}, ErrInvalidCallbackToken
	}
	return CallbackGrant{TenantID: cb.TenantID, ExecutionID: cb.ExecutionID, Attempt: cb.Attempt}, nil
}

// CompletionInput is the body of a completion.
type CompletionInput struct {
	// Status is succeeded or failed.
	Status string
	// Output is any JSON up to OutputMax bytes; kept and returned with the
	// execution.
	Output json.RawMessage
	// Error describes a failure.
	Error string
	// Retryable (default true) lets a failure be retried by the task's
	// retry policy; false ends the execution failed.
	Retryable *bool
}

func (in CompletionInput) validate() error {
	var ve ValidationError
	if in.Status != ExecSucceeded && in.Status != ExecFailed {
		ve.Add("status", "must be succeeded or failed")
	}
	switch {
	case len(in.Output) > OutputMax:
		ve.Add("output", fmt.Sprintf("must be at most %d bytes of JSON", OutputMax))
	case len(in.Output) > 0 && !json.Valid(in.Output):
		ve.Add("output", "must be valid JSON")
	default:
		checkJSONDocument(&ve, "output", in.Output)
	}
	if len(in.Error) > 4096 {
		ve.Add("error", "must be at most 4096 bytes")
	}
	if in.Status == ExecSucceeded && (in.Error != "" || in.Retryable != nil) {
		ve.Add("status", "error and retryable go with status failed")
	}
	return ve.Err()
}

// Completed is the execution after a completion.
type Completed struct {
	Finished
	Output json.RawMessage
}

// current locks the execution and its latest callback attempt and checks
// that grant (nil: a tenant token, which acts on the current attempt) may
// act on it now.
func (s *Deliveries) current(ctx context.Context, tx db.Tx, tenant, executionID string, grant *CallbackGrant,
) (db.DeliveryOutcome, db.CallbackAttempt, error) {
	row, err := db.GetDeliveryOutcome(ctx, tx, tenant, executionID)
	if err != nil {
		return row, db.CallbackAttempt{}, storeError(err, "load execution "+executionID)
	}
	cb, err := db.GetLatestCallback(ctx, tx, tenant, executionID, true)
	if err = storeError(err, "load callback attempt"); errors.Is(err, ErrNotFound) {
		return row, cb, conflictf("the execution is %s and has no callback attempt", row.State)
	}
	if err != nil {
		return row, cb, err
	}
	switch {
	case grant != nil && grant.Attempt != cb.Attempt:
		return row, cb, conflictf("the token is for attempt %d; attempt %d is the current one", grant.Attempt, cb.Attempt)
	case !cb.Current:
		return row, cb, conflictf("attempt %d is over (the execution is %s)", cb.Attempt, row.State)
	case cb.Expired:
		return row, cb, conflictf("attempt %d timed out (%s)", cb.Attempt, cb.ExpiredClass)
	}
	return row, cb, nil
}

// Heartbeat extends the heartbeat deadline of the execution's current
// callback attempt and keeps progress (when given). A stale attempt's
// token, an expired wait or an execution that is not running is a
// conflict, and changes nothing.
func (s *Deliveries) Heartbeat(ctx context.Context, tenant, executionID string, grant *CallbackGrant, progress json.RawMessage) error {
	if !validID(executionID) {
		return ErrNotFound
	}
	if len(progress) > ProgressMax {
		return fieldError("progress", fmt.Sprintf("must be at most %d bytes of JSON", ProgressMax))
	}
	var ve ValidationError
	if checkJSONDocument(&ve, "progress", progress); ve.Err() != nil {
		return &ve
	}
	return storeError(db.InTx(ctx, s.pool, func(tx db.Tx) error {
		_, cb, err := s.current(ctx, tx, tenant, executionID, grant)
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
func (s *Deliveries) Complete(ctx context.Context, tenant, executionID string, grant *CallbackGrant, in CompletionInput) (Completed, error) {
	if !validID(executionID) {
		return Completed{}, ErrNotFound
	}
	if err := in.validate(); err != nil {
		return Completed{}, err
	}
	var out Completed
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, cb, err := s.current(ctx, tx, tenant, executionID, grant)
		if err != nil {
			return err
		}
		o := Outcome{Kind: OutcomeSucceeded, Detached: true}
		data := map[string]any{"status": in.Status, "by": "api"}
		if grant != nil {
			data["by"] = "callback_token"
		}
		if in.Status == ExecFailed {
			o.Kind, o.ErrorClass, o.Error = OutcomeRetry, ErrorClassCallbackFailed, cmpOr(in.Error, "the receiver reported a failure")
			retryable := in.Retryable == nil || *in.Retryable
			if !retryable {
				o.Kind = OutcomePermanent
			}
			data["retryable"] = retryable
		}
		if len(in.Output) > 0 {
			data["output_bytes"] = len(in.Output)
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
		if len(in.Output) > 0 && string(in.Output) != "null" {
			out.Output = in.Output
		}
		out.Finished = fin
		return recordAudit(ctx, tx, tenant, AuditUpdate, ResourceExecution, executionID, map[string]any{
			"state": map[string]any{"old": ExecRunning, "new": fin.State}, "completion": data,
		})
	})
	if err != nil {
		return Completed{}, storeError(err, "complete callback attempt")
	}
	s.released(out.Finished)
	out.ended.report(s.cfg.Metrics)
	return out, nil
}

// CallbackSweep is what one SweepCallbacks pass did.
type CallbackSweep struct {
	// TimedOut counts attempts failed by a timeout, by error class.
	TimedOut map[string]int
	// Finished counts the executions that ended, by final state.
	Finished map[string]int
	// Retrying counts the executions that will be retried.
	Retrying int
	// More: the pass stopped at its batch with more left.
	More bool
}

// callbackSweepBatch bounds the attempts one pass fails.
const callbackSweepBatch = 200

// SweepCallbacks fails the callback attempts whose wait expired by the
// database clock (heartbeat_timeout or callback_timeout): each in its own
// transaction, through decideFinish, so that a failure is retried with a
// new deliver job (the same idempotency key, a new attempt and token)
// under the task's retry policy. A completion that commits first wins:
// the sweep then finds the attempt over and leaves it.
func (s *Deliveries) SweepCallbacks(ctx context.Context) (CallbackSweep, error) {
	res := CallbackSweep{TimedOut: map[string]int{}, Finished: map[string]int{}}
	refs, err := db.FindExpiredCallbacks(ctx, s.pool, callbackSweepBatch)
	if err != nil {
		return res, storeError(err, "find expired callbacks")
	}
	res.More = len(refs) == callbackSweepBatch
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
	next, now, err := db.NextCallbackExpiry(ctx, s.pool)
	if err != nil || next == nil {
		return 0, false, storeError(err, "next callback expiry")
	}
	return max(next.Sub(now), 0), true, nil
}

// retryDetached gives a retrying execution that no River job carries any
// more (its attempt was accepted and the job ended) a new deliver job, due
// at, whose leases are above lease, recorded as its river_job_id. Not
// unique: the finished job of the accepted attempt has the same args.
func (s *Deliveries) retryDetached(ctx context.Context, tx db.Tx, tenant, executionID string, lease, priority int, at time.Time) error {
	opts := &river.InsertOpts{Queue: QueueDeliver, Priority: max(priority, 1), MaxAttempts: handOffMaxAttempts, ScheduledAt: at}
	res, err := s.enqueuer.insertMany(ctx, tx, []river.InsertManyParams{{
		Args: DeliverArgs{TenantID: tenant, ExecutionID: executionID, LeaseBase: lease}, InsertOpts: opts,
	}})
	if err != nil {
		return err
	}
	return storeError(db.SetExecutionJobs(ctx, tx, []db.ExecutionRef{{TenantID: tenant, ID: executionID}}, []int64{res[0].Job.ID}),
		"record detached retry job")
}

// ExecutionCallback is what an execution shows of its callbacks: the
// latest attempt's progress and output.
type ExecutionCallback struct {
	Progress json.RawMessage
	Output   json.RawMessage
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
