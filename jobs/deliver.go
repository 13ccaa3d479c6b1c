package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// DeliverWorker delivers one execution per job: Begin (decide and mark it
// running, one transaction), one HTTP attempt, Classify, Finish (record the
// outcome, one transaction). What it returns tells River what to do next:
// nil when the execution is final, river.JobCancel when it failed for good
// or was cancelled, an error when it is retrying (after the delay Finish
// decided: NextRetry), river.JobSnooze while an overlap "queue" wait lasts,
// and the context's error when a shutdown cut the attempt short: River then
// makes the job available again without counting the attempt, and the
// re-run resumes the execution with the same idempotency key.
type DeliverWorker struct {
	river.WorkerDefaults[deliverArgs]

	deliveries *service.Deliveries
	sender     *Sender
	logger     *slog.Logger
	metrics    *metrics.Metrics
	clock      *service.DBClock
	timeout    time.Duration
	queuePoll  time.Duration
	slots      sendSlots
	// bulkSlots are the send slots of the bulk lane
	// (service.QueueDeliverBulk): its own, so that a burst or a slow
	// endpoint cannot take the main lane's.
	bulkSlots sendSlots
	lanes     *service.Lanes
	// slotWait bounds the wait for a send slot (slotWaitMax, or less for
	// a short JobTimeout).
	slotWait time.Duration
	// backfillProgress: WorkerDeps.BackfillProgress.
	backfillProgress func()
}

// deliverArgs is a deliver job's args as the worker sees them: the
// service.DeliverArgs that were inserted (the same JSON, the same kind),
// and the wait before the next attempt that Finish decided for a retrying
// execution. River hands Work and NextRetry the same *Job, and NextRetry
// sees nothing else of the attempt, so Work leaves the delay there.
type deliverArgs struct {
	service.DeliverArgs

	retryIn time.Duration
}

var _ river.Worker[deliverArgs] = (*DeliverWorker)(nil)

func newDeliverWorker(deps WorkerDeps, cfg RiverConfig, slots, bulkSlots sendSlots) *DeliverWorker {
	return &DeliverWorker{
		deliveries: deps.Deliveries, sender: deps.Sender, logger: deps.Logger, metrics: deps.Metrics, clock: deps.Clock,
		timeout: cfg.JobTimeout, queuePoll: cfg.QueueWaitPoll, slots: slots, slotWait: min(slotWaitMax, cfg.JobTimeout/4),
		backfillProgress: deps.BackfillProgress, bulkSlots: bulkSlots, lanes: deps.Lanes,
	}
}

// slotsFor returns the send slots of queue's lane.
func (w *DeliverWorker) slotsFor(queue string) sendSlots {
	if service.LaneQueue(queue) == service.QueueDeliverBulk {
		return w.bulkSlots
	}
	return w.slots
}

// laneFor returns how a batch's execution to endpoint continues (its
// retry): in the batch's lane, or in the bulk lane when the batch's is the
// main lane and the endpoint is slow now (service.Lanes.Slow), as its new
// fires are.
func (w *DeliverWorker) laneFor(h *service.HandOff, endpoint string) *service.HandOff {
	if h == nil || service.LaneQueue(h.Queue) == service.QueueDeliverBulk || !w.lanes.Slow(endpoint) {
		return h
	}
	return &service.HandOff{Priority: h.Priority, Queue: service.QueueDeliverBulk}
}

// Timeout bounds a job: the sender enforces each endpoint's own timeout
// inside it.
func (w *DeliverWorker) Timeout(*river.Job[deliverArgs]) time.Duration { return w.timeout }

// NextRetry schedules a retry after the delay Finish decided (the task's
// backoff or the receiver's Retry-After; service.RetryPolicy.Delay);
// without one, River's default policy applies (e.g. after a database
// error).
func (w *DeliverWorker) NextRetry(job *river.Job[deliverArgs]) time.Time {
	if d := job.Args.retryIn; d > 0 {
		return time.Now().Add(d)
	}
	return time.Time{}
}

// Work makes one delivery attempt: of a scheduled fire, at its slot
// (its job is due a little ahead; see service.SchedulerConfig.FetchAhead).
func (w *DeliverWorker) Work(ctx context.Context, job *river.Job[deliverArgs]) error {
	args := job.Args
	if !sleepUntil(ctx, w.clock.Local(args.ScheduledFor)) {
		return ctx.Err() // a shutdown: River runs the job again
	}
	slots := w.slotsFor(job.Queue)
	switch {
	case service.LaneQueue(job.Queue) == service.QueueDeliver && w.lanes.Slow(args.EndpointID):
		// Its endpoint turned slow since it was queued. A job cannot
		// change lanes, and one to a slow endpoint must not hold the main
		// lane's workers waiting for a slot: it sends only within its
		// share, or comes back later without using an attempt.
		if !slots.tryWithinShare(args.TenantID, args.EndpointID) {
			return river.JobSnooze(w.slotWait)
		}
	case !slots.acquire(ctx, args.TenantID, args.EndpointID, w.slotWait):
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Every send slot is busy: come back without using an attempt.
		return river.JobSnooze(time.Second)
	}
	sent := slots.holder(args.TenantID, args.EndpointID)
	defer sent()
	lease := args.Lease(job.Attempt)
	log := newAttrLogger(w.logger, slog.Int64("job_id", job.ID), slog.String("execution_id", args.ExecutionID),
		slog.String("tenant", args.TenantID))
	st := w.attempt(ctx, args.TenantID, args.ExecutionID, lease, job.ID, nil, log, sent)
	switch st.kind {
	case stepDone:
		return nil
	case stepWait:
		return river.JobSnooze(w.queueWait(job))
	case stepHold:
		// Held by a limit: the job sleeps without using an attempt or a
		// worker; the dispatcher wakes it (limits.Limits.Dispatch).
		return river.JobSnooze(service.HoldRecheck)
	case stepInterrupted:
		return ctx.Err()
	case stepRetry:
		job.Args.retryIn = st.delay
		return st.err
	case stepCancel:
		return river.JobCancel(st.err)
	default:
		return st.err
	}
}

// stepKind is what one attempt of an execution came to, for the job that
// made it.
type stepKind int

const (
	// stepDone: the execution needs nothing more from this job.
	stepDone stepKind = iota
	// stepWait: an overlap "queue" wait; nothing was sent.
	stepWait
	// stepHold: a limit holds the delivery back; nothing was sent, and
	// the dispatcher wakes the execution's job when it may start.
	stepHold
	// stepInterrupted: a shutdown cut the attempt short; the execution
	// stays as it was (running, if it was sent) for the job's re-run.
	stepInterrupted
	// stepRetry: the execution is retrying after delay (err describes the
	// failure).
	stepRetry
	// stepCancel: the execution failed for good or was cancelled (err
	// says why).
	stepCancel
	// stepError: Begin or Finish could not be recorded (err); the
	// execution is as it was before the failed call.
	stepError
)

type step struct {
	kind  stepKind
	delay time.Duration
	err   error
}

// attempt makes one delivery attempt of an execution under lease: Begin,
// send, Classify, Finish. handOff is set when a batch job makes it (see
// service.Outcome.HandOff). sent is called once the request is over,
// before its outcome is recorded: it gives the send slot back, so that a
// slot bounds webhooks in flight, and recording (batched: its statement
// waits for its turn) does not hold a slot the next send could use.
func (w *DeliverWorker) attempt(ctx context.Context, tenant, executionID string, lease int, jobID int64, handOff *service.HandOff,
	log attrLogger, sent func(),
) step {
	d, err := w.deliveries.BeginJob(ctx, tenant, executionID, lease, jobID)
	switch {
	case err != nil && stopping(ctx):
		return step{kind: stepInterrupted}
	case errors.Is(err, service.ErrNotFound):
		log.warn(ctx, "deliver job of a missing execution; nothing to do", slog.Int("lease", lease))
		return step{kind: stepDone}
	case err != nil:
		return step{kind: stepError, err: fmt.Errorf("begin delivery of execution %s: %w", executionID, err)}
	}
	if d.Missed {
		w.metrics.MissedSlots.Inc()
	}
	switch d.Action {
	case service.ActionDone:
		log.debug(ctx, "nothing to deliver", slog.Int("lease", lease), slog.String("state", d.State), slog.String("reason", d.Reason))
		return step{kind: stepDone}
	case service.ActionWait:
		return step{kind: stepWait}
	case service.ActionHold:
		if d.Throttled {
			w.metrics.Throttled.WithLabelValues(d.Limit).Inc()
			log.debug(ctx, "delivery held back by a limit", slog.String("limit", d.Limit))
		}
		return step{kind: stepHold}
	}

	log = log.with(slog.String("task_id", d.TaskID), slog.Int("attempt", d.Attempt))
	if d.FiringLateness != nil {
		w.metrics.FiringLateness.Observe(d.FiringLateness.Seconds())
	}
	if d.Attempt == 1 && !d.Resumed {
		if d.Trigger != service.TriggerSchedule {
			w.metrics.Fires.WithLabelValues(d.Trigger).Inc() // the scheduler counts its own fires
		}
		if d.WorkflowRunID != "" { // from its rule met (or its slot, for a root) to its start
			ready := d.CreatedAt
			if d.ScheduledFor.After(ready) {
				ready = d.ScheduledFor
			}
			w.metrics.NodeWait.Observe(max(time.Since(ready), 0).Seconds())
		}
	}
	if d.Resumed {
		log.info(ctx, "resuming an interrupted delivery")
	}
	req := Request{
		Method: d.Method, URL: d.URL, Headers: d.Headers, Body: d.Payload, Timeout: d.Timeout,
		ExecutionID: d.ExecutionID, TaskID: d.TaskID, ScheduledFor: d.ScheduledFor, Round: d.Round, Attempt: d.Attempt, Keys: d.Keys,
		WorkflowID: d.WorkflowID, WorkflowRunID: d.WorkflowRunID, Node: d.Node, ShardIndex: d.Shard, ShardCount: d.ShardCount,
		EventID: d.EventID,
		// A node in response mode: its JSON answer is its output.
		ReadBody: d.WorkflowRunID != "" && d.Callback == nil,
	}
	if d.Callback != nil {
		// The token's hash and the attempt's deadline are stored before
		// the request leaves: the receiver may complete it at once.
		token, err := w.deliveries.PrepareCallback(ctx, d)
		switch {
		case err != nil && stopping(ctx):
			return step{kind: stepInterrupted}
		case errors.Is(err, service.ErrConflict) && !errors.Is(err, service.ErrTryAgain):
			return step{kind: stepDone}
		case err != nil:
			return step{kind: stepError, err: fmt.Errorf("prepare callback of execution %s: %w", executionID, err)}
		}
		req.CallbackToken, req.HeartbeatTimeout = token, d.Callback.HeartbeatTimeout
	}
	w.metrics.AddDeliveriesInFlight(1)
	sending := w.lanes.Sending(d.EndpointID)
	res := w.sender.Send(ctx, req)
	sending.Done(res.Latency)
	w.metrics.AddDeliveriesInFlight(-1)
	sent()
	remoteCancel := cancelledOnRequest(ctx)
	if res.Err != nil && stopping(ctx) {
		// Not a failure of the receiver: leave the execution running for
		// the re-run River makes after the interrupted job.
		log.info(ctx, "delivery interrupted by shutdown; it will be resumed with the same idempotency key")
		return step{kind: stepInterrupted}
	}

	class := Classify(res, time.Now())
	w.metrics.AttemptDuration.Observe(res.Latency.Seconds())
	if d.Callback != nil && class.Outcome == service.OutcomeSucceeded {
		return w.accept(ctx, d, res, remoteCancel, log)
	}
	out := outcome(res, class, d, w.timeout)
	out.HandOff = w.laneFor(handOff, d.EndpointID)
	if remoteCancel && class.Outcome != service.OutcomeSucceeded {
		out.CutByCancel = true
		if res.Err != nil {
			out.Error, out.ErrorClass = "the attempt was cut short by a cancel", ErrorClassCanceled
		}
	}
	rctx, cancel := recordContext(ctx)
	defer cancel()
	// Finish also gives back the attempt's place under the limits (its
	// permit), in the transaction that records the outcome.
	fin, err := w.deliveries.Finish(rctx, tenant, executionID, d.Lease, out)
	w.metrics.Attempts.WithLabelValues(attemptOutcome(class, fin, err), class.ErrorClass).Inc()
	if errors.Is(err, service.ErrConflict) && !errors.Is(err, service.ErrTryAgain) {
		log.warn(ctx, "attempt outcome not recorded: a newer run owns the execution", slog.Int("status_code", res.StatusCode),
			slog.String("error_class", class.ErrorClass))
		return step{kind: stepDone}
	}
	if err != nil {
		// The execution stays running; a re-run of the job resumes it.
		return step{kind: stepError, err: fmt.Errorf("record attempt %d of execution %s: %w", d.Attempt, d.ExecutionID, err)}
	}

	if d.Trigger == service.TriggerBackfill && w.backfillProgress != nil {
		w.backfillProgress()
	}
	log = log.with(slog.String("state", fin.State), slog.Int("status_code", res.StatusCode),
		slog.Int64("latency_ms", res.Latency.Milliseconds()))
	if fin.State == service.ExecRetrying {
		w.metrics.RetriesScheduled.Inc()
	}
	switch fin.State {
	case service.ExecSucceeded:
		// Debug: at thousands a second an info record per delivery would
		// be most of the log (and of its cost); the execution row and
		// the metrics have it.
		log.debug(ctx, "delivered")
		return step{kind: stepDone}
	case service.ExecRetrying:
		log.info(ctx, "delivery attempt failed; retrying", slog.String("error_class", class.ErrorClass),
			slog.String("error", out.Error), slog.Int64("retry_in_ms", fin.RetryDelay.Milliseconds()))
		return step{
			kind: stepRetry, delay: fin.RetryDelay,
			err: fmt.Errorf("attempt %d: %s; retrying in %s", d.Attempt, out.Error, fin.RetryDelay),
		}
	default:
		log.warn(ctx, "delivery failed", slog.String("error_class", class.ErrorClass), slog.String("error", out.Error),
			slog.Bool("task_paused", fin.TaskPaused), slog.Bool("alert_queued", fin.AlertQueued))
		return step{kind: stepCancel, err: fmt.Errorf("attempt %d: execution %s: %s", d.Attempt, fin.State, out.Error)}
	}
}

// accept records a 2xx of an attempt in callback completion mode: the
// execution waits for its callback, which no job and no worker carries
// (the callback sweeper watches its deadlines), so the job ends here.
func (w *DeliverWorker) accept(ctx context.Context, d service.Delivery, res Result, remoteCancel bool, log attrLogger) step {
	rctx, cancel := recordContext(ctx)
	defer cancel()
	state, err := w.deliveries.Accept(rctx, d, res.StatusCode, res.Latency)
	if err != nil {
		// The execution stays running; a re-run of the job resumes it.
		return step{kind: stepError, err: fmt.Errorf("accept attempt %d of execution %s: %w", d.Attempt, d.ExecutionID, err)}
	}
	switch state {
	case service.ExecRunning:
		w.metrics.Attempts.WithLabelValues(service.OutcomeSucceeded.String(), "").Inc()
		w.metrics.CallbacksAccepted.Inc()
		log.debug(ctx, "accepted; waiting for the callback", slog.Int("status_code", res.StatusCode))
	case "":
		log.debug(ctx, "accepted after the attempt was completed", slog.Int("status_code", res.StatusCode))
	default: // counted by service (ax_executions_finished_total)
		log.info(ctx, "accepted attempt cut short by a cancel", slog.String("state", state), slog.Bool("cancel", remoteCancel))
	}
	return step{kind: stepDone}
}

// attemptOutcome is the outcome label of ax_delivery_attempts_total: what
// followed the attempt — success; retry when another attempt was
// scheduled; permanent when the execution ended without success (a
// permanent error, or no attempt left). When the outcome was not recorded
// (err), the classification's.
func attemptOutcome(c Class, fin service.Finished, err error) string {
	switch {
	case c.Outcome == service.OutcomeSucceeded || err != nil:
		return c.Outcome.String()
	case fin.State == service.ExecRetrying:
		return service.OutcomeRetry.String()
	}
	return service.OutcomePermanent.String()
}

// outcome translates one attempt's result for the service, which decides
// what it does to the execution (service.Deliveries.Finish); jobTimeout is
// the job's timeout (AX_JOB_TIMEOUT).
func outcome(res Result, c Class, d service.Delivery, jobTimeout time.Duration) service.Outcome {
	out := service.Outcome{
		StatusCode: res.StatusCode, Latency: res.Latency, ErrorClass: c.ErrorClass, Excerpt: res.Excerpt,
		RetryAfter: c.RetryAfter, DisableEndpoint: c.DisableEndpoint, EndpointID: d.EndpointID,
		WorkflowRun: d.WorkflowRunID != "",
	}
	out.Kind = c.Outcome
	if out.Kind != service.OutcomeSucceeded {
		out.Error = failureText(res, c, d.Timeout, jobTimeout)
		return out
	}
	if d.WorkflowRunID != "" && d.Callback == nil { // the request read the body (Request.ReadBody)
		if res.BodyErr != nil {
			out.NoOutput = "the response body could not be read whole"
		} else {
			out.Output, out.NoOutput = service.ResponseOutput(res.Body, res.BodyTooLarge)
		}
	}
	return out
}

// failureText describes a failed attempt for the timeline and the logs;
// timeout is the attempt's own, jobTimeout the job's. Transport errors lose
// their URL wrapper: a URL may carry a token.
func failureText(res Result, c Class, timeout, jobTimeout time.Duration) string {
	if res.Err == nil {
		text := fmt.Sprintf("HTTP %d", res.StatusCode)
		if st := http.StatusText(res.StatusCode); st != "" {
			text += " " + st
		}
		if c.ErrorClass == ErrorClassHTTP3xx {
			text += " (redirects are never followed; point the endpoint at the final URL)"
		}
		return text
	}
	switch c.ErrorClass {
	case ErrorClassTimeout:
		return fmt.Sprintf("no response within %s", timeout)
	case ErrorClassJobTimeout:
		return fmt.Sprintf("cut by the job timeout (AX_JOB_TIMEOUT %s) before the endpoint answered", jobTimeout)
	}
	err := res.Err
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return err.Error()
}

// queueWait is the snooze of an overlap "queue" wait: QueueWaitPoll,
// doubling with each snooze up to 16×.
func (w *DeliverWorker) queueWait(job *river.Job[deliverArgs]) time.Duration {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(job.Metadata, &meta) // no metadata: no snoozes yet
	return w.queuePoll << min(max(meta.Snoozes, 0), queueWaitPollGrowth)
}
