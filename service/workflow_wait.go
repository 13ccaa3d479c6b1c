package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/template"
	"github.com/axhq/ax/service/workflow"
)

// Workflow nodes that wait for an event (wait_for instead of an endpoint):
// their rules are service/workflow's (wait.go says how a wait ends); the
// transactions that start and end waits are here.

// Wait limits and error classes (service/workflow).
const (
	WaitTimeoutMin         = workflow.WaitTimeoutMin
	WaitTimeoutMax         = workflow.WaitTimeoutMax
	ErrorClassEventTimeout = workflow.ErrorClassEventTimeout
	// waitSweepBatch bounds the runs one expiry pass ends waits of.
	waitSweepBatch = 100
	// waitCountBatch bounds the runs one pass of countRunWaits brings
	// up to date, waitCountPasses the passes of one sweep.
	waitCountBatch  = 1000
	waitCountPasses = 10
	// waitGaugeEvery paces the count behind ax_waiting_nodes.
	waitGaugeEvery = 10 * time.Second
)

type (
	// WaitFor is what a wait_for node waits for.
	WaitFor = workflow.WaitFor
	// NodeWait is what an awaiting node waits for, as a run shows it.
	NodeWait = workflow.NodeWait
)

// waitDefaults is a wait_for node's defaults: its rule and dependencies,
// and none of the delivery fields' (a payload, shards or a completion
// given are refused by checkWaitNode).
func (n WorkflowNodeInput) waitDefaults() WorkflowNodeInput {
	if n.TriggerRule == "" {
		n.TriggerRule = RuleAllSuccess
	}
	if n.DependsOn == nil {
		n.DependsOn = []string{}
	}
	if n.Completion.Mode == CompletionResponse {
		n.Completion.Mode = ""
	}
	if n.Shards == 1 {
		n.Shards = 0
	}
	return n
}

// checkWaitNode checks a wait_for node (field prefix f, nodes[i]): its
// wait, and that it has no delivery field.
func checkWaitNode(ve *ValidationError, f string, n WorkflowNodeInput, in WorkflowInput) {
	if n.EndpointID != "" {
		ve.Add(f+".endpoint_id", "a node has endpoint_id or wait_for, not both")
	}
	workflow.CheckWait(ve, f, *n.WaitFor, nodeScope(n, in))
	refuse := func(field string, given bool) {
		if given {
			ve.Add(f+"."+field, "a wait_for node sends nothing: it has no "+field)
		}
	}
	refuse("payload", len(n.Payload) > 0)
	refuse("payload_template", n.PayloadTemplate)
	refuse("shards", n.Shards != 0)
	refuse("completion", n.Completion.Mode != "" || n.Completion.Timeout != 0 || n.Completion.HeartbeatTimeout != 0)
	refuse("timeout_ms", n.Timeout != 0)
	refuse("priority", n.Priority != 0)
	refuse("retry", n.Retry != (RetryPolicy{}))
}

// storedWaitNode is wait_for node n as its version's document keeps it.
func storedWaitNode(n WorkflowNodeInput) storedNode {
	return storedNode{
		Key: n.Key, DependsOn: n.DependsOn, TriggerRule: n.TriggerRule, RunIf: n.RunIf,
		WaitFor: n.WaitFor.Stored(),
	}
}

// waitInput is a stored wait_for node as the client set it.
func waitInput(n storedNode) WorkflowNodeInput {
	return WorkflowNodeInput{Key: n.Key, DependsOn: n.DependsOn, TriggerRule: n.TriggerRule, RunIf: n.RunIf, WaitFor: n.WaitFor.Input()}
}

// startWaits makes the wait_for nodes keys of run await their events: each
// one's key rendered with tr; a node in broken (its run_if) or whose key
// does not render fails (error class template). A node whose event
// already arrived after it became ready (an event that committed while
// this transaction ran) ends with it at once (consumeArrived). changed
// says that a node failed or ended: the run is to be planned again.
func (e runEngine) startWaits(ctx context.Context, tx db.Tx, run db.WorkflowRun, g *graph, keys []string,
	tr *runTemplates, broken map[string]string,
) (changed bool, err error) {
	var waits []db.NodeWait
	for _, k := range keys {
		n := g.Nodes[g.Index[k]]
		reason, bad := broken[k]
		var key *string
		if !bad && n.WaitFor.Key != "" {
			var rendered string
			if rendered, err = tr.waitKey(n); err != nil {
				reason, bad = "wait_for.key: "+err.Error(), true
			} else {
				key = &rendered
			}
		}
		if bad {
			if err := db.FailRunNode(ctx, tx, run.TenantID, run.ID, k, ErrorClassTemplate, reason); err != nil {
				return false, storeError(err, "fail wait_for node")
			}
			changed = true
			continue
		}
		waits = append(waits, db.NodeWait{
			Key: k, Event: n.WaitFor.Event, WaitKey: key, Timeout: time.Duration(n.WaitFor.TimeoutMS) * time.Millisecond,
		})
	}
	if len(waits) == 0 {
		return changed, nil
	}
	// The waits' exclusive locks first (db.LockEvent says why): an event
	// transaction that takes one afterwards finds these waits once this
	// commits. Taken without waiting: this transaction holds its run (and
	// maybe its workflow), which an event transaction holding one may be
	// waiting for. Got, no event these waits may match is in flight and
	// the lookup below sees every one; not got, a job looks again, under
	// the locks, once this committed and those that held them did
	// (WaitLookupArgs).
	locks, started := make([]db.WaitLock, len(waits)), make([]string, len(waits))
	for i, w := range waits {
		locks[i], started[i] = db.WaitLock{Event: w.Event, Key: w.WaitKey}, w.Key
	}
	all, err := db.TryLockWaits(ctx, tx, run.TenantID, locks)
	if err != nil {
		return false, storeError(err, "lock waits")
	}
	if err := db.SetRunNodesAwaiting(ctx, tx, run.TenantID, run.ID, run.ScheduledFor, waits); err != nil {
		return false, storeError(err, "start waits")
	}
	if !all {
		look := WaitLookupArgs{TenantID: run.TenantID, RunID: run.ID, Keys: started, Locks: locks}
		if _, err := e.enq.insertMany(ctx, tx, []river.InsertManyParams{{Args: look, InsertOpts: &river.InsertOpts{
			Queue: QueueAlert, MaxAttempts: AlertMaxAttemptsDefault,
		}}}); err != nil {
			return false, err
		}
	}
	ended, err := consumeArrived(ctx, tx, run, started)
	return changed || ended, err
}

// WaitLookupArgs is the River job that looks again for the events of
// waits a run started while an event transaction held one of their locks
// (startWaits): it waits for those locks, so it sees every event that
// arrived for those waits after their since. Short and rare, it shares
// the alert queue (woken by its insert).
type WaitLookupArgs struct {
	TenantID string        `json:"tenant_id"`
	RunID    string        `json:"run_id"`
	Keys     []string      `json:"keys"`  // the nodes
	Locks    []db.WaitLock `json:"locks"` // their locks
}

// Kind implements river.JobArgs.
func (WaitLookupArgs) Kind() string { return "wait_lookup" }

// LookUpArrived is a WaitLookupArgs job: in a transaction that takes the
// waits' exclusive locks before anything else (so waiting for them cannot
// deadlock), it ends the nodes still awaiting whose event arrived after
// they became ready (consumeArrived), and advances their run.
func (s *Workflows) LookUpArrived(ctx context.Context, a WaitLookupArgs) error {
	var done ended
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		if err := db.LockWaits(ctx, tx, a.TenantID, a.Locks); err != nil {
			return storeError(err, "lock waits")
		}
		run, err := db.GetWorkflowRun(ctx, tx, a.TenantID, a.RunID, true)
		if err = storeError(err, "load workflow run"); errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !lifecycle.RunActive.Has(run.State) {
			return nil
		}
		ended, err := consumeArrived(ctx, tx, run, a.Keys)
		if err != nil || !ended {
			return err
		}
		return s.engine.tallying(&done).advanceLocked(ctx, tx, run, nil)
	})
	if err != nil {
		return storeError(err, "look up arrived events")
	}
	done.report(s.cfg.Metrics)
	return nil
}

// consumeArrived ends the waits keys just started of a run (locked, their
// locks held exclusive) whose event arrived after the node became ready
// and committed before the lock was granted: the earliest such event,
// conditionally as an event's own resolution (ResolveWaits) is, which
// lists the node in its detail. The lock makes this lookup and the
// event's own one (resolveWaits) complementary, so that no event arriving
// after a node became ready misses it. Its since is its advance's clock
// (when the rule was met), which may precede the lock: an event posted in
// between is found here. It is compared strictly, as resolveWaits does,
// so that an event never ends a wait it readied in its own transaction.
func consumeArrived(ctx context.Context, tx db.Tx, run db.WorkflowRun, keys []string) (bool, error) {
	arrived, err := db.ConsumeArrivedEvents(ctx, tx, run.TenantID, run.ID, keys)
	if err != nil || len(arrived) == 0 {
		return false, storeError(err, "consume arrived events")
	}
	byEvent := map[string][]event.Match{}
	for _, a := range arrived {
		byEvent[a.EventID] = append(byEvent[a.EventID], event.Match{
			Type: event.MatchWait, WorkflowID: run.WorkflowID, RunID: run.ID, Node: a.Key,
		})
	}
	ids := slices.Sorted(maps.Keys(byEvent)) // one order of the events' row locks
	for _, id := range ids {
		list, err := json.Marshal(byEvent[id])
		if err != nil {
			return false, err
		}
		if err := db.AddEventWaits(ctx, tx, run.TenantID, id, len(byEvent[id]), list); err != nil {
			return false, storeError(err, "record the waits an event ended")
		}
	}
	return true, nil
}

// waitKey renders wait_for node n's key: a string, or a number or boolean
// as its JSON text; anything else, or an empty key, is an error.
func (t *runTemplates) waitKey(n storedNode) (string, error) {
	if t == nil {
		return "", errors.New("no template data") // NeedsTemplates said otherwise: a programmer's error
	}
	doc, _ := json.Marshal(n.WaitFor.Key)
	tpl, err := template.Parse(doc, workflow.ScopeOf(t.g, n))
	if err != nil {
		return "", fmt.Errorf("does not parse: %w", err)
	}
	out, err := tpl.Render(t.data(n, "", TriggerDependency, 0, 1), event.KeyMax*4)
	if err != nil {
		return "", err
	}
	return workflow.CheckKey(out)
}

// resolveWaits ends, succeeded, the nodes waiting for ev (in ev's
// transaction) and advances their runs, adding them to out. It finds the
// runs by one probe of the awaiting nodes' index, locks them all in id
// order (run before nodes, as the engine does; every run before any
// advance, which may lock a workflow), then ends their nodes' waits in
// one statement, conditionally: a wait another transaction ended first is
// not ended again.
func (f *EventFires) resolveWaits(ctx context.Context, tx db.Tx, ev event.Occurrence, out *event.Fired, done *ended) error {
	var key *string
	if ev.Key != "" {
		key = &ev.Key
	}
	ids, err := db.WaitingRuns(ctx, tx, ev.TenantID, ev.Name, key, ev.At)
	if err != nil || len(ids) == 0 {
		return storeError(err, "find waiting runs")
	}
	runs, err := db.LockRuns(ctx, tx, ev.TenantID, ids)
	if err != nil {
		return storeError(err, "lock waiting runs")
	}
	ids = ids[:0]
	for _, r := range runs {
		if lifecycle.RunActive.Has(r.State) {
			ids = append(ids, r.ID)
		}
	}
	resolved, err := db.ResolveWaits(ctx, tx, ev.TenantID, ids, db.WaitResolution{
		Name: ev.Name, Key: key, EventID: ev.ID, Payload: ev.Payload, At: ev.At,
	})
	if err != nil {
		return storeError(err, "resolve waits")
	}
	byRun := map[string][]string{}
	for _, r := range resolved {
		byRun[r.RunID] = append(byRun[r.RunID], r.Key)
	}
	engine := f.workflows.engine.tallying(done)
	for _, run := range runs {
		keys := byRun[run.ID]
		if len(keys) == 0 {
			continue
		}
		slices.Sort(keys)
		for _, k := range keys {
			out.Matched.Waits++
			out.Matches = append(out.Matches, event.Match{Type: event.MatchWait, WorkflowID: run.WorkflowID, RunID: run.ID, Node: k})
		}
		if err := engine.advanceLocked(ctx, tx, run, nil); err != nil {
			return err
		}
	}
	return nil
}

// expireWaits fails the waits past their deadline (event_timeout), a
// transaction per run (locked first, as an event's), and advances their
// runs; it returns how many runs it looked at. Every waitGaugeEvery it
// also counts the awaiting nodes for ax_waiting_nodes.
func (s *Workflows) expireWaits(ctx context.Context) (int, error) {
	if err := s.countWaits(ctx); err != nil {
		return 0, err
	}
	refs, err := db.OverdueWaitRuns(ctx, s.pool, waitSweepBatch)
	if err != nil {
		return 0, storeError(err, "find overdue waits")
	}
	for _, r := range refs {
		var done ended
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			done = nil
			run, err := db.GetWorkflowRun(ctx, tx, r.TenantID, r.ID, true)
			if err = storeError(err, "load workflow run"); errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			keys, err := db.ExpireWaits(ctx, tx, r.TenantID, r.ID, ErrorClassEventTimeout)
			if err != nil {
				return storeError(err, "expire waits")
			}
			if len(keys) == 0 || !lifecycle.RunActive.Has(run.State) {
				return nil
			}
			return s.engine.tallying(&done).advanceLocked(ctx, tx, run, nil)
		})
		if err != nil {
			return 0, storeError(err, "expire waits")
		}
		done.report(s.cfg.Metrics)
	}
	return len(refs), nil
}

// countRunWaits brings up to date the runs' counts of awaiting nodes
// after waits started or ended (db.CountRunWaits), so that the stalled-run
// backstop reads no waiting run and again reads a run whose waits ended.
// The sweep calls it before db.StalledRuns.
func (s *Workflows) countRunWaits(ctx context.Context) error {
	for range waitCountPasses {
		n, err := db.CountRunWaits(ctx, s.pool, waitCountBatch)
		if err != nil {
			return storeError(err, "count run waits")
		}
		if n < waitCountBatch {
			return nil
		}
	}
	return nil
}

// countWaits refreshes ax_waiting_nodes, at most every waitGaugeEvery.
func (s *Workflows) countWaits(ctx context.Context) error {
	if s.cfg.Metrics == nil {
		return nil
	}
	s.retireMu.Lock()
	due := time.Since(s.countedAt) >= waitGaugeEvery
	if due {
		s.countedAt = time.Now()
	}
	s.retireMu.Unlock()
	if !due {
		return nil
	}
	n, err := db.CountWaitingNodes(ctx, s.pool)
	if err != nil {
		return storeError(err, "count waiting nodes")
	}
	s.cfg.Metrics.SetWaitingNodes(n)
	return nil
}

// WaitingNodes counts the nodes of every tenant awaiting their event (the
// ax_waiting_nodes gauge, read now).
func (s *Workflows) WaitingNodes(ctx context.Context) (int64, error) {
	n, err := db.CountWaitingNodes(ctx, s.pool)
	return n, storeError(err, "count waiting nodes")
}

// resolveWait ends a wait_for node of a locked run that is waiting,
// blocked or awaiting its event: state succeeded (run by hand, with
// output) or skipped. The update is conditional on those states, so a
// node another transaction ended is a conflict.
func resolveWait(ctx context.Context, tx db.Tx, run db.WorkflowRun, key, state string, output json.RawMessage) error {
	ok, err := db.ResolveWaitByHand(ctx, tx, run.TenantID, run.ID, key, state, output)
	if err != nil {
		return storeError(err, "resolve wait_for node")
	}
	if !ok {
		return conflictf("node %q is no longer waiting", key)
	}
	return nil
}
