package lifecycle

// Task states.
const (
	// TaskActive: the scheduler fires its slots.
	TaskActive = "active"
	// TaskPaused: paused (through the API, or after pause_after_failures
	// consecutive failures); its scheduled fires are cancelled when they
	// start, its manual ones are sent.
	TaskPaused = "paused"
	// TaskCompleted: its schedule has no slot left.
	TaskCompleted = "completed"
)

// TaskStates are every task state.
var TaskStates = newSet(TaskActive, TaskPaused, TaskCompleted)

// Workflow states (of the workflow itself; its runs have their own).
const (
	WorkflowActive = "active"
	WorkflowPaused = "paused"
)

// WorkflowStates are every workflow state.
var WorkflowStates = newSet(WorkflowActive, WorkflowPaused)

// Backfill states.
const (
	BackfillRunning   = "running"
	BackfillSucceeded = "succeeded"
	BackfillFailed    = "failed"
	BackfillCancelled = "cancelled"
)

// BackfillStates are every backfill state.
var BackfillStates = newSet(BackfillRunning, BackfillSucceeded, BackfillFailed, BackfillCancelled)
