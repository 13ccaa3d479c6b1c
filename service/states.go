package service

import "github.com/axhq/ax/service/lifecycle"

// The states of executions, workflow runs and nodes, tasks, workflows and
// backfills are service/lifecycle's, with the sets the rules use and the
// transitions they may make; db builds its SQL from the same names. These
// are their names in service's API.

// Execution states (docs/architecture.md, "Executions").
const (
	ExecPending   = lifecycle.ExecPending
	ExecRunning   = lifecycle.ExecRunning
	ExecRetrying  = lifecycle.ExecRetrying
	ExecSucceeded = lifecycle.ExecSucceeded
	ExecFailed    = lifecycle.ExecFailed
	ExecCancelled = lifecycle.ExecCancelled
	ExecSkipped   = lifecycle.ExecSkipped
)

// Run states.
const (
	RunPending   = lifecycle.RunPending
	RunRunning   = lifecycle.RunRunning
	RunBlocked   = lifecycle.RunBlocked
	RunSucceeded = lifecycle.RunSucceeded
	RunFailed    = lifecycle.RunFailed
	RunCancelled = lifecycle.RunCancelled
)

// Node states as the API shows them; waiting, blocked, skipped and
// cancelled are stored, the others are a fired node's executions'.
const (
	NodeWaiting   = lifecycle.NodeWaiting
	NodeBlocked   = lifecycle.NodeBlocked
	NodeSkipped   = lifecycle.NodeSkipped
	NodeCancelled = lifecycle.NodeCancelled
	// nodeFired: stored; the node's executions exist.
	nodeFired = lifecycle.NodeFired
	// nodeAwaiting: stored; a wait_for node waits for its event (shown
	// running). A wait_for node's outcome is stored as succeeded or
	// failed: it has no execution.
	nodeAwaiting  = lifecycle.NodeAwaiting
	nodeSucceeded = lifecycle.NodeSucceeded
	nodeFailed    = lifecycle.NodeFailed
)

// Task states.
const (
	TaskActive    = lifecycle.TaskActive
	TaskPaused    = lifecycle.TaskPaused
	TaskCompleted = lifecycle.TaskCompleted
)

// Workflow states.
const (
	WorkflowActive = lifecycle.WorkflowActive
	WorkflowPaused = lifecycle.WorkflowPaused
)

// Backfill states.
const (
	BackfillRunning   = lifecycle.BackfillRunning
	BackfillSucceeded = lifecycle.BackfillSucceeded
	BackfillFailed    = lifecycle.BackfillFailed
	BackfillCancelled = lifecycle.BackfillCancelled
)

// checkExec returns an error unless each of from → to is a transition of
// the execution lifecycle (lifecycle.Executions): every Go path that moves
// an execution asks it first, so that a move the table lacks fails the
// tests that take the path.
func checkExec(from []string, to string) error { return lifecycle.Executions.Check(from, to) }
