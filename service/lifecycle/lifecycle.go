// Package lifecycle names the states of what ax runs — executions,
// workflow runs and their nodes, tasks, workflows, backfills — the sets of
// those states that its rules use, the transitions an execution, a run
// and a node may make, and the triggers that create executions.
//
// It is the one home of these names: service's rules read them, and db
// builds every state list and state comparison of its SQL from them (db
// imports this package and nothing else of ax, as River's drivers share
// rivertype). A state or a set added here reaches every statement that
// names it; TestStatesAreNamed in db fails on a state written into SQL by
// hand, and TestDiagramShowsTheTransitions on a transition that
// docs/architecture.md does not show.
//
// It imports nothing of ax.
package lifecycle

import (
	"fmt"
	"slices"
)

// A Set is a named set of states, in lifecycle order. Its zero value is
// empty.
type Set struct{ states []string }

func newSet(states ...string) Set { return Set{states: states} }

// Has reports whether state is in s.
func (s Set) Has(state string) bool { return slices.Contains(s.states, state) }

// States returns the states of s, in lifecycle order (a copy).
func (s Set) States() []string { return slices.Clone(s.states) }

// A Transition is a move from one state to another that the code makes,
// with why.
type Transition struct {
	From, To string
	Why      string
}

// A Machine is one lifecycle: its states and every transition between
// them.
type Machine struct {
	name        string
	states      Set
	transitions []Transition
}

// Name is what the machine's states belong to ("execution", …).
func (m Machine) Name() string { return m.name }

// States returns every state, in lifecycle order.
func (m Machine) States() Set { return m.states }

// Transitions returns every transition, a copy.
func (m Machine) Transitions() []Transition { return slices.Clone(m.transitions) }

// Allows reports whether from → to is one of m's transitions.
func (m Machine) Allows(from, to string) bool {
	return slices.ContainsFunc(m.transitions, func(t Transition) bool { return t.From == from && t.To == to })
}

// Check returns an error unless every from → to is one of m's transitions
// (a state to itself is no move, and passes): a caller that moves a row
// between states asks it first, so that a move the table does not list
// fails the tests that take that path instead of going unnoticed.
func (m Machine) Check(from []string, to string) error {
	for _, f := range from {
		if f != to && !m.Allows(f, to) {
			return fmt.Errorf("%s %s → %s is not a transition of its lifecycle (service/lifecycle)", m.name, f, to)
		}
	}
	return nil
}
