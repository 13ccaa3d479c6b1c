package lifecycle

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

var machines = []Machine{Executions, Runs, Nodes}

// TestMachinesAreWellFormed: each transition joins two different states of
// its machine, once, with a reason; each state has a transition into or
// out of it.
func TestMachinesAreWellFormed(t *testing.T) {
	t.Parallel()
	for _, m := range machines {
		states := m.States()
		touched := map[string]bool{}
		seen := map[[2]string]bool{}
		for _, tr := range m.Transitions() {
			require.True(t, states.Has(tr.From), "%s: %s → %s starts from no state of the machine", m.Name(), tr.From, tr.To)
			require.True(t, states.Has(tr.To), "%s: %s → %s ends in no state of the machine", m.Name(), tr.From, tr.To)
			require.NotEqual(t, tr.From, tr.To, "%s: a transition moves", m.Name())
			require.NotEmpty(t, tr.Why, "%s: %s → %s says why", m.Name(), tr.From, tr.To)
			key := [2]string{tr.From, tr.To}
			require.False(t, seen[key], "%s: %s → %s twice", m.Name(), tr.From, tr.To)
			seen[key] = true
			touched[tr.From], touched[tr.To] = true, true
			require.True(t, m.Allows(tr.From, tr.To))
		}
		for _, s := range states.States() {
			require.True(t, touched[s], "%s: no transition into or out of %s", m.Name(), s)
		}
		require.Len(t, states.States(), len(slices.Compact(slices.Sorted(slices.Values(states.States())))),
			"%s: a state twice", m.Name())
	}
}

// TestSetsPartitionTheStates: the named sets are what their names say,
// over the machine's states.
func TestSetsPartitionTheStates(t *testing.T) {
	t.Parallel()
	all := Executions.States()
	for _, s := range all.States() {
		require.NotEqual(t, ExecUnfinished.Has(s), ExecFinal.Has(s), "%s is unfinished or final", s)
		require.Equal(t, ExecFinal.Has(s) && s != ExecSucceeded, ExecUnsuccessful.Has(s), "%s", s)
		require.Equal(t, ExecUnfinished.Has(s) && s != ExecRunning, ExecIdle.Has(s), "%s", s)
	}
	runs := Runs.States()
	for _, s := range runs.States() {
		require.NotEqual(t, RunUnfinished.Has(s), RunFinal.Has(s), "%s is unfinished or final", s)
		require.Equal(t, RunUnfinished.Has(s) && s != RunPending, RunActive.Has(s), "%s", s)
		require.Equal(t, RunFinal.Has(s) && s != RunSucceeded, RunUnsuccessful.Has(s), "%s", s)
	}
	for _, s := range Nodes.States().States() {
		left := slices.ContainsFunc(Nodes.Transitions(), func(tr Transition) bool { return tr.From == s })
		require.Equal(t, left, NodeOpen.Has(s), "a node leaves %s exactly when it is open", s)
	}
	for _, set := range []Set{ExecUnfinished, ExecIdle, ExecFinal, ExecUnsuccessful, ExecRetryable} {
		for _, s := range set.States() {
			require.True(t, all.Has(s), "%s is an execution state", s)
		}
	}
}

// TestFinalIsFinal: a final execution leaves its state only by an API
// retry of a retryable one, back to pending; a final run or node never.
func TestFinalIsFinal(t *testing.T) {
	t.Parallel()
	for _, tr := range Executions.Transitions() {
		if ExecFinal.Has(tr.From) {
			require.True(t, ExecRetryable.Has(tr.From), "%s → %s leaves a final state that is not retryable", tr.From, tr.To)
			require.Equal(t, ExecPending, tr.To, "a retry reopens to pending")
		}
	}
	for _, s := range ExecRetryable.States() {
		require.True(t, Executions.Allows(s, ExecPending), "%s can be retried", s)
	}
	for _, tr := range Runs.Transitions() {
		require.False(t, RunFinal.Has(tr.From), "%s → %s leaves a final run state", tr.From, tr.To)
	}
}

// TestCheck: Check lets a table's transitions and no-moves through and
// names the first move it does not list.
func TestCheck(t *testing.T) {
	t.Parallel()
	require.NoError(t, Executions.Check([]string{ExecPending, ExecRetrying}, ExecRunning))
	require.NoError(t, Executions.Check([]string{ExecRunning}, ExecRunning))
	require.EqualError(t, Executions.Check([]string{ExecPending, ExecSucceeded}, ExecRunning),
		"execution succeeded → running is not a transition of its lifecycle (service/lifecycle)")
}
