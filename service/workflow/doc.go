// Package workflow holds what a workflow is made of and shown as, apart
// from the transactions that store it and the engine that runs it (both
// in package service): a version's stored document (StoredNode, Graph),
// the data a run's templates read (Inputs, RunData) and the scope they
// are checked against (Scope, ScopeOf), the rules of a wait_for node
// (WaitFor, CheckWait, CheckKey), a templated node's lineage
// (RenderedFrom, Lineage), and a run as the API shows it (Run, RunNode,
// RunFromRow, NodeOf). It imports db and service's leaves, never
// service, which re-exports its types under their old names.
package workflow
