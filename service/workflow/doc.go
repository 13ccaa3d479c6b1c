// Package workflow holds what a workflow is made of and shown as, apart
// from the transactions that store it and the engine that runs it (both
// in package service): a version's stored document and its parse
// (StoredNode, Graph, with the run's plan, Graph.Plan), cached per
// process (Cache); the data a run's templates read (Inputs, RunData), the
// scope they are checked against (NodeScope, ScopeOf, CheckTemplates) and
// what a run_if rendered means (RunIfVerdict); the rules of a wait_for
// node (WaitFor, CheckWait, CheckKey, CheckOutput); a templated node's
// lineage (RenderedFrom, Lineage); a run as the API shows it (Run,
// RunNode, RunFromRow, NodeOf); a claimed workflow as the scheduler plans
// it (Due); a run's alert (AlertArgs, AlertTarget). It imports db and
// service's subpackages, never service, which re-exports its types under
// their old names (WorkflowRun, Inputs, WaitFor, …).
package workflow
