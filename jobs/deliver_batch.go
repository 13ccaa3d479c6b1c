package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/service"
)

// DeliverBatchWorker makes the first attempt of the executions of a
// service.DeliverBatchArgs job, each concurrently and each exactly as the
// DeliverWorker would (Begin, send, Finish, under the job's attempt as
// lease), so that River's per-job work is paid once per batch instead of
// once per delivery. What an execution needs after that attempt continues
// in a DeliverArgs job of its own (service.Deliveries.HandOff):
//
//   - a retry: Finish inserts the job with the retrying transition;
//   - an overlap "queue" wait: a job due after the first wait;
//   - no send slot within the batch's slot wait: a job due at once;
//   - in the main lane, a member whose endpoint is slow when it comes due
//     or when its slot wait ends (service.Lanes.Slow): a job in the bulk
//     lane, due at once, as the endpoint's new fires go there;
//   - every execution of a run whose River attempt is above 1 (the batch
//     job was rescued after a crash, or its first run failed to record
//     something): a job each, whose Begin resumes, finishes or leaves
//     alone what the first run left; executions that already have a
//     deliver job keep it.
//
// A handed-off execution belongs to its job (river_job_id): Begin under
// the batch leaves it alone. A shutdown that interrupts the batch leaves
// its sent executions running; River makes the job available again with
// the same attempt, and the re-run resumes them under the same lease with
// the same idempotency keys. A cancel requested through the API for an
// execution in flight cuts its attempt short within about a second
// (cancelWatchInterval), as River's job cancel does for a single delivery.
type DeliverBatchWorker struct {
	river.WorkerDefaults[service.DeliverBatchArgs]

	one *DeliverWorker
}

var _ river.Worker[service.DeliverBatchArgs] = (*DeliverBatchWorker)(nil)

// slotWaitMax bounds how long a delivery waits for a send slot: a batch's
// execution is then handed off to a job of its own, a single delivery's
// job snoozes. The job's timeout must cover the wait and the slowest
// endpoint.
const slotWaitMax = 15 * time.Second

func newDeliverBatchWorker(one *DeliverWorker) *DeliverBatchWorker {
	return &DeliverBatchWorker{one: one}
}

// Timeout bounds a batch job like a single delivery: its sends run
// concurrently.
func (w *DeliverBatchWorker) Timeout(*river.Job[service.DeliverBatchArgs]) time.Duration {
	return w.one.timeout
}

// Work delivers the batch.
func (w *DeliverBatchWorker) Work(ctx context.Context, job *river.Job[service.DeliverBatchArgs]) error {
	refs := job.Args.Executions
	log := newAttrLogger(w.one.logger, slog.Int64("job_id", job.ID))
	// What a member needs after the batch continues in its lane's queue of
	// single deliveries.
	lane := service.LaneQueue(job.Queue)
	if job.Attempt > 1 {
		return w.handOff(ctx, log, refs, job.Attempt, job.Priority, lane, time.Time{}, "the batch job runs again (attempt %d)", job.Attempt)
	}
	lease := job.Attempt
	handOff := &service.HandOff{Priority: job.Priority, Queue: lane}
	slots := w.one.slotsFor(job.Queue)
	var (
		wg          sync.WaitGroup
		mu          sync.Mutex
		errs        []error
		interrupted bool
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if stopping(ctx) {
			interrupted = true
		} else {
			errs = append(errs, err)
		}
	}
	inflight := newInflight()
	// Members that find no send slot are handed off together (noSlot);
	// in the main lane, so are those whose endpoint is slow now, to the
	// bulk lane (toBulk), as the endpoint's next fires go there.
	var noSlot, toBulk handOffGroup
	slow := func(ref service.ExecutionRef) bool {
		return lane == service.QueueDeliver && w.one.lanes.Slow(ref.EndpointID)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		w.watchCancels(watchCtx, log, inflight)
	}()
	for _, ref := range refs {
		wg.Go(func() {
			elog := log.with(slog.String("execution_id", ref.ExecutionID), slog.String("tenant", ref.TenantID))
			if !sleepUntil(ctx, w.one.clock.Local(ref.ScheduledFor)) {
				fail(ctx.Err())
				return
			}
			if slow(ref) {
				if err := w.handOffTogether(ctx, log, &toBulk, ref, lease, job.Priority, service.QueueDeliverBulk,
					"the endpoint is slow"); err != nil {
					fail(err)
				}
				return
			}
			if !slots.acquire(ctx, ref.TenantID, ref.EndpointID, w.one.slotWait) {
				if ctx.Err() != nil {
					fail(ctx.Err())
					return
				}
				group, queue, why := &noSlot, lane, "no send slot within "+w.one.slotWait.String()
				if slow(ref) {
					group, queue, why = &toBulk, service.QueueDeliverBulk, "the endpoint is slow"
				}
				if err := w.handOffTogether(ctx, log, group, ref, lease, job.Priority, queue, why); err != nil {
					fail(err)
				}
				return
			}
			sent := slots.holder(ref.TenantID, ref.EndpointID)
			defer sent()
			actx := inflight.add(ctx, ref)
			st := w.one.attempt(actx, ref.TenantID, ref.ExecutionID, lease, job.ID, handOff, elog, sent)
			inflight.remove(ref)
			switch st.kind {
			case stepWait:
				// Recorded even when a shutdown is under way: it is what
				// the execution needs next.
				rctx, cancel := recordContext(ctx)
				defer cancel()
				wait := w.one.queuePoll
				if err := w.handOff(rctx, elog, []service.ExecutionRef{ref}, lease, job.Priority, lane, time.Now().Add(wait),
					"overlap_policy queue: waiting %s", wait); err != nil {
					fail(err)
				}
			case stepHold:
				// Held by a limit: it waits in a job of its own, which
				// the dispatcher wakes when the limit allows.
				rctx, cancel := recordContext(ctx)
				defer cancel()
				if err := w.handOff(rctx, elog, []service.ExecutionRef{ref}, lease, job.Priority, lane,
					time.Now().Add(service.HoldRecheck), "held back by a limit"); err != nil {
					fail(err)
				}
			case stepInterrupted:
				mu.Lock()
				interrupted = true
				mu.Unlock()
			case stepError:
				fail(st.err)
			}
		})
	}
	wg.Wait()
	stopWatch()
	<-watched

	switch {
	case len(errs) > 0:
		// River runs the batch again; that run hands every execution off.
		return fmt.Errorf("batch of %d executions: %w", len(refs), errors.Join(errs...))
	case interrupted:
		// River makes the job available again with the same attempt: the
		// re-run resumes what was sent, and leaves alone what was handed
		// off (Begin: the execution belongs to its own job now).
		return ctx.Err()
	}
	return nil
}

// handOff continues refs in jobs of their own (service.Deliveries.HandOff)
// and logs why.
func (w *DeliverBatchWorker) handOff(ctx context.Context, log attrLogger, refs []service.ExecutionRef, leaseBase, priority int,
	queue string, at time.Time, why string, whyArgs ...any,
) error {
	if len(refs) == 0 {
		return nil
	}
	if err := w.one.deliveries.HandOff(ctx, refs, leaseBase, priority, at, queue); err != nil {
		if stopping(ctx) {
			return ctx.Err()
		}
		return fmt.Errorf("hand off %d executions: %w", len(refs), err)
	}
	log.info(ctx, "executions continue in deliver jobs of their own", slog.Int("executions", len(refs)),
		slog.String("reason", fmt.Sprintf(why, whyArgs...)))
	return nil
}

// handOffTogether hands ref off with the others g gathers: the batch's
// members time out (or find their endpoint slow) together, and one
// transaction hands off all that are waiting, not one each — a backlog
// must not make catching up dearer.
func (w *DeliverBatchWorker) handOffTogether(ctx context.Context, log attrLogger, g *handOffGroup, ref service.ExecutionRef,
	leaseBase, priority int, queue, why string,
) error {
	if !g.add(ref) {
		return nil
	}
	var errs []error
	for refs := g.take(); len(refs) > 0; refs = g.take() {
		if err := w.handOff(ctx, log, refs, leaseBase, priority, queue, time.Time{}, "%s", why); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// handOffGroup gathers executions to hand off together (group commit):
// the first to arrive flushes, and keeps flushing what arrived meanwhile
// until nothing is left.
type handOffGroup struct {
	mu       sync.Mutex
	pending  []service.ExecutionRef
	flushing bool
}

// add queues ref and reports whether the caller must flush (take, hand
// off, until take returns nothing).
func (g *handOffGroup) add(ref service.ExecutionRef) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending = append(g.pending, ref)
	if g.flushing {
		return false
	}
	g.flushing = true
	return true
}

// take returns what is queued; when nothing is, the flush is over.
func (g *handOffGroup) take() []service.ExecutionRef {
	g.mu.Lock()
	defer g.mu.Unlock()
	refs := g.pending
	g.pending = nil
	if len(refs) == 0 {
		g.flushing = false
	}
	return refs
}

// cancelWatchInterval is how often a batch looks for cancel requests of
// its executions in flight: a single delivery's job is cancelled through
// River, but a batch job carries others.
const cancelWatchInterval = time.Second

// watchCancels cuts short the attempts of executions in flight whose
// cancel was requested through the API, until ctx ends. It reads nothing
// while every attempt ends within cancelWatchInterval.
func (w *DeliverBatchWorker) watchCancels(ctx context.Context, log attrLogger, inflight *inflight) {
	t := time.NewTicker(cancelWatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		refs := inflight.refs()
		if len(refs) == 0 {
			continue
		}
		ids, err := w.one.deliveries.CancelRequested(ctx, refs)
		if err != nil {
			if ctx.Err() == nil {
				log.warn(ctx, "could not read cancel requests of a batch's executions", slog.String("error", err.Error()))
			}
			continue
		}
		for _, id := range ids {
			inflight.cancel(id)
		}
	}
}

// inflight tracks a batch's attempts in flight, by execution id, and how
// to cut each short.
type inflight struct {
	mu       sync.Mutex
	attempts map[string]inflightAttempt
}

type inflightAttempt struct {
	ref    service.ExecutionRef
	cancel context.CancelCauseFunc
}

func newInflight() *inflight {
	return &inflight{attempts: map[string]inflightAttempt{}}
}

// add registers ref's attempt and returns its context.
func (f *inflight) add(ctx context.Context, ref service.ExecutionRef) context.Context {
	actx, cancel := context.WithCancelCause(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts[ref.ExecutionID] = inflightAttempt{ref: ref, cancel: cancel}
	return actx
}

func (f *inflight) remove(ref service.ExecutionRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.attempts[ref.ExecutionID]; ok {
		a.cancel(nil)
		delete(f.attempts, ref.ExecutionID)
	}
}

func (f *inflight) refs() []service.ExecutionRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]service.ExecutionRef, 0, len(f.attempts))
	for _, a := range f.attempts {
		out = append(out, a.ref)
	}
	return out
}

func (f *inflight) cancel(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.attempts[id]; ok {
		a.cancel(errCancelRequested)
	}
}

// sleepUntil waits until t on this process's clock (for a slot, the
// moment the database's clock reads it: DBClock.Local); false means ctx
// ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
