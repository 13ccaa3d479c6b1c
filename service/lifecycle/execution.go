package lifecycle

// Execution states (docs/architecture.md, "Executions").
const (
	// ExecPending: created, not sent yet (or reopened by an API retry).
	ExecPending = "pending"
	// ExecRunning: an attempt owns it (its lease_attempt) and is sending
	// it, or waits for its callback.
	ExecRunning = "running"
	// ExecRetrying: an attempt failed retryably; the next is due at
	// next_attempt_at.
	ExecRetrying = "retrying"
	// ExecSucceeded: the receiver accepted it.
	ExecSucceeded = "succeeded"
	// ExecFailed: it failed for good (the dead-letter set).
	ExecFailed = "failed"
	// ExecCancelled: cancelled before or during its delivery.
	ExecCancelled = "cancelled"
	// ExecSkipped: deliberately never sent (overlap or misfire policy, a
	// skipped slot).
	ExecSkipped = "skipped"
)

// Execution triggers: what created an execution (or a workflow run).
// service names them too (TriggerSchedule…); the subpackages that create
// executions read them here.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
	TriggerRetry    = "retry"
	TriggerBackfill = "backfill"
)

// Sets of execution states the rules use.
var (
	// ExecUnfinished: not final. Exactly these executions have a row in
	// unfinished_executions and count for the overlap policy; an API
	// cancel takes any of them, and Begin may start any of them.
	ExecUnfinished = newSet(ExecPending, ExecRunning, ExecRetrying)
	// ExecIdle: unfinished with no attempt in flight: a cancel ends it
	// at once (a running one is asked to stop instead).
	ExecIdle = newSet(ExecPending, ExecRetrying)
	// ExecFinal: it will not change again, but by an API retry. Its
	// finished_at is set; retention may delete it.
	ExecFinal = newSet(ExecSucceeded, ExecFailed, ExecCancelled, ExecSkipped)
	// ExecUnsuccessful: final without success; its last_error says why
	// (a constraint since migration 0005), and a backfill counts it
	// failed.
	ExecUnsuccessful = newSet(ExecFailed, ExecCancelled, ExecSkipped)
	// ExecRetryable: an API retry reopens it (POST
	// /v1/executions/{id}/retry); a skipped slot was deliberately not
	// fired and a succeeded one was delivered.
	ExecRetryable = newSet(ExecFailed, ExecCancelled)
)

// Executions is the execution lifecycle: every transition the code makes.
// docs/architecture.md draws it ("Executions"); its machine-readable list
// there must match this table (TestDiagramShowsTheTransitions).
var Executions = Machine{
	name:   "execution",
	states: newSet(ExecPending, ExecRunning, ExecRetrying, ExecSucceeded, ExecFailed, ExecCancelled, ExecSkipped),
	transitions: []Transition{
		{ExecPending, ExecRunning, "an attempt starts (Begin)"},
		{ExecPending, ExecCancelled, "a cancel before it was sent: through the API, a cancel request, its task paused " +
			"or deleted, its endpoint deleted or disabled, a schedule change, its backfill or workflow run cancelled"},
		{ExecPending, ExecSkipped, "not sent: its task's overlap policy, a misfire its misfire policy does not fire, " +
			"a slot skipped through the API"},
		{ExecPending, ExecFailed, "no attempt left to start (max_attempts); its payload's template failed to render " +
			"when it was created (error_class template: never enqueued nor sent)"},
		{ExecRunning, ExecSucceeded, "the receiver accepted it (a 2xx; a completed callback)"},
		{ExecRunning, ExecRetrying, "a retryable failure with attempts left"},
		{ExecRunning, ExecFailed, "a permanent failure or the last attempt's; a resumed run with no attempt left"},
		{ExecRunning, ExecCancelled, "a failure after a cancel request or its task's deletion; a resumed run that must " +
			"not send it; an API cancel while it waits for its callback or no job carries it"},
		{ExecRetrying, ExecRunning, "the next attempt starts"},
		{ExecRetrying, ExecCancelled, "a cancel between attempts: through the API, its task paused or deleted, " +
			"its endpoint deleted or disabled, its workflow run cancelled"},
		{ExecRetrying, ExecFailed, "no attempt left to start (max_attempts lowered)"},
		{ExecFailed, ExecPending, "an API retry: same id, same idempotency key, a fresh retry budget"},
		{ExecCancelled, ExecPending, "an API retry"},
	},
}
