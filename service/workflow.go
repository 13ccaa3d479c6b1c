package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/dag"
	"github.com/axhq/ax/service/lifecycle"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/schedule"
	"github.com/axhq/ax/service/workflow"
)

// Workflow limits.
const (
	WorkflowNodesMax    = 200
	ShardsMax           = 1000
	MaxActiveRunsMax    = 1000
	ResourceWorkflow    = "workflow"
	ResourceWorkflowRun = "workflow_run"
	workflowSweepAge    = 2 * time.Second
	workflowSweepBatch  = 100
	workflowClaimBatch  = 100
	nodeTaskNamePrefix  = "~wf/"
)

// WorkflowNodeInput is one node of a workflow document: a task's delivery
// fields, its key, its upstream keys and its trigger rule.
type WorkflowNodeInput struct {
	Key        string
	EndpointID string
	// Payload is the exact JSON the webhook body carries ("{}" by default).
	Payload     []byte
	Priority    int
	Timeout     time.Duration
	Retry       RetryPolicy
	Shards      int
	DependsOn   []string
	TriggerRule string
	// Completion: how an attempt of the node ends, as for a task; in
	// callback mode the node is done when its execution is completed
	// (POST /v1/executions/{id}/complete), not at its 2xx.
	Completion Completion
	// PayloadTemplate: each JSON string of Payload is a template over the
	// run's data (its inputs, its upstream nodes' outputs and states),
	// rendered when the node fires.
	PayloadTemplate bool
	// RunIf, when set, is a template rendered when the node's rule is met:
	// "true" fires it, "false" skips it, anything else fails it.
	RunIf string
	// WaitFor, instead of EndpointID, makes the node wait for an event
	// (workflow_wait.go): it sends nothing, and has none of the delivery
	// fields.
	WaitFor *WaitFor
}

// WorkflowInput is what a client may set on a workflow.
type WorkflowInput struct {
	Name string
	// Schedule is optional: without one, runs start by trigger.
	Schedule        *schedule.Spec
	MaxActiveRuns   int
	MisfirePolicy   string
	AlertEndpointID string
	// SLAFinishWithin is kept with the workflow (sla.finish_within_ms).
	SLAFinishWithin time.Duration
	Nodes           []WorkflowNodeInput
	// Inputs are the workflow's inputs with their defaults: each run's
	// inputs are these, overridden by its trigger or backfill. Kept with
	// the version, as the nodes are.
	Inputs Inputs
}

// Workflow is a stored workflow: its current version's document.
type Workflow struct {
	WorkflowInput
	ID        string
	State     string
	Version   int
	NextRunAt *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Input returns the client-settable fields (the start of a PATCH).
func (w Workflow) Input() WorkflowInput { return w.WorkflowInput }

// A run, its nodes and events, a trigger and a run's alert, as
// service's callers name them (service/workflow).
type (
	WorkflowRun       = workflow.Run
	WorkflowRunNode   = workflow.RunNode
	WorkflowRunEvent  = workflow.RunEvent
	WorkflowTrigger   = workflow.Trigger
	WorkflowAlertArgs = workflow.AlertArgs
	WorkflowAlert     = workflow.Alert
	storedNode        = workflow.StoredNode
	graph             = workflow.Graph
)

// WorkflowsConfig configures Workflows.
type WorkflowsConfig struct {
	// PayloadMax caps a node's payload. Defaults to PayloadMaxDefault.
	PayloadMax int
	// FetchAhead: see SchedulerConfig.FetchAhead.
	FetchAhead time.Duration
	// Limits, when set, refuses a create past the tenant's max_workflows
	// (a *QuotaError).
	Limits *Limits
	// Metrics, when set, counts the runs that end
	// (ax_workflow_runs_total).
	Metrics *metrics.Metrics
}

// Workflows manages workflows and their runs.
type Workflows struct {
	pool   *db.Pool
	cfg    WorkflowsConfig
	engine runEngine
	graphs graphCache // the engine's
	tasks  *Tasks

	retireMu  sync.Mutex
	retiredAt time.Time // the last retirement sweep
	countedAt time.Time // the last count of the waiting nodes (under retireMu)

	// admitting queues this process's triggers for their admissions,
	// striped by workflow (startTriggered).
	admitting [admitStripes]sync.Mutex
}

// admitStripes is how many workflows' admissions a process runs at once.
const admitStripes = 64

// NewWorkflows returns Workflows on pool; enq inserts the node deliveries.
func NewWorkflows(pool *db.Pool, enq *Enqueuer, cfg WorkflowsConfig) *Workflows {
	if cfg.PayloadMax <= 0 {
		cfg.PayloadMax = PayloadMaxDefault
	}
	s := &Workflows{pool: pool, cfg: cfg, tasks: NewTasks(pool, TasksConfig{PayloadMax: cfg.PayloadMax})}
	s.engine = runEngine{enq: enq, ahead: cfg.FetchAhead, metrics: cfg.Metrics, graphs: &s.graphs}
	return s
}

func (in WorkflowInput) withDefaults() WorkflowInput {
	if in.MaxActiveRuns == 0 {
		in.MaxActiveRuns = 1
	}
	if in.MisfirePolicy == "" {
		in.MisfirePolicy = MisfireFireOnce
	}
	if in.Schedule != nil && in.Schedule.Timezone == "" {
		s := *in.Schedule
		s.Timezone = "UTC"
		in.Schedule = &s
	}
	nodes := make([]WorkflowNodeInput, len(in.Nodes))
	for i, n := range in.Nodes {
		if n.WaitFor != nil {
			nodes[i] = n.waitDefaults()
			continue
		}
		t := TaskInput{Payload: n.Payload, Priority: n.Priority, Retry: n.Retry}.withDefaults()
		n.Payload, n.Priority, n.Retry = t.Payload, t.Priority, t.Retry
		if n.Shards == 0 {
			n.Shards = 1
		}
		if n.TriggerRule == "" {
			n.TriggerRule = RuleAllSuccess
		}
		if n.DependsOn == nil {
			n.DependsOn = []string{}
		}
		if n.Completion.Mode == CompletionResponse {
			n.Completion.Mode = "" // the default: stored and compared as none
		}
		nodes[i] = n
	}
	in.Nodes = nodes
	if in.Inputs == nil {
		in.Inputs = Inputs{}
	}
	return in
}

// validate checks a workflow document; it returns the schedule (nil when
// none) and the nodes in topological order.
func (s *Workflows) validate(in WorkflowInput, now time.Time) (*schedule.Schedule, []WorkflowNodeInput, error) {
	var ve ValidationError
	if !taskNamePattern.MatchString(in.Name) {
		ve.Add("name", nameRule) // the same rule as a task's name
	}
	var sched *schedule.Schedule
	if in.Schedule != nil && in.Schedule.Type == schedule.Union {
		// The workflow scheduler reads a schedule's columns, which a
		// union has not: unions are tasks' schedules.
		ve.Add("schedule.type", `a workflow's schedule is "cron", "interval" or "once"; "union" is for tasks`)
	} else if in.Schedule != nil {
		var err error
		sched, err = parseSchedule(*in.Schedule, now)
		if err != nil {
			var se *ValidationError
			if !errors.As(err, &se) {
				return nil, nil, err
			}
			ve.Fields = append(ve.Fields, se.Fields...)
		}
	}
	if in.MaxActiveRuns < 1 || in.MaxActiveRuns > MaxActiveRunsMax {
		ve.Add("max_active_runs", fmt.Sprintf("must be 1 to %d", MaxActiveRunsMax))
	}
	if !contains([]string{MisfireFireOnce, MisfireFireAll, MisfireSkip}, in.MisfirePolicy) {
		ve.Add("misfire_policy", "must be fire_once, fire_all or skip")
	}
	if in.AlertEndpointID != "" && !validID(in.AlertEndpointID) {
		ve.Add("alert_endpoint_id", "must be the id of one of your endpoints")
	}
	validateSLA(&ve, SLA{FinishWithin: in.SLAFinishWithin})
	workflow.CheckInputs(&ve, in.Inputs)
	switch {
	case len(in.Nodes) == 0:
		ve.Add("nodes", "a workflow has at least one node")
	case len(in.Nodes) > WorkflowNodesMax:
		ve.Add("nodes", fmt.Sprintf("at most %d nodes", WorkflowNodesMax))
	}
	nodeGraph := make([]dag.Node, len(in.Nodes))
	for i, n := range in.Nodes {
		nodeGraph[i] = dag.Node{Key: n.Key, DependsOn: n.DependsOn, Rule: n.TriggerRule}
	}
	// The graph's problems, each reported where the document's fields
	// are checked: a node's key, its delivery fields, its rule; then
	// every node's dependencies.
	problems := dag.Check(nodeGraph)
	addProblems := func(i int, field string) {
		for _, p := range problems {
			if p.Node == i && p.Field == field {
				ve.Add(fmt.Sprintf("nodes[%d].%s", i, field), p.Message)
			}
		}
	}
	for i, n := range in.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		addProblems(i, "key")
		if n.WaitFor != nil {
			checkWaitNode(&ve, f, n, in)
			addProblems(i, "trigger_rule")
			n.PayloadTemplate = false // refused above: it has no payload
			workflow.CheckTemplates(&ve, f, n.Payload, n.PayloadTemplate, n.RunIf, nodeScope(n, in))
			continue
		}
		// The delivery fields follow the task rules.
		t := TaskInput{
			Name: "node", EndpointID: n.EndpointID, Payload: n.Payload, Priority: n.Priority, Timeout: n.Timeout,
			Retry: n.Retry, Completion: n.Completion, OverlapPolicy: OverlapAllow, MisfirePolicy: MisfireFireAll,
			Schedule: schedule.Spec{Type: schedule.Once, RunAt: &now, Timezone: "UTC"},
		}
		if _, err := s.tasks.validate(t, now); err != nil {
			var tv *ValidationError
			if !errors.As(err, &tv) {
				return nil, nil, err
			}
			for _, fe := range tv.Fields {
				ve.Add(f+"."+fe.Field, fe.Message)
			}
		}
		if n.Shards < 1 || n.Shards > ShardsMax {
			ve.Add(f+".shards", fmt.Sprintf("must be 1 to %d", ShardsMax))
		}
		// Unlike a task's, a node's payload is kept in a JSON document
		// (the workflow's version).
		checkJSONDocument(&ve, f+".payload", n.Payload)
		addProblems(i, "trigger_rule")
		workflow.CheckTemplates(&ve, f, n.Payload, n.PayloadTemplate, n.RunIf, nodeScope(n, in))
	}
	for i := range in.Nodes {
		addProblems(i, "depends_on")
	}
	if err := ve.Err(); err != nil {
		return nil, nil, err
	}
	order, err := dag.Order(nodeGraph)
	if err != nil {
		return nil, nil, fieldError("nodes", err.Error())
	}
	nodes := make([]WorkflowNodeInput, len(order))
	for i, j := range order {
		nodes[i] = in.Nodes[j]
	}
	return sched, nodes, nil
}

// checkEndpoints reports the nodes (and the alert endpoint) naming an
// endpoint the tenant does not have.
func checkEndpoints(ctx context.Context, q db.Querier, tenant string, in WorkflowInput) error {
	ids := []string{}
	for _, n := range in.Nodes {
		if n.WaitFor == nil {
			ids = append(ids, n.EndpointID)
		}
	}
	if in.AlertEndpointID != "" {
		ids = append(ids, in.AlertEndpointID)
	}
	slices.Sort(ids)
	have, err := db.ExistingEndpoints(ctx, q, tenant, slices.Compact(ids))
	if err != nil {
		return storeError(err, "find endpoints")
	}
	var ve ValidationError
	for i, n := range in.Nodes {
		if n.WaitFor == nil && !have[strings.ToLower(n.EndpointID)] {
			ve.Add(fmt.Sprintf("nodes[%d].endpoint_id", i), "no such endpoint")
		}
	}
	if in.AlertEndpointID != "" && !have[strings.ToLower(in.AlertEndpointID)] {
		ve.Add("alert_endpoint_id", "no such endpoint")
	}
	return ve.Err()
}

// storeVersion creates the hidden tasks of a version's nodes and stores
// the version's document with its inputs.
func storeVersion(ctx context.Context, tx db.Tx, tenant, workflowID string, version int32, nodes []WorkflowNodeInput, inputs Inputs,
	now time.Time,
) error {
	stored := make([]storedNode, len(nodes))
	for i, n := range nodes {
		if n.WaitFor != nil { // no hidden task: it sends nothing
			stored[i] = storedWaitNode(n)
			continue
		}
		id := NewID()
		row := taskRow(tenant, id, TaskInput{
			Name: fmt.Sprintf("%s%s/v%d/%s", nodeTaskNamePrefix, workflowID, version, n.Key), EndpointID: n.EndpointID,
			Schedule: schedule.Spec{Type: schedule.Once, RunAt: &now, Timezone: "UTC"}, Payload: n.Payload,
			Priority: n.Priority, Timeout: n.Timeout, Retry: n.Retry, Completion: n.Completion, OverlapPolicy: OverlapAllow,
			// The run applied the workflow's misfire policy when it was
			// created; a node fire is not a slot of its own.
			MisfirePolicy: MisfireFireAll, Labels: map[string]string{},
		})
		row.State, row.CreatedAt, row.Shards, row.WorkflowID = TaskActive, now, int32(n.Shards), &workflowID
		if _, err := db.InsertTask(ctx, tx, row, false); err != nil {
			return storeError(err, "store node task",
				onConstraint(db.ConstraintTaskEndpoint, fieldError(fmt.Sprintf("nodes[%d].endpoint_id", i), "no such endpoint")))
		}
		sn := storedNode{
			Key: n.Key, TaskID: id, EndpointID: strings.ToLower(n.EndpointID), Payload: n.Payload,
			Priority: n.Priority, TimeoutMS: n.Timeout.Milliseconds(), MaxAttempts: n.Retry.MaxAttempts,
			InitialBackoffMS: n.Retry.InitialBackoff.Milliseconds(), MaxBackoffMS: n.Retry.MaxBackoff.Milliseconds(),
			Shards: n.Shards, DependsOn: n.DependsOn, TriggerRule: n.TriggerRule,
			PayloadTemplate: n.PayloadTemplate, RunIf: n.RunIf,
		}
		if n.Completion.Callback() {
			sn.CompletionMode, sn.CompletionTimeoutMS = CompletionCallback, n.Completion.Timeout.Milliseconds()
			sn.HeartbeatTimeoutMS = n.Completion.HeartbeatTimeout.Milliseconds()
		}
		stored[i] = sn
	}
	doc, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("encode workflow version: %w", err)
	}
	in, err := inputs.Encode()
	if err != nil {
		return err
	}
	return storeError(db.InsertWorkflowVersion(ctx, tx, tenant, workflowID, version, doc, in), "store workflow version")
}

func (s *Workflows) now(ctx context.Context, q db.Querier) (time.Time, error) {
	t, err := db.Now(ctx, q)
	return t, storeError(err, "read the database clock")
}

func workflowError(err error, name string) error {
	return storeError(err, "store workflow",
		onConstraint(db.ConstraintWorkflowName, conflictf("a workflow named %q already exists", name)),
		onConstraint(db.ConstraintWorkflowAlertEndpoint, fieldError("alert_endpoint_id", "no such endpoint")))
}

// Create validates and stores a new active workflow (version 1).
func (s *Workflows) Create(ctx context.Context, tenant string, in WorkflowInput) (Workflow, error) {
	in = in.withDefaults()
	var out Workflow
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		// A count quota: checked first, under the tenant's row lock, so
		// that concurrent creates take the last places one at a time.
		if err := s.cfg.Limits.checkWorkflowQuota(ctx, tx, tenant); err != nil {
			return err
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		sched, order, err := s.validate(in, now)
		if err != nil {
			return err
		}
		if err := checkEndpoints(ctx, tx, tenant, in); err != nil {
			return err
		}
		if sched, err = withWorkflowCalendars(ctx, tx, tenant, sched, true); err != nil {
			return err
		}
		id := NewID()
		row := db.Workflow{
			TenantID: tenant, ID: id, Name: in.Name, State: WorkflowActive, Version: 1,
			MisfirePolicy: in.MisfirePolicy, MaxActiveRuns: int32(in.MaxActiveRuns), CreatedAt: now,
		}
		if err := setWorkflowFields(&row, in, sched, now); err != nil {
			return err
		}
		if err := db.InsertWorkflow(ctx, tx, row); err != nil {
			return workflowError(err, in.Name)
		}
		if err := storeVersion(ctx, tx, tenant, id, 1, order, in.Inputs, now); err != nil {
			return err
		}
		out, err = s.get(ctx, tx, tenant, id, false)
		if err != nil {
			return err
		}
		return recordAudit(ctx, tx, tenant, AuditCreate, ResourceWorkflow, id, auditCreated(out.Input()))
	})
	return out, storeError(err, "create workflow")
}

// setWorkflowFields copies the client's fields into row, with the next
// slot of sched after now.
func setWorkflowFields(row *db.Workflow, in WorkflowInput, sched *schedule.Schedule, now time.Time) error {
	row.Name, row.MisfirePolicy, row.MaxActiveRuns = in.Name, in.MisfirePolicy, int32(in.MaxActiveRuns)
	row.AlertEndpointID, row.SLAFinishWithinMS, row.Schedule, row.NextRunAt = nil, nil, nil, nil
	row.ExcludeCalendars = nil
	if in.AlertEndpointID != "" {
		a := strings.ToLower(in.AlertEndpointID)
		row.AlertEndpointID = &a
	}
	if in.SLAFinishWithin > 0 {
		ms := in.SLAFinishWithin.Milliseconds()
		row.SLAFinishWithinMS = &ms
	}
	if in.Schedule != nil {
		b, err := json.Marshal(in.Schedule)
		if err != nil {
			return fmt.Errorf("encode schedule: %w", err)
		}
		str := string(b)
		row.Schedule = &str
		for _, c := range in.Schedule.ExcludeCalendars {
			row.ExcludeCalendars = append(row.ExcludeCalendars, strings.ToLower(c))
		}
		next, err := firstRun(sched, now)
		if err != nil {
			return err
		}
		row.NextRunAt = next
	}
	return nil
}

func (s *Workflows) get(ctx context.Context, q db.Querier, tenant, id string, forUpdate bool) (Workflow, error) {
	if !validID(id) {
		return Workflow{}, ErrNotFound
	}
	row, err := db.GetWorkflow(ctx, q, tenant, id, forUpdate)
	if err != nil {
		return Workflow{}, storeError(err, "load workflow")
	}
	return workflowFromRow(row)
}

func workflowFromRow(r db.Workflow) (Workflow, error) {
	w := Workflow{
		ID: r.ID, State: r.State, Version: int(r.Version), NextRunAt: utcPtr(r.NextRunAt),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	w.Name, w.MisfirePolicy, w.MaxActiveRuns = r.Name, r.MisfirePolicy, int(r.MaxActiveRuns)
	w.AlertEndpointID = zeroIfNil(r.AlertEndpointID)
	w.SLAFinishWithin = time.Duration(zeroIfNil(r.SLAFinishWithinMS)) * time.Millisecond
	if r.Schedule != nil {
		var spec schedule.Spec
		if err := json.Unmarshal([]byte(*r.Schedule), &spec); err != nil {
			return Workflow{}, fmt.Errorf("decode workflow schedule: %w", err)
		}
		w.Schedule = &spec
	}
	g, err := workflow.ParseGraph(r.Nodes)
	if err != nil {
		return Workflow{}, err
	}
	if w.Inputs, err = workflow.DecodeInputs(r.Inputs); err != nil {
		return Workflow{}, err
	}
	for _, n := range g.Nodes {
		if n.WaitFor != nil {
			w.Nodes = append(w.Nodes, waitInput(n))
			continue
		}
		w.Nodes = append(w.Nodes, WorkflowNodeInput{
			Key: n.Key, EndpointID: n.EndpointID, Payload: n.Payload,
			Priority: n.Priority, Timeout: time.Duration(n.TimeoutMS) * time.Millisecond,
			Retry: RetryPolicy{
				MaxAttempts: n.MaxAttempts, InitialBackoff: time.Duration(n.InitialBackoffMS) * time.Millisecond,
				MaxBackoff: time.Duration(n.MaxBackoffMS) * time.Millisecond,
			},
			Shards: n.Shards, DependsOn: n.DependsOn, TriggerRule: n.TriggerRule, Completion: n.Completion(),
			PayloadTemplate: n.PayloadTemplate, RunIf: n.RunIf,
		})
	}
	return w, nil
}

// Get returns a workflow with its current version's document.
func (s *Workflows) Get(ctx context.Context, tenant, id string) (Workflow, error) {
	return s.get(ctx, s.pool, tenant, id, false)
}

// List returns a tenant's workflows newest first.
func (s *Workflows) List(ctx context.Context, tenant string, page Page) ([]Workflow, string, error) {
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	rows, err := db.ListWorkflows(ctx, s.pool, tenant, page.After, page.Limit+1)
	if err != nil {
		return nil, "", storeError(err, "list workflows")
	}
	out := make([]Workflow, 0, len(rows))
	for _, r := range rows {
		w, err := workflowFromRow(r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, w)
	}
	items, next := pageOf(out, page.Limit, func(w Workflow) Workflow { return w }, func(w Workflow) string { return w.ID })
	return items, next, nil
}

// Update applies change to the workflow's document. A change of the nodes
// makes a new version (runs in flight keep theirs); a schedule change
// moves the next slot.
func (s *Workflows) Update(ctx context.Context, tenant, id string, change func(*WorkflowInput) error) (Workflow, error) {
	var (
		out  Workflow
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		before, err := s.get(ctx, tx, tenant, id, true)
		if err != nil {
			return err
		}
		in := before.Input()
		if err := change(&in); err != nil {
			return err
		}
		in = in.withDefaults()
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		sched, order, err := s.validate(in, now)
		if err != nil {
			return err
		}
		if err := checkEndpoints(ctx, tx, tenant, in); err != nil {
			return err
		}
		if sched, err = withWorkflowCalendars(ctx, tx, tenant, sched, true); err != nil {
			return err
		}
		row, err := db.GetWorkflow(ctx, tx, tenant, id, true)
		if err != nil {
			return storeError(err, "load workflow")
		}
		next := row.NextRunAt
		if err := setWorkflowFields(&row, in, sched, now); err != nil {
			return err
		}
		if sameScheduleSpec(before.Schedule, in.Schedule) {
			row.NextRunAt = next // keep the cursor: no slot is fired twice or lost
		} else {
			// The scheduler re-reads the schedule; runs materialised ahead
			// for slots the new schedule does not have are cancelled.
			row.ScheduleVersion++
			if err := rescheduleRuns(ctx, tx, tenant, id, sched, now, s.cfg.Metrics, &done); err != nil {
				return err
			}
		}
		if !jsonEqual(before.Nodes, in.Nodes) || !jsonEqual(before.Inputs, in.Inputs) {
			row.Version++
			if err := storeVersion(ctx, tx, tenant, id, row.Version, order, in.Inputs, now); err != nil {
				return err
			}
		}
		if err := db.UpdateWorkflow(ctx, tx, row); err != nil {
			return workflowError(err, in.Name)
		}
		// The previous version may have no run left.
		if err := retireVersions(ctx, tx, tenant, id); err != nil {
			return err
		}
		// More room may start pending runs.
		if err := s.engine.tallying(&done).promote(ctx, tx, tenant, id); err != nil {
			return err
		}
		out, err = s.get(ctx, tx, tenant, id, false)
		if err != nil {
			return err
		}
		return recordAudit(ctx, tx, tenant, AuditUpdate, ResourceWorkflow, id, auditDiff(before.Input(), out.Input()))
	})
	if err != nil {
		return Workflow{}, storeError(err, "update workflow")
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

func sameScheduleSpec(a, b *schedule.Spec) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return sameSchedule(*a, *b)
}

// Delete deletes a workflow, its runs and its node tasks; node executions
// not started yet are cancelled when their start finds the task gone.
func (s *Workflows) Delete(ctx context.Context, tenant, id string) error {
	if !validID(id) {
		return ErrNotFound
	}
	return storeError(db.InTx(ctx, s.pool, func(tx db.Tx) error {
		ok, err := db.DeleteWorkflow(ctx, tx, tenant, id)
		if err != nil {
			return storeError(err, "delete workflow")
		}
		if !ok {
			return ErrNotFound
		}
		return recordAudit(ctx, tx, tenant, AuditDelete, ResourceWorkflow, strings.ToLower(id), nil)
	}), "delete workflow")
}

// Pause stops the workflow's schedule from starting runs: runs in flight
// go on, and the scheduled runs made ahead of a slot still to come (the
// scheduler's look-ahead) are dropped before any of their nodes fires.
// Resume starts the schedule again from the next slot after now.
func (s *Workflows) Pause(ctx context.Context, tenant, id string) (Workflow, error) {
	return s.setState(ctx, tenant, id, WorkflowPaused, AuditPause)
}

// Resume: see Pause.
func (s *Workflows) Resume(ctx context.Context, tenant, id string) (Workflow, error) {
	return s.setState(ctx, tenant, id, WorkflowActive, AuditResume)
}

func (s *Workflows) setState(ctx context.Context, tenant, id, state, action string) (Workflow, error) {
	var out Workflow
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		w, err := s.get(ctx, tx, tenant, id, true)
		if err != nil {
			return err
		}
		if w.State == state {
			out = w
			return nil
		}
		row, err := db.GetWorkflow(ctx, tx, tenant, id, true)
		if err != nil {
			return storeError(err, "load workflow")
		}
		row.State = state
		if state == WorkflowActive && w.Schedule != nil {
			now, err := s.now(ctx, tx)
			if err != nil {
				return err
			}
			sched, err := workflowSchedule(ctx, tx, tenant, w, false)
			if err != nil {
				return err
			}
			if next, ok := sched.Next(now); ok {
				row.NextRunAt = &next
			} else {
				row.NextRunAt = nil
			}
		}
		if err := db.UpdateWorkflow(ctx, tx, row); err != nil {
			return workflowError(err, row.Name)
		}
		changes := map[string]any{"state": state}
		if state == WorkflowPaused {
			n, err := db.DropUnstartedScheduledRuns(ctx, tx, tenant, id)
			if err != nil {
				return storeError(err, "drop the runs made ahead of their slot")
			}
			if n > 0 {
				changes["dropped_runs"] = n
			}
		}
		out, err = s.get(ctx, tx, tenant, id, false)
		if err != nil {
			return err
		}
		return recordAudit(ctx, tx, tenant, action, ResourceWorkflow, id, changes)
	})
	return out, storeError(err, action+" workflow")
}

// Trigger starts a run now (pending while max_active_runs are started).
// The same dedup key returns the run it made.
func (s *Workflows) Trigger(ctx context.Context, tenant, id, dedupKey string) (WorkflowRun, error) {
	return s.TriggerWith(ctx, tenant, id, WorkflowTrigger{DedupKey: dedupKey})
}

// TriggerWith is Trigger with inputs.
//
// The run is inserted pending in one transaction and started in the next
// ones (startTriggered): only the admission under max_active_runs needs
// the workflow's row lock exclusively, so triggers of one workflow insert
// their runs side by side, and each admission admits every run committed
// by then. A trigger that dies between them leaves a pending run with
// room, or a running one whose roots have not fired: the sweep starts
// both.
func (s *Workflows) TriggerWith(ctx context.Context, tenant, id string, in WorkflowTrigger) (WorkflowRun, error) {
	var (
		runID string
		done  ended // its roots failed unsent (a payload that does not render)
	)
	dedupKey := in.DedupKey
	if len(dedupKey) > 256 {
		return WorkflowRun{}, fieldError("dedup_key", "at most 256 characters")
	}
	if !validID(id) {
		return WorkflowRun{}, ErrNotFound
	}
	inserted := false
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		// KEY SHARE: the version read here is the run's until it is
		// inserted (a change of the workflow takes FOR UPDATE).
		row, err := db.GetWorkflowLocked(ctx, tx, tenant, id, db.LockKeyShare)
		if err != nil {
			return storeError(err, "load workflow")
		}
		w, err := workflowFromRow(row)
		if err != nil {
			return err
		}
		overrides, err := workflow.MergeInputs(w.Inputs, in.Inputs)
		if err != nil {
			return err
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		run := db.WorkflowRun{
			TenantID: tenant, ID: NewID(), WorkflowID: w.ID, Version: int32(w.Version),
			ScheduledFor: now, Trigger: TriggerManual, Inputs: overrides,
		}
		if dedupKey != "" {
			run.DedupKey = &dedupKey
		}
		ok, err := db.InsertWorkflowRun(ctx, tx, run)
		if err != nil {
			return storeError(err, "insert workflow run")
		}
		if !ok {
			prev, err := db.GetWorkflowRunByDedup(ctx, tx, tenant, w.ID, dedupKey)
			if err != nil {
				return storeError(err, "load workflow run")
			}
			runID, inserted = prev.ID, false
			return nil
		}
		runID, inserted = run.ID, true
		changes := map[string]any{"run_id": run.ID}
		if len(in.Inputs) > 0 { // each value summarised, as a workflow's inputs are
			inputs := map[string]any{}
			for k, v := range in.Inputs {
				inputs[k] = auditBytes(v)
			}
			changes["inputs"] = inputs
		}
		return recordAudit(ctx, tx, tenant, AuditTrigger, ResourceWorkflow, w.ID, changes)
	})
	if err != nil {
		return WorkflowRun{}, storeError(err, "trigger workflow")
	}
	if inserted {
		if err := s.startTriggered(ctx, tenant, id, runID, &done); err != nil {
			return WorkflowRun{}, storeError(err, "trigger workflow")
		}
		done.report(s.cfg.Metrics)
	}
	// With a context carrying a transaction (an Idempotency-Key), both
	// transactions above were its savepoints: read the run there.
	out, err := s.getRun(ctx, db.Using(ctx, s.pool), tenant, runID)
	if err != nil {
		return WorkflowRun{}, storeError(err, "trigger workflow")
	}
	return out, nil
}

// startTriggered starts the pending run runID a trigger inserted: a
// transaction under the workflow's row lock makes it, and the other
// pending runs there is room for, running and fires their roots
// (runEngine.promote), so that triggers of one workflow wait for each
// other only for the admission, and a run found running has its roots
// fired. A run whose trigger died before that is the sweep's.
func (s *Workflows) startTriggered(ctx context.Context, tenant, workflowID, runID string, done *ended) error {
	return s.admitTriggered(ctx, db.Using(ctx, s.pool), tenant, workflowID, runID, done)
}

// admitTriggered admits the pending run runID and fires its roots
// (runEngine.promote) unless an admission committed since its insert did.
// This process's triggers of one workflow take their turns in memory
// rather than in the workflow's row lock: each one's admission admits
// every run committed before it, so the triggers queued behind it mostly
// find theirs admitted, and skip the transaction and the lock. done
// tallies the roots the admission failed unsent.
func (s *Workflows) admitTriggered(ctx context.Context, q db.Querier, tenant, workflowID, runID string, done *ended) error {
	mu := &s.admitting[stripe(workflowID)]
	mu.Lock()
	defer mu.Unlock()
	state, err := db.GetWorkflowRunState(ctx, q, tenant, runID)
	if err != nil || state != RunPending {
		return storeError(err, "load workflow run")
	}
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		*done = nil
		return s.engine.tallying(done).promote(ctx, tx, tenant, workflowID)
	})
	return storeError(err, "admit workflow runs")
}

// stripe is the admitting stripe of a workflow.
func stripe(workflowID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(workflowID))
	return int(h.Sum32() % admitStripes)
}

// GetRun returns a run with its nodes.
func (s *Workflows) GetRun(ctx context.Context, tenant, id string) (WorkflowRun, error) {
	return s.getRun(ctx, s.pool, tenant, id)
}

func (s *Workflows) getRun(ctx context.Context, q db.Querier, tenant, id string) (WorkflowRun, error) {
	if !validID(id) {
		return WorkflowRun{}, ErrNotFound
	}
	// The run and what it shows are one round trip (db.ReadRunView).
	view, err := db.ReadRunView(ctx, q, tenant, id)
	if err != nil {
		return WorkflowRun{}, storeError(err, "load workflow run")
	}
	row := view.Run
	out, err := workflow.RunFromRow(row)
	if err != nil {
		return WorkflowRun{}, err
	}
	g, err := s.graphs.Load(ctx, q, tenant, row.WorkflowID, row.Version)
	if err != nil {
		return WorkflowRun{}, err
	}
	out.Events = workflow.EventsFromRows(view.Events)
	out.SLA = runSLA(time.Duration(zeroIfNil(view.SLAFinishWithinMS))*time.Millisecond, out, view.Now)
	stored := map[string]db.RunNode{}
	states := map[string]string{}
	for _, n := range view.Nodes {
		stored[n.Key], states[n.Key] = n, n.State
	}
	byNode := map[string][]db.RunExecution{}
	for _, x := range view.Executions {
		byNode[x.Node] = append(byNode[x.Node], x)
	}
	data, err := runDataOf(row, g, states, byNode, view.Outputs)
	if err != nil {
		return WorkflowRun{}, err
	}
	var lineage map[string]*RenderedFrom
	if g.NeedsTemplates(slices.Collect(maps.Keys(g.Index))) {
		if lineage, err = runLineage(ctx, q, tenant, id); err != nil {
			return WorkflowRun{}, err
		}
	}
	for _, n := range g.Nodes {
		sn, ok := stored[n.Key]
		out.Nodes = append(out.Nodes, workflow.NodeOf(n, sn, ok, row.State, byNode[n.Key], data.Nodes[n.Key].Output, lineage[n.Key]))
	}
	return out, nil
}

// ListRuns returns a workflow's runs newest first.
func (s *Workflows) ListRuns(ctx context.Context, tenant, workflowID string, page Page) ([]WorkflowRun, string, error) {
	if err := page.Check(); err != nil {
		return nil, "", err
	}
	w, err := s.Get(ctx, tenant, workflowID)
	if err != nil {
		return nil, "", err
	}
	rows, err := db.ListWorkflowRuns(ctx, s.pool, tenant, workflowID, page.After, page.Limit+1)
	if err != nil {
		return nil, "", storeError(err, "list workflow runs")
	}
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return nil, "", err
	}
	runs := make([]WorkflowRun, 0, len(rows))
	for _, r := range rows {
		run, err := workflow.RunFromRow(r)
		if err != nil {
			return nil, "", err
		}
		run.SLA = runSLA(w.SLAFinishWithin, run, now)
		runs = append(runs, run)
	}
	items, next := pageOf(runs, page.Limit, func(r WorkflowRun) WorkflowRun { return r }, func(r WorkflowRun) string { return r.ID })
	return items, next, nil
}

// lockRun locks a run that is started and not final, or explains why not.
func lockRun(ctx context.Context, tx db.Tx, tenant, id string) (db.WorkflowRun, error) {
	if !validID(id) {
		return db.WorkflowRun{}, ErrNotFound
	}
	run, err := db.GetWorkflowRun(ctx, tx, tenant, id, true)
	if err != nil {
		return db.WorkflowRun{}, storeError(err, "load workflow run")
	}
	return run, nil
}

// CancelRun cancels a run that is not final: its nodes that have not fired
// are cancelled, its executions not started are cancelled and its running
// ones are asked to stop.
func (s *Workflows) CancelRun(ctx context.Context, tenant, id string) (WorkflowRun, error) {
	var (
		out  WorkflowRun
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		run, err := lockRun(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		if lifecycle.RunFinal.Has(run.State) {
			return conflictf("the run is %s; only a pending, running or blocked run can be cancelled", run.State)
		}
		n, err := cancelRunLocked(ctx, tx, run, "the workflow run was cancelled", s.cfg.Metrics)
		if err != nil {
			return err
		}
		done.add(ExecCancelled, n)
		if err := s.engine.tallying(&done).finishedRun(ctx, tx, run); err != nil {
			return err
		}
		out, err = s.getRun(ctx, tx, tenant, id)
		if err != nil {
			return err
		}
		return recordAudit(ctx, tx, tenant, AuditCancel, ResourceWorkflowRun, id, map[string]any{"cancelled_executions": n})
	})
	if err != nil {
		return WorkflowRun{}, storeError(err, "cancel workflow run")
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// RunNode fires a node of a running or blocked run now, whatever its rule
// (skip: marks it skipped, which satisfies all_success downstream).
// It is audited as a trigger of the run, with the node in changes (the
// audit log's actions are a fixed list; "run it now" is a trigger).
func (s *Workflows) RunNode(ctx context.Context, tenant, runID, key string) (WorkflowRun, error) {
	return s.resolveNode(ctx, tenant, runID, key, AuditTrigger, nil)
}

// RunNodeWith is RunNode with an output: a wait_for node (waiting,
// blocked or awaiting its event) succeeds at once with output as its
// output (nil: none); output on another node is a 422.
func (s *Workflows) RunNodeWith(ctx context.Context, tenant, runID, key string, output json.RawMessage) (WorkflowRun, error) {
	if err := workflow.CheckOutput(output); err != nil {
		return WorkflowRun{}, err
	}
	return s.resolveNode(ctx, tenant, runID, key, AuditTrigger, output)
}

// SkipNode: see RunNode; audited as a skip of the run, with the node.
func (s *Workflows) SkipNode(ctx context.Context, tenant, runID, key string) (WorkflowRun, error) {
	return s.resolveNode(ctx, tenant, runID, key, AuditSkip, nil)
}

// resolveNode runs (action AuditTrigger) or skips (AuditSkip) a node.
func (s *Workflows) resolveNode(ctx context.Context, tenant, runID, key, action string, output json.RawMessage) (WorkflowRun, error) {
	var (
		out  WorkflowRun
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		run, err := lockRun(ctx, tx, tenant, runID)
		if err != nil {
			return err
		}
		if !lifecycle.RunActive.Has(run.State) {
			return conflictf("the run is %s; nodes of a running or blocked run only can be run or skipped", run.State)
		}
		nodes, err := db.GetRunNodes(ctx, tx, tenant, runID)
		if err != nil {
			return storeError(err, "load run nodes")
		}
		i := slices.IndexFunc(nodes, func(n db.RunNode) bool { return n.Key == key })
		if i < 0 {
			return ErrNotFound
		}
		g, err := s.graphs.Load(ctx, tx, tenant, run.WorkflowID, run.Version)
		if err != nil {
			return err
		}
		if j, ok := g.Index[key]; ok && g.Nodes[j].WaitFor != nil {
			// A wait_for node ends by hand: succeeded (with the output
			// given) or skipped, whether its rule was met yet or not.
			if st := nodes[i].State; !lifecycle.NodeOpen.Has(st) {
				return conflictf("node %q is %s; only a wait_for node still waiting (for its rule or its event) can be run or skipped",
					key, st)
			}
			state := map[bool]string{true: NodeSkipped, false: nodeSucceeded}[action == AuditSkip]
			if err := resolveWait(ctx, tx, run, key, state, output); err != nil {
				return err
			}
			if err := s.engine.tallying(&done).advanceLocked(ctx, tx, run, nil); err != nil {
				return err
			}
			out, err = s.getRun(ctx, tx, tenant, runID)
			if err != nil {
				return err
			}
			return recordAudit(ctx, tx, tenant, action, ResourceWorkflowRun, runID, map[string]any{"node": key})
		}
		if output != nil {
			return fieldError("output", "only a wait_for node takes an output")
		}
		if st := nodes[i].State; !lifecycle.NodeOpen.Has(st) {
			return conflictf("node %q is %s; only a waiting or blocked node can be run or skipped (retry its execution instead)", key,
				map[string]string{nodeFired: "already fired"}[st]+map[bool]string{true: st}[st != nodeFired])
		}
		var force []string
		if action == AuditSkip {
			if err := db.SetRunNodeStates(ctx, tx, tenant, runID, []string{key}, []string{NodeSkipped}); err != nil {
				return storeError(err, "skip node")
			}
		} else {
			force = []string{key}
		}
		if err := s.engine.tallying(&done).advanceLocked(ctx, tx, run, force); err != nil {
			return err
		}
		out, err = s.getRun(ctx, tx, tenant, runID)
		if err != nil {
			return err
		}
		return recordAudit(ctx, tx, tenant, action, ResourceWorkflowRun, runID, map[string]any{"node": key})
	})
	if err != nil {
		return WorkflowRun{}, storeError(err, action+" workflow run node")
	}
	done.report(s.cfg.Metrics)
	return out, nil
}

// Sweep is the backstop of the event-driven advance: it advances running
// runs that nothing in flight will advance (db.StalledRuns) and starts
// the pending runs of workflows with room under max_active_runs, after
// counting the waits started or ended since the last pass into their
// runs (countRunWaits). It also fails the wait_for nodes past their
// deadline (expireWaits). It returns
// how many runs and workflows it looked at.
func (s *Workflows) Sweep(ctx context.Context) (int, error) {
	if err := s.countRunWaits(ctx); err != nil {
		return 0, err
	}
	stalled, err := db.StalledRuns(ctx, s.pool, workflowSweepAge, workflowSweepBatch)
	if err != nil {
		return 0, storeError(err, "find stalled runs")
	}
	for _, r := range stalled {
		if err := s.AdvanceRun(ctx, r.TenantID, r.ID); err != nil {
			return 0, err
		}
	}
	queued, err := db.WorkflowsWithQueuedRuns(ctx, s.pool, workflowSweepBatch)
	if err != nil {
		return 0, storeError(err, "find queued runs")
	}
	for _, w := range queued {
		var done ended
		err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
			done = nil
			return s.engine.tallying(&done).promote(ctx, tx, w.TenantID, w.ID)
		})
		if err != nil {
			return 0, storeError(err, "promote queued workflow runs")
		}
		done.report(s.cfg.Metrics)
	}
	retired, err := s.sweepRetire(ctx)
	if err != nil {
		return 0, err
	}
	expired, err := s.expireWaits(ctx)
	if err != nil {
		return 0, err
	}
	return len(stalled) + len(queued) + retired + expired, nil
}

// AdvanceRun advances one run in a transaction of its own (the sweep's
// step, for tests and tools).
func (s *Workflows) AdvanceRun(ctx context.Context, tenant, runID string) error {
	var done ended
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		done = nil
		return s.engine.tallying(&done).advanceRun(ctx, tx, tenant, runID)
	})
	if err != nil {
		return storeError(err, "advance workflow run")
	}
	done.report(s.cfg.Metrics)
	return nil
}

// CountRuns counts a tenant's runs per state (the stats API).
func (s *Workflows) CountRuns(ctx context.Context, tenant string) (map[string]int64, error) {
	m, err := db.CountRunsByState(ctx, s.pool, tenant)
	return m, storeError(err, "count workflow runs")
}

// tickWorkflows claims the workflows whose next slot is within the
// look-ahead and starts a run per slot, under the workflow's misfire
// policy, as the scheduler plans a task's slots (Scheduler.plan).
func (s *Scheduler) tickWorkflows(ctx context.Context) (int, error) {
	var (
		n    int
		done ended
	)
	engine := runEngine{enq: s.enq, ahead: s.cfg.FetchAhead, metrics: s.cfg.Metrics, graphs: &s.graphs, ended: &done}
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		n, done = 0, nil
		due, err := db.ClaimDueWorkflows(ctx, tx, s.cfg.LookAhead, workflowClaimBatch)
		if err != nil || len(due) == 0 {
			return err
		}
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		tasks := make([]db.DueTask, 0, len(due))
		for _, w := range due {
			// The parsed schedule is cached per (workflow, schedule version).
			t, ok, err := workflow.Due(w)
			if err != nil {
				return err
			}
			if ok {
				tasks = append(tasks, t)
			}
		}
		cals, err := s.calendarsFor(ctx, tx, tasks)
		if err != nil {
			return err
		}
		version := make(map[string]int32, len(due))
		for _, w := range due {
			version[w.ID] = w.Version
		}
		for _, t := range tasks {
			w := db.Workflow{TenantID: t.TenantID, ID: t.ID, Version: version[t.ID]}
			p := s.plan(t, now, cals)
			for _, e := range p.execs {
				ok, err := db.InsertWorkflowRun(ctx, tx, db.WorkflowRun{
					TenantID: w.TenantID, ID: NewID(), WorkflowID: w.ID,
					Version: w.Version, ScheduledFor: e.ScheduledFor, Trigger: TriggerSchedule,
				})
				if err != nil {
					return err
				}
				if ok {
					n++
				}
			}
			if err := db.SetWorkflowNextRun(ctx, tx, w.TenantID, w.ID, p.next); err != nil {
				return err
			}
			if err := engine.promote(ctx, tx, w.TenantID, w.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, storeError(err, "workflow tick")
	}
	done.report(s.cfg.Metrics)
	return n, nil
}

// Workflow alert types (service/workflow).
const (
	AlertWorkflowRunBlocked   = workflow.AlertRunBlocked
	AlertWorkflowRunSLAMissed = workflow.AlertRunSLAMissed
)

func workflowAlertInsert(a WorkflowAlertArgs) []river.InsertManyParams {
	return []river.InsertManyParams{{Args: a, InsertOpts: &river.InsertOpts{Queue: QueueAlert, MaxAttempts: AlertMaxAttemptsDefault}}}
}

// AlertTarget loads the endpoint a workflow alert goes to; ErrNotFound:
// the endpoint or the workflow is gone, or the endpoint is disabled.
func (s *Workflows) AlertTarget(ctx context.Context, a WorkflowAlertArgs) (WorkflowAlert, error) {
	w, err := s.Get(ctx, a.TenantID, a.WorkflowID)
	if err != nil {
		return WorkflowAlert{}, err
	}
	return workflow.AlertTarget(ctx, s.pool, a, w.Name)
}
