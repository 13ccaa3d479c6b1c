package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/lifecycle"
)

// The run engine of workflows: how a run's nodes fire. advanceRun is the
// one place that decides it, under the run's row lock, from the run's
// stored node states and its executions; it is called in the transaction
// of every change that can meet or break a rule (an upstream execution's
// terminal transition in Finish or Begin, an API retry or cancel of an
// execution, a forced run or skip of a node, a run's start), and by the
// backstop sweep (Workflows.Sweep) for a run nothing in flight will
// advance. Two callers of the same run serialize on its row lock, and the
// executions' node key (executions_node_idx) is the backstop against two
// fires of a node's shard.

// Trigger rules of a workflow node.
const (
	RuleAllSuccess = "all_success"
	RuleAllDone    = "all_done"
	RuleOneSuccess = "one_success"
)

// TriggerDependency: a workflow node fired because its rule was met.
const TriggerDependency = "dependency"

// WorkflowObserver receives the run engine's events (metrics).
type WorkflowObserver struct {
	// RunFinished is called in the transaction that ends a run, with its
	// final state (a transaction rolled back afterwards still counted).
	RunFinished func(state string)
}

var workflowObserver atomic.Pointer[WorkflowObserver]

// SetWorkflowObserver installs o (nil: none).
func SetWorkflowObserver(o *WorkflowObserver) { workflowObserver.Store(o) }

// storedNode is one node of a workflow version, as workflow_versions
// stores it: the client's fields and the hidden task that delivers it.
type storedNode struct {
	Key              string          `json:"key"`
	TaskID           string          `json:"task_id"`
	EndpointID       string          `json:"endpoint_id"`
	Payload          json.RawMessage `json:"payload"`
	Priority         int             `json:"priority"`
	TimeoutMS        int64           `json:"timeout_ms,omitempty"`
	MaxAttempts      int             `json:"max_attempts"`
	InitialBackoffMS int64           `json:"initial_backoff_ms"`
	MaxBackoffMS     int64           `json:"max_backoff_ms"`
	Shards           int             `json:"shards"`
	DependsOn        []string        `json:"depends_on"`
	TriggerRule      string          `json:"trigger_rule"`
	// CompletionMode is "callback" for a node in callback mode (absent:
	// response), with its timeouts.
	CompletionMode      string `json:"completion_mode,omitempty"`
	CompletionTimeoutMS int64  `json:"completion_timeout_ms,omitempty"`
	HeartbeatTimeoutMS  int64  `json:"heartbeat_timeout_ms,omitempty"`
}

// completion is the node's completion mode as a task's.
func (n storedNode) completion() Completion {
	if n.CompletionMode != CompletionCallback {
		return Completion{}
	}
	return Completion{Mode: CompletionCallback, Timeout: time.Duration(n.CompletionTimeoutMS) * time.Millisecond,
		HeartbeatTimeout: time.Duration(n.HeartbeatTimeoutMS) * time.Millisecond}
}

// graph is a parsed workflow version: its nodes in topological order.
type graph struct {
	nodes []storedNode
	index map[string]int
}

func parseGraph(doc string) (*graph, error) {
	var nodes []storedNode
	if err := json.Unmarshal([]byte(doc), &nodes); err != nil {
		return nil, fmt.Errorf("workflow version document: %w", err)
	}
	g := &graph{nodes: nodes, index: make(map[string]int, len(nodes))}
	for i, n := range nodes {
		g.index[n.Key] = i
	}
	return g, nil
}

// graphs caches parsed versions (immutable) by tenant, workflow, version.
var graphs struct {
	sync.Mutex
	m map[string]*graph
}

func loadGraph(ctx context.Context, q db.Querier, tenant, workflowID string, version int32) (*graph, error) {
	key := fmt.Sprintf("%s\x00%s\x00%d", tenant, workflowID, version)
	graphs.Lock()
	g := graphs.m[key]
	graphs.Unlock()
	if g != nil {
		return g, nil
	}
	doc, err := db.GetWorkflowVersion(ctx, q, tenant, workflowID, version)
	if err != nil {
		return nil, storeError(err, "load workflow version")
	}
	if g, err = parseGraph(string(doc)); err != nil {
		return nil, err
	}
	graphs.Lock()
	if graphs.m == nil || len(graphs.m) > 10_000 {
		graphs.m = map[string]*graph{}
	}
	graphs.m[key] = g
	graphs.Unlock()
	return g, nil
}

// nodeOutcome is a node's state as rules see it.
func nodeState(stored string, execs []db.RunExecution) string {
	if stored != nodeFired {
		return stored
	}
	if len(execs) == 0 {
		return ExecPending
	}
	var running, retrying, pending, failed, cancelled, succeeded int
	for _, e := range execs {
		switch e.State {
		case ExecRunning:
			running++
		case ExecRetrying:
			retrying++
		case ExecPending:
			pending++
		case ExecSucceeded:
			succeeded++
		case ExecFailed:
			failed++
		default: // cancelled, or skipped without being sent
			cancelled++
		}
	}
	switch {
	case running > 0:
		return ExecRunning
	case retrying > 0:
		return ExecRetrying
	case pending > 0:
		return ExecPending
	case failed > 0:
		return ExecFailed
	case cancelled > 0:
		return ExecCancelled
	}
	return ExecSucceeded
}

func nodeDone(s string) bool {
	return s == ExecSucceeded || s == NodeSkipped || s == ExecFailed || s == ExecCancelled
}

func nodeOK(s string) bool { return s == ExecSucceeded || s == NodeSkipped }

// ruleOf says whether a node's rule is met by its upstreams' states, or
// can no longer be met (broken).
func ruleOf(rule string, ups []string) (met, broken bool) {
	all, done, ok := len(ups), 0, 0
	for _, s := range ups {
		if nodeDone(s) {
			done++
		}
		if nodeOK(s) {
			ok++
		}
	}
	switch rule {
	case RuleAllDone:
		return done == all, false
	case RuleOneSuccess:
		return ok > 0 || all == 0, done == all && ok == 0 && all > 0
	}
	return ok == all, done > ok
}

// runPlan is what advanceRun decides for a run.
type runPlan struct {
	fire, block, unblock []string
	states               map[string]string // every node's state after the plan
	run                  string
}

// planRun decides, from the stored node states and the executions of a
// running or blocked run, which nodes fire, which are blocked or no longer
// blocked, and the run's state. Nodes are visited in topological order.
func planRun(g *graph, stored map[string]string, execs map[string][]db.RunExecution) runPlan {
	p := runPlan{states: make(map[string]string, len(g.nodes))}
	for _, n := range g.nodes {
		st := nodeState(stored[n.Key], execs[n.Key])
		if st == NodeWaiting || st == NodeBlocked {
			ups := make([]string, len(n.DependsOn))
			for i, u := range n.DependsOn {
				ups[i] = p.states[u]
			}
			met, broken := ruleOf(n.TriggerRule, ups)
			switch {
			case met:
				p.fire = append(p.fire, n.Key)
				st = ExecPending
			case broken && st == NodeWaiting:
				p.block = append(p.block, n.Key)
				st = NodeBlocked
			case !broken && st == NodeBlocked:
				p.unblock = append(p.unblock, n.Key)
				st = NodeWaiting
			}
		}
		p.states[n.Key] = st
	}
	blocked, final, ok := false, 0, 0
	for _, st := range p.states {
		blocked = blocked || st == NodeBlocked
		if nodeDone(st) {
			final++
		}
		if nodeOK(st) {
			ok++
		}
	}
	switch {
	case blocked:
		p.run = RunBlocked
	case final < len(g.nodes):
		p.run = RunRunning
	case ok == len(g.nodes):
		p.run = RunSucceeded
	default:
		p.run = RunFailed
	}
	return p
}

// runEngine fires the nodes of runs; ahead makes a root's deliver job due
// that long before its slot (SchedulerConfig.FetchAhead).
type runEngine struct {
	enq   *Enqueuer
	ahead time.Duration
}

// advanceRun brings run runID up to date in tx (see the top of the
// file). A run that is gone, pending or final is left alone.
func (e runEngine) advanceRun(ctx context.Context, tx db.Tx, tenant, runID string) error {
	run, err := db.GetWorkflowRun(ctx, tx, tenant, runID, true)
	if err = storeError(err, "load workflow run"); errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !lifecycle.RunActive.Has(run.State) {
		return nil
	}
	return e.advanceLocked(ctx, tx, run, nil)
}

// advanceLocked is advanceRun on a run locked by the caller; force names
// nodes to fire whatever their rule.
func (e runEngine) advanceLocked(ctx context.Context, tx db.Tx, run db.WorkflowRun, force []string) error {
	g, err := loadGraph(ctx, tx, run.TenantID, run.WorkflowID, run.Version)
	if err != nil {
		return err
	}
	nodes, err := db.GetRunNodes(ctx, tx, run.TenantID, run.ID)
	if err != nil {
		return storeError(err, "load run nodes")
	}
	stored := make(map[string]string, len(nodes))
	for _, n := range nodes {
		stored[n.Key] = n.State
	}
	rows, err := db.GetRunExecutions(ctx, tx, run.TenantID, run.ID)
	if err != nil {
		return storeError(err, "load run executions")
	}
	execs := map[string][]db.RunExecution{}
	for _, x := range rows {
		execs[x.Node] = append(execs[x.Node], x)
	}
	for _, k := range force {
		stored[k] = nodeFired // fired below with the planned ones
	}
	p := planRun(g, stored, execs)
	fire := append(slices.Clone(p.fire), force...)
	var keys, states []string
	for _, k := range fire {
		keys, states = append(keys, k), append(states, nodeFired)
	}
	for _, k := range p.block {
		keys, states = append(keys, k), append(states, NodeBlocked)
	}
	for _, k := range p.unblock {
		keys, states = append(keys, k), append(states, NodeWaiting)
	}
	if len(keys) > 0 {
		if err := db.SetRunNodeStates(ctx, tx, run.TenantID, run.ID, keys, states); err != nil {
			return storeError(err, "set run node states")
		}
	}
	if err := e.fireNodes(ctx, tx, run, g, fire); err != nil {
		return err
	}
	if p.run == run.State {
		return nil
	}
	if err := lifecycle.Runs.Check([]string{run.State}, p.run); err != nil {
		return err
	}
	if err := db.SetWorkflowRunState(ctx, tx, run.TenantID, run.ID, p.run); err != nil {
		return storeError(err, "set workflow run state")
	}
	if p.run == RunBlocked {
		if err := e.alertBlocked(ctx, tx, run, p.block); err != nil {
			return err
		}
	}
	if lifecycle.RunFinal.Has(p.run) {
		if o := workflowObserver.Load(); o != nil && o.RunFinished != nil {
			o.RunFinished(p.run)
		}
		return e.finishedRun(ctx, tx, run)
	}
	return nil
}

// fireNodes creates the executions (one per shard) of nodes of a run and
// their deliver jobs.
func (e runEngine) fireNodes(ctx context.Context, tx db.Tx, run db.WorkflowRun, g *graph, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	var news []db.NewNodeExecution
	meta := map[string]storedNode{}
	for _, k := range keys {
		n := g.nodes[g.index[k]]
		trigger := TriggerDependency
		if len(n.DependsOn) == 0 {
			// A root has its run's trigger: a backfill run's roots are
			// backfill executions (no misfire rule, the backfill's wake).
			trigger = TriggerManual
			if run.Trigger == TriggerSchedule || run.Trigger == TriggerBackfill {
				trigger = run.Trigger
			}
		}
		shards := max(n.Shards, 1)
		for i := range shards {
			news = append(news, db.NewNodeExecution{ID: NewID(), TaskID: n.TaskID, Trigger: trigger, Node: k,
				Shard: int32(i), ShardCount: int32(shards)})
		}
		meta[n.TaskID] = n
	}
	inserted, err := db.InsertNodeExecutions(ctx, tx, run.TenantID, run.WorkflowID, run.ID, run.ScheduledFor, run.Round, news)
	if err != nil {
		return storeError(err, "insert node executions")
	}
	if len(inserted) == 0 {
		return nil
	}
	fired := make([]firedExecution, len(inserted))
	for i, x := range inserted {
		n := meta[x.TaskID]
		fired[i] = firedExecution{TenantID: x.TenantID, ID: x.ID, ScheduledFor: x.ScheduledFor, Priority: n.Priority,
			MaxAttempts: n.MaxAttempts}
	}
	_, err = e.enq.insertMany(ctx, tx, fireInserts(fired, time.Now(), e.ahead, e.ahead)) // a run's nodes are in the main lane
	return err
}

// promote starts a workflow's pending runs, oldest slot first, while fewer
// than max_active_runs are started, under the workflow's row lock.
func (e runEngine) promote(ctx context.Context, tx db.Tx, tenant, workflowID string) error {
	_, err := e.promoteVersion(ctx, tx, tenant, workflowID)
	return err
}

// promoteVersion is promote; it returns the workflow's current version
// (0: the workflow is gone).
func (e runEngine) promoteVersion(ctx context.Context, tx db.Tx, tenant, workflowID string) (int32, error) {
	w, err := db.GetWorkflow(ctx, tx, tenant, workflowID, true)
	if err = storeError(err, "load workflow"); errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	active, err := db.CountActiveRuns(ctx, tx, tenant, workflowID)
	if err != nil {
		return 0, storeError(err, "count active runs")
	}
	free := int(w.MaxActiveRuns) - active
	if free <= 0 {
		return w.Version, nil
	}
	pending, err := db.PendingRuns(ctx, tx, tenant, workflowID, free)
	if err != nil {
		return 0, storeError(err, "pending runs")
	}
	for _, r := range pending {
		if err := e.start(ctx, tx, r); err != nil {
			return 0, err
		}
	}
	return w.Version, nil
}

// start makes a pending run running: its nodes, then its roots' fires.
func (e runEngine) start(ctx context.Context, tx db.Tx, run db.WorkflowRun) error {
	g, err := loadGraph(ctx, tx, run.TenantID, run.WorkflowID, run.Version)
	if err != nil {
		return err
	}
	keys := make([]string, len(g.nodes))
	for i, n := range g.nodes {
		keys[i] = n.Key
	}
	if err := db.InsertRunNodes(ctx, tx, run.TenantID, run.ID, keys); err != nil {
		return storeError(err, "insert run nodes")
	}
	if err := lifecycle.Runs.Check([]string{run.State}, RunRunning); err != nil {
		return err
	}
	if err := db.SetWorkflowRunState(ctx, tx, run.TenantID, run.ID, RunRunning); err != nil {
		return storeError(err, "start workflow run")
	}
	run.State = RunRunning
	return e.advanceLocked(ctx, tx, run, nil)
}

// alertBlocked enqueues the workflow_run.blocked alert to the workflow's
// alert endpoint, if it has one.
func (e runEngine) alertBlocked(ctx context.Context, tx db.Tx, run db.WorkflowRun, nodes []string) error {
	w, err := db.GetWorkflow(ctx, tx, run.TenantID, run.WorkflowID, false)
	if err != nil {
		return storeError(err, "load workflow")
	}
	if w.AlertEndpointID == nil {
		return nil
	}
	_, err = e.enq.insertMany(ctx, tx, workflowAlertInsert(WorkflowAlertArgs{
		TenantID: run.TenantID, WorkflowID: run.WorkflowID, RunID: run.ID, EndpointID: *w.AlertEndpointID,
		Type: AlertWorkflowRunBlocked, Nodes: nodes,
	}))
	return err
}
