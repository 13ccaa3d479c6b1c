package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/lane"
	"github.com/axhq/ax/service/queue"
)

// River's queues (service/queue), as service's files and callers name
// them.
const (
	QueueDeliver          = queue.Deliver
	QueueDeliverBatch     = queue.DeliverBatch
	QueueDeliverBulk      = queue.DeliverBulk
	QueueDeliverBulkBatch = queue.DeliverBulkBatch
	QueueAlert            = queue.Alert
	// NearTermWindow is how far ahead a job is written available
	// (queue.NearTermWindow).
	NearTermWindow = queue.NearTermWindow
)

// handOffMaxAttempts is the River attempts of a job that continues an
// execution from a batch: the worker enforces the task's own budget.
const handOffMaxAttempts = MaxAttemptsMax + queue.AttemptsMargin

// The River jobs' args (service/job), the lanes (service/lane) and
// River's client (service/queue), as service's files and callers name
// them.
type (
	// DeliverArgs is the River job that delivers one execution.
	DeliverArgs = job.DeliverArgs
	// ExecutionRef names an execution in a job's args.
	ExecutionRef = job.ExecutionRef
	// DeliverBatchArgs is the River job that makes the first attempt of
	// several executions.
	DeliverBatchArgs = job.DeliverBatchArgs
	// AlertArgs is the River job that sends an execution's alert.
	AlertArgs = job.AlertArgs
	// Lanes decides which deliver queue (lane) a fire's job goes to. A
	// nil *Lanes puts everything in the main lane.
	Lanes = lane.Picker
	// RiverClient is a River client on ax's database.
	RiverClient = queue.Client
	// firedExecution is an execution the scheduler inserted (queue.Fire).
	firedExecution = queue.Fire
)

// DeliverBatchWorkers is how many batch jobs a process with sendSlots
// send slots works at once (queue.BatchWorkers).
func DeliverBatchWorkers(sendSlots int) int { return queue.BatchWorkers(sendSlots) }

// LaneQueue is the queue of the single deliveries of the lane whose job
// ran in q (queue.Singles).
func LaneQueue(q string) string { return queue.Singles(q) }

// Enqueuer inserts River jobs inside service transactions
// (queue.Enqueuer); jobs/ runs the working client (Enqueuer.Workers).
type Enqueuer struct{ *queue.Enqueuer }

// NewEnqueuer returns an Enqueuer on pool; River logs through logger
// (nil: nowhere).
func NewEnqueuer(pool *db.Pool, logger *slog.Logger) (*Enqueuer, error) {
	e, err := queue.NewEnqueuer(pool, logger)
	if err != nil {
		return nil, err
	}
	return &Enqueuer{e}, nil
}

// insertMany is the Enqueuer's Enqueue, as service's files call it.
func (e *Enqueuer) insertMany(ctx context.Context, tx db.Tx, p []river.InsertManyParams) ([]*rivertype.JobInsertResult, error) {
	return e.Enqueue(ctx, tx, p)
}

// deliverInsert is queue.DeliverInsert.
func deliverInsert(tenant, executionID, endpointID string, scheduledFor time.Time, priority, maxAttempts int, now time.Time,
	ahead time.Duration, q string,
) river.InsertManyParams {
	return queue.DeliverInsert(tenant, executionID, endpointID, scheduledFor, priority, maxAttempts, now, ahead, q)
}

// fireInserts is queue.FireInserts.
func fireInserts(execs []firedExecution, now time.Time, ahead, bulkAhead time.Duration) []river.InsertManyParams {
	return queue.FireInserts(execs, now, ahead, bulkAhead)
}
