package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/batch"
)

// EventRunner makes the first attempt of an event's fires in this
// process as soon as the event commits (service.FireRunner): the event's
// transaction claims their deliver jobs for this process's River client
// (service.Enqueuer.Claim: running, attempt 1, as River's fetch would),
// and the runner works each as the DeliverWorker would (a send slot,
// Begin, send, Finish), under the job's lease, then ends the job. River's
// fetch — a notification, the queue's fetch cooldown, the fetch's own
// commit — was most of the time between an event's answer and its
// webhook.
//
// The claimed job stays the durable record, and River never runs it while
// the runner does (it is running). What the attempt leaves to a job — a
// retry, the rest of a batch's hand-off cases — continues as a batch
// member's does (service.HandOff), and the claimed job is completed. What
// it did not do — a limit's hold, an overlap wait, no send slot, a slow
// endpoint, a shutdown that interrupted it, a Begin or Finish that could
// not be recorded — is released: the job goes back to River as it was
// before the claim, and River's run of it, under the same lease, decides
// again (Begin resumes an execution the attempt left running). A process
// that dies leaves its claimed jobs running under its client, resumed
// with its fetched ones (Replicas); one whose end was not recorded is
// released as stranded (WorkTracker).
type EventRunner struct {
	// set by NewRiverClient (wire)
	one  *DeliverWorker
	enq  *service.Enqueuer
	work *WorkTracker
	// client is the River client ID the jobs are claimed for.
	client string
	// most bounds the attempts in flight: past it, events leave their
	// fires to River.
	most     int
	softStop time.Duration
	// ends groups the jobs' ends of concurrent attempts into one
	// statement.
	ends *batch.Batcher[jobEnd, struct{}]

	// inflight are the attempts under way, cut short when their cancel
	// is requested (CancelLoop).
	inflight *inflight

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	running bool
	working int
	wg      sync.WaitGroup
}

var _ service.FireRunner = (*EventRunner)(nil)

// NewEventRunner returns a runner to pass to NewRiverClient
// (WorkerDeps.Events), which wires it to its deliver worker, and to
// service.NewEventsRunBy. It takes fires between Start and Stop.
func NewEventRunner() *EventRunner { return &EventRunner{inflight: newInflight()} }

// LoopEventCancels is the loop name of the EventRunner's watch for
// cancel requests.
const LoopEventCancels = "event_cancels"

// CancelLoop returns the loop that cuts short the runner's attempts whose
// execution's cancel was requested through the API (River cancels a job
// its own worker runs; these it does not run), within
// cancelWatchInterval, as a batch does for its members. It reads nothing
// while no attempt is in flight.
func (r *EventRunner) CancelLoop() Loop {
	return Loop{Name: LoopEventCancels, Every: cancelWatchInterval, Pass: func(ctx context.Context) (time.Duration, error) {
		refs := r.inflight.refs()
		if len(refs) == 0 || r.one == nil {
			return 0, nil
		}
		ids, err := r.one.deliveries.CancelRequested(ctx, refs)
		if err != nil {
			return 0, fmt.Errorf("read cancel requests of event fires in flight: %w", err)
		}
		for _, id := range ids {
			r.inflight.cancel(id)
		}
		return 0, nil
	}}
}

// wire gives the runner the deliver worker whose attempts it makes.
// client is the River client's ID, which its fetches record in
// attempted_by.
func (r *EventRunner) wire(one *DeliverWorker, enq *service.Enqueuer, work *WorkTracker, client string, cfg RiverConfig) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.one, r.enq, r.work = one, enq, work
	r.client, r.most, r.softStop = client, cfg.DeliverWorkers, cfg.SoftStopTimeout
	r.ends = batch.New(endsMax, endsFlushers, r.endJobs)
}

// jobEnd is how a claimed job ends: completed, or released to River.
type jobEnd struct {
	id        int64
	completed bool
}

// endsMax and endsFlushers bound the batched ends of claimed jobs: jobs
// per statement, statements at once.
const (
	endsMax      = 200
	endsFlushers = 1
)

// endJobs ends a batch of claimed jobs in one statement.
func (r *EventRunner) endJobs(ctx context.Context, ends []jobEnd) ([]struct{}, error) {
	var completed, released []int64
	for _, e := range ends {
		if e.completed {
			completed = append(completed, e.id)
		} else {
			released = append(released, e.id)
		}
	}
	if err := r.enq.EndClaimed(ctx, completed, released); err != nil {
		return nil, err
	}
	return make([]struct{}, len(ends)), nil
}

// Claimant implements service.FireRunner.
func (r *EventRunner) Claimant() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running || r.working >= r.most {
		return ""
	}
	return r.client
}

// Start makes the runner take fires; start it once River's client runs
// (its client ID is the one the jobs are claimed for).
func (r *EventRunner) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.one == nil || r.client == "" {
		return errors.New("event runner: not wired to a River client (WorkerDeps.Events)")
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.running = true
	return nil
}

// Stop makes the runner take no more fires, lets the attempts in flight
// finish for the soft-stop timeout (or until ctx ends), then cuts them
// short: their jobs are released, and River's next run resumes them with
// the same idempotency key.
func (r *EventRunner) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.running {
		r.mu.Unlock()
		return nil
	}
	r.running = false
	cancel := r.cancel
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	soft := time.NewTimer(r.softStop)
	defer soft.Stop()
	select {
	case <-done:
	case <-soft.C:
	case <-ctx.Done():
	}
	cancel()
	<-done
	return nil
}

// Run implements service.FireRunner: each fire's attempt runs in a
// goroutine of its own, as River's worker would run its job.
func (r *EventRunner) Run(fires []service.ClaimedFire) {
	r.mu.Lock()
	if !r.running {
		r.mu.Unlock()
		// Stopped since the claim: River runs them.
		r.end(context.Background(), nil, fires)
		return
	}
	ctx := r.ctx
	r.working += len(fires)
	r.wg.Add(len(fires))
	r.mu.Unlock()
	for _, f := range fires {
		tracked := r.work.track(f.JobID)
		go r.attempt(ctx, f, tracked)
	}
}

// attempt makes f's attempt and ends its job.
func (r *EventRunner) attempt(ctx context.Context, f service.ClaimedFire, tracked func()) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		r.working--
		r.mu.Unlock()
	}()
	defer tracked()
	ctx, cancel := context.WithTimeout(ctx, r.one.timeout)
	defer cancel()
	done := r.send(ctx, f)
	rctx, cancelRecord := recordContext(ctx)
	defer cancelRecord()
	if _, err := r.ends.Do(rctx, jobEnd{id: f.JobID, completed: done}); err != nil {
		r.one.logger.WarnContext(rctx, "event fire's job not ended; it is released as stranded", "job_id", f.JobID,
			"completed", done, "error", err.Error())
	}
}

// send makes f's attempt as the DeliverWorker would, and reports whether
// its job is done (completed) rather than left to River (released).
func (r *EventRunner) send(ctx context.Context, f service.ClaimedFire) bool {
	w := r.one
	if w.lanes.Slow(f.EndpointID) {
		return false // River's run sends it within its share of the main lane, or later
	}
	if !w.slots.acquire(ctx, f.TenantID, f.EndpointID, w.slotWait) {
		return false
	}
	sent := w.slots.holder(f.TenantID, f.EndpointID)
	defer sent()
	log := newAttrLogger(w.logger, slog.Int64("job_id", f.JobID), slog.String("execution_id", f.ExecutionID),
		slog.String("tenant", f.TenantID))
	// As a batch member: a retry continues in a job of its own.
	handOff := &service.HandOff{Priority: f.Priority, Queue: service.QueueDeliver}
	ref := service.ExecutionRef{TenantID: f.TenantID, ExecutionID: f.ExecutionID, EndpointID: f.EndpointID}
	actx := r.inflight.add(ctx, ref)
	st := w.attempt(actx, f.TenantID, f.ExecutionID, f.Lease, f.JobID, handOff, log, sent)
	r.inflight.remove(ref)
	switch st.kind {
	case stepDone, stepRetry, stepCancel:
		return true
	case stepError:
		log.warn(ctx, "event fire's attempt not recorded; River runs its job again", slog.String("error", st.err.Error()))
	}
	return false
}

// end completes the jobs of completed and releases those of released,
// on a context that survives a shutdown; a failure leaves them running,
// released later as stranded.
func (r *EventRunner) end(ctx context.Context, completed, released []service.ClaimedFire) {
	rctx, cancel := recordContext(ctx)
	defer cancel()
	ids := func(fs []service.ClaimedFire) []int64 {
		out := make([]int64, len(fs))
		for i, f := range fs {
			out[i] = f.JobID
		}
		return out
	}
	if err := r.enq.EndClaimed(rctx, ids(completed), ids(released)); err != nil {
		r.one.logger.WarnContext(rctx, "event fires' jobs not ended; they are released as stranded",
			"completed", len(completed), "released", len(released), "error", err.Error())
	}
}
