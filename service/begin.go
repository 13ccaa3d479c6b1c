package service

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/limits"
)

// Action is what the worker should do after Begin.
type Action int

// Actions.
const (
	// ActionSend: the execution is running for this attempt; send it and
	// call Finish.
	ActionSend Action = iota + 1
	// ActionDone: nothing to send; the execution is (or was already)
	// final, or a newer attempt owns it.
	ActionDone
	// ActionWait: overlap policy "queue" and the previous execution is
	// unfinished; come back later without consuming an attempt.
	ActionWait
	// ActionHold: a limit holds the delivery back (Limit names it);
	// sleep until the dispatcher wakes the job (HoldRecheck at most),
	// without consuming an attempt.
	ActionHold
)

// HoldRecheck is how long a held delivery's job sleeps before it looks
// again by itself; the dispatcher wakes it as soon as its limits allow.
const HoldRecheck = 5 * time.Minute

// Delivery is one attempt to send, or the reason there is none.
type Delivery struct {
	Action Action
	// State is the execution's state after Begin.
	State string
	// Reason explains ActionDone and ActionWait.
	Reason string
	// Ended is set when this Begin moved the execution to its final State
	// (cancelled, skipped, or failed without sending).
	Ended bool
	// Missed is set when this Begin skipped a misfire by its task's
	// misfire policy: a missed slot (counted in the task's missed_count).
	Missed bool
	// Late is set when the attempt sends a misfire its task's misfire
	// policy still fires (the execution is marked late).
	Late bool
	// FiringLateness is set when this Begin started the first attempt of
	// an on-time scheduled fire: how late it started (firingLateness, by
	// the database's clock, as first_started_at records it).
	FiringLateness *time.Duration
	// Limit names the limit of ActionHold (limits.Table); Throttled is
	// set when this Begin put the delivery on hold (its throttled event).
	// An attempt admitted through a limit holds a permit, which the
	// transaction that records its outcome gives back (decideFinish).
	Limit     string
	Throttled bool

	TenantID     string
	ExecutionID  string
	TaskID       string
	TaskName     string
	EndpointID   string
	ScheduledFor time.Time
	Trigger      string
	// Round is sent as X-Ax-Round: 1 for a slot's first fire, one more
	// for each backfill that re-ran it.
	Round int
	// WorkflowID, WorkflowRunID and Node name the workflow run and node of
	// a node's execution (X-Ax-Workflow-Id, X-Ax-Workflow-Run-Id,
	// X-Ax-Node); empty for a task's own fire.
	WorkflowID, WorkflowRunID, Node string
	// Shard and ShardCount are X-Ax-Shard-Index and X-Ax-Shard-Count
	// (sent when ShardCount > 1).
	Shard, ShardCount int
	// EventID is the event that fired the execution (trigger event), sent
	// as X-Ax-Event-Id; empty otherwise.
	EventID string
	// CreatedAt is when the execution was created: for a workflow node's,
	// when its rule was met.
	CreatedAt time.Time
	// Attempt is the attempt number sent as X-Ax-Attempt: 1 for the
	// first, one more per retry and per run resumed after an interruption.
	Attempt int
	// Lease is the River attempt that owns the execution; pass it to Finish.
	Lease int
	// Resumed is set when this run took over a running execution whose
	// previous run was interrupted (a crash or a shutdown).
	Resumed bool

	URL     string
	Method  string
	Headers map[string]string
	Timeout time.Duration
	// Payload is the body, byte for byte: the execution's override or the
	// task's payload.
	Payload []byte
	// Keys sign the request: the current secret first, then the previous
	// one during a rotation overlap.
	Keys  [][]byte
	Retry RetryPolicy
	// Callback is set for a task in callback completion mode: a 2xx only
	// accepts the attempt (PrepareCallback, Accept).
	Callback *CallbackSpec

	// released: this Begin gave back the execution's permit.
	released bool
	// ended counts the executions this Begin ended (itself, and the
	// pending ones an auto-pause cancelled).
	ended ended
}

// Begin decides (decideStart) and records the start of River attempt
// lease of an execution, in one transaction. The common case — a first
// send that needs no decision beyond the execution, task and endpoint rows
// (db.StartsWithoutDecision), a one-shot task's late send included — is
// batched with concurrent Begins into one statement, and so are the
// misfires of recurring tasks when deliveries fall behind, decided
// together (decideMisfires); everything else, and any execution a failed
// batch carried, takes the row-by-row path.
func (s *Deliveries) Begin(ctx context.Context, tenant, executionID string, lease int) (Delivery, error) {
	return s.BeginJob(ctx, tenant, executionID, lease, 0)
}

// BeginJob is Begin for River job jobID: an execution whose river_job_id
// names another job (a job it was handed off to, or the job of an API
// retry) belongs to that job, and this one gets ActionDone.
func (s *Deliveries) BeginJob(ctx context.Context, tenant, executionID string, lease int, jobID int64) (Delivery, error) {
	// Admission through gates is a decision of the row-by-row path: the
	// batched start leaves an endpoint with limits alone by its own rows,
	// and a tenant with delivery limits by what the request says.
	key := db.DeliveryKey{
		ExecutionRef: db.ExecutionRef{TenantID: tenant, ID: executionID}, Lease: lease, JobID: jobID,
		TenantLimited: s.cfg.Limits.Effective(tenant).Deliveries(),
	}
	if r, err := s.starts.Do(ctx, key); s.count(r.ok, err) {
		d := deliveryFromRow(r.row, lease)
		if r.missed {
			// A misfire its policy does not fire (decideMisfires).
			d.Action, d.State, d.Reason, d.Ended, d.Missed = ActionDone, ExecSkipped, r.reason, true, true
			return d, nil
		}
		keys, err := endpointOf(r.row.JoinedEndpoint).SigningKeysFrom(r.row.Now, &s.secrets)
		if err != nil {
			return Delivery{}, err
		}
		d.Action, d.Attempt, d.Keys, d.Late = ActionSend, r.row.Attempts, keys, r.row.Late
		d.FiringLateness = firstFiringLateness(r.row, r.row.Late)
		return d, nil
	}
	return s.beginRow(ctx, tenant, executionID, lease, jobID)
}

// beginRow is Begin's row-by-row path: it locks the execution, reads the
// facts, asks decideStart and applies the verdict. Facts that must be
// decided alone (startRules.decidedAlone) are read again once the task's
// row lock is held: in READ COMMITTED the second statement sees what the
// misfire decided before it committed.
func (s *Deliveries) beginRow(ctx context.Context, tenant, executionID string, lease int, jobID int64) (Delivery, error) {
	var d Delivery
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		row, err := db.GetDeliveryForUpdate(ctx, tx, tenant, executionID, s.cfg.misfire())
		if err != nil {
			return storeError(err, "load execution "+executionID)
		}
		if s.cfg.rules().decidedAlone(startFactsOf(row, lease, jobID, nil)) {
			if err := db.LockTask(ctx, tx, tenant, row.TaskID); err != nil {
				return err
			}
			if row, err = db.GetDeliveryForUpdate(ctx, tx, tenant, executionID, s.cfg.misfire()); err != nil {
				return storeError(err, "load execution "+executionID)
			}
		}
		d, err = s.begin(ctx, tx, row, lease, jobID)
		return err
	})
	if err != nil {
		return Delivery{}, storeError(err, "begin delivery")
	}
	d.ended.report(s.cfg.Metrics)
	if d.Action == ActionHold || d.released {
		// Committed: the dispatcher, which may be polling slowly while
		// nothing was held, finds the hold, or the room, at once.
		s.cfg.Limits.Wake()
	}
	return d, nil
}

// startFactsOf reads the facts of decideStart from a locked row; gates
// are the gates its delivery passes (Limits.deliveryGates).
func startFactsOf(row db.DeliveryRow, lease int, jobID int64, gates []limits.Gate) startFacts {
	return startFacts{
		State: row.State, Trigger: row.Trigger, CancelRequested: row.CancelRequested, Attempts: row.Attempts,
		AttemptsBase: row.AttemptsBase, NeverStarted: row.NeverStarted, Held: row.Held,
		LeaseAttempt: row.LeaseAttempt, RiverJobID: row.RiverJobID, Lease: lease, JobID: jobID,
		TaskFound: row.TaskFound, TaskState: zeroIfNil(row.TaskState), OverlapPolicy: zeroIfNil(row.OverlapPolicy),
		MisfirePolicy: zeroIfNil(row.MisfirePolicy), MaxAttempts: int(zeroIfNil(row.MaxAttempts)),
		EarlierUnfinished: row.EarlierUnfinished, LaterMissed: row.LaterMissed,
		LaterMisfire: row.LaterMisfire, CaughtUp: row.CaughtUp, CatchUpShard: row.CatchUpShard, SingleSlot: row.SingleSlot,
		Sharded:       row.ShardCount > 1,
		EndpointFound: row.EndpointFound, EndpointEnabled: zeroIfNil(row.EndpointEnabled),
		Waited: row.Now.Sub(row.ScheduledFor), Waiting: row.Waiting,
		EndpointLimited: row.EndpointMaxConcurrency != nil || row.EndpointRateLimit != nil,
		TenantLimited:   slices.ContainsFunc(gates, func(g limits.Gate) bool { return g.Name == limits.TenantGate }),
	}
}

// begin applies decideStart's verdict to the locked row.
func (s *Deliveries) begin(ctx context.Context, tx db.Tx, row db.DeliveryRow, lease int, jobID int64) (Delivery, error) {
	gates := s.cfg.Limits.deliveryGates(row)
	dec := decideStart(startFactsOf(row, lease, jobID, gates), s.cfg.rules())
	d := deliveryFromRow(row, lease)
	d.Reason = dec.Reason
	var events []db.DeliveryEvent
	if dec.Resumed {
		events = append(events, db.DeliveryEvent{
			Type: EventRescued, Attempt: &row.Attempts,
			Message: refTo(fmt.Sprintf("attempt %d was interrupted (a crash or a shutdown) before its outcome was recorded; "+
				"resuming with the same idempotency key", row.Attempts)),
		})
	}
	if dec.Release {
		released, err := limits.Release(ctx, tx, row.TenantID, row.ID)
		if err != nil {
			return Delivery{}, err
		}
		d.released = released
	}
	switch dec.Verdict {
	case startLeave:
		d.Action = ActionDone
		return d, nil

	case startWait:
		d.Action = ActionWait
		return d, nil

	case startPark:
		// Nothing written: the job ends, the execution stays pending and
		// held (the reconciler leaves it alone) until its release.
		d.Action = ActionDone
		return d, nil

	case startCancel:
		events = append(events, db.DeliveryEvent{Type: EventCancelled, Message: &dec.Reason})
		if err := s.end(ctx, tx, row, lease, ExecCancelled, dec.Reason, "", events, &d.ended); err != nil {
			return Delivery{}, err
		}
		d.Action, d.State, d.Ended = ActionDone, ExecCancelled, true
		d.ended.add(ExecCancelled, 1)
		return d, nil

	case startSkip:
		events = append(events, db.DeliveryEvent{
			Type: EventSkipped, Message: &dec.Reason,
			Data: map[string]any{"overlap_policy": zeroIfNil(row.OverlapPolicy)},
		})
		if err := s.end(ctx, tx, row, 0, ExecSkipped, dec.Reason, "", events, &d.ended); err != nil {
			return Delivery{}, err
		}
		d.Action, d.State, d.Ended = ActionDone, ExecSkipped, true
		d.ended.add(ExecSkipped, 1)
		return d, nil

	case startMiss:
		events = append(events, db.DeliveryEvent{
			Type: EventSkipped, Message: &dec.Reason,
			Data: map[string]any{"misfire_policy": zeroIfNil(row.MisfirePolicy), "lateness_ms": row.Now.Sub(row.ScheduledFor).Milliseconds()},
		})
		if err := s.end(ctx, tx, row, 0, ExecSkipped, dec.Reason, "", events, &d.ended); err != nil {
			return Delivery{}, err
		}
		if err := db.AddMissedSlot(ctx, tx, row.TenantID, row.TaskID); err != nil {
			return Delivery{}, storeError(err, "count missed slot")
		}
		d.Action, d.State, d.Ended, d.Missed = ActionDone, ExecSkipped, true, true
		d.ended.add(ExecSkipped, 1)
		return d, nil

	case startFail:
		events = append(events, db.DeliveryEvent{
			Type: EventFailed, Attempt: &row.Attempts,
			ErrorClass: nilIfEmpty(dec.ErrorClass), Message: &dec.Reason,
		})
		if err := s.end(ctx, tx, row, lease, ExecFailed, dec.Reason, dec.ErrorClass, events, &d.ended); err != nil {
			return Delivery{}, err
		}
		fx, err := s.afterFailure(ctx, tx, row.TenantID, row.ID, row.TaskID)
		if err != nil {
			return Delivery{}, err
		}
		d.Action, d.State, d.Ended = ActionDone, ExecFailed, true
		d.ended.add(ExecFailed, 1)
		d.ended.add(ExecCancelled, fx.cancelled)
		return d, nil
	}

	if dec.Admit {
		adm, err := limits.Admit(ctx, tx, limits.Request{
			TenantID: row.TenantID, ExecutionID: row.ID, TaskID: row.TaskID,
			JobID: jobID, ScheduledFor: row.ScheduledFor, Gates: gates, PermitTTL: s.cfg.Limits.permitTTL(),
		})
		if err != nil {
			return Delivery{}, err
		}
		if !adm.Admitted {
			d.Action, d.Limit, d.Throttled = ActionHold, adm.Limit, adm.NewHold
			d.Reason = "held back by the " + adm.Limit + " limit"
			if adm.NewHold {
				ev := db.DeliveryEvent{Type: EventThrottled, Message: &d.Reason, Data: map[string]any{"limit": adm.Limit}}
				if limits.ScopeOf(adm.Limit) == limits.ScopeEndpoint {
					ev.Data["endpoint_id"] = zeroIfNil(row.EndpointID)
				}
				if err := db.InsertDeliveryEvents(ctx, tx, row.TenantID, row.ID, append(events, ev)); err != nil {
					return Delivery{}, storeError(err, "record hold")
				}
			}
			return d, nil
		}
	}
	attempts, ok, err := db.StartDelivery(ctx, tx, row.TenantID, row.ID, lease, dec.Late)
	if err != nil {
		return Delivery{}, storeError(err, "start delivery")
	}
	if !ok {
		return Delivery{}, conflictf("start execution %s attempt %d: the execution changed under its lock", row.ID, lease)
	}
	if dec.CatchUp {
		if err := db.RecordCatchUp(ctx, tx, row.TenantID, row.TaskID); err != nil {
			return Delivery{}, storeError(err, "record catch-up")
		}
	}
	started := db.DeliveryEvent{Type: EventAttemptStarted, Attempt: &attempts}
	if dec.Late {
		// A late fire says so, and which policy let it through.
		started.Data = map[string]any{
			"late": true, "lateness_ms": row.Now.Sub(row.ScheduledFor).Milliseconds(),
			"misfire_policy": zeroIfNil(row.MisfirePolicy),
		}
	}
	events = append(events, started)
	if err := db.InsertDeliveryEvents(ctx, tx, row.TenantID, row.ID, events); err != nil {
		return Delivery{}, storeError(err, "record start")
	}
	keys, err := endpointOf(row.JoinedEndpoint).SigningKeysFrom(row.Now, &s.secrets)
	if err != nil {
		return Delivery{}, err
	}
	d.Action, d.State, d.Attempt, d.Resumed, d.Late, d.Keys = ActionSend, ExecRunning, attempts, dec.Resumed, dec.Late, keys
	d.FiringLateness = firstFiringLateness(row, dec.Late)
	return d, nil
}

// firstFiringLateness is the firing lateness of row's first start, made
// now (nil: it was not its first, or it has none). A first start records
// first_started_at = now(), the row's Now; a catch-up is marked late by
// its start (late) or was by the scheduler, which its start decides again.
func firstFiringLateness(row db.DeliveryRow, late bool) *time.Duration {
	if !row.NeverStarted {
		return nil
	}
	if d, ok := firingLateness(row.Trigger, late, row.ScheduledFor, &row.Now); ok {
		return &d
	}
	return nil
}

// end moves the locked execution row to a final state from the state Begin
// read, without an attempt of its own, and appends events; done tallies
// what its run's advance ends.
func (s *Deliveries) end(ctx context.Context, tx db.Tx, row db.DeliveryRow, lease int, to, reason, class string,
	events []db.DeliveryEvent, done *ended,
) error {
	e := db.DeliveryEnd{
		TenantID: row.TenantID, ID: row.ID, From: []string{row.State}, To: to, Error: &reason, KeepStatusCode: true,
		ErrorClass: nilIfEmpty(class),
	}
	if err := checkExec(e.From, to); err != nil {
		return err
	}
	if row.State == ExecRunning {
		e.MaxLease = &lease
	}
	ok, err := db.EndDelivery(ctx, tx, e)
	if err != nil {
		return storeError(err, "end delivery")
	}
	if !ok {
		return conflictf("execution %s %s → %s: the execution changed under its lock", row.ID, row.State, to)
	}
	if err := db.InsertDeliveryEvents(ctx, tx, row.TenantID, row.ID, events); err != nil {
		return storeError(err, "record end")
	}
	return s.advanceWorkflow(ctx, tx, row.TenantID, row.WorkflowRunID, done)
}

func deliveryFromRow(row db.DeliveryRow, lease int) Delivery {
	d := Delivery{
		State: row.State, TenantID: row.TenantID, ExecutionID: row.ID, TaskID: row.TaskID, TaskName: zeroIfNil(row.TaskName),
		EndpointID: zeroIfNil(row.EndpointID), ScheduledFor: row.ScheduledFor.UTC(), Trigger: row.Trigger, Round: max(row.Round, 1),
		Attempt: row.Attempts, Lease: lease, URL: zeroIfNil(row.EndpointURL), Method: zeroIfNil(row.EndpointMethod),
		Headers: row.EndpointHeaders, Payload: row.Payload,
		WorkflowID: zeroIfNil(row.WorkflowID), WorkflowRunID: zeroIfNil(row.WorkflowRunID), Node: zeroIfNil(row.Node),
		Shard: row.Shard, ShardCount: row.ShardCount, EventID: zeroIfNil(row.EventID), CreatedAt: row.CreatedAt,
		Retry: RetryPolicy{
			MaxAttempts:    int(zeroIfNil(row.MaxAttempts)),
			InitialBackoff: time.Duration(zeroIfNil(row.InitialBackoffMS)) * time.Millisecond,
			MaxBackoff:     time.Duration(zeroIfNil(row.MaxBackoffMS)) * time.Millisecond,
		},
	}
	if d.Payload == nil {
		d.Payload = row.TaskPayload
	}
	if row.CompletionTimeoutMS != nil {
		d.Callback = &CallbackSpec{
			Timeout:          time.Duration(*row.CompletionTimeoutMS) * time.Millisecond,
			HeartbeatTimeout: time.Duration(zeroIfNil(row.HeartbeatTimeoutMS)) * time.Millisecond,
		}
	}
	d.Timeout = time.Duration(zeroIfNil(row.EndpointTimeoutMS)) * time.Millisecond
	if row.TaskTimeoutMS != nil {
		d.Timeout = time.Duration(*row.TaskTimeoutMS) * time.Millisecond
	}
	return d
}

func endpointOf(row db.JoinedEndpoint) Endpoint {
	return Endpoint{
		ID: zeroIfNil(row.EndpointID), Secret: zeroIfNil(row.Secret), PreviousSecret: zeroIfNil(row.PreviousSecret),
		PreviousSecretExpiresAt: row.PreviousSecretExp,
	}
}
