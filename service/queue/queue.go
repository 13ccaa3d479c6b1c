// Package queue is how ax writes River jobs: the deliver queues and their
// lanes, the insert parameters of a fire's deliver job and of the batches
// that share one, and the Enqueuer, the insert-only River client whose
// inserts join service's transactions (docs/architecture.md, "Delivering").
package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/lane"
)

// River queues and job kinds.
const (
	// Deliver carries webhook deliveries of one execution each.
	Deliver = "deliver"
	// DeliverBatch carries the batched first deliveries of fires
	// (job.DeliverBatchArgs). A queue of their own bounds how many batches a
	// process fetches — a burst is shared between replicas instead of being
	// held, unstarted, by the first to fetch — without bounding the single
	// deliveries (retries, hand-offs).
	DeliverBatch = "deliver_batch"
	// DeliverBulk is the deliver queue's bulk lane: fires of a
	// tenant's burst and fires to slow endpoints. It has its own River
	// workers and send slots, so that neither can take the workers of
	// everyone else's on-time fires (docs/architecture.md, "Limits and
	// fairness").
	DeliverBulk = "deliver_bulk"
	// DeliverBulkBatch carries the bulk lane's batches, bounded like
	// the main lane's (BatchWorkers of the bulk lane's send slots),
	// so that one replica does not take a whole burst it cannot start
	// soon.
	DeliverBulkBatch = "deliver_bulk_batch"
	// Alert carries failure alerts, so a flood of alerts cannot delay
	// scheduled deliveries.
	Alert = "alert"
	// AttemptsMargin is added to a task's max_attempts for River's own
	// MaxAttempts: the worker enforces the task's budget itself, and the
	// margin lets a run that was rescued after a crash reach the worker to
	// be recorded instead of being discarded by River.
	AttemptsMargin = 3
)

// deliverBatchMax is the most executions one job.DeliverBatchArgs carries,
// and deliverBatchWindow the most their slots may be apart: the job is due
// at the earliest slot and holds a River worker until the latest has been
// sent.
const (
	deliverBatchMax    = 50
	deliverBatchWindow = 20 * time.Millisecond
)

// BatchWorkers is how many batch jobs (DeliverBatch) a process
// with sendSlots send slots works at once: members for four times its
// slots, and no more, so that what a process holds beyond what it can
// start soon is bounded (another replica takes the rest of a burst; a
// replica that dies strands little). Four, not two: a batch is fetched
// ahead of its slot and holds its worker until its last member is
// recorded, about 200 ms, so 5,000 fires/s keep about 20 batches in hand,
// and the bound must not be what limits throughput.
func BatchWorkers(sendSlots int) int {
	return max(4, (4*sendSlots+deliverBatchMax-1)/deliverBatchMax)
}

// BatchMaxAttempts is a batch job's River attempts: every run after
// the first only hands its executions off, so more runs cost little and
// keep a batch from being discarded while the database is unreachable.
const BatchMaxAttempts = 25

// DeliverInsert returns the insert parameters of a scheduled fire's
// deliver job: unique per execution while one is live, due ahead before
// the slot, which its args carry with the task's endpoint.
func DeliverInsert(tenant, executionID, endpointID string, scheduledFor time.Time, priority, maxAttempts int, now time.Time,
	ahead time.Duration, queue string,
) river.InsertManyParams {
	opts := &river.InsertOpts{
		Queue:       queue,
		Priority:    priority,
		MaxAttempts: maxAttempts + AttemptsMargin,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	}
	if due := scheduledFor.Add(-ahead); due.After(now) {
		opts.ScheduledAt = due
	}
	args := job.DeliverArgs{TenantID: tenant, ExecutionID: executionID, ScheduledFor: scheduledFor.UTC(), EndpointID: endpointID}
	return river.InsertManyParams{Args: args, InsertOpts: opts}
}

// FireInserts returns the deliver jobs of executions the scheduler
// inserted: executions of the same tenant, lane and priority whose slots
// lie within deliverBatchWindow of the earliest share job.DeliverBatchArgs
// jobs of up to deliverBatchMax; one alone gets a job.DeliverArgs job. Each job is due ahead
// of its earliest slot: by ahead in the main lane, by bulkAhead in the bulk
// lane (its queues are polled less often). A batch holds one tenant's executions, so that
// the fair sharing of the deliver queues between tenants (Limits.Share)
// can tell whose it is.
func FireInserts(execs []Fire, now time.Time, ahead, bulkAhead time.Duration) []river.InsertManyParams {
	sorted := slices.Clone(execs)
	slices.SortStableFunc(sorted, func(a, b Fire) int {
		if a.Bulk != b.Bulk {
			if a.Bulk {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		if c := cmp.Compare(a.TenantID, b.TenantID); c != 0 {
			return c
		}
		return a.ScheduledFor.Compare(b.ScheduledFor)
	})
	jobs := make([]river.InsertManyParams, 0, len(sorted))
	for len(sorted) > 0 {
		first := sorted[0]
		n := 1
		for n < len(sorted) && n < deliverBatchMax && sorted[n].Priority == first.Priority && sorted[n].Bulk == first.Bulk &&
			sorted[n].TenantID == first.TenantID && sorted[n].ScheduledFor.Sub(first.ScheduledFor) < deliverBatchWindow {
			n++
		}
		chunk := sorted[:n]
		sorted = sorted[n:]
		dueAhead := ahead
		if first.Bulk {
			dueAhead = bulkAhead
		}
		if n == 1 {
			jobs = append(jobs, DeliverInsert(first.TenantID, first.ID, first.EndpointID, first.ScheduledFor, first.Priority, first.MaxAttempts, now, dueAhead,
				laneQueue(first.Bulk)))
			continue
		}
		args := job.DeliverBatchArgs{Executions: make([]job.ExecutionRef, n)}
		for i, e := range chunk {
			args.Executions[i] = job.ExecutionRef{
				TenantID: e.TenantID, ExecutionID: e.ID, ScheduledFor: e.ScheduledFor.UTC(),
				EndpointID: e.EndpointID,
			}
		}
		opts := &river.InsertOpts{Queue: batchQueue(first.Bulk), Priority: first.Priority, MaxAttempts: BatchMaxAttempts}
		if due := first.ScheduledFor.Add(-dueAhead); due.After(now) {
			opts.ScheduledAt = due
		}
		jobs = append(jobs, river.InsertManyParams{Args: args, InsertOpts: opts})
	}
	return jobs
}

// Fire is an execution the scheduler inserted, with what its deliver job
// needs.
type Fire struct {
	TenantID     string
	ID           string
	EndpointID   string
	ScheduledFor time.Time
	Priority     int
	MaxAttempts  int
	// Bulk: the job goes to the bulk lane (AssignLanes).
	Bulk bool
}

// AssignLanes sets the Bulk lane of fired executions (lane.Picker.Assign;
// a nil l puts everything in the main lane).
func AssignLanes(l *lane.Picker, fired []Fire) {
	l.Assign(len(fired), func(i int) lane.Fire {
		return lane.Fire{Tenant: fired[i].TenantID, Slot: fired[i].ScheduledFor, Endpoint: fired[i].EndpointID}
	}, func(i int, bulk bool) { fired[i].Bulk = bulk })
}

// laneQueue is the deliver queue of a lane.
func laneQueue(bulk bool) string {
	if bulk {
		return DeliverBulk
	}
	return Deliver
}

// batchQueue is the queue of a lane's batch jobs: each lane's batches have
// a queue of their own (DeliverBatch, DeliverBulkBatch).
func batchQueue(bulk bool) string {
	if bulk {
		return DeliverBulkBatch
	}
	return DeliverBatch
}

// Singles is the queue of the single deliveries (hand-offs, retries) of
// the lane whose job ran in queue: a main-lane batch's continue in
// Deliver.
func Singles(queue string) string {
	switch queue {
	case DeliverBatch:
		return Deliver
	case DeliverBulkBatch:
		return DeliverBulk
	}
	return queue
}

// HandOffInsert returns the insert parameters of the job.DeliverArgs job that
// continues an execution after a batch: unique per execution (a live or
// completed deliver job of the execution makes the insert return that job
// instead), available at at (or at once when at is zero), its leases above
// leaseBase, with maxAttempts River attempts (the worker enforces the
// task's own budget).
func HandOffInsert(ref job.ExecutionRef, leaseBase, priority, maxAttempts int, at time.Time, queue string) river.InsertManyParams {
	opts := &river.InsertOpts{
		Queue: cmp.Or(queue, Deliver), Priority: priority, MaxAttempts: maxAttempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true},
	}
	if !at.IsZero() {
		opts.ScheduledAt = at
	}
	return river.InsertManyParams{
		Args:       job.DeliverArgs{TenantID: ref.TenantID, ExecutionID: ref.ExecutionID, LeaseBase: leaseBase, EndpointID: ref.EndpointID},
		InsertOpts: opts,
	}
}

// NearTermWindow is how far ahead a scheduled job is written as available
// (its scheduled_at still holds it back): River's leader promotes
// scheduled jobs only every 5 s, so without this a fire due within 5 s
// could be up to 5 s late. River's fetch only takes an available job once
// its scheduled_at has passed, so the window may be wider than River's own
// 5 s look-ahead; it covers the scheduler's Horizon, so every job the
// scheduler writes is available and none waits for River's leader to
// promote it.
const NearTermWindow = 20 * time.Second

// nearTermAvailable is a River insert hook implementing NearTermWindow.
func nearTermAvailable(_ context.Context, p *rivertype.JobInsertParams) error {
	if p.State == rivertype.JobStateScheduled && p.ScheduledAt != nil && time.Until(*p.ScheduledAt) <= NearTermWindow {
		p.State = rivertype.JobStateAvailable
	}
	return nil
}

// InsertNotifyCooldown is the shortest time between two of the Enqueuer's
// notifications of inserts into one queue (River's client-level
// FetchCooldown throttles them), the deliver queues' fetch cooldown
// (jobs.FetchCooldownDefault). A job inserted within it after a
// notification is fetched at the next one, or at its queue's poll: with
// River's default, 100 ms, an event's fire, due at once, waited up to
// 100 ms for its fetch; the queue's fetches were not sooner for it.
const InsertNotifyCooldown = 10 * time.Millisecond

// Client is a River client on ax's database.
type Client = river.Client[db.Tx]

// Enqueuer inserts River jobs inside service transactions. It is an
// insert-only River client; jobs/ runs the working one (Enqueuer.Workers).
type Enqueuer struct {
	pool   *db.Pool
	client *Client
}

// NewEnqueuer returns an Enqueuer on pool.
//
// River logs through logger (nil: nowhere), e.g. a failed insert
// notification when the inserting transaction is cancelled.
func NewEnqueuer(pool *db.Pool, logger *slog.Logger) (*Enqueuer, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c, err := newRiverClient(pool, &river.Config{Logger: logger, FetchCooldown: InsertNotifyCooldown})
	if err != nil {
		return nil, fmt.Errorf("river insert client: %w", err)
	}
	return &Enqueuer{pool: pool, client: c}, nil
}

// Workers returns a River client on the Enqueuer's database that works
// jobs as cfg says (its queues and workers), with ax's insert hooks.
func (e *Enqueuer) Workers(cfg *river.Config) (*Client, error) {
	return newRiverClient(e.pool, cfg)
}

// newRiverClient returns a River client on pool with ax's insert hooks
// (nearTermAvailable) on top of cfg's.
func newRiverClient(pool *db.Pool, cfg *river.Config) (*Client, error) {
	c := *cfg
	c.Hooks = append(slices.Clip(cfg.Hooks), river.HookInsertBeginFunc(nearTermAvailable))
	return river.NewClient(riverpgxv5.New(pool), &c)
}

// Enqueue inserts jobs in tx.
func (e *Enqueuer) Enqueue(ctx context.Context, tx db.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	res, err := e.client.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, errs.Store(err, fmt.Sprintf("enqueue %d jobs", len(params)))
	}
	return res, nil
}

// CancelTx cancels a River job in tx: a queued job is cancelled at once; a
// running one gets a cancel request that its client acts on (cancelling
// the job's context) when tx commits. A job River no longer has is fine.
func (e *Enqueuer) CancelTx(ctx context.Context, tx db.Tx, jobID int64) error {
	if _, err := e.client.JobCancelTx(ctx, tx, jobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
		return errs.Store(err, fmt.Sprintf("cancel job %d", jobID))
	}
	return nil
}

// DeleteTx deletes a River job that is not running in tx. A job River no
// longer has is fine.
func (e *Enqueuer) DeleteTx(ctx context.Context, tx db.Tx, jobID int64) error {
	if _, err := e.client.JobDeleteTx(ctx, tx, jobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
		return errs.Store(err, fmt.Sprintf("delete job %d", jobID))
	}
	return nil
}

// RetryNowTx makes a scheduled or retryable River job available now in tx.
// A job River no longer has is fine.
func (e *Enqueuer) RetryNowTx(ctx context.Context, tx db.Tx, jobID int64) error {
	if _, err := e.client.JobRetryTx(ctx, tx, jobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
		return errs.Store(err, fmt.Sprintf("retry job %d now", jobID))
	}
	return nil
}
