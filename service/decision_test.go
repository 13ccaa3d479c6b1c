package service

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	const (
		initial = time.Second
		maxWait = time.Minute
	)
	tests := []struct {
		name    string
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{"first retry, low", 1, 0, 500 * time.Millisecond},
		{"first retry, high", 1, 0.999999999, time.Second - time.Nanosecond/2},
		{"first retry, mid", 1, 0.5, 750 * time.Millisecond},
		{"second retry, low", 2, 0, time.Second},
		{"third retry, low", 3, 0, 2 * time.Second},
		{"fourth retry, high", 4, 1, 8 * time.Second},
		{"capped, low", 10, 0, 30 * time.Second},
		{"capped, high", 10, 1, time.Minute},
		{"huge attempt", math.MaxInt, 1, time.Minute},
		{"zero attempt is the first", 0, 0, 500 * time.Millisecond},
		{"jitter above range clamps", 1, 7, time.Second},
		{"jitter below range clamps", 1, -3, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		require.InDelta(t, float64(tt.want), float64(Backoff(tt.attempt, initial, maxWait, tt.jitter)), 1, tt.name)
	}
	require.Zero(t, Backoff(3, 0, time.Minute, 0.5))
	require.Equal(t, time.Second, Backoff(5, time.Second, 0, 1), "max below initial is raised to it")
	big := time.Duration(math.MaxInt64)
	require.Equal(t, big, Backoff(200, time.Hour, big, 1), "no overflow near the top")
}

func TestBackoffJitter(t *testing.T) {
	t.Parallel()
	// With the default random source every value stays in [d/2, d] and
	// the values spread out.
	seen := make(map[time.Duration]bool)
	for range 200 {
		for attempt := 1; attempt <= 12; attempt++ {
			d := Backoff(attempt, time.Second, 5*time.Minute, randomJitter())
			base := min(time.Second<<(attempt-1), 5*time.Minute)
			require.GreaterOrEqual(t, d, base/2)
			require.LessOrEqual(t, d, base)
			if attempt == 3 {
				seen[d] = true
			}
		}
	}
	require.Greater(t, len(seen), 150, "jitter should spread delays")
}

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{MaxAttempts: 10, InitialBackoff: time.Second, MaxBackoff: 10 * time.Minute}
	tests := []struct {
		name       string
		retryAfter time.Duration
		attempt    int
		want       time.Duration
	}{
		{"retry-after honoured", 120 * time.Second, 1, 120 * time.Second},
		{"retry-after shorter than backoff wins", 2 * time.Second, 8, 2 * time.Second},
		{"retry-after capped", 9999999 * time.Second, 1, 10 * time.Minute},
		{"no retry-after: backoff", 0, 3, 3 * time.Second},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, p.Delay(tt.attempt, tt.retryAfter, 0.5), tt.name)
	}
	require.Equal(t, time.Hour, RetryPolicy{}.Delay(1, time.Hour, 0), "no max backoff: Retry-After as given")
}

// TestDecideStart spells out decideStart's rules one case at a time; the
// equivalence tests (decision_db_test.go) run every combination.
func TestDecideStart(t *testing.T) {
	t.Parallel()
	job := func(v int64) *int64 { return &v }
	sendable := startFacts{
		State: ExecPending, Trigger: TriggerSchedule, NeverStarted: true, Lease: 1, TaskFound: true,
		TaskState: TaskActive, OverlapPolicy: OverlapAllow, MisfirePolicy: MisfireFireOnce, MaxAttempts: 3,
		EndpointFound: true, EndpointEnabled: true, Waited: time.Second,
	}
	late := func(policy string, waited time.Duration, later int) func(*startFacts) {
		return func(f *startFacts) { f.MisfirePolicy, f.Waited, f.LaterMissed = policy, waited, later }
	}
	const held = "the execution is held; it starts when it is released"
	tests := []struct {
		name   string
		change func(*startFacts)
		want   startDecision
	}{
		{"first send", func(*startFacts) {}, startDecision{Verdict: startSend, Attempt: 1, Batch: true}},
		{
			"another job's execution", func(f *startFacts) { f.JobID, f.RiverJobID = 7, job(8) },
			startDecision{Verdict: startLeave, Reason: "River job 8 delivers the execution"},
		},
		{"its own job", func(f *startFacts) { f.JobID, f.RiverJobID = 8, job(8) }, startDecision{Verdict: startSend, Attempt: 1, Batch: true}},
		{
			"a newer attempt runs it", func(f *startFacts) { f.State, f.LeaseAttempt, f.Lease = ExecRunning, 3, 2 },
			startDecision{Verdict: startLeave, Reason: "attempt 2 is stale: River attempt 3 owns the execution"},
		},
		{
			"retrying after this attempt", func(f *startFacts) { f.State, f.LeaseAttempt, f.Lease = ExecRetrying, 2, 2 },
			startDecision{Verdict: startLeave, Reason: "attempt 2 is stale: the execution is retrying after River attempt 2"},
		},
		{"final", func(f *startFacts) { f.State = ExecSucceeded }, startDecision{Verdict: startLeave, Reason: "the execution is succeeded"}},
		{
			"cancel requested", func(f *startFacts) { f.CancelRequested = true },
			startDecision{Verdict: startCancel, Reason: "cancel requested"},
		},
		{"task deleted", func(f *startFacts) { f.TaskFound = false }, startDecision{Verdict: startCancel, Reason: "the task was deleted"}},
		{"task paused", func(f *startFacts) { f.TaskState = TaskPaused }, startDecision{Verdict: startCancel, Reason: "the task is paused"}},
		{
			"manual fire of a paused task", func(f *startFacts) { f.TaskState, f.Trigger = TaskPaused, TriggerManual },
			startDecision{Verdict: startSend, Attempt: 1, Batch: true},
		},
		{
			"endpoint gone", func(f *startFacts) { f.EndpointFound = false },
			startDecision{Verdict: startCancel, Reason: "the task's endpoint no longer exists"},
		},
		{
			"endpoint disabled", func(f *startFacts) { f.EndpointEnabled = false },
			startDecision{Verdict: startCancel, Reason: "the endpoint is disabled"},
		},
		{
			"an endpoint with limits is not batched", func(f *startFacts) { f.EndpointLimited = true },
			startDecision{Verdict: startSend, Attempt: 1, Admit: true},
		},
		{
			"resumed and cancelled", func(f *startFacts) { f.State, f.Attempts, f.LeaseAttempt, f.CancelRequested = ExecRunning, 1, 1, true },
			startDecision{Verdict: startCancel, Reason: "cancel requested", Resumed: true},
		},
		{
			"overlap skip", func(f *startFacts) { f.OverlapPolicy, f.EarlierUnfinished = OverlapSkip, 1 },
			startDecision{Verdict: startSkip, Reason: "the previous execution is unfinished (overlap_policy skip)"},
		},
		{"overlap skip, nothing earlier", func(f *startFacts) { f.OverlapPolicy = OverlapSkip }, startDecision{Verdict: startSend, Attempt: 1}},
		{
			"overlap queue waits", func(f *startFacts) { f.OverlapPolicy, f.EarlierUnfinished = OverlapQueue, 1 },
			startDecision{Verdict: startWait, Reason: "waiting for the previous execution to finish (overlap_policy queue)"},
		},
		{
			"overlap queue waited too long", func(f *startFacts) { f.OverlapPolicy, f.EarlierUnfinished, f.Waited = OverlapQueue, 1, 2*time.Hour },
			startDecision{Verdict: startSkip, Reason: "waited more than 1h0m0s for the previous execution (overlap_policy queue)"},
		},
		{
			"overlap queue, two earlier", func(f *startFacts) { f.OverlapPolicy, f.EarlierUnfinished = OverlapQueue, 2 },
			startDecision{Verdict: startSkip, Reason: "another execution is already queued behind the unfinished one (overlap_policy queue)"},
		},
		{"overlap allow ignores earlier ones", func(f *startFacts) { f.EarlierUnfinished = 2 }, startDecision{Verdict: startSend, Attempt: 1, Batch: true}},
		{
			"retry", func(f *startFacts) { f.State, f.Attempts, f.LeaseAttempt, f.Lease = ExecRetrying, 1, 1, 2 },
			startDecision{Verdict: startSend, Attempt: 2},
		},
		{
			"resumed", func(f *startFacts) { f.State, f.Attempts, f.LeaseAttempt, f.Lease = ExecRunning, 1, 1, 1 },
			startDecision{Verdict: startSend, Attempt: 2, Resumed: true},
		},
		{
			"resumed without attempts left", func(f *startFacts) { f.State, f.Attempts, f.LeaseAttempt, f.MaxAttempts = ExecRunning, 1, 1, 1 },
			startDecision{
				Verdict: startFail, Resumed: true, ErrorClass: ErrorClassInterrupted,
				Reason: "attempts exhausted (max_attempts 1); the last attempt was interrupted before its outcome was recorded",
			},
		},
		{
			"retry after max_attempts was lowered", func(f *startFacts) { f.State, f.Attempts, f.LeaseAttempt, f.Lease = ExecRetrying, 3, 1, 2 },
			startDecision{Verdict: startFail, Reason: "attempts exhausted (max_attempts 3)"},
		},

		// Attempt numbers keep counting across API retries; the budget
		// restarts.
		{
			"first send after an API retry", func(f *startFacts) { f.Attempts, f.AttemptsBase, f.NeverStarted = 3, 3, false },
			startDecision{Verdict: startSend, Attempt: 4, Batch: true},
		},
		{"a retry after an API retry", func(f *startFacts) {
			f.State, f.Attempts, f.AttemptsBase, f.LeaseAttempt, f.Lease, f.NeverStarted = ExecRetrying, 5, 3, 2, 3, false
		}, startDecision{Verdict: startSend, Attempt: 6}},
		{"the budget after an API retry is spent", func(f *startFacts) {
			f.State, f.Attempts, f.AttemptsBase, f.LeaseAttempt, f.Lease, f.NeverStarted = ExecRetrying, 6, 3, 2, 3, false
		}, startDecision{Verdict: startFail, Reason: "attempts exhausted (max_attempts 3)"}},

		// Misfires: first fires picked up past the threshold (5 s).
		{"at the threshold is on time", late(MisfireSkip, 5*time.Second, 0), startDecision{Verdict: startSend, Attempt: 1, Batch: true}},
		{
			"misfire, skip", late(MisfireSkip, 6*time.Second, 0),
			startDecision{Verdict: startMiss, Reason: "missed: picked up more than 5s after its slot (misfire_policy skip)", MisfireBatch: true},
		},
		{
			"misfire, fire_once, the latest: the catch-up", late(MisfireFireOnce, time.Minute, 0),
			startDecision{Verdict: startSend, Attempt: 1, Late: true, CatchUp: true, MisfireBatch: true},
		},
		{"misfire, fire_once, a later one still to decide fires", func(f *startFacts) {
			late(MisfireFireOnce, time.Minute, 0)(f)
			f.LaterMisfire = true
		}, startDecision{
			Verdict:      startMiss,
			Reason:       "missed: picked up more than 5s after its slot; a later missed slot fires instead (misfire_policy fire_once)",
			MisfireBatch: true,
		}},
		{"misfire, fire_once, a catch-up started since its slot", func(f *startFacts) {
			late(MisfireFireOnce, time.Minute, 0)(f)
			f.CaughtUp = true
		}, startDecision{
			Verdict:      startMiss,
			Reason:       "missed: picked up more than 5s after its slot; a late fire that started after its slot stands for it (misfire_policy fire_once)",
			MisfireBatch: true,
		}},
		{"misfire, fire_once, a shard of the catch-up's slot is sent with it", func(f *startFacts) {
			late(MisfireFireOnce, time.Minute, 0)(f)
			f.CaughtUp, f.LaterMisfire, f.CatchUpShard = true, true, true
		}, startDecision{Verdict: startSend, Attempt: 1, Late: true, CatchUp: true, MisfireBatch: true}},
		{"misfire, fire_once, a one-shot task's only slot: late, no catch-up to record, batched", func(f *startFacts) {
			late(MisfireFireOnce, time.Minute, 0)(f)
			f.SingleSlot = true
		}, startDecision{Verdict: startSend, Attempt: 1, Late: true, Batch: true}},
		{"misfire, fire_once, a one-shot task's shard sent with its caught-up slot: late, not batched", func(f *startFacts) {
			late(MisfireFireOnce, time.Minute, 0)(f)
			f.SingleSlot, f.CaughtUp, f.CatchUpShard = true, true, true
		}, startDecision{Verdict: startSend, Attempt: 1, Late: true}},
		{
			"misfire, fire_once, later slots fired count for fire_all only", late(MisfireFireOnce, time.Minute, 5),
			startDecision{Verdict: startSend, Attempt: 1, Late: true, CatchUp: true, MisfireBatch: true},
		},
		{"misfire, fire_all", late(MisfireFireAll, time.Minute, 99), startDecision{Verdict: startSend, Attempt: 1, Late: true, MisfireBatch: true}},
		{
			"misfire, fire_all, beyond CatchUpMax", late(MisfireFireAll, time.Minute, 100),
			startDecision{
				Verdict:      startMiss,
				Reason:       "missed: picked up more than 5s after its slot; the 100 most recent missed slots fire instead (misfire_policy fire_all)",
				MisfireBatch: true,
			},
		},
		{
			"misfire, fire_all, beyond the window", late(MisfireFireAll, 25*time.Hour, 0),
			startDecision{
				Verdict:      startMiss,
				Reason:       "missed: picked up more than the catch-up window of 24h0m0s after its slot (misfire_policy fire_all)",
				MisfireBatch: true,
			},
		},
		// The batched misfire decision takes what it can decide from the
		// rows and the misfire facts alone.
		{"misfire, a shard: decided row by row", func(f *startFacts) {
			late(MisfireFireOnce, time.Minute, 0)(f)
			f.Sharded = true
		}, startDecision{Verdict: startSend, Attempt: 1, Late: true, CatchUp: true}},
		{"misfire, skip, a one-shot task's only slot: missed in the batch", func(f *startFacts) {
			late(MisfireSkip, time.Minute, 0)(f)
			f.SingleSlot = true
		}, startDecision{Verdict: startMiss, Reason: "missed: picked up more than 5s after its slot (misfire_policy skip)", MisfireBatch: true}},
		{"misfire, no attempt left: missed row by row", func(f *startFacts) {
			late(MisfireSkip, time.Minute, 0)(f)
			f.MaxAttempts = 0
		}, startDecision{Verdict: startMiss, Reason: "missed: picked up more than 5s after its slot (misfire_policy skip)"}},
		{"misfire, overlap skip: missed row by row", func(f *startFacts) {
			late(MisfireSkip, time.Minute, 0)(f)
			f.OverlapPolicy = OverlapSkip
		}, startDecision{Verdict: startMiss, Reason: "missed: picked up more than 5s after its slot (misfire_policy skip)"}},
		{
			"a late manual fire is no misfire", func(f *startFacts) { late(MisfireSkip, time.Hour, 0)(f); f.Trigger = TriggerManual },
			startDecision{Verdict: startSend, Attempt: 1, Batch: true},
		},
		{"a late API retry is no misfire", func(f *startFacts) {
			late(MisfireSkip, time.Hour, 0)(f)
			f.NeverStarted, f.Attempts, f.AttemptsBase = false, 1, 1
		}, startDecision{Verdict: startSend, Attempt: 2, Batch: true}},
		{"a late retry is no misfire", func(f *startFacts) {
			late(MisfireSkip, time.Hour, 0)(f)
			f.State, f.NeverStarted, f.Attempts, f.LeaseAttempt, f.Lease = ExecRetrying, false, 1, 1, 2
		}, startDecision{Verdict: startSend, Attempt: 2}},
		{
			"a cancel comes before the misfire", func(f *startFacts) { late(MisfireSkip, time.Hour, 0)(f); f.TaskState = TaskPaused },
			startDecision{Verdict: startCancel, Reason: "the task is paused"},
		},
		{"a late fire still obeys its overlap policy", func(f *startFacts) {
			late(MisfireFireOnce, time.Hour, 0)(f)
			f.OverlapPolicy, f.EarlierUnfinished = OverlapSkip, 1
		}, startDecision{Verdict: startSkip, Reason: "the previous execution is unfinished (overlap_policy skip)"}},

		// Held by an operator: parked, whatever its overlap or misfire
		// would say (its release decides again); a cancel still wins.
		{"held", func(f *startFacts) { f.Held = true }, startDecision{Verdict: startPark, Reason: held}},
		{
			"held past the misfire threshold is not missed", func(f *startFacts) { late(MisfireSkip, time.Hour, 0)(f); f.Held = true },
			startDecision{Verdict: startPark, Reason: held},
		},
		{"held behind an unfinished one is not skipped", func(f *startFacts) {
			f.Held, f.OverlapPolicy, f.EarlierUnfinished = true, OverlapSkip, 1
		}, startDecision{Verdict: startPark, Reason: held}},
		{"held, no attempt left", func(f *startFacts) { f.Held, f.MaxAttempts = true, 0 }, startDecision{Verdict: startPark, Reason: held}},
		{"held and cancelled", func(f *startFacts) { f.Held, f.CancelRequested = true, true }, startDecision{Verdict: startCancel, Reason: "cancel requested"}},
		{"held, its task paused", func(f *startFacts) { f.Held, f.TaskState = true, TaskPaused }, startDecision{Verdict: startCancel, Reason: "the task is paused"}},
		{
			"held, another job's", func(f *startFacts) { f.Held, f.JobID, f.RiverJobID = true, 7, job(8) },
			startDecision{Verdict: startLeave, Reason: "River job 8 delivers the execution"},
		},
		{
			"held through a gate gives its permit back", func(f *startFacts) { f.Held, f.TenantLimited = true, true },
			startDecision{Verdict: startPark, Reason: held, Release: true},
		},

		// Through gates: a send is admitted through them; any other
		// verdict gives back the permit the execution may hold, but for
		// an attempt left alone while its execution is unfinished.
		{
			"through an endpoint's gate", func(f *startFacts) { f.EndpointLimited = true },
			startDecision{Verdict: startSend, Attempt: 1, Admit: true},
		},
		{
			"through the tenant's gate", func(f *startFacts) { f.TenantLimited = true },
			startDecision{Verdict: startSend, Attempt: 1, Admit: true},
		},
		{
			"cancelled through a gate", func(f *startFacts) { f.TenantLimited, f.CancelRequested = true, true },
			startDecision{Verdict: startCancel, Reason: "cancel requested", Release: true},
		},
		{
			"waits through a gate", func(f *startFacts) { f.EndpointLimited, f.OverlapPolicy, f.EarlierUnfinished = true, OverlapQueue, 1 },
			startDecision{Verdict: startWait, Reason: "waiting for the previous execution to finish (overlap_policy queue)", Release: true},
		},
		{
			"missed through a gate", func(f *startFacts) { late(MisfireSkip, time.Hour, 0)(f); f.TenantLimited = true },
			startDecision{Verdict: startMiss, Reason: "missed: picked up more than 5s after its slot (misfire_policy skip)", Release: true},
		},
		{
			"final through a gate", func(f *startFacts) { f.TenantLimited, f.State = true, ExecCancelled },
			startDecision{Verdict: startLeave, Reason: "the execution is cancelled", Release: true},
		},
		{
			"another job's through a gate", func(f *startFacts) { f.EndpointLimited, f.JobID, f.RiverJobID = true, 7, job(8) },
			startDecision{Verdict: startLeave, Reason: "River job 8 delivers the execution"},
		},
		{"a newer attempt's through a gate", func(f *startFacts) {
			f.TenantLimited, f.State, f.LeaseAttempt, f.Lease = true, ExecRunning, 3, 2
		}, startDecision{Verdict: startLeave, Reason: "attempt 2 is stale: River attempt 3 owns the execution"}},
	}
	for _, tt := range tests {
		f := sendable
		tt.change(&f)
		require.Equal(t, tt.want, decideStart(f, DeliveriesConfig{}.WithDefaults().rules()), tt.name)
	}
}

// TestDecidedAlone: a misfire of a fire_once task, and only that, is
// decided under its task's row lock (its decision reads what the task's
// other misfires decided) — unless the task has one slot only.
func TestDecidedAlone(t *testing.T) {
	t.Parallel()
	r := DeliveriesConfig{}.WithDefaults().rules()
	misfire := startFacts{
		State: ExecPending, Trigger: TriggerSchedule, NeverStarted: true, MisfirePolicy: MisfireFireOnce,
		Waited: time.Minute,
	}
	require.True(t, r.decidedAlone(misfire))
	for name, change := range map[string]func(*startFacts){
		"on time":      func(f *startFacts) { f.Waited = time.Second },
		"fire_all":     func(f *startFacts) { f.MisfirePolicy = MisfireFireAll },
		"skip":         func(f *startFacts) { f.MisfirePolicy = MisfireSkip },
		"manual":       func(f *startFacts) { f.Trigger = TriggerManual },
		"an API retry": func(f *startFacts) { f.NeverStarted = false },
		"retrying":     func(f *startFacts) { f.State = ExecRetrying },
		"one-shot":     func(f *startFacts) { f.SingleSlot = true },
	} {
		f := misfire
		change(&f)
		require.False(t, r.decidedAlone(f), name)
	}
}

// TestDecideFinish spells out decideFinish's rules one case at a time.
func TestDecideFinish(t *testing.T) {
	t.Parallel()
	owned := finishFacts{
		State: ExecRunning, LeaseAttempt: 2, Attempts: 1, Lease: 2, TaskFound: true, MaxAttempts: 3,
		Retry: RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute}, Jitter: 0.5,
	}
	ok := Outcome{Kind: OutcomeSucceeded, StatusCode: 200}
	retry := Outcome{Kind: OutcomeRetry, StatusCode: 503, Error: "HTTP 503"}
	permanent := Outcome{Kind: OutcomePermanent, StatusCode: 400, Error: "HTTP 400"}
	tests := []struct {
		name   string
		change func(*finishFacts)
		out    Outcome
		want   finishDecision
	}{
		{"success", func(*finishFacts) {}, ok, finishDecision{Verdict: finishSucceed, Batch: true}},
		{
			"success after a cancel request", func(f *finishFacts) { f.CancelRequested = true }, ok,
			finishDecision{Verdict: finishSucceed, Batch: true},
		},
		{"success of a deleted task", func(f *finishFacts) { f.TaskFound = false }, ok, finishDecision{Verdict: finishSucceed, Batch: true}},
		{"success of a workflow node", func(f *finishFacts) { f.WorkflowRun = true }, ok, finishDecision{Verdict: finishSucceed}},
		{"stale attempt", func(f *finishFacts) { f.LeaseAttempt = 3 }, ok, finishDecision{
			Verdict: finishStale,
			Reason:  "the execution is not running under attempt 2; its outcome is not recorded",
		}},
		{"ended meanwhile", func(f *finishFacts) { f.State = ExecCancelled }, retry, finishDecision{
			Verdict: finishStale,
			Reason:  "the execution is not running under attempt 2; its outcome is not recorded",
		}},
		{"retry", func(*finishFacts) {}, retry, finishDecision{Verdict: finishRetry, Reason: "backoff", Delay: 750 * time.Millisecond}},
		{
			"retry-after", func(*finishFacts) {},
			Outcome{Kind: OutcomeRetry, RetryAfter: 10 * time.Second},
			finishDecision{Verdict: finishRetry, Reason: "retry_after", Delay: 10 * time.Second},
		},
		{
			"attempts exhausted", func(f *finishFacts) { f.Attempts = 3 }, retry,
			finishDecision{Verdict: finishFail, Reason: "attempts exhausted (max_attempts 3): HTTP 503"},
		},
		{"permanent", func(*finishFacts) {}, permanent, finishDecision{Verdict: finishFail, Reason: "permanent failure: HTTP 400"}},
		{
			"permanent without text", func(*finishFacts) {},
			Outcome{Kind: OutcomePermanent, ErrorClass: "tls"},
			finishDecision{Verdict: finishFail, Reason: "permanent failure: tls"},
		},
		{
			"cut by a cancel", func(*finishFacts) {},
			Outcome{Kind: OutcomeRetry, CutByCancel: true},
			finishDecision{Verdict: finishCancel, Reason: "cancel requested"},
		},
		{
			"failure after a cancel request", func(f *finishFacts) { f.CancelRequested = true }, permanent,
			finishDecision{Verdict: finishCancel, Reason: "cancel requested"},
		},
		{
			"failure of a deleted task", func(f *finishFacts) { f.TaskFound = false }, retry,
			finishDecision{Verdict: finishCancel, Reason: "the task was deleted"},
		},
		{
			"retry after an API retry", func(f *finishFacts) { f.Attempts, f.AttemptsBase = 5, 3 }, retry,
			finishDecision{Verdict: finishRetry, Reason: "backoff", Delay: 1500 * time.Millisecond},
		},
		{
			"attempts exhausted after an API retry", func(f *finishFacts) { f.Attempts, f.AttemptsBase = 6, 3 }, retry,
			finishDecision{Verdict: finishFail, Reason: "attempts exhausted (max_attempts 3): HTTP 503"},
		},

		// A recorded outcome gives the permit back; a stale one leaves
		// it to the attempt that owns the execution.
		{
			"success with a permit", func(f *finishFacts) { f.Permitted = true }, ok,
			finishDecision{Verdict: finishSucceed, Release: true},
		},
		{
			"retry with a permit", func(f *finishFacts) { f.Permitted = true }, retry,
			finishDecision{Verdict: finishRetry, Reason: "backoff", Delay: 750 * time.Millisecond, Release: true},
		},
		{
			"failure with a permit", func(f *finishFacts) { f.Permitted = true }, permanent,
			finishDecision{Verdict: finishFail, Reason: "permanent failure: HTTP 400", Release: true},
		},
		{
			"cancel with a permit", func(f *finishFacts) { f.Permitted = true },
			Outcome{Kind: OutcomeRetry, CutByCancel: true},
			finishDecision{Verdict: finishCancel, Reason: "cancel requested", Release: true},
		},
		{"stale with a permit", func(f *finishFacts) { f.Permitted, f.LeaseAttempt = true, 3 }, ok, finishDecision{
			Verdict: finishStale,
			Reason:  "the execution is not running under attempt 2; its outcome is not recorded",
		}},
	}
	for _, tt := range tests {
		f := owned
		tt.change(&f)
		require.Equal(t, tt.want, decideFinish(f, tt.out), tt.name)
	}
}

// TestOutcomeKindString: the kinds' names are the outcome labels of
// ax_delivery_attempts_total.
func TestOutcomeKindString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "success", OutcomeSucceeded.String())
	require.Equal(t, "retry", OutcomeRetry.String())
	require.Equal(t, "permanent", OutcomePermanent.String())
	require.Equal(t, "OutcomeKind(0)", OutcomeKind(0).String())
}
