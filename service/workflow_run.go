package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/dag"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/workflow"
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

// Trigger rules of a workflow node (package dag decides them).
const (
	RuleAllSuccess = dag.AllSuccess
	RuleAllDone    = dag.AllDone
	RuleOneSuccess = dag.OneSuccess
)

// TriggerDependency: a workflow node fired because its rule was met.
const TriggerDependency = "dependency"

// A version's stored document and its parse (storedNode, graph) are
// service/workflow's.

// graphCache keeps parsed versions (workflow.Cache).
type graphCache = workflow.Cache

// runEngine fires the nodes of runs; ahead makes a root's deliver job due
// that long before its slot (SchedulerConfig.FetchAhead); graphs is its
// owner's cache of parsed versions (nil: none).
type runEngine struct {
	enq   *Enqueuer
	ahead time.Duration
	// metrics counts the runs that end (nil: none).
	metrics *metrics.Metrics
	graphs  *graphCache
	// handOffs, when set, gathers the deliver jobs of the nodes fired, for
	// the caller to insert at once (handOffs.insert) before it commits.
	handOffs *handOffs
	// ended is the tally of the executions the caller's transaction ends,
	// which the caller reports once it committed (tallying): the engine
	// adds the node executions it fails unsent. The engine runs inside
	// its callers' transactions, so it never reports a count itself.
	ended *ended
}

// tallying returns e adding the executions it ends to done, which the
// caller reports after its transaction commits.
func (e runEngine) tallying(done *ended) runEngine {
	e.ended = done
	return e
}

// advanceRun brings run runID up to date in tx (see the top of the
// file). A run that is gone, pending or final is left alone.
//
// The lock and the reads the advance starts from are one round trip
// (db.LockRunForAdvance): a node's success, which comes here once per
// node, costs no more statements than the changes it makes.
func (e runEngine) advanceRun(ctx context.Context, tx db.Tx, tenant, runID string) error {
	run, nodes, rows, err := db.LockRunForAdvance(ctx, tx, tenant, runID)
	if err = storeError(err, "load workflow run"); errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return e.advanceRead(ctx, tx, db.RunForAdvance{Run: run, Nodes: nodes, Execs: rows, Found: true})
}

// advanceRead is advanceRun on a run the caller locked and read
// (db.ReadRunsForAdvance).
func (e runEngine) advanceRead(ctx context.Context, tx db.Tx, r db.RunForAdvance) error {
	if !r.Found || !lifecycle.RunActive.Has(r.Run.State) {
		return nil
	}
	return e.advance(ctx, tx, r.Run, nil, 0, &runRead{nodes: r.Nodes, execs: r.Execs})
}

// advanceLocked is advanceRun on a run locked by the caller; force names
// nodes to fire whatever their rule.
func (e runEngine) advanceLocked(ctx context.Context, tx db.Tx, run db.WorkflowRun, force []string) error {
	return e.advance(ctx, tx, run, force, 0, nil)
}

// runRead is a run's nodes and executions as its advance read them with
// the run's lock.
type runRead struct {
	nodes []db.RunNode
	execs []db.RunExecution
}

// advance is advanceLocked; depth counts the passes a node's condition or
// template made it run again (each one changes a node's state, so they
// are at most as many as the nodes). read is the run's nodes and
// executions read under its lock in this transaction (nil: read them).
func (e runEngine) advance(ctx context.Context, tx db.Tx, run db.WorkflowRun, force []string, depth int, read *runRead) error {
	g, err := e.graphs.Load(ctx, tx, run.TenantID, run.WorkflowID, run.Version)
	if err != nil {
		return err
	}
	if depth > len(g.Nodes) {
		return fmt.Errorf("workflow run %s: its nodes' conditions did not settle after %d passes", run.ID, depth)
	}
	if read == nil {
		read = &runRead{}
		if read.nodes, err = db.GetRunNodes(ctx, tx, run.TenantID, run.ID); err != nil {
			return storeError(err, "load run nodes")
		}
		if read.execs, err = db.GetRunExecutions(ctx, tx, run.TenantID, run.ID); err != nil {
			return storeError(err, "load run executions")
		}
	}
	nodes, rows := read.nodes, read.execs
	stored := make(map[string]string, len(nodes))
	for _, n := range nodes {
		stored[n.Key] = n.State
	}
	execs := map[string][]db.RunExecution{}
	for _, x := range rows {
		execs[x.Node] = append(execs[x.Node], x)
	}
	for _, k := range force {
		stored[k] = nodeFired // fired below with the planned ones
	}
	p := g.Plan(stored, execs)
	fire := append(slices.Clone(p.Fire), force...)
	// Conditions and templates: run_if decides whether a node whose rule
	// is met fires or is skipped (a node forced to run fires whatever it
	// says); one that renders anything else fails, as does a payload
	// that does not render.
	var (
		tr      *runTemplates
		skipped []string
		broken  map[string]string
		ranIf   = map[string]bool{} // the nodes whose run_if rendered (lineage)
	)
	if g.NeedsTemplates(fire) {
		if tr, err = loadTemplates(ctx, tx, run, g, stored, execs); err != nil {
			return err
		}
		kept := fire[:0:0]
		for _, k := range fire {
			n := g.Nodes[g.Index[k]]
			if n.RunIf == "" || slices.Contains(force, k) {
				kept = append(kept, k)
				continue
			}
			ranIf[k] = true
			switch ok, skip, reason := tr.runIf(n); {
			case skip:
				skipped = append(skipped, k)
			case !ok:
				if broken == nil {
					broken = map[string]string{}
				}
				broken[k] = reason
				kept = append(kept, k)
			default:
				kept = append(kept, k)
			}
		}
		fire = kept
	}
	// A wait_for node whose rule is met starts waiting for its event.
	fire, waits := g.SplitWaits(fire)
	var keys, states []string
	for _, k := range fire {
		keys, states = append(keys, k), append(states, nodeFired)
	}
	for _, k := range skipped {
		keys, states = append(keys, k), append(states, NodeSkipped)
	}
	for _, k := range p.Block {
		keys, states = append(keys, k), append(states, NodeBlocked)
	}
	for _, k := range p.Unblock {
		keys, states = append(keys, k), append(states, NodeWaiting)
	}
	gather := e.handOffs != nil && tr == nil && len(waits) == 0 && len(skipped) == 0
	switch {
	case len(keys) == 0:
	case gather && p.Run == run.State:
		// Nothing reads them before the flush (settle only marks the
		// run advanced): written with the other runs' (handOffs.write).
		e.handOffs.states = append(e.handOffs.states, db.RunNodeStates{
			TenantID: run.TenantID, RunID: run.ID, Keys: keys, States: states,
		})
	default:
		if err := db.SetRunNodeStates(ctx, tx, run.TenantID, run.ID, keys, states); err != nil {
			return storeError(err, "set run node states")
		}
	}
	if gather {
		// Nothing here reads the executions before the caller's flush:
		// they go in with the other runs' (handOffs.insert).
		news, _, meta := nodeExecutions(run, g, fire, nil, nil)
		e.handOffs.later(run, news, meta)
		return e.settle(ctx, tx, run, p)
	}
	if err := tr.keepLineage(ctx, tx, slices.Concat(fire, waits), skipped, broken, ranIf); err != nil {
		return err
	}
	failed, err := e.fireNodes(ctx, tx, run, g, fire, tr, broken)
	if err != nil {
		return err
	}
	waitsChanged, err := e.startWaits(ctx, tx, run, g, waits, tr, broken)
	if err != nil {
		return err
	}
	if len(skipped) > 0 || failed || waitsChanged {
		// A skipped, failed or ended node may meet (or break) its
		// downstream nodes' rules, and settles the run's state: plan
		// again.
		return e.advance(ctx, tx, run, nil, depth+1, nil)
	}
	return e.settle(ctx, tx, run, p)
}

// settle applies the run's state that the advance's plan p decided.
func (e runEngine) settle(ctx context.Context, tx db.Tx, run db.WorkflowRun, p dag.Plan) error {
	if p.Run == run.State {
		return e.advanced(ctx, tx, run)
	}
	if err := lifecycle.Runs.Check([]string{run.State}, p.Run); err != nil {
		return err
	}
	if err := db.SetWorkflowRunState(ctx, tx, run.TenantID, run.ID, p.Run); err != nil {
		return storeError(err, "set workflow run state")
	}
	if p.Run == RunBlocked {
		if err := e.alertBlocked(ctx, tx, run, p.Block); err != nil {
			return err
		}
	}
	if lifecycle.RunFinal.Has(p.Run) {
		e.metrics.WorkflowRunFinished(p.Run)
		return e.finishedRun(ctx, tx, run)
	}
	return nil
}

// fireNodes creates the executions (one per shard) of nodes of a run and
// their deliver jobs. With tr, a templated node's executions get their
// rendered payloads; a node in broken (its run_if), or an execution whose
// payload does not render, is failed unsent (error_class template), and
// failed says so.
func (e runEngine) fireNodes(ctx context.Context, tx db.Tx, run db.WorkflowRun, g *graph, keys []string,
	tr *runTemplates, broken map[string]string,
) (failed bool, err error) {
	if len(keys) == 0 {
		return false, nil
	}
	news, unsent, meta := nodeExecutions(run, g, keys, tr, broken)
	inserted, err := db.InsertNodeExecutions(ctx, tx, run.TenantID, run.WorkflowID, run.ID, run.ScheduledFor, run.Round, news)
	if err != nil {
		return false, storeError(err, "insert node executions")
	}
	if len(inserted) == 0 {
		return false, nil
	}
	fired, fails := firedOf(inserted, unsent, meta)
	if len(fails) > 0 {
		if e.ended == nil { // a caller that would lose the count: see tallying
			return false, errors.New("workflow engine: no tally of the executions it ends (runEngine.tallying)")
		}
		if err := failUnsent(ctx, tx, e.enq, fails, e.ended); err != nil {
			return false, err
		}
	}
	if len(fired) > 0 {
		jobs := fireInserts(fired, time.Now(), e.ahead, e.ahead) // a run's nodes are in the main lane
		if e.handOffs != nil {
			e.handOffs.jobs = append(e.handOffs.jobs, jobs...)
		} else if err := (&handOffs{jobs: jobs}).insert(ctx, tx, e.enq); err != nil {
			return false, err
		}
	}
	return len(fails) > 0, nil
}

// advanced records that the advance brought run, still running, up to
// date (db.MarkRunsAdvanced: the backstop reads only the runs not
// advanced for its age), at once or, gathering, with the hand-offs. A run
// whose state the advance changed is not marked: the state's write sets
// it (db.SetWorkflowRunState).
func (e runEngine) advanced(ctx context.Context, tx db.Tx, run db.WorkflowRun) error {
	if run.State != RunRunning {
		return nil
	}
	if e.handOffs != nil {
		if e.handOffs.advanced == nil {
			e.handOffs.advanced = map[string][]string{}
		}
		e.handOffs.advanced[run.TenantID] = append(e.handOffs.advanced[run.TenantID], run.ID)
		return nil
	}
	return storeError(db.MarkRunsAdvanced(ctx, tx, run.TenantID, []string{run.ID}), "mark workflow run advanced")
}

// nodeExecutions returns the executions (one per shard) of nodes keys of
// run to insert, with, by id, those that fail unsent and why (a node in
// broken, a payload that does not render with tr), and the nodes by task.
func nodeExecutions(run db.WorkflowRun, g *graph, keys []string, tr *runTemplates, broken map[string]string,
) (news []db.NewNodeExecution, unsent map[string]string, meta map[string]storedNode) {
	unsent, meta = map[string]string{}, map[string]storedNode{}
	for _, k := range keys {
		n := g.Nodes[g.Index[k]]
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
			x := db.NewNodeExecution{
				ID: NewID(), TaskID: n.TaskID, Trigger: trigger, Node: k,
				Shard: int32(i), ShardCount: int32(shards),
			}
			var err error
			if why, ok := broken[k]; ok {
				unsent[x.ID] = why
			} else if x.Payload, err = tr.payload(n, x.ID, trigger, i, shards); err != nil {
				unsent[x.ID], x.Payload = err.Error(), nil
			}
			news = append(news, x)
		}
		meta[n.TaskID] = n
	}
	return news, unsent, meta
}

// firedOf splits the executions inserted into those to deliver and those
// that fail unsent.
func firedOf(inserted []db.InsertedExecution, unsent map[string]string, meta map[string]storedNode,
) (fired []firedExecution, fails []unsentFire) {
	fired = make([]firedExecution, 0, len(inserted))
	for _, x := range inserted {
		if why, ok := unsent[x.ID]; ok {
			fails = append(fails, unsentFire{TenantID: x.TenantID, ID: x.ID, TaskID: x.TaskID, Reason: why})
			continue
		}
		n := meta[x.TaskID]
		fired = append(fired, firedExecution{
			TenantID: x.TenantID, ID: x.ID, ScheduledFor: x.ScheduledFor, Priority: n.Priority,
			MaxAttempts: n.MaxAttempts,
		})
	}
	return fired, fails
}

// handOffs are the deliver jobs of the nodes a transaction fired, gathered
// from the advances of several runs so that they cost one insert and one
// notification (runEngine.handOffs), and the runs advanced, marked in one
// statement per tenant.
type handOffs struct {
	jobs []river.InsertManyParams
	// advanced: tenant → its runs advanced, still running (runEngine.advanced).
	advanced map[string][]string
	// writes: tenant → the node executions of the advances that left
	// them for the flush (later), with the nodes by task and the engine's
	// ahead for their jobs.
	writes map[string][]db.RunNodeExecution
	nodes  map[string]storedNode
	ahead  time.Duration
	// states: the node states of the advances that left them for the
	// flush, written before their executions, all in one round trip.
	states []db.RunNodeStates
}

// later keeps the executions news of an advance of run for the flush: an
// advance that reads nothing of them afterwards (no template, no wait, no
// skip: those plan the run again) leaves them to one insert for all the
// runs of the transaction. Its node states go with them when nothing
// reads them first (advance), in one round trip but one update per run:
// in the workflow bench one update for all the runs' nodes cost three
// times as much per row as one per run.
func (h *handOffs) later(run db.WorkflowRun, news []db.NewNodeExecution, meta map[string]storedNode) {
	if len(news) == 0 {
		return
	}
	if h.writes == nil {
		h.writes, h.nodes = map[string][]db.RunNodeExecution{}, map[string]storedNode{}
	}
	for _, x := range news {
		h.writes[run.TenantID] = append(h.writes[run.TenantID], db.RunNodeExecution{
			WorkflowID: run.WorkflowID, RunID: run.ID, Slot: run.ScheduledFor, Round: run.Round, NewNodeExecution: x,
		})
	}
	maps.Copy(h.nodes, meta)
}

// write makes the writes left for the flush (later), tenant by tenant,
// and gathers the jobs of the executions it inserted.
func (h *handOffs) write(ctx context.Context, tx db.Tx) error {
	if len(h.states) > 0 {
		if err := db.SetRunsNodeStates(ctx, tx, h.states); err != nil {
			return storeError(err, "set run node states")
		}
		h.states = nil
	}
	for _, t := range slices.Sorted(maps.Keys(h.writes)) {
		execs := h.writes[t]
		inserted, err := db.InsertRunsNodeExecutions(ctx, tx, t, execs)
		if err != nil {
			return storeError(err, "insert node executions")
		}
		fired, _ := firedOf(inserted, nil, h.nodes) // nothing fails unsent without a template
		// Each run's fired nodes get their jobs apart, as fireNodes gives
		// them (a job carries one run's executions).
		runOf := make(map[string]string, len(execs))
		for _, x := range execs {
			runOf[x.ID] = x.RunID
		}
		slices.SortStableFunc(fired, func(a, b firedExecution) int { return cmp.Compare(runOf[a.ID], runOf[b.ID]) })
		for i := 0; i < len(fired); {
			j := i + 1
			for j < len(fired) && runOf[fired[j].ID] == runOf[fired[i].ID] {
				j++
			}
			h.jobs = append(h.jobs, fireInserts(fired[i:j], time.Now(), h.ahead, h.ahead)...) // a run's nodes are in the main lane
			i = j
		}
	}
	h.writes = nil
	return nil
}

// insert inserts the jobs gathered, if any, and notifies their queues at
// commit: the hand-off to the next nodes must not wait for a poll, whatever
// River's own notification throttle decided (db.NotifyJobQueues). It marks
// the runs advanced.
func (h *handOffs) insert(ctx context.Context, tx db.Tx, enq *Enqueuer) error {
	if err := h.write(ctx, tx); err != nil {
		return err
	}
	tenants := slices.Sorted(maps.Keys(h.advanced))
	for _, t := range tenants {
		if err := db.MarkRunsAdvanced(ctx, tx, t, h.advanced[t]); err != nil {
			return storeError(err, "mark workflow runs advanced")
		}
	}
	h.advanced = nil
	if len(h.jobs) == 0 {
		return nil
	}
	if _, err := enq.insertMany(ctx, tx, h.jobs); err != nil {
		return err
	}
	queues := make([]string, len(h.jobs))
	for i, j := range h.jobs {
		queues[i] = j.InsertOpts.Queue
	}
	h.jobs = nil
	return storeError(db.NotifyJobQueues(ctx, tx, queues), "notify job queues")
}

// gathering returns e gathering its fired nodes' jobs in h.
func (e runEngine) gathering(h *handOffs) runEngine {
	h.ahead = e.ahead
	e.handOffs = h
	return e
}

// promote starts a workflow's pending runs, oldest slot first, while fewer
// than max_active_runs are started, under the workflow's row lock (FOR NO
// KEY UPDATE: promotes and changes of the workflow wait for each other,
// triggers inserting runs do not; db.GetWorkflowLocked).
func (e runEngine) promote(ctx context.Context, tx db.Tx, tenant, workflowID string) error {
	_, err := e.promoteVersion(ctx, tx, tenant, workflowID)
	return err
}

// promoteVersion is promote; it returns the workflow's current version
// (0: the workflow is gone).
func (e runEngine) promoteVersion(ctx context.Context, tx db.Tx, tenant, workflowID string) (int32, error) {
	opened, version, err := e.admit(ctx, tx, tenant, workflowID)
	if err != nil {
		return 0, err
	}
	own := e.handOffs == nil // the runs' roots' jobs go in one insert, ours or the caller's
	if own {
		e = e.gathering(&handOffs{})
	}
	for _, r := range opened {
		if err := e.advance(ctx, tx, r.run, nil, 0, r.read); err != nil {
			return 0, err
		}
	}
	if own {
		if err := e.handOffs.insert(ctx, tx, e.enq); err != nil {
			return 0, err
		}
	}
	return version, nil
}

// openedRun is a run admit made running, with what its advance starts
// from when its nodes are all fresh (every one waiting, no execution; nil:
// read them).
type openedRun struct {
	run  db.WorkflowRun
	read *runRead
}

// admit is the part of promote that needs the workflow's row lock: it
// makes the pending runs there is room for running, with their nodes
// waiting (open), and returns them, still to be advanced (their roots
// fired), with the workflow's current version (0: the workflow is gone).
// A run admitted in a transaction that commits without its advance is a
// running run with no unfinished execution: the sweep's
// (db.StalledRuns).
func (e runEngine) admit(ctx context.Context, tx db.Tx, tenant, workflowID string) ([]openedRun, int32, error) {
	w, err := db.GetWorkflowLocked(ctx, tx, tenant, workflowID, db.LockNoKeyUpdate)
	if err = storeError(err, "load workflow"); errors.Is(err, ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	active, err := db.CountActiveRuns(ctx, tx, tenant, workflowID)
	if err != nil {
		return nil, 0, storeError(err, "count active runs")
	}
	free := int(w.MaxActiveRuns) - active
	if free <= 0 {
		return nil, w.Version, nil
	}
	pending, err := db.PendingRuns(ctx, tx, tenant, workflowID, free)
	if err != nil {
		return nil, 0, storeError(err, "pending runs")
	}
	opened, err := e.open(ctx, tx, tenant, pending)
	return opened, w.Version, err
}

// open makes pending runs of tenant running with their nodes waiting, in
// one statement (db.OpenRuns); their advance fires their roots. A run
// whose nodes were all inserted here has nothing else to read: its
// advance starts from them, waiting, and no execution (an execution that
// existed anyway would only make the fire of its node's shard a no-op,
// executions_node_idx).
func (e runEngine) open(ctx context.Context, tx db.Tx, tenant string, runs []db.WorkflowRun) ([]openedRun, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(runs))
	var nodeRuns, nodeKeys []string
	fresh := make([][]db.RunNode, len(runs))
	for i, r := range runs {
		if err := lifecycle.Runs.Check([]string{r.State}, RunRunning); err != nil {
			return nil, err
		}
		g, err := e.graphs.Load(ctx, tx, r.TenantID, r.WorkflowID, r.Version)
		if err != nil {
			return nil, err
		}
		ids[i] = r.ID
		fresh[i] = make([]db.RunNode, len(g.Nodes))
		for j, n := range g.Nodes {
			nodeRuns, nodeKeys = append(nodeRuns, r.ID), append(nodeKeys, n.Key)
			fresh[i][j] = db.RunNode{Key: n.Key, State: NodeWaiting}
		}
	}
	inserted, err := db.OpenRuns(ctx, tx, tenant, ids, nodeRuns, nodeKeys)
	if err != nil {
		return nil, storeError(err, "start workflow runs")
	}
	out := make([]openedRun, len(runs))
	for i, r := range runs {
		r.State = RunRunning
		out[i] = openedRun{run: r}
		if inserted[r.ID] == len(fresh[i]) {
			out[i].read = &runRead{nodes: fresh[i]}
		}
	}
	return out, nil
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
