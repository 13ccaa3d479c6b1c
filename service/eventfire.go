package service

import (
	"context"
	"errors"
	"sync"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/template"
)

// EventFires fires what an event matches, in the transaction that stores
// the event (event.Events.Post): one execution of each active task whose
// schedule is the event (every shard of it), trigger event, scheduled for
// the event's arrival, with its deliver jobs; one run of each active
// workflow whose schedule is the event; and it ends the waits of the
// workflow nodes waiting for it (resolveWaits, workflow_wait.go). A paused
// task or workflow fires nothing, and the events it missed are not
// replayed when it resumes; a paused workflow's runs in flight go on, and
// their nodes' waits end as any others'.
//
// Each fire's identity is (task, event, shard) or (workflow, event)
// (executions_event_idx, workflow_runs_event_idx), not the slot: two
// events that arrive in the same microsecond both fire.
type EventFires struct {
	enq       *Enqueuer
	workflows *Workflows
	metrics   *metrics.Metrics

	// runner, when set, makes the first attempt of the fires at once in
	// this process (SetRunner).
	runner FireRunner

	// renders holds the templated tasks' payload renderers, parsed once
	// per task version as the scheduler's are (Scheduler.renderer):
	// parsing a template costs more than rendering it.
	mu      sync.Mutex
	renders map[string]eventRender // task id → its renderer
}

// eventRender is a task's payload renderer at a version of the task (a
// patch moves the version on).
type eventRender struct {
	version int32
	r       payload.Renderer
}

// eventRendersMax bounds the renderers EventFires keeps: past it, the
// cache starts over (tasks deleted or no longer fired leave entries).
const eventRendersMax = 10_000

// NewEventFires returns the firing of events: enq inserts the deliveries,
// workflows starts the runs (nil: workflows are not fired); m counts what
// ended (a fire whose template failed).
func NewEventFires(enq *Enqueuer, workflows *Workflows, m *metrics.Metrics) *EventFires {
	return &EventFires{enq: enq, workflows: workflows, metrics: m, renders: map[string]eventRender{}}
}

// FireRunner makes the first attempt of an event's fires in this
// process as soon as the event commits (jobs.EventRunner), instead of
// leaving their deliver jobs for River's next fetch: an event's fire is
// due at once, and the fetch (a notification, the queue's fetch
// cooldown, the fetch's own commit) was most of the time from the post's
// answer to the webhook.
type FireRunner interface {
	// Claimant is the River client the fires' jobs are claimed for (the
	// replica's, whose death resumes them), or "" while the runner takes
	// nothing (not started, or stopping).
	Claimant() string
	// Run makes the attempts of fires, whose jobs are claimed and
	// committed, and ends each job (queue.Enqueuer.EndClaimed). It must
	// not block.
	Run(fires []ClaimedFire)
}

// ClaimedFire is a fire of an event whose deliver job was claimed for
// the FireRunner (queue.Enqueuer.Claim) in the event's transaction.
type ClaimedFire struct {
	TenantID, ExecutionID, EndpointID string
	// JobID is its deliver job, running under the runner's client.
	JobID int64
	// Lease is the attempt the claim made the job's (DeliverArgs.Lease):
	// a run of the job by River after the claim is released runs under
	// the same one.
	Lease    int
	Priority int
}

// SetRunner makes r run the fires of the events posted from now on (nil:
// River runs them). Call it before the events are posted.
func (f *EventFires) SetRunner(r FireRunner) { f.runner = r }

// renderer returns the payload's renderer of t (payload.ForTask), from
// the cache when it holds t's version.
func (f *EventFires) renderer(t db.Task) payload.Renderer {
	if !t.PayloadTemplate {
		return payload.Renderer{}
	}
	f.mu.Lock()
	c, ok := f.renders[t.ID]
	f.mu.Unlock()
	if ok && c.version == t.Version {
		return c.r
	}
	r := payload.ForTask(t)
	f.mu.Lock()
	if len(f.renders) >= eventRendersMax {
		clear(f.renders)
	}
	if c, ok := f.renders[t.ID]; !ok || c.version < t.Version {
		f.renders[t.ID] = eventRender{version: t.Version, r: r}
	}
	f.mu.Unlock()
	return r
}

// Fire is an event.Fire.
func (f *EventFires) Fire(ctx context.Context, tx db.Tx, ev event.Occurrence) (event.Fired, error) {
	var (
		out  event.Fired
		done ended
	)
	if f.workflows != nil {
		// First the nodes waiting for it (a run it starts below cannot
		// wait for it: it arrived before).
		if err := f.resolveWaits(ctx, tx, ev, &out, &done); err != nil {
			return event.Fired{}, err
		}
	}
	if err := f.fireTasks(ctx, tx, ev, &out, &done); err != nil {
		return event.Fired{}, err
	}
	if f.workflows != nil {
		ids, err := db.EventWorkflowIDs(ctx, tx, ev.TenantID, ev.Name)
		if err != nil {
			return event.Fired{}, storeError(err, "list event workflows")
		}
		for _, id := range ids {
			runID, ok, err := f.workflows.startEventRun(ctx, tx, ev, id)
			if err != nil {
				return event.Fired{}, err
			}
			if ok {
				out.Matched.Workflows++
				out.Matches = append(out.Matches, event.Match{Type: event.MatchWorkflow, WorkflowID: id, RunID: runID})
			}
		}
	}
	if len(done) > 0 {
		m, then := f.metrics, out.Committed
		out.Committed = func() {
			done.report(m)
			if then != nil {
				then()
			}
		}
	}
	return out, nil
}

// fireTasks creates the executions of the tasks ev fires and their
// deliver jobs, adding them to out.
func (f *EventFires) fireTasks(ctx context.Context, tx db.Tx, ev event.Occurrence, out *event.Fired, done *ended) error {
	tasks, err := db.EventTasks(ctx, tx, ev.TenantID, ev.Name)
	if err != nil {
		return storeError(err, "list event tasks")
	}
	if len(tasks) == 0 {
		return nil
	}
	data := &template.Event{Name: ev.Name, Key: ev.Key, Payload: ev.Payload}
	var (
		execs  []db.EventExecution
		byTask = make(map[string]db.Task, len(tasks))
		unsent map[string]string // execution id → why its template failed
	)
	for _, t := range tasks {
		byTask[t.ID] = t
		r := f.renderer(t)
		n := max(t.Shards, 1)
		for i := range n {
			e := db.EventExecution{ID: NewID(), TaskID: t.ID, Shard: i, ShardCount: n}
			if r.Active() {
				b, err := r.Render(payload.Fire{
					ExecutionID: e.ID, ScheduledFor: ev.At, Round: 1, Shard: int(i), ShardCount: int(n),
					Trigger: TriggerEvent, Event: data,
				})
				if err != nil {
					if unsent == nil {
						unsent = map[string]string{}
					}
					unsent[e.ID] = err.Error()
				}
				e.Payload = b
			}
			execs = append(execs, e)
		}
	}
	ids, err := db.InsertEventExecutions(ctx, tx, ev.TenantID, ev.ID, ev.At, execs)
	if err != nil {
		return storeError(err, "insert event executions")
	}
	inserted := make(map[string]bool, len(ids))
	for _, id := range ids {
		inserted[id] = true
	}
	var (
		jobs   []river.InsertManyParams
		failed []unsentFire
	)
	for _, e := range execs {
		if !inserted[e.ID] {
			continue
		}
		t := byTask[e.TaskID]
		if e.Shard == 0 {
			out.Matched.Tasks++
			out.Matches = append(out.Matches, event.Match{Type: event.MatchTask, TaskID: t.ID, ExecutionID: e.ID})
		}
		if reason, ok := unsent[e.ID]; ok {
			failed = append(failed, unsentFire{TenantID: ev.TenantID, ID: e.ID, TaskID: t.ID, Reason: reason})
			continue
		}
		jobs = append(jobs, deliverInsert(ev.TenantID, e.ID, t.EndpointID, ev.At, int(t.Priority), int(t.MaxAttempts), ev.At, 0, QueueDeliver))
	}
	if len(jobs) > 0 {
		res, err := f.enq.insertMany(ctx, tx, jobs)
		if err != nil {
			return err
		}
		if err := f.claim(ctx, tx, res, jobs, out); err != nil {
			return err
		}
	}
	return failUnsent(ctx, tx, f.enq, failed, done)
}

// claim claims the deliver jobs res (inserted from params) for the
// FireRunner, if one takes them, and hands them to it once the event
// commits (out.Committed).
func (f *EventFires) claim(ctx context.Context, tx db.Tx, res []*rivertype.JobInsertResult, params []river.InsertManyParams,
	out *event.Fired,
) error {
	if f.runner == nil || len(res) != len(params) {
		return nil
	}
	client := f.runner.Claimant()
	if client == "" {
		return nil
	}
	ids := make([]int64, 0, len(res))
	byJob := make(map[int64]ClaimedFire, len(res))
	for i, r := range res {
		args, ok := params[i].Args.(DeliverArgs)
		if r == nil || r.Job == nil || r.UniqueSkippedAsDuplicate || !ok {
			continue
		}
		ids = append(ids, r.Job.ID)
		byJob[r.Job.ID] = ClaimedFire{
			TenantID: args.TenantID, ExecutionID: args.ExecutionID, EndpointID: args.EndpointID,
			JobID: r.Job.ID, Lease: args.Lease(r.Job.Attempt + 1), Priority: r.Job.Priority,
		}
	}
	got, err := f.enq.Claim(ctx, tx, ids, client)
	if err != nil || len(got) == 0 {
		return err
	}
	fires := make([]ClaimedFire, 0, len(got))
	for _, id := range got {
		fires = append(fires, byJob[id])
	}
	runner, then := f.runner, out.Committed
	out.Committed = func() {
		if then != nil {
			then()
		}
		runner.Run(fires)
	}
	return nil
}

// startEventRun starts a run of workflow id for ev, in tx: pending, then
// promoted as a trigger's run is (max_active_runs). ok is false when the
// workflow is gone or the event already started one.
func (s *Workflows) startEventRun(ctx context.Context, tx db.Tx, ev event.Occurrence, id string) (runID string, ok bool, err error) {
	w, err := s.get(ctx, tx, ev.TenantID, id, true)
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	eventID := ev.ID
	run := db.WorkflowRun{
		TenantID: ev.TenantID, ID: NewID(), WorkflowID: w.ID, Version: int32(w.Version),
		ScheduledFor: ev.At, Trigger: TriggerEvent, EventID: &eventID,
	}
	created, err := db.InsertWorkflowRun(ctx, tx, run)
	if err != nil {
		return "", false, storeError(err, "insert workflow run")
	}
	if !created {
		return "", false, nil
	}
	if err := s.engine.promote(ctx, tx, ev.TenantID, w.ID); err != nil {
		return "", false, err
	}
	return run.ID, true, nil
}

// NewEvents returns the events of pool, fired by EventFires (enq,
// workflows) and counted in m's ax_events_total.
func NewEvents(pool *db.Pool, enq *Enqueuer, workflows *Workflows, m *metrics.Metrics) *event.Events {
	return NewEventsRunBy(pool, enq, workflows, m, nil)
}

// NewEventsRunBy is NewEvents whose fires' first attempts runner makes
// in this process (EventFires.SetRunner; nil: River's fetch).
func NewEventsRunBy(pool *db.Pool, enq *Enqueuer, workflows *Workflows, m *metrics.Metrics, runner FireRunner) *event.Events {
	fires := NewEventFires(enq, workflows, m)
	if runner != nil {
		fires.SetRunner(runner)
	}
	return event.New(pool, event.Config{
		Fire:    fires.Fire,
		Observe: func(o event.Outcome) { m.EventPosted(string(o)) },
	})
}
