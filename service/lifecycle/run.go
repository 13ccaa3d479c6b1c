package lifecycle

// Workflow run states.
const (
	// RunPending: waiting for its workflow's max_active_runs.
	RunPending = "pending"
	// RunRunning: started; its nodes fire as their rules are met.
	RunRunning = "running"
	// RunBlocked: a node's rule can no longer be met; it waits for a
	// person (run or skip the node, retry an upstream execution).
	RunBlocked = "blocked"
	// RunSucceeded: every node succeeded or was skipped.
	RunSucceeded = "succeeded"
	// RunFailed: every node is done and one failed or was cancelled.
	RunFailed = "failed"
	// RunCancelled: cancelled (through the API, its backfill, a schedule
	// change).
	RunCancelled = "cancelled"
)

// Sets of workflow run states the rules use.
var (
	// RunUnfinished: not final (the workflow_runs_unfinished_idx
	// predicate; an SLA counts while a run is in one of these).
	RunUnfinished = newSet(RunPending, RunRunning, RunBlocked)
	// RunActive: started and unfinished: counts against max_active_runs;
	// the engine advances only these, and only their nodes can be run or
	// skipped by hand.
	RunActive = newSet(RunRunning, RunBlocked)
	// RunFinal: it will not change again; finished_at is set.
	RunFinal = newSet(RunSucceeded, RunFailed, RunCancelled)
	// RunUnsuccessful: final without success (a backfill counts it
	// failed).
	RunUnsuccessful = newSet(RunFailed, RunCancelled)
)

// Runs is the workflow run lifecycle.
var Runs = Machine{
	name:   "workflow run",
	states: newSet(RunPending, RunRunning, RunBlocked, RunSucceeded, RunFailed, RunCancelled),
	transitions: []Transition{
		{RunPending, RunRunning, "max_active_runs lets it start"},
		{RunPending, RunCancelled, "cancelled before it started: through the API, its backfill, a schedule change"},
		{RunRunning, RunBlocked, "a node's rule can no longer be met"},
		{RunRunning, RunSucceeded, "every node succeeded or was skipped"},
		{RunRunning, RunFailed, "every node is done, and one failed or was cancelled"},
		{RunRunning, RunCancelled, "cancelled through the API or by a schedule change"},
		{RunBlocked, RunRunning, "no node is blocked any more (a node run or skipped, an upstream retried)"},
		{RunBlocked, RunSucceeded, "the blocked nodes were skipped and the rest succeeded"},
		{RunBlocked, RunFailed, "the blocked nodes were resolved and a node failed or was cancelled"},
		{RunBlocked, RunCancelled, "cancelled through the API or by a schedule change"},
	},
}

// Workflow run node states, as stored (workflow_run_nodes). The API shows
// a fired node's state as its executions' (one per shard).
const (
	// NodeWaiting: its rule is not met yet.
	NodeWaiting = "waiting"
	// NodeFired: its rule was met (or it was run by hand); its
	// executions exist.
	NodeFired = "fired"
	// NodeBlocked: its rule can no longer be met; it waits for a person.
	NodeBlocked = "blocked"
	// NodeSkipped: skipped by hand; downstream it counts as a success.
	NodeSkipped = "skipped"
	// NodeCancelled: its run was cancelled before it fired.
	NodeCancelled = "cancelled"
	// NodeAwaiting: a wait_for node whose rule is met: it waits for its
	// event (the API shows it running, with what it waits for).
	NodeAwaiting = "awaiting"
	// NodeSucceeded: a wait_for node whose event arrived, or that a
	// person ran.
	NodeSucceeded = "succeeded"
	// NodeFailed: a wait_for node whose wait timed out, or whose key did
	// not render.
	NodeFailed = "failed"
)

// NodeOpen: a node not decided yet, which may still fire (or, a wait_for
// node, still receive its event): only these can be run or skipped by
// hand, and a run's cancel cancels them.
var NodeOpen = newSet(NodeWaiting, NodeBlocked, NodeAwaiting)

// Nodes is the lifecycle of a run's node, as stored.
var Nodes = Machine{
	name:   "workflow node",
	states: newSet(NodeWaiting, NodeFired, NodeBlocked, NodeSkipped, NodeCancelled, NodeAwaiting, NodeSucceeded, NodeFailed),
	transitions: []Transition{
		{NodeWaiting, NodeFired, "its rule is met, or it is run by hand"},
		{NodeWaiting, NodeBlocked, "its rule can no longer be met"},
		{NodeWaiting, NodeSkipped, "skipped by hand"},
		{NodeWaiting, NodeCancelled, "its run was cancelled"},
		{NodeBlocked, NodeFired, "run by hand, or its rule is met after all"},
		{NodeBlocked, NodeWaiting, "its rule can be met again (an upstream execution retried)"},
		{NodeBlocked, NodeSkipped, "skipped by hand"},
		{NodeBlocked, NodeCancelled, "its run was cancelled"},
		{NodeWaiting, NodeAwaiting, "a wait_for node's rule is met: it waits for its event"},
		{NodeBlocked, NodeAwaiting, "a wait_for node's rule is met after all"},
		{NodeWaiting, NodeSucceeded, "a wait_for node run by hand"},
		{NodeBlocked, NodeSucceeded, "a wait_for node run by hand"},
		{NodeWaiting, NodeFailed, "a wait_for node's rule is met and its key does not render"},
		{NodeBlocked, NodeFailed, "a wait_for node's rule is met after all and its key does not render"},
		{NodeAwaiting, NodeSucceeded, "its event arrived, or a person ran it"},
		{NodeAwaiting, NodeFailed, "no event within its timeout"},
		{NodeAwaiting, NodeSkipped, "skipped by hand"},
		{NodeAwaiting, NodeCancelled, "its run was cancelled"},
	},
}
