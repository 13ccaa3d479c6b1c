// Package callback is long-running work's side of ax (docs/architecture.md,
// "Callbacks"): a task's completion mode and its bounds, the callback
// token (an opaque random capability whose SHA-256 is all ax keeps) and
// what it grants, an attempt's wait recorded before its request leaves,
// the checks that a heartbeat or a completion may act on the current
// attempt, and a completion's body. service ends the attempts through its
// one finish (Deliveries.Accept, Complete, SweepCallbacks).
package callback

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
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/jsondoc"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/queue"
)

// Completion modes.
const (
	// ModeResponse: a 2xx ends the attempt (the default).
	ModeResponse = "response"
	// ModeCallback: a 2xx accepts the attempt; the receiver completes it
	// later (POST /v1/executions/{id}/complete).
	ModeCallback = "callback"
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

// Timeline events of callbacks.
const (
	// EventAccepted: the receiver answered a callback attempt with a 2xx;
	// ax waits for its completion.
	EventAccepted = "accepted"
	// EventCompleted: the receiver (or a tenant token) completed the
	// attempt; data says how.
	EventCompleted = "completed"
)

// Callback limits.
const (
	// TokenPrefix starts every callback token, so that the API tells one
	// from a JWT without parsing it.
	TokenPrefix = "axcb_"
	// OutputMax caps a completion's output (JSON bytes).
	OutputMax = 64 << 10
	// ProgressMax caps a heartbeat's progress (JSON bytes).
	ProgressMax = 16 << 10
	// TimeoutMax bounds a callback attempt: 7 days.
	TimeoutMax = 7 * 24 * time.Hour
	// TimeoutMin and HeartbeatTimeoutMin: 1 s.
	TimeoutMin          = time.Second
	HeartbeatTimeoutMin = time.Second
)

// Completion is how an attempt of a task ends (TaskInput.Completion).
type Completion struct {
	// Mode is ModeResponse ("" too) or ModeCallback.
	Mode string
	// Timeout bounds a callback attempt, from its send to its completion.
	Timeout time.Duration
	// HeartbeatTimeout, when set, fails a callback attempt that neither
	// heartbeats nor completes within it of its acceptance or of its
	// last heartbeat.
	HeartbeatTimeout time.Duration
}

// Callback reports whether c is callback mode.
func (c Completion) Callback() bool { return c.Mode == ModeCallback }

// Check adds c's invalid fields to ve.
func (c Completion) Check(ve *errs.ValidationError) {
	switch c.Mode {
	case "", ModeResponse:
		if c.Timeout != 0 || c.HeartbeatTimeout != 0 {
			ve.Add("completion.mode", "timeout_ms and heartbeat_timeout_ms need mode callback")
		}
	case ModeCallback:
		if c.Timeout < TimeoutMin || c.Timeout > TimeoutMax {
			ve.Add("completion.timeout_ms", fmt.Sprintf("must be %d to %d", TimeoutMin.Milliseconds(),
				TimeoutMax.Milliseconds()))
		}
		if c.HeartbeatTimeout != 0 && (c.HeartbeatTimeout < HeartbeatTimeoutMin || c.HeartbeatTimeout > c.Timeout) {
			ve.Add("completion.heartbeat_timeout_ms", fmt.Sprintf("must be %d to completion.timeout_ms, or absent for none",
				HeartbeatTimeoutMin.Milliseconds()))
		}
	default:
		ve.Add("completion.mode", "must be response or callback")
	}
}

// Spec is what a delivery in callback mode needs.
type Spec struct {
	Timeout          time.Duration
	HeartbeatTimeout time.Duration
}

// newToken returns a new token and the hash ax keeps of it.
func newToken() (string, []byte, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	h := sha256.Sum256([]byte(token))
	return token, h[:], nil
}

// Prepare records attempt of the execution (in callback mode, just begun
// under lease) with the deadlines of spec, and returns the
// X-Ax-Callback-Token it is sent with: the token's hash and the attempt's
// deadline are stored before the request leaves, so that a receiver may
// complete it before it even answers.
func Prepare(ctx context.Context, q db.Querier, tenant, executionID string, attempt, lease int, spec Spec) (string, error) {
	token, hash, err := newToken()
	if err != nil {
		return "", err
	}
	var hb *time.Duration
	if spec.HeartbeatTimeout > 0 {
		hb = &spec.HeartbeatTimeout
	}
	ok, err := db.InsertCallbackAttempt(ctx, q, tenant, executionID, attempt, lease, hash, spec.Timeout, hb)
	if err != nil {
		return "", errs.Store(err, "record callback attempt")
	}
	if !ok {
		return "", errs.Conflictf("execution %s is not running under attempt %d", executionID, attempt)
	}
	return token, nil
}

// AcceptedEvent is the timeline event of attempt accepted with statusCode
// after latency, waiting under spec.
func AcceptedEvent(attempt, statusCode int, latency time.Duration, spec Spec) db.DeliveryEvent {
	ms := int(latency.Milliseconds())
	data := map[string]any{"completion_timeout_ms": spec.Timeout.Milliseconds()}
	if spec.HeartbeatTimeout > 0 {
		data["heartbeat_timeout_ms"] = spec.HeartbeatTimeout.Milliseconds()
	}
	msg := "accepted; waiting for the receiver to complete the attempt"
	return db.DeliveryEvent{
		Type: EventAccepted, Attempt: &attempt, StatusCode: &statusCode, LatencyMS: &ms, Message: &msg, Data: data,
	}
}

// Grant is what a callback token allows: acting on one attempt of one
// execution of one tenant.
type Grant struct {
	TenantID    string
	ExecutionID string
	Attempt     int
	// TokenHash is the SHA-256 of the token: an act checks it against
	// the attempt's row (a kept grant may be stale).
	TokenHash []byte
	// Kept: the grant is one this replica kept (Grants), not read from
	// the database for this request.
	Kept bool
}

// ErrInvalidToken: no attempt was ever given the token.
var ErrInvalidToken = errs.New("invalid callback token")

// Looked is what a token's lookup found (GrantsOf): its grant and how
// long the grant is worth keeping (until the attempt's deadline while it
// may still act, zero otherwise), or Err (ErrInvalidToken: no attempt was
// given the token).
type Looked struct {
	Grant Grant
	Until time.Time
	Err   error
}

// GrantOf returns what token allows, by the database. A token that no
// attempt was given is ErrInvalidToken; a token of an attempt that is no
// longer current is still returned (acting with it is a conflict).
func GrantOf(ctx context.Context, q db.Querier, token string) (Grant, error) {
	l, err := GrantsOf(ctx, q, []string{token})
	if err != nil {
		return Grant{}, err
	}
	return l[0].Grant, l[0].Err
}

// GrantsOf is GrantOf of many tokens in one statement: the i-th result is
// tokens[i]'s. err is the statement's.
func GrantsOf(ctx context.Context, q db.Querier, tokens []string) ([]Looked, error) {
	out := make([]Looked, len(tokens))
	hashes := make([][]byte, 0, len(tokens))
	for i, token := range tokens {
		if !WellFormed(token) {
			out[i].Err = ErrInvalidToken
			continue
		}
		h := sha256.Sum256([]byte(token))
		out[i].Grant.TokenHash = h[:]
		hashes = append(hashes, h[:])
	}
	if len(hashes) == 0 {
		return out, nil
	}
	rows, err := db.GetCallbacksByTokens(ctx, q, hashes)
	if err != nil {
		return nil, errs.Store(err, "find callback tokens")
	}
	byHash := make(map[[sha256.Size]byte]db.CallbackAttempt, len(rows))
	for _, cb := range rows {
		if len(cb.TokenHash) == sha256.Size {
			byHash[[sha256.Size]byte(cb.TokenHash)] = cb
		}
	}
	for i := range out {
		h := out[i].Grant.TokenHash
		if out[i].Err != nil {
			continue
		}
		cb, ok := byHash[[sha256.Size]byte(h)]
		// The index found the row by the hash; compare it again in
		// constant time, so that nothing of the answer depends on how
		// much matched.
		if !ok || subtle.ConstantTimeCompare(cb.TokenHash, h) != 1 {
			out[i] = Looked{Err: ErrInvalidToken}
			continue
		}
		out[i].Grant = Grant{TenantID: cb.TenantID, ExecutionID: cb.ExecutionID, Attempt: cb.Attempt, TokenHash: h}
		if cb.Current && !cb.Expired {
			out[i].Until = cb.DeadlineAt
		}
	}
	return out, nil
}

// WellFormed: token may be a callback token (one that is not is
// invalid without a lookup).
func WellFormed(token string) bool {
	return strings.HasPrefix(token, TokenPrefix) && len(token) <= 128
}

// Current locks the execution and its latest callback attempt in tx and
// checks that grant (nil: a tenant token, which acts on the current
// attempt) may act on it now.
func Current(ctx context.Context, tx db.Tx, tenant, executionID string, grant *Grant,
) (db.DeliveryOutcome, db.CallbackAttempt, error) {
	row, err := db.GetDeliveryOutcome(ctx, tx, tenant, executionID)
	if err != nil {
		return row, db.CallbackAttempt{}, errs.Store(err, "load execution "+executionID)
	}
	cb, err := db.GetLatestCallback(ctx, tx, tenant, executionID, true)
	if err = errs.Store(err, "load callback attempt"); errors.Is(err, errs.ErrNotFound) {
		return row, cb, errs.Conflictf("the execution is %s and has no callback attempt", row.State)
	}
	if err != nil {
		return row, cb, err
	}
	switch {
	case grant != nil && grant.Attempt == cb.Attempt && grant.TokenHash != nil &&
		subtle.ConstantTimeCompare(grant.TokenHash, cb.TokenHash) != 1:
		// The attempt was given another token since (a kept grant).
		return row, cb, ErrInvalidToken
	case grant != nil && grant.Attempt != cb.Attempt:
		return row, cb, errs.Conflictf("the token is for attempt %d; attempt %d is the current one", grant.Attempt, cb.Attempt)
	case !cb.Current:
		return row, cb, errs.Conflictf("attempt %d is over (the execution is %s)", cb.Attempt, row.State)
	case cb.Expired:
		return row, cb, errs.Conflictf("attempt %d timed out (%s)", cb.Attempt, cb.ExpiredClass)
	}
	return row, cb, nil
}

// CheckProgress checks a heartbeat's progress.
func CheckProgress(progress json.RawMessage) error {
	if len(progress) > ProgressMax {
		return errs.Field("progress", fmt.Sprintf("must be at most %d bytes of JSON", ProgressMax))
	}
	var ve errs.ValidationError
	jsondoc.Check(&ve, "progress", progress)
	return ve.Err()
}

// Input is the body of a completion.
type Input struct {
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

// Validate checks in.
func (in Input) Validate() error {
	var ve errs.ValidationError
	if in.Status != lifecycle.ExecSucceeded && in.Status != lifecycle.ExecFailed {
		ve.Add("status", "must be succeeded or failed")
	}
	switch {
	case len(in.Output) > OutputMax:
		ve.Add("output", fmt.Sprintf("must be at most %d bytes of JSON", OutputMax))
	case len(in.Output) > 0 && !json.Valid(in.Output):
		ve.Add("output", "must be valid JSON")
	default:
		jsondoc.Check(&ve, "output", in.Output)
	}
	if len(in.Error) > 4096 {
		ve.Add("error", "must be at most 4096 bytes")
	}
	if in.Status == lifecycle.ExecSucceeded && (in.Error != "" || in.Retryable != nil) {
		ve.Add("status", "error and retryable go with status failed")
	}
	return ve.Err()
}

// Sweep is what one pass of the callback sweeper did.
type Sweep struct {
	// TimedOut counts attempts failed by a timeout, by error class.
	TimedOut map[string]int
	// Finished counts the executions that ended, by final state.
	Finished map[string]int
	// Retrying counts the executions that will be retried.
	Retrying int
	// More: the pass stopped at its batch with more left.
	More bool
}

// SweepBatch bounds the attempts one pass fails.
const SweepBatch = 200

// NextExpiry returns how long until the earliest waiting attempt expires
// by the database clock (ok false: none waits).
func NextExpiry(ctx context.Context, q db.Querier) (time.Duration, bool, error) {
	next, now, err := db.NextCallbackExpiry(ctx, q)
	if err != nil || next == nil {
		return 0, false, errs.Store(err, "next callback expiry")
	}
	return max(next.Sub(now), 0), true, nil
}

// RetryDetached gives a retrying execution that no River job carries any
// more (its attempt was accepted and the job ended) a new deliver job of
// maxAttempts River attempts, due at, whose leases are above lease,
// recorded as its river_job_id. Not unique: the finished job of the
// accepted attempt has the same args.
func RetryDetached(ctx context.Context, tx db.Tx, enq *queue.Enqueuer, tenant, executionID string, lease, priority, maxAttempts int,
	at time.Time,
) error {
	opts := &river.InsertOpts{Queue: queue.Deliver, Priority: max(priority, 1), MaxAttempts: maxAttempts, ScheduledAt: at}
	res, err := enq.Enqueue(ctx, tx, []river.InsertManyParams{{
		Args: job.DeliverArgs{TenantID: tenant, ExecutionID: executionID, LeaseBase: lease}, InsertOpts: opts,
	}})
	if err != nil {
		return err
	}
	return errs.Store(db.SetExecutionJobs(ctx, tx, []db.ExecutionRef{{TenantID: tenant, ID: executionID}}, []int64{res[0].Job.ID}),
		"record detached retry job")
}
