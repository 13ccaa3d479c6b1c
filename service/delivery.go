package service

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/batch"
	"github.com/axhq/ax/service/callback"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/signing"
)

// ErrorClassInterrupted is the error class of an execution failed because
// its last attempt was interrupted (a crash) and it has no attempt left.
const ErrorClassInterrupted = "interrupted"

// Deliveries defaults. See DeliveriesConfig.
const (
	QueueWaitMaxDefault     = time.Hour
	ExcerptMaxDefault       = 512
	AlertMaxAttemptsDefault = 8
)

// DeliveriesConfig configures Deliveries. Zero fields take the defaults.
type DeliveriesConfig struct {
	// QueueWaitMax is how long an execution of an overlap_policy "queue"
	// task waits for the previous one before it is skipped. Default 1 h.
	QueueWaitMax time.Duration
	// ExcerptMax caps the response excerpt kept in an attempt_failed
	// event's message, in bytes. Default 512.
	ExcerptMax int
	// AlertMaxAttempts bounds the River attempts of one failure alert
	// (River's default backoff: 1 s, 16 s, 81 s, … about 1.3 h for 8).
	// Default 8.
	AlertMaxAttempts int
	// Rand returns values in [0, 1) that place each retry's backoff
	// within its range (Backoff). Default math/rand/v2.
	Rand func() float64
	// MisfireThreshold, CatchUpWindow and CatchUpMax apply the tasks'
	// misfire policies to first fires picked up late, as the scheduler
	// applies them to slots it claims late (SchedulerConfig); give both
	// the same values. Defaults: the scheduler's.
	MisfireThreshold time.Duration
	CatchUpWindow    time.Duration
	CatchUpMax       int
	// Limits, when set, holds deliveries back by their tenant's and
	// endpoint's limits (Begin). Nil: endpoint limits still apply,
	// tenant limits do not.
	Limits *Limits
	// Metrics, when set, counts the executions (ax_executions_finished_total)
	// and the workflow runs (ax_workflow_runs_total) that a start or an
	// outcome ends.
	Metrics *metrics.Metrics
}

// WithDefaults returns c with every zero field set to its default.
func (c DeliveriesConfig) WithDefaults() DeliveriesConfig {
	if c.QueueWaitMax <= 0 {
		c.QueueWaitMax = QueueWaitMaxDefault
	}
	if c.ExcerptMax <= 0 {
		c.ExcerptMax = ExcerptMaxDefault
	}
	if c.AlertMaxAttempts <= 0 {
		c.AlertMaxAttempts = AlertMaxAttemptsDefault
	}
	if c.Rand == nil {
		c.Rand = randomJitter
	}
	if c.MisfireThreshold <= 0 {
		c.MisfireThreshold = MisfireThresholdDefault
	}
	if c.CatchUpWindow <= 0 {
		c.CatchUpWindow = CatchUpWindowDefault
	}
	if c.CatchUpMax <= 0 {
		c.CatchUpMax = CatchUpMaxDefault
	}
	return c
}

// rules returns the limits of decideStart.
func (c DeliveriesConfig) rules() startRules {
	return startRules{
		QueueWaitMax: c.QueueWaitMax, MisfireThreshold: c.MisfireThreshold,
		CatchUpWindow: c.CatchUpWindow, CatchUpMax: c.CatchUpMax,
	}
}

// misfire returns the misfire parameters of the delivery statements.
func (c DeliveriesConfig) misfire() db.Misfire {
	return db.Misfire{Threshold: c.MisfireThreshold, CountMax: c.CatchUpMax}
}

// Deliveries runs the execution state machine for the deliver and alert
// workers (docs/architecture.md, "Executions" and "Delivering"): Begin
// before an attempt is sent (begin.go), Finish with its outcome
// (finish.go), HandOff when a batch job's execution continues in a job of
// its own (handoff.go), and the failure alert (alert.go). What each may
// do is decided by the pure functions of decision.go. Each method is one
// short transaction and never spans an HTTP call; every transition is a
// conditional UPDATE fenced on the execution's state and the River attempt
// that owns it (lease_attempt), and one that matches no row is reported as
// ErrConflict, never forced.
type Deliveries struct {
	pool     *db.Pool
	enqueuer *Enqueuer
	cfg      DeliveriesConfig
	// starts and successes batch the common case of Begin and Finish
	// (db.StartPendingDeliveries, db.SucceedDeliveries).
	starts    *batch.Batcher[db.DeliveryKey, startResult]
	successes *batch.Batcher[db.DeliverySuccess, successResult]
	batched   atomic.Int64 // Begins, Finishes and completions a batch completed
	batchErrs atomic.Int64 // Begins, Finishes and completions whose batch failed
	// graphs are the workflow versions its finishes advance runs of.
	graphs graphCache
	// secrets are the endpoints' signing keys, read once per secret.
	secrets signing.Keys
	// steps batch workflow nodes' successes (workflow_step.go).
	steps *batch.Batcher[stepSuccess, stepResult]
	// completions batch the callbacks' common completion (callback.go).
	completions *batch.Batcher[db.CallbackCompletion, completionResult]
	// grants keep the callback tokens' grants, and lookups batch the
	// lookups of those not kept (callback.go).
	grants  *callback.Grants
	lookups *batch.Batcher[string, callback.Looked]
}

// Batching of the deliver worker's two statements: at most deliveryBatchMax
// executions per statement, and at most startFlushers (successFlushers)
// start (success) statements in flight at once. Each statement has a fixed
// cost in the database (its executor, its constraints, its commit) worth
// a dozen rows; fewer in flight make each carry more. A start delays its
// webhook, so two run at once; a success only records what was sent (its
// send slot is free already), so one at a time lets them gather.
//
// Under a steady load natural batching alone made statements of 15–20
// rows once sending got cheap (calls arrive evenly, and a quick statement
// gathers little): deliveryLinger lets a busy batcher that finds a few
// pending wait once for more, up to deliveryLingerTo (batch.Linger).
const (
	deliveryBatchMax   = 256
	startFlushers      = 2
	successFlushers    = 1
	deliveryLingerFrom = 4
	deliveryLingerTo   = 64
	deliveryLinger     = time.Millisecond
)

// NewDeliveries returns Deliveries on pool; enqueuer inserts alert and
// hand-off jobs in the transactions that need them. Every transition that
// ends an execution or hands it off must commit durably (the server's
// synchronous_commit on, as for db.OpenPools' delivery pool): the deliver
// job is marked finished once the worker returns.
func NewDeliveries(pool *db.Pool, enqueuer *Enqueuer, cfg DeliveriesConfig) *Deliveries {
	s := &Deliveries{pool: pool, enqueuer: enqueuer, cfg: cfg.WithDefaults()}
	s.starts = batch.New(deliveryBatchMax, startFlushers, s.startPending).Linger(deliveryLingerFrom, deliveryLingerTo, deliveryLinger)
	s.successes = batch.New(deliveryBatchMax, successFlushers, s.recordSuccesses).Linger(deliveryLingerFrom, deliveryLingerTo, deliveryLinger)
	s.completions = batch.New(deliveryBatchMax, completionFlushers, s.completeMany)
	s.steps = batch.New(deliveryBatchMax, stepFlushers, s.recordSteps)
	s.grants = callback.NewGrants(0)
	s.lookups = batch.New(deliveryBatchMax, lookupFlushers, s.lookUpGrants)
	return s
}

// BatchStats counts Begins and Finishes by path: Batched completed in a
// batched statement; Failed were carried by a batch that failed and took
// the row-by-row path (a deadlock with a concurrent pause, a lost
// connection). The rest took the row-by-row path because they needed a
// decision.
type BatchStats struct {
	Batched, Failed int64
}

// BatchStats returns the counts since NewDeliveries.
func (s *Deliveries) BatchStats() BatchStats {
	return BatchStats{Batched: s.batched.Load(), Failed: s.batchErrs.Load()}
}

// count records how a batched call went and reports whether it completed.
func (s *Deliveries) count(ok bool, err error) bool {
	switch {
	case err != nil:
		s.batchErrs.Add(1)
	case ok:
		s.batched.Add(1)
	}
	return err == nil && ok
}

type startResult struct {
	row db.DeliveryRow
	ok  bool
	// missed: the batched misfire decision missed the execution (row as
	// it read it, pending), for reason.
	missed bool
	reason string
}

type successResult struct {
	attempts int
	ok       bool
}

// startPending runs one batched start: the rows db.StartsWithoutDecision
// admits become running; of the others, the misfires the batch decides
// (decideMisfires) are sent late or missed; the rest are left for the
// row-by-row path.
func (s *Deliveries) startPending(ctx context.Context, keys []db.DeliveryKey) ([]startResult, error) {
	started, err := db.StartPendingDeliveries(ctx, s.pool, keys, s.cfg.misfire())
	if err != nil {
		return nil, storeError(err, "start pending deliveries")
	}
	res := make([]startResult, len(keys))
	var left []db.DeliveryKey
	var idx []int
	for i := range keys {
		res[i].row, res[i].ok = started[i]
		if !res[i].ok {
			left, idx = append(left, keys[i]), append(idx, i)
		}
	}
	if len(left) > 0 {
		// The starts above committed: a failure here leaves the rest to
		// the row-by-row path and fails none of them.
		missed, err := s.decideMisfires(ctx, left, idx, res)
		if err != nil {
			s.batchErrs.Add(int64(len(left)))
		}
		s.cfg.Metrics.ExecutionsFinished(ExecSkipped, missed)
	}
	return res, nil
}

// recordSuccesses runs one batched success: the rows
// db.SucceedsWithoutDecision admits become succeeded.
func (s *Deliveries) recordSuccesses(ctx context.Context, oks []db.DeliverySuccess) ([]successResult, error) {
	// One transaction: a success is never visible before its task's
	// failure count is reset, or a failure of the task's next execution
	// recorded in between would count on from the old count (and could
	// pause the task).
	// The recovered alerts of the tasks whose alerted failure streak a
	// success ended are queued in it too (queueRecovered).
	var done map[int]int
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		var recovered []db.Recovered
		var err error
		done, recovered, err = db.SucceedDeliveries(ctx, tx, oks)
		if err != nil {
			return err
		}
		for _, r := range recovered {
			ok := oks[r.Index]
			if _, err := queueRecovered(ctx, tx, s.enqueuer, s.cfg.AlertMaxAttempts, ok.TenantID, ok.ID, r.Recovery); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, storeError(err, "record successes")
	}
	s.cfg.Metrics.ExecutionsFinished(ExecSucceeded, len(done))
	res := make([]successResult, len(oks))
	for i := range oks {
		res[i].attempts, res[i].ok = done[i]
	}
	return res, nil
}

// attemptMessage is an attempt_failed event's message: the failure, then
// the start of the response body, cut to at most limit bytes on a rune
// boundary.
func attemptMessage(failure, excerpt string, limit int) string {
	msg := failure
	if excerpt = strings.TrimSpace(excerpt); excerpt != "" {
		msg += ": " + excerpt
	}
	return truncateUTF8(msg, limit)
}

// truncateUTF8 cuts s to at most limit bytes without splitting a rune,
// marking a cut with "…" (counted in the limit).
func truncateUTF8(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "…"
	cut := max(limit-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

func zeroIfNil[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func refTo[T any](v T) *T { return &v }

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
