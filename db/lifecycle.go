package db

import (
	"strings"

	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/service/lifecycle"
)

// The SQL spellings of the states that db's statements compare or list,
// built once from their one home: service/lifecycle for ax's own states
// (the only package of ax that db imports), rivertype for River's, and
// this package for the replicas'. A statement names a state or a set
// through one of these, never as a literal (TestStatesAreNamed), so that a
// state added to a set reaches every statement that means the set.
var (
	execPending   = stateLit(lifecycle.ExecPending)
	execRunning   = stateLit(lifecycle.ExecRunning)
	execRetrying  = stateLit(lifecycle.ExecRetrying)
	execSucceeded = stateLit(lifecycle.ExecSucceeded)
	execFailed    = stateLit(lifecycle.ExecFailed)
	execCancelled = stateLit(lifecycle.ExecCancelled)
	execSkipped   = stateLit(lifecycle.ExecSkipped)

	execUnfinished   = stateSet(lifecycle.ExecUnfinished)
	execIdle         = stateSet(lifecycle.ExecIdle)
	execFinal        = stateSet(lifecycle.ExecFinal)
	execUnsuccessful = stateSet(lifecycle.ExecUnsuccessful)
	execRetryable    = stateSet(lifecycle.ExecRetryable)

	runPending   = stateLit(lifecycle.RunPending)
	runRunning   = stateLit(lifecycle.RunRunning)
	runBlocked   = stateLit(lifecycle.RunBlocked)
	runSucceeded = stateLit(lifecycle.RunSucceeded)
	runCancelled = stateLit(lifecycle.RunCancelled)

	runUnfinished   = stateSet(lifecycle.RunUnfinished)
	runFinal        = stateSet(lifecycle.RunFinal)
	runUnsuccessful = stateSet(lifecycle.RunUnsuccessful)

	nodeFired     = stateLit(lifecycle.NodeFired)
	nodeAwaiting  = stateLit(lifecycle.NodeAwaiting)
	nodeSucceeded = stateLit(lifecycle.NodeSucceeded)
	nodeFailed    = stateLit(lifecycle.NodeFailed)
	nodeOpen      = stateSet(lifecycle.NodeOpen)

	taskActive    = stateLit(lifecycle.TaskActive)
	taskPaused    = stateLit(lifecycle.TaskPaused)
	taskCompleted = stateLit(lifecycle.TaskCompleted)

	workflowActive = stateLit(lifecycle.WorkflowActive)

	backfillRunning   = stateLit(lifecycle.BackfillRunning)
	backfillSucceeded = stateLit(lifecycle.BackfillSucceeded)

	replicaAlive = stateLit(ReplicaAlive)
	replicaDead  = stateLit(ReplicaDead)
	replicaGone  = stateLit(ReplicaGone)

	jobAvailable = stateLit(string(rivertype.JobStateAvailable))
	jobRunning   = stateLit(string(rivertype.JobStateRunning))
	jobScheduled = stateLit(string(rivertype.JobStateScheduled))
	// liveJobStates are the River job states in which a job will still
	// run (or is running): a job in any other state (completed,
	// cancelled, discarded) or a job that is gone carries nothing any
	// more.
	liveJobStates = stateList(string(rivertype.JobStateAvailable), string(rivertype.JobStatePending),
		string(rivertype.JobStateRetryable), string(rivertype.JobStateRunning), string(rivertype.JobStateScheduled))
	// endedJobStates are the River job states of a job stopped before it
	// completed.
	endedJobStates = stateList(string(rivertype.JobStateCancelled), string(rivertype.JobStateDiscarded))
)

// stateLit is a state as a SQL literal: 'pending'.
func stateLit(s string) string {
	if strings.ContainsRune(s, '\'') {
		panic("a state with a quote: " + s) // programmer error, at init
	}
	return "'" + s + "'"
}

// stateList is states as a parenthesized SQL list: ('pending', 'running').
func stateList(states ...string) string {
	quoted := make([]string, len(states))
	for i, s := range states {
		quoted[i] = stateLit(s)
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

// stateSet is a set of states as a parenthesized SQL list.
func stateSet(s lifecycle.Set) string { return stateList(s.States()...) }
