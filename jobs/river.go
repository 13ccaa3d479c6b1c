package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// RiverConfig defaults. See RiverConfig.
const (
	DeliverWorkersDefault = 400
	AlertWorkersDefault   = 10
	// FetchCooldownDefault and FetchPollIntervalDefault: a due job is
	// picked up within about the poll interval (River polls each queue
	// for due jobs, and a NOTIFY of an insert wakes it within the
	// cooldown); a fire's job is due that much ahead of its slot
	// (FetchAhead), so the poll costs idle queries, not lateness.
	FetchCooldownDefault     = 10 * time.Millisecond
	FetchPollIntervalDefault = 100 * time.Millisecond
	// BulkFetchPollIntervalDefault: the deliver queues' polls are most of
	// an idle replica's queries; the bulk lane's two queues poll less often
	// than the main lane's, and their fires are due that much earlier
	// instead (BulkFetchAhead).
	BulkFetchPollIntervalDefault = 250 * time.Millisecond
	// JobTimeoutDefault is the largest endpoint timeout plus a margin for
	// the two short transactions around the HTTP call.
	JobTimeoutDefault = service.TimeoutMax + 30*time.Second
	// RescueStuckJobsAfterDefault is how long a job may stay running before
	// River's rescuer retries it (a crashed process): a few minutes, not
	// River's hour. It must be at least the JobTimeout.
	RescueStuckJobsAfterDefault = 6 * time.Minute
	SoftStopTimeoutDefault      = 20 * time.Second
	QueueWaitPollDefault        = time.Second
	// SlotShareDefault: a tenant's share of a lane's send slots, in
	// percent (RiverConfig.SlotShare).
	SlotShareDefault = 50

	// alertPollInterval is the alert queue's poll: only retries depend on it.
	alertPollInterval = time.Second

	// queueWaitPollGrowth bounds how far the overlap "queue" wait backs
	// off: up to QueueWaitPoll × 16.
	queueWaitPollGrowth = 4
)

// RiverConfig configures the working River client. Zero fields take the
// documented defaults (WithDefaults).
type RiverConfig struct {
	// ClientID is the River client's ID, which River records in the
	// attempted_by of every job it fetches: the replica's River client ID
	// (service.Replicas), unique per process start. Empty: River's default
	// (host name and start time).
	ClientID string
	// DeliverWorkers is the deliver queue's concurrency per process, and
	// the number of webhooks one process sends at once. Default 400.
	DeliverWorkers int
	// BulkWorkers is the bulk lane's concurrency per process
	// (service.QueueDeliverBulk: tenants' bursts, slow endpoints,
	// backfills), with as many send slots of its own. Default: DeliverWorkers.
	BulkWorkers int
	// SlotShare is a tenant's share of each lane's send slots, in percent
	// (an endpoint's is half of it): while a tenant or an endpoint holds
	// more than its share, deliveries of others within theirs may use the
	// lane's reserve of a quarter more slots instead of waiting for its
	// sends to end (sendSlots). A tenant alone still uses every slot.
	// Default 50.
	SlotShare int
	// AlertWorkers is the alert queue's concurrency per process. Default 10.
	AlertWorkers int
	// FetchCooldown is the shortest time between two fetches of a queue,
	// and the throttle of River's insert notifications. Default 10 ms.
	FetchCooldown time.Duration
	// FetchPollInterval is how often the deliver queue polls for due jobs.
	// Fires are not late by it (FetchAhead); retries and waits that come
	// due are picked up within it. Default 100 ms. The alert queue polls
	// every second (or this, if longer).
	FetchPollInterval time.Duration
	// BulkFetchPollInterval is how often the bulk lane's queues poll for
	// due jobs: its fires are due BulkFetchAhead before their slot, so
	// this costs them no lateness; its retries are picked up within it.
	// Default: BulkFetchPollIntervalDefault, or FetchPollInterval if longer.
	BulkFetchPollInterval time.Duration
	// JobTimeout cancels a job's context; keep it above the largest
	// endpoint timeout. Default service.TimeoutMax + 30 s.
	JobTimeout time.Duration
	// RescueStuckJobsAfter is how long a job may stay running before it is
	// retried as stuck (its process died): a delivery cut by a crash is
	// resumed this long after it started, plus up to River's 30 s rescuer
	// interval. At least JobTimeout. Default 6 min.
	RescueStuckJobsAfter time.Duration
	// SoftStopTimeout is how long Stop lets running deliveries finish
	// before cancelling them; cancelled ones are resumed by the next run
	// with the same idempotency key. Keep it below the pod's termination
	// grace period. Default 20 s.
	SoftStopTimeout time.Duration
	// QueueWaitPoll is how often an execution of an overlap_policy "queue"
	// task checks whether the previous one finished; it doubles per check
	// up to 16×. Default 1 s.
	QueueWaitPoll time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c RiverConfig) WithDefaults() RiverConfig {
	setDefault(&c.DeliverWorkers, DeliverWorkersDefault)
	setDefault(&c.AlertWorkers, AlertWorkersDefault)
	setDefault(&c.BulkWorkers, c.DeliverWorkers)
	setDefault(&c.SlotShare, SlotShareDefault)
	setDefault(&c.FetchCooldown, FetchCooldownDefault)
	setDefault(&c.FetchPollInterval, FetchPollIntervalDefault)
	setDefault(&c.BulkFetchPollInterval, max(BulkFetchPollIntervalDefault, c.FetchPollInterval))
	setDefault(&c.JobTimeout, JobTimeoutDefault)
	setDefault(&c.RescueStuckJobsAfter, max(RescueStuckJobsAfterDefault, c.JobTimeout))
	setDefault(&c.SoftStopTimeout, SoftStopTimeoutDefault)
	setDefault(&c.QueueWaitPoll, QueueWaitPollDefault)
	return c
}

// fetchAheadMargin is what FetchAhead adds to the deliver queue's poll
// interval and fetch cooldown: the fetch itself and handing the job to a
// worker, on a busy machine.
const fetchAheadMargin = 50 * time.Millisecond

// fetchAheadMax bounds FetchAhead: a job waits in a worker for its slot,
// and with a poll slower than about a second precision is not the point.
const fetchAheadMax = time.Second

// FetchAhead is how long before its slot a fire's deliver job should be
// due (service.SchedulerConfig.FetchAhead) for River to hand it to a
// worker before the slot: the deliver queue's poll interval and fetch
// cooldown, plus a margin; at most a second.
func (c RiverConfig) FetchAhead() time.Duration {
	c = c.WithDefaults()
	return min(c.FetchPollInterval+c.FetchCooldown+fetchAheadMargin, fetchAheadMax)
}

// BulkFetchAhead is FetchAhead for the bulk lane's fires, from its
// queues' poll interval (service.SchedulerConfig.BulkFetchAhead).
func (c RiverConfig) BulkFetchAhead() time.Duration {
	c = c.WithDefaults()
	return min(c.BulkFetchPollInterval+c.FetchCooldown+fetchAheadMargin, fetchAheadMax)
}

func (c RiverConfig) validate() error {
	switch {
	case c.DeliverWorkers < 1 || c.DeliverWorkers > 10_000, c.AlertWorkers < 1 || c.AlertWorkers > 10_000,
		c.BulkWorkers < 1 || c.BulkWorkers > 10_000:
		return errors.New("DeliverWorkers, BulkWorkers and AlertWorkers must be 1..10000")
	case c.SlotShare < 1 || c.SlotShare > 100:
		return fmt.Errorf("SlotShare %d must be 1..100 (percent)", c.SlotShare)
	case c.FetchCooldown < time.Millisecond:
		return errors.New("FetchCooldown must be at least 1ms")
	case c.FetchPollInterval < c.FetchCooldown:
		return fmt.Errorf("FetchPollInterval %s must be at least FetchCooldown %s", c.FetchPollInterval, c.FetchCooldown)
	case c.JobTimeout <= 0:
		return errors.New("JobTimeout must be positive")
	case c.RescueStuckJobsAfter < c.JobTimeout:
		return fmt.Errorf("RescueStuckJobsAfter %s must be at least JobTimeout %s", c.RescueStuckJobsAfter, c.JobTimeout)
	case c.SoftStopTimeout < 0, c.QueueWaitPoll < 0:
		return errors.New("SoftStopTimeout and QueueWaitPoll must not be negative")
	}
	return nil
}

// WorkerDeps are what the deliver and alert workers use.
type WorkerDeps struct {
	// Deliveries runs the execution state machine. Required.
	Deliveries *service.Deliveries
	// Sender sends webhooks and alerts; its UserAgent is "ax/<version>".
	// Required.
	Sender *Sender
	// Logger receives the workers' logs; River's own go there at warn and
	// above. Default: discard.
	Logger *slog.Logger
	// Metrics records deliveries. Default: metrics on a private registry.
	Metrics *metrics.Metrics
	// Clock is the database's clock, which a worker waiting for a slot
	// waits by (the scheduler loop keeps it: service.SchedulerConfig.Clock).
	// Default: this process's clock.
	Clock *service.DBClock
	// Lanes learns the endpoints' latencies from the attempts (the
	// scheduler's lanes: service.SchedulerConfig.Lanes). Optional.
	Lanes *service.Lanes
	// BackfillProgress, when set, is called after an attempt of a backfill
	// execution is recorded, so that the backfill's next slots are created
	// at once (service.Backfills.Wake). It must not block.
	BackfillProgress func()
	// Work tracks the jobs being worked (the heartbeat loop releases the ones
	// River shows running that are not). Default: a private tracker.
	Work *WorkTracker
	// Workflows, when set, serves the workflow alert worker.
	Workflows *service.Workflows
	// PublicURL is where ax's API is reached (AX_PUBLIC_URL): alerts in
	// the slack format link to the execution there.
	PublicURL string
	// Events, when set, is wired to the deliver worker and the client, to
	// make the first attempt of events' fires in this process
	// (EventRunner).
	Events *EventRunner
}

// NewRiverClient returns the River client that works ax's queues, on the
// database of enq: deliver (DeliverWorkers) and alert (AlertWorkers).
// Start it after migrations with client.Start(ctx); on shutdown, after the
// HTTP server, call client.Stop(ctx): it stops fetching, lets running
// deliveries finish for SoftStopTimeout, then cancels them (they are
// resumed by the next run).
func NewRiverClient(enq *service.Enqueuer, cfg RiverConfig, deps WorkerDeps) (*service.RiverClient, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("river config: %w", err)
	}
	if deps.Deliveries == nil || deps.Sender == nil {
		return nil, errors.New("river: WorkerDeps needs Deliveries and Sender")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Metrics == nil {
		deps.Metrics = metrics.New(nil)
	}
	if deps.Work == nil {
		deps.Work = NewWorkTracker()
	}
	workers := river.NewWorkers()
	one := newDeliverWorker(deps, cfg, newSendSlots(cfg.DeliverWorkers, cfg.SlotShare),
		newSendSlots(cfg.BulkWorkers, cfg.SlotShare))
	river.AddWorker(workers, one)
	river.AddWorker(workers, newDeliverBatchWorker(one))
	river.AddWorker(workers, newAlertWorker(deps, cfg))
	if deps.Workflows != nil {
		river.AddWorker(workers, &WorkflowAlertWorker{
			workflows: deps.Workflows, sender: deps.Sender, logger: deps.Logger,
			timeout: cfg.JobTimeout, publicURL: deps.PublicURL,
		})
		river.AddWorker(workers, &WaitLookupWorker{workflows: deps.Workflows})
	}
	queue := func(n int, poll time.Duration) river.QueueConfig {
		return river.QueueConfig{MaxWorkers: n, FetchCooldown: cfg.FetchCooldown, FetchPollInterval: poll}
	}
	client, err := enq.Workers(&river.Config{
		ID:                   cfg.ClientID,
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		SoftStopTimeout:      cfg.SoftStopTimeout,
		// River logs every retry at info; the workers log deliveries.
		Logger:       slog.New(minLevel{min: slog.LevelWarn, Handler: deps.Logger.Handler()}),
		ErrorHandler: panicLogger{logger: deps.Logger},
		Queues: map[string]river.QueueConfig{
			service.QueueDeliver: queue(cfg.DeliverWorkers, cfg.FetchPollInterval),
			// The main lane's batches share its send slots (DeliverWorkers).
			service.QueueDeliverBatch: queue(service.DeliverBatchWorkers(cfg.DeliverWorkers), cfg.FetchPollInterval),
			service.QueueDeliverBulk:  queue(cfg.BulkWorkers, cfg.BulkFetchPollInterval),
			// The bulk lane's batches share its send slots (BulkWorkers).
			service.QueueDeliverBulkBatch: queue(service.DeliverBatchWorkers(cfg.BulkWorkers), cfg.BulkFetchPollInterval),
			// Alerts are not due at an instant: new ones wake the queue by
			// NOTIFY, and retries can wait for a slow poll.
			service.QueueAlert: queue(cfg.AlertWorkers, max(cfg.FetchPollInterval, alertPollInterval)),
		},
		Workers:    workers,
		Middleware: []rivertype.Middleware{deps.Work},
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	if deps.Events != nil {
		deps.Events.wire(one, enq, deps.Work, client.ID(), cfg)
	}
	return client, nil
}

// minLevel drops records below min.
type minLevel struct {
	min slog.Level
	slog.Handler
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{min: h.min, Handler: h.Handler.WithAttrs(attrs)}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{min: h.min, Handler: h.Handler.WithGroup(name)}
}

// panicLogger logs worker panics (River retries the job; a delivery cut
// by a panic is resumed like one cut by a crash).
type panicLogger struct{ logger *slog.Logger }

func (p panicLogger) HandleError(context.Context, *rivertype.JobRow, error) *river.ErrorHandlerResult {
	return nil
}

func (p panicLogger) HandlePanic(ctx context.Context, job *rivertype.JobRow, v any, trace string) *river.ErrorHandlerResult {
	p.logger.ErrorContext(ctx, "worker panicked", "job_id", job.ID, "job_kind", job.Kind, "attempt", job.Attempt,
		"panic", fmt.Sprint(v), "trace", trace)
	return nil
}

// stopping reports whether ctx ended because the River client is stopping
// (not a timeout, not a cancel of the job).
func stopping(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && !cancelledOnRequest(ctx)
}

// errCancelRequested ends the context of one execution's attempt in a
// batch whose execution got a cancel request (DeliverBatchWorker).
var errCancelRequested = errors.New("the execution's cancel was requested")

// cancelledOnRequest reports whether ctx ended because a cancel of the
// execution was requested: River cancelled the job, or a batch cancelled
// the attempt.
func cancelledOnRequest(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, river.ErrJobCancelledRemotely) || errors.Is(cause, errCancelRequested)
}

// recordTimeout bounds recording an outcome after the HTTP call, on a
// context that survives the job's cancellation: an answer that arrived is
// recorded even during a shutdown.
const recordTimeout = 15 * time.Second

func recordContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
}
