package service

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/axhq/ax/service/lifecycle"
)

// The delivery decisions: whether a River attempt may start an execution
// and what happens instead, and what an attempt's outcome does to it. Each
// is one pure function of a small set of facts, so that every rule has one
// home. The row-by-row path (Deliveries.beginRow, Deliveries.finishRow)
// reads the facts under a row lock, asks the function and applies its
// verdict. The batched fast path runs the common case in one SQL statement
// for many executions at once; which executions it may take is part of
// the verdict too (startDecision.Batch, finishDecision.Batch: the verdict
// needs no write beyond the statement's own), and the statement's WHERE
// clause is that verdict's mirror in SQL, a single named predicate
// (db.StartsWithoutDecision, db.SucceedsWithoutDecision). Everything else
// falls back to the row-by-row path. Misfires of recurring tasks, which
// the statement leaves, are decided in a batch of their own
// (startDecision.MisfireBatch, Deliveries.decideMisfires), by this
// function, for the executions db.DecidesMisfireInBatch admits. A rule
// added here must be added to the predicates too; TestStartDecisionAgreesWithTheBatch and
// TestFinishDecisionAgreesWithTheBatch run every combination of the facts
// through both against Postgres and fail until they agree.

// startFacts is what decides whether River attempt Lease of job JobID may
// start an execution.
type startFacts struct {
	// The execution.
	State           string
	Trigger         string
	CancelRequested bool
	// Attempts counts every attempt ever started, across API retries;
	// AttemptsBase is how many were made before the latest API retry (the
	// task's max_attempts counts the attempts after it).
	Attempts     int
	AttemptsBase int
	// NeverStarted: no attempt ever started and the API never retried the
	// execution: a first fire.
	NeverStarted bool
	// Held: an operator holds the pending execution (POST
	// /v1/executions/{id}/hold); it does not start until released.
	Held bool
	// LeaseAttempt is the River attempt that owns the execution.
	LeaseAttempt int
	// RiverJobID is the job the execution belongs to (nil: the one that
	// was inserted with it).
	RiverJobID *int64

	// The attempt asking.
	Lease int
	// JobID is the River job asking; 0: not checked.
	JobID int64

	// The task (TaskFound false: deleted).
	TaskFound     bool
	TaskState     string
	OverlapPolicy string
	MisfirePolicy string
	MaxAttempts   int
	// EarlierUnfinished counts the task's unfinished executions ordered
	// before this one, up to 2; it is only counted for a pending execution
	// whose task does not allow overlap.
	EarlierUnfinished int
	// LaterMissed counts the task's scheduled executions after this one
	// whose slots are misfires too, up to the rules' CatchUpMax; it is only
	// counted for a misfire (startRules.misfire) of a fire_all task.
	LaterMissed int
	// The facts of a misfire of a fire_once task (false otherwise), read
	// under the task's row lock (startRules.decidedAlone):
	// LaterMisfire: a later scheduled execution of the task is a misfire
	// not decided yet, so it is decided after this one; CaughtUp: the
	// task's latest catch-up (a late fire) started at or after this slot;
	// CatchUpShard: another shard of this slot was sent late, as the
	// catch-up.
	LaterMisfire bool
	CaughtUp     bool
	CatchUpShard bool
	// SingleSlot: the task's schedule has one slot only (once). Its
	// misfire stands for no other slot: fire_once sends it late without
	// the catch-up's bookkeeping (no task row lock, nothing recorded).
	SingleSlot bool
	// Sharded: the execution is one shard of its slot (shard_count > 1);
	// a misfire of it is decided row by row (startRules.batchesMisfire).
	Sharded bool

	// The task's endpoint (EndpointFound false: deleted).
	EndpointFound   bool
	EndpointEnabled bool
	// EndpointLimited: the endpoint has max_concurrency or
	// rate_limit_per_second; TenantLimited: the tenant has delivery
	// limits (by the replica's cache of them). Either way the delivery
	// passes gates (limits.Gates): a send is admitted through them
	// (limits.Admit), which the batched start does not do.
	EndpointLimited bool
	TenantLimited   bool

	// Waited is how long ago the execution's slot was (database clock).
	Waited time.Duration
	// Waiting: the running execution's current attempt was accepted in
	// callback completion mode, and ax waits for its completion.
	Waiting bool
}

// startRules are the limits decideStart applies (DeliveriesConfig).
type startRules struct {
	// QueueWaitMax: how long an overlap "queue" execution waits.
	QueueWaitMax time.Duration
	// MisfireThreshold: a first fire of a slot picked up more than this
	// after the slot is a misfire.
	MisfireThreshold time.Duration
	// CatchUpWindow and CatchUpMax bound what fire_all still sends.
	CatchUpWindow time.Duration
	CatchUpMax    int
}

// misfire reports whether the facts are a misfire: a first fire of a
// scheduled slot, still pending, picked up past the threshold.
func (r startRules) misfire(f startFacts) bool {
	return f.State == ExecPending && f.Trigger == TriggerSchedule && f.NeverStarted && f.Waited > r.MisfireThreshold
}

// decidedAlone reports whether the facts must be read, and the decision
// made, holding the task's row lock: a misfire of a fire_once task, whose
// decision reads what the task's other misfires decided (CaughtUp,
// LaterMisfire) and whose every outcome writes the task row. Two misfires
// of a task then never decide at once, each unaware of the other's catch-
// up.
func (r startRules) decidedAlone(f startFacts) bool {
	return r.misfire(f) && f.MisfirePolicy == MisfireFireOnce && !f.SingleSlot
}

// batchesLate reports whether the batched start may send the misfire f
// late: a one-shot (SingleSlot) fire_once task's, which takes no task row
// lock and records no catch-up (decidedAlone, startDecision.CatchUp),
// when neither a catch-up that started after its slot (CaughtUp) nor a
// later misfire (LaterMisfire) could miss it — then no other fact
// (CatchUpShard) matters either. A burst of one-shot tasks picked up past
// the threshold is sent in batches, not row by row.
func (r startRules) batchesLate(f startFacts) bool {
	return r.misfire(f) && f.MisfirePolicy == MisfireFireOnce && f.SingleSlot && !f.CaughtUp && !f.LaterMisfire
}

// batchesMisfire reports whether the batched misfire decision
// (db.LockMisfires, Deliveries.decideMisfires) decides the misfire f, whose
// verdict is then a late send or a miss (the cases that end it otherwise
// come first in startVerdictOf): a pending execution of a task that
// allows overlap and has an attempt left, to an endpoint without limits
// for a tenant without them; not a one-shot fire_once task's (the
// batched start sends those: batchesLate) and not a shard (a catch-up's
// other shards are sent with it, which the row-by-row path decides).
// The batch decides a task's misfires in the order of their slots, as
// decideStart would one after the other, under the task's row lock.
// db.DecidesMisfireInBatch is its mirror in SQL.
func (r startRules) batchesMisfire(f startFacts) bool {
	return r.misfire(f) && f.OverlapPolicy == OverlapAllow && f.Attempts-f.AttemptsBase < f.MaxAttempts &&
		(f.MisfirePolicy != MisfireFireOnce || !f.SingleSlot) && !f.Sharded && !f.EndpointLimited && !f.TenantLimited
}

// startVerdict is what Begin does with an attempt.
type startVerdict uint8

const (
	// startSend: the execution becomes running under the lease as attempt
	// Attempt; send it.
	startSend startVerdict = iota + 1
	// startLeave: nothing to do for this attempt (the execution is final,
	// a newer attempt or another job owns it); nothing is written.
	startLeave
	// startWait: overlap_policy queue and the previous execution is
	// unfinished; come back later without using an attempt.
	startWait
	// startCancel: the execution ends cancelled without being sent.
	startCancel
	// startSkip: the execution ends skipped (overlap policy).
	startSkip
	// startFail: the execution ends failed without being sent: it has no
	// attempt left.
	startFail
	// startMiss: the execution ends skipped without being sent: a
	// misfire its task's misfire policy does not fire. It counts as a
	// missed slot.
	startMiss
	// startPark: the execution is held; it stays pending, unsent, and
	// this job ends. Its release gives it a new job (Executions.Release).
	startPark
)

func (v startVerdict) String() string {
	switch v {
	case startSend:
		return "send"
	case startLeave:
		return "leave"
	case startWait:
		return "wait"
	case startCancel:
		return "cancel"
	case startSkip:
		return "skip"
	case startFail:
		return "fail"
	case startMiss:
		return "miss"
	case startPark:
		return "park"
	}
	return fmt.Sprintf("startVerdict(%d)", v)
}

// startDecision is decideStart's verdict.
type startDecision struct {
	Verdict startVerdict
	// Reason explains every verdict but startSend.
	Reason string
	// Resumed: the attempt takes over a running execution whose previous
	// run was interrupted (a crash or a shutdown).
	Resumed bool
	// Attempt is the attempt number to send (startSend).
	Attempt int
	// Late: a misfire the task's misfire policy still sends (startSend).
	Late bool
	// CatchUp: the late send is a fire_once task's catch-up; the task
	// records when it started (db.RecordCatchUp), in the transaction that
	// starts it, and its misfires due by then are missed.
	CatchUp bool
	// ErrorClass classifies startFail.
	ErrorClass string
	// Batch: the batched start (db.StartPendingDeliveries) makes this
	// start itself: a send of a pending execution (not held: that is no
	// send), to an endpoint without limits, decided from the execution,
	// task and endpoint rows alone (an overlap policy other than allow
	// needs the count of earlier unfinished executions) — not a misfire,
	// or the late send of a one-shot fire_once task's misfire that no
	// catch-up fact stands against (startRules.batchesLate). It marks a
	// late send late and stores its attempt_started event, as Begin does.
	// db.StartsWithoutDecision is its mirror in SQL.
	Batch bool
	// MisfireBatch: the batched misfire decision makes this decision, a
	// misfire sent late or missed (startRules.batchesMisfire), for many
	// executions at once; db.DecidesMisfireInBatch is its mirror in SQL.
	MisfireBatch bool
	// Admit: the send passes gates, and is admitted through them first
	// (limits.Admit, in the transaction that starts it): it starts under
	// a permit, or is held back (ActionHold).
	Admit bool
	// Release: an attempt through gates ends without sending, or finds
	// its execution over: the execution's permit (a hold the dispatcher
	// granted) goes back (limits.Release), in the transaction that
	// records the verdict. A permit of another attempt or job stays.
	Release bool
}

// decideStart decides whether the attempt may start the execution
// (startVerdictOf) and what that does to the permit of a delivery through
// gates (startPermits).
func decideStart(f startFacts, r startRules) startDecision {
	d := startVerdictOf(f, r)
	d.Admit, d.Release = f.startPermits(d.Verdict)
	return d
}

// startPermits says what verdict v does to the permit of a delivery that
// passes gates: a send is admitted through them; any other verdict gives
// back the permit the dispatcher may have granted the execution, but for
// an attempt left alone while its execution is unfinished (another
// attempt or job owns it, and the permit with it).
func (f startFacts) startPermits(v startVerdict) (admit, release bool) {
	if !f.EndpointLimited && !f.TenantLimited {
		return false, false
	}
	switch v {
	case startSend:
		return true, false
	case startLeave:
		return false, f.State != ExecPending && f.State != ExecRetrying && f.State != ExecRunning
	}
	return false, true
}

// startVerdictOf decides whether the attempt may start the execution, in
// this order:
//
//   - an execution another job owns, a newer attempt owns, one whose
//     accepted attempt waits for its callback, or that is final: leave it;
//   - a requested cancel, a deleted task, a paused task (unless the
//     execution was triggered manually), a deleted or disabled endpoint:
//     cancel it;
//   - a pending execution an operator holds: park it (nothing is sent or
//     written; its release decides again, misfire included, with a job
//     of its own);
//   - a misfire (a first fire of a slot picked up more than the misfire
//     threshold after it, by the database clock: the worker or the
//     database was down, or a backlog): its task's misfire_policy decides.
//     "skip" misses it; "fire_once" sends one late fire, its catch-up,
//     for the slots missed at once (missReason); "fire_all" misses it
//     beyond the catch-up window or when CatchUpMax later slots are
//     misfires too; one that is not missed goes on as a late fire;
//   - overlap (pending executions only): "skip" with an unfinished
//     execution before it, or "queue" with two, skips it; "queue" with
//     one waits up to queueWaitMax, then skips it;
//   - a run that would exceed the task's max_attempts (a run resumed after
//     an interruption, or a retry after max_attempts was lowered) fails it
//     without sending, which keeps max_attempts 1 at most once across
//     crashes and shutdowns;
//   - otherwise: send it as attempt Attempts+1 (numbers keep counting
//     across API retries; the budget counts from AttemptsBase).
func startVerdictOf(f startFacts, r startRules) startDecision {
	leave := func(reason string) startDecision { return startDecision{Verdict: startLeave, Reason: reason} }
	switch {
	case f.JobID != 0 && f.RiverJobID != nil && *f.RiverJobID != f.JobID:
		return leave(fmt.Sprintf("River job %d delivers the execution", *f.RiverJobID))
	case f.State == ExecRunning && f.Waiting:
		return leave(fmt.Sprintf("attempt %d was accepted; the execution waits for its callback", f.Attempts))
	case f.State == ExecRunning && f.LeaseAttempt > f.Lease:
		return leave(fmt.Sprintf("attempt %d is stale: River attempt %d owns the execution", f.Lease, f.LeaseAttempt))
	case f.State == ExecRetrying && f.LeaseAttempt >= f.Lease:
		return leave(fmt.Sprintf("attempt %d is stale: the execution is retrying after River attempt %d", f.Lease, f.LeaseAttempt))
	case !lifecycle.ExecUnfinished.Has(f.State):
		return leave("the execution is " + f.State)
	}
	resumed := f.State == ExecRunning

	if reason := f.cancelReason(); reason != "" {
		return startDecision{Verdict: startCancel, Reason: reason, Resumed: resumed}
	}

	if f.State == ExecPending && f.Held {
		return startDecision{Verdict: startPark, Reason: "the execution is held; it starts when it is released"}
	}

	late := r.misfire(f)
	if late {
		if reason := r.missReason(f); reason != "" {
			return startDecision{Verdict: startMiss, Reason: reason, MisfireBatch: r.batchesMisfire(f)}
		}
	}

	if f.State == ExecPending && f.EarlierUnfinished > 0 {
		skip := func(reason string) startDecision { return startDecision{Verdict: startSkip, Reason: reason} }
		switch {
		case f.OverlapPolicy == OverlapQueue && f.EarlierUnfinished == 1 && f.Waited <= r.QueueWaitMax:
			return startDecision{Verdict: startWait, Reason: "waiting for the previous execution to finish (overlap_policy queue)"}
		case f.OverlapPolicy == OverlapQueue && f.EarlierUnfinished == 1:
			return skip(fmt.Sprintf("waited more than %s for the previous execution (overlap_policy queue)", r.QueueWaitMax))
		case f.OverlapPolicy == OverlapQueue:
			return skip("another execution is already queued behind the unfinished one (overlap_policy queue)")
		case f.OverlapPolicy == OverlapSkip:
			return skip("the previous execution is unfinished (overlap_policy skip)")
		}
	}

	next := f.Attempts + 1
	if next-f.AttemptsBase > f.MaxAttempts {
		d := startDecision{
			Verdict: startFail, Resumed: resumed,
			Reason: fmt.Sprintf("attempts exhausted (max_attempts %d)", f.MaxAttempts),
		}
		if resumed {
			d.Reason += "; the last attempt was interrupted before its outcome was recorded"
			d.ErrorClass = ErrorClassInterrupted
		}
		return d
	}
	// A delivery through gates is admitted through them first (Admit),
	// which the batched start does not do.
	batch := f.State == ExecPending && f.OverlapPolicy == OverlapAllow && (!late || r.batchesLate(f)) &&
		!f.EndpointLimited && !f.TenantLimited
	return startDecision{
		Verdict: startSend, Resumed: resumed, Attempt: next, Late: late, Batch: batch,
		CatchUp:      late && f.MisfirePolicy == MisfireFireOnce && !f.SingleSlot,
		MisfireBatch: late && r.batchesMisfire(f),
	}
}

// missReason says why the misfire f is not sent, or "" when its task's
// misfire policy sends it late.
//
// fire_once promises one late fire, the catch-up, for the slots a task
// misses at once (ax or its database was down, or behind): it stands for
// every slot of the task that was due when it started, and those are
// missed; the slots due after it fire on time, or, picked up late too,
// make a new catch-up. Of the misfires queued at once the latest fires: a
// misfire with a later one still to decide is missed. So after an outage
// a task sends exactly one late fire, then fires on time — however its
// queued slots cross the threshold one after the other while the backlog
// drains — as long as the slots due after the catch-up are picked up
// within the threshold. The shards of the
// catch-up's slot are sent with it. A misfire of a fire_once task is
// decided under its task's row lock (decidedAlone), one at a time.
func (r startRules) missReason(f startFacts) string {
	late := fmt.Sprintf("picked up more than %s after its slot", r.MisfireThreshold)
	switch f.MisfirePolicy {
	case MisfireSkip:
		return "missed: " + late + " (misfire_policy skip)"
	case MisfireFireOnce:
		switch {
		case f.CatchUpShard: // sent with the catch-up it is a shard of
		case f.CaughtUp:
			return "missed: " + late + "; a late fire that started after its slot stands for it (misfire_policy fire_once)"
		case f.LaterMisfire:
			return "missed: " + late + "; a later missed slot fires instead (misfire_policy fire_once)"
		}
	case MisfireFireAll:
		switch {
		case f.Waited > r.CatchUpWindow:
			return fmt.Sprintf("missed: picked up more than the catch-up window of %s after its slot (misfire_policy fire_all)", r.CatchUpWindow)
		case f.LaterMissed >= r.CatchUpMax:
			return fmt.Sprintf("missed: %s; the %d most recent missed slots fire instead (misfire_policy fire_all)", late, r.CatchUpMax)
		}
	}
	return ""
}

// cancelReason says why an execution must not be sent, or "".
func (f startFacts) cancelReason() string {
	switch {
	case f.CancelRequested:
		return "cancel requested"
	case !f.TaskFound:
		return "the task was deleted"
	case f.TaskState == TaskPaused && f.Trigger != TriggerManual:
		return "the task is paused"
	case !f.EndpointFound:
		return "the task's endpoint no longer exists"
	case !f.EndpointEnabled:
		return "the endpoint is disabled"
	}
	return ""
}

// finishFacts is what decides what an attempt's outcome does to its
// execution.
type finishFacts struct {
	// The execution.
	State        string
	LeaseAttempt int
	// Attempts and AttemptsBase: as in startFacts.
	Attempts        int
	AttemptsBase    int
	CancelRequested bool
	// Lease is the River attempt reporting the outcome.
	Lease int

	// WorkflowRun: the execution is a workflow node's; its end advances
	// the run in the transaction that records it (Workflows' engine).
	WorkflowRun bool

	// The task (TaskFound false: deleted).
	TaskFound   bool
	MaxAttempts int
	Retry       RetryPolicy

	// Jitter, in [0, 1), places a backoff within its range (Backoff).
	Jitter float64

	// Permitted: the execution holds a permit of its gates (its attempt
	// was admitted through them, limits.Admit).
	Permitted bool
}

// finishVerdict is what an outcome does to the execution.
type finishVerdict uint8

const (
	// finishStale: the attempt does not own the execution (a newer run
	// took it over, or it ended); its outcome is not recorded.
	finishStale finishVerdict = iota + 1
	// finishSucceed: the execution succeeded.
	finishSucceed
	// finishCancel: the execution ends cancelled.
	finishCancel
	// finishRetry: the execution is retrying after Delay.
	finishRetry
	// finishFail: the execution failed for good.
	finishFail
)

func (v finishVerdict) String() string {
	switch v {
	case finishStale:
		return "stale"
	case finishSucceed:
		return "succeed"
	case finishCancel:
		return "cancel"
	case finishRetry:
		return "retry"
	case finishFail:
		return "fail"
	}
	return fmt.Sprintf("finishVerdict(%d)", v)
}

// finishDecision is decideFinish's verdict.
type finishDecision struct {
	Verdict finishVerdict
	// Reason explains finishStale, finishCancel and finishFail; for
	// finishRetry it is where Delay comes from ("backoff", "retry_after").
	Reason string
	// Delay is the wait before the next attempt (finishRetry).
	Delay time.Duration
	// Batch: the batched success (db.SucceedDeliveries) records this
	// outcome itself: a success of an execution that is no workflow
	// node's (a node's success advances its run, which the statement does
	// not do). db.SucceedsWithoutDecision is its mirror in SQL.
	Batch bool
	// Release: the attempt's permit goes back (limits.Release), in the
	// transaction that records the outcome, so that no worker has to
	// remember it; a permit whose process died first expires
	// (limits.Limits.SweepPermits).
	Release bool
}

// decideFinish decides what outcome out of attempt f.Lease does to the
// execution:
//
//   - an attempt that does not own the running execution: stale, nothing
//     recorded;
//   - success: succeeded (even when a cancel was requested meanwhile or
//     the task was deleted: the receiver has it);
//   - a failure of an attempt cut short by a cancel, or after a cancel
//     request, or whose task was deleted: cancelled;
//   - a retryable failure with attempts left: retrying after the
//     receiver's Retry-After (capped by the task's max backoff) or the
//     task's backoff;
//   - otherwise (permanent, or attempts exhausted): failed.
//
// A recorded outcome (any verdict but stale) releases the execution's
// permit; a stale one leaves it to the attempt that owns the execution.
func decideFinish(f finishFacts, out Outcome) finishDecision {
	d := finishVerdictOf(f, out)
	d.Release = f.Permitted && d.Verdict != finishStale
	// The batched success releases no permit: one with a permit to give
	// back takes the row-by-row path.
	d.Batch = d.Batch && !d.Release
	return d
}

// finishVerdictOf decides what outcome out does to the execution
// (decideFinish).
func finishVerdictOf(f finishFacts, out Outcome) finishDecision {
	if f.State != ExecRunning || f.LeaseAttempt != f.Lease {
		return finishDecision{
			Verdict: finishStale,
			Reason:  fmt.Sprintf("the execution is not running under attempt %d; its outcome is not recorded", f.Lease),
		}
	}
	if out.Kind == OutcomeSucceeded {
		return finishDecision{Verdict: finishSucceed, Batch: !f.WorkflowRun}
	}
	failure := out.failure()
	switch {
	case out.CutByCancel || f.CancelRequested:
		return finishDecision{Verdict: finishCancel, Reason: "cancel requested"}
	case !f.TaskFound:
		return finishDecision{Verdict: finishCancel, Reason: "the task was deleted"}
	case out.Kind == OutcomeRetry && f.Attempts-f.AttemptsBase < f.MaxAttempts:
		d := finishDecision{
			Verdict: finishRetry, Reason: "backoff",
			Delay: f.Retry.Delay(f.Attempts-f.AttemptsBase, out.RetryAfter, f.Jitter),
		}
		if out.RetryAfter > 0 {
			d.Reason = "retry_after"
		}
		return d
	case out.Kind == OutcomeRetry:
		return finishDecision{
			Verdict: finishFail,
			Reason:  fmt.Sprintf("attempts exhausted (max_attempts %d): %s", f.MaxAttempts, failure),
		}
	}
	return finishDecision{Verdict: finishFail, Reason: "permanent failure: " + failure}
}

// mayBatchFinish reports whether Finish offers out to the batched
// success: the part of finishDecision.Batch that the outcome alone
// decides — a success, of an execution the worker knows is no workflow
// node's (Outcome.WorkflowRun; the statement would leave a node's anyway,
// by db.SucceedsWithoutDecision). Everything else goes straight to the
// row-by-row path.
func mayBatchFinish(out Outcome) bool { return out.Kind == OutcomeSucceeded && !out.WorkflowRun }

// Delay returns how long to wait before the next attempt after attempt
// (1 is the first) failed retryably: the receiver's Retry-After when it
// gave one, capped at the policy's MaxBackoff, otherwise Backoff.
func (p RetryPolicy) Delay(attempt int, retryAfter time.Duration, jitter float64) time.Duration {
	if retryAfter > 0 {
		if p.MaxBackoff > 0 {
			return min(retryAfter, p.MaxBackoff)
		}
		return retryAfter
	}
	return Backoff(attempt, p.InitialBackoff, p.MaxBackoff, jitter)
}

// Backoff returns the delay before retry number attempt (1 is the first
// retry): initial doubled per attempt, capped at maxDelay, with "equal
// jitter": a point in the upper half, [d/2, d], placed by jitter in
// [0, 1). The floor keeps retries from bunching at zero; the random half
// spreads a burst of failures apart. A non-positive initial gives 0;
// maxDelay below initial is raised to it.
func Backoff(attempt int, initial, maxDelay time.Duration, jitter float64) time.Duration {
	if initial <= 0 {
		return 0
	}
	maxDelay = max(maxDelay, initial)
	d := initial
	for i := 1; i < attempt && d < maxDelay; i++ {
		if d > maxDelay/2 {
			d = maxDelay
			break
		}
		d *= 2
	}
	d = min(d, maxDelay)
	f := min(max(jitter, 0), 1)
	half := d / 2
	// min: float rounding must not push a delay near MaxInt64 past d.
	return half + min(time.Duration(f*float64(d-half)), d-half)
}

// randomJitter is the default jitter source (DeliveriesConfig.Rand).
func randomJitter() float64 { return rand.Float64() } //nolint:gosec // jitter, not a secret
