package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
)

// background runs the scheduler loop and River's workers. They need the
// schema, so they start once the database is migrated: a server started
// with AX_AUTO_MIGRATE=false before its migration job finished serves
// /healthz, fails /readyz, and begins work when the schema arrives.
type background struct {
	river   *service.RiverClient
	logger  *slog.Logger
	metrics *jobs.Metrics
	cancel  context.CancelFunc
	done    chan struct{}
	// riverStarted records that River was started; read it after done.
	riverStarted bool
}

// startBackground starts River and the scheduler loop; the loop keeps
// clock's estimate of the database's clock.
func startBackground(ctx context.Context, d *database, enq *service.Enqueuer, deliveries *service.Deliveries,
	sender *jobs.Sender, metrics *jobs.Metrics, clock *service.DBClock, backfills *service.Backfills, cfg config,
	logger *slog.Logger,
) (*background, error) {
	// The lanes learn endpoints' latencies from this process's attempts
	// and route the fires it schedules.
	lanes := &service.Lanes{}
	riverCfg := jobs.RiverConfig{
		DeliverWorkers: cfg.DeliverWorkers, BulkWorkers: cfg.BulkWorkers, JobTimeout: cfg.JobTimeout, FetchPollInterval: cfg.FetchPollInterval,
		RescueStuckJobsAfter: cfg.RescueAfter, SoftStopTimeout: cfg.SoftStopTimeout,
	}
	rc, err := jobs.NewRiverClient(enq, riverCfg, jobs.WorkerDeps{
		Deliveries: deliveries,
		Sender:     sender,
		Logger:     logger,
		Metrics:    metrics,
		Clock:      clock,
		Lanes:      lanes,

		BackfillProgress: backfills.Wake,
	})
	if err != nil {
		return nil, err
	}
	// Its own context: shutdown stops it explicitly, after the HTTP server.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b := &background{river: rc, logger: logger, metrics: metrics, cancel: cancel, done: make(chan struct{})}
	retention := service.NewRetention(d.pool, service.RetentionConfig{Executions: cfg.ExecutionRetention, Audit: cfg.AuditRetention})
	go b.run(runCtx, d.pool, enq, backfills, service.SchedulerConfig{FetchAhead: riverCfg.FetchAhead(), Clock: clock, Lanes: lanes}, retention)
	return b, nil
}

func (b *background) run(ctx context.Context, pool *db.Pool, enq *service.Enqueuer, backfills *service.Backfills,
	schedCfg service.SchedulerConfig, retention *service.Retention,
) {
	defer close(b.done)
	for warned := false; ; warned = true {
		err := db.CheckMigrated(ctx, pool)
		if err == nil {
			break
		}
		if !warned {
			b.logger.Warn("waiting for the database to be migrated before starting the scheduler and workers "+
				"(run `ax migrate`, or set AX_AUTO_MIGRATE=true)", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	if err := b.river.Start(ctx); err != nil {
		b.logger.Error("start river", "error", err.Error())
		return
	}
	b.riverStarted = true
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		jobs.RunBackfills(ctx, backfills, 0, b.logger)
	}()
	defer func() { <-pumped }()
	retained := make(chan struct{})
	go func() {
		defer close(retained)
		jobs.RunRetention(ctx, retention, jobs.RetentionLoopConfig{Logger: b.logger, OnSweep: b.metrics.ObserveRetention})
	}()
	defer func() { <-retained }()
	jobs.RunScheduler(ctx, service.NewScheduler(pool, enq, schedCfg, b.logger),
		jobs.SchedulerLoopConfig{Logger: b.logger, OnTick: b.metrics.ObserveTick, OnReconcile: b.metrics.ObserveReconcile,
			ExpireKeys: service.NewIdempotencyKeys(pool).ExpireKeys})
}

// stop stops the scheduler, then River: running deliveries get River's
// soft-stop timeout to finish, then are interrupted (and re-run, with the
// same idempotency key, by this or another replica).
func (b *background) stop(timeout time.Duration) {
	b.cancel()
	<-b.done
	if !b.riverStarted {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := b.river.Stop(ctx); err != nil {
		b.logger.Error("river did not stop in time", "error", fmt.Sprint(err))
	}
}
