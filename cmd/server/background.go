package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
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
	river    *service.RiverClient
	replicas *service.Replicas
	replica  jobs.ReplicaLoopConfig
	logger   *slog.Logger
	metrics  *jobs.Metrics
	cancel   context.CancelFunc
	done     chan struct{}
	// riverStarted records that River was started, and replicaID the
	// replica's last id (empty: it never registered); read them after done.
	riverStarted bool
	replicaID    string
	// heartbeatCtx ends the heartbeat (stopHeartbeat), after River
	// stopped; heartbeats then gives the replica's last id.
	heartbeatCtx  context.Context
	stopHeartbeat context.CancelFunc
	heartbeats    chan string
}

// startBackground starts River and the scheduler loop; the loop keeps
// clock's estimate of the database's clock.
func startBackground(ctx context.Context, d *database, enq *service.Enqueuer, deliveries *service.Deliveries,
	sender *jobs.Sender, metrics *jobs.Metrics, clock *service.DBClock, backfills *service.Backfills,
	workflows *service.Workflows, cfg config, logger *slog.Logger,
) (*background, error) {
	// A new id every start: the replica's, and its River client's, which
	// River records in attempted_by of the jobs it runs.
	replicaID := service.NewID()
	// The lanes learn endpoints' latencies from this process's attempts
	// and route the fires it schedules.
	lanes := &service.Lanes{}
	riverCfg := jobs.RiverConfig{
		ClientID:       replicaID,
		DeliverWorkers: cfg.DeliverWorkers, BulkWorkers: cfg.BulkWorkers, JobTimeout: cfg.JobTimeout, FetchPollInterval: cfg.FetchPollInterval,
		RescueStuckJobsAfter: cfg.RescueAfter, SoftStopTimeout: cfg.SoftStopTimeout,
	}
	work := jobs.NewWorkTracker()
	rc, err := jobs.NewRiverClient(enq, riverCfg, jobs.WorkerDeps{
		Work:       work,
		Deliveries: deliveries,
		Sender:     sender,
		Logger:     logger,
		Metrics:    metrics,
		Clock:      clock,
		Lanes:      lanes,

		BackfillProgress: backfills.Wake,
		Workflows:        workflows,
		PublicURL:        cfg.PublicURL,
	})
	if err != nil {
		return nil, err
	}
	// Its own context: shutdown stops it explicitly, after the HTTP server.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	hbCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	host, _ := os.Hostname()
	b := &background{river: rc, replicas: service.NewReplicas(d.pool), logger: logger, metrics: metrics, cancel: cancel,
		done: make(chan struct{}), replica: jobs.ReplicaLoopConfig{
			ID: replicaID, RiverClientID: replicaID, Hostname: host, Version: version(), DeadAfter: cfg.ReplicaDeadAfter,
			Logger: logger, Metrics: metrics, Work: work,
		}, heartbeatCtx: hbCtx, stopHeartbeat: stopHeartbeat, heartbeats: make(chan string, 1)}
	retention := service.NewRetention(d.pool, service.RetentionConfig{Executions: cfg.ExecutionRetention, Audit: cfg.AuditRetention})
	service.SetWorkflowObserver(&service.WorkflowObserver{RunFinished: metrics.ObserveWorkflowRun})
	go b.run(runCtx, d.pool, enq, deliveries, backfills, workflows,
		service.SchedulerConfig{FetchAhead: riverCfg.FetchAhead(), BulkFetchAhead: riverCfg.BulkFetchAhead(), Clock: clock,
			Lanes: lanes}, retention)
	return b, nil
}

func (b *background) run(ctx context.Context, pool *db.Pool, enq *service.Enqueuer, deliveries *service.Deliveries,
	backfills *service.Backfills, workflows *service.Workflows, schedCfg service.SchedulerConfig, retention *service.Retention,
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
	// Registered before River fetches anything under its client ID.
	for warned := false; ; warned = true {
		_, err := b.replicas.Register(ctx, b.replica.ID, b.replica.RiverClientID, b.replica.Hostname, b.replica.Version)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if !warned {
			b.logger.Warn("could not register the replica; retrying", "replica_id", b.replica.ID, "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	b.replicaID = b.replica.ID
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
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		jobs.RunWorkflowSweep(ctx, workflows, 0, b.logger)
	}()
	defer func() { <-swept }()
	retained := make(chan struct{})
	go func() {
		defer close(retained)
		jobs.RunRetention(ctx, retention, jobs.RetentionLoopConfig{Logger: b.logger, OnSweep: b.metrics.ObserveRetention})
	}()
	defer func() { <-retained }()
	// The heartbeat outlives the scheduler: it goes on while River's stop
	// lets deliveries finish, so that no replica takes them meanwhile.
	go func() { b.heartbeats <- jobs.RunReplica(b.heartbeatCtx, b.replicas, b.replica) }()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		jobs.RunCallbacks(ctx, deliveries, jobs.CallbackLoopConfig{Logger: b.logger, OnCallbacks: b.metrics.ObserveCallbacks,
			OnSLA: b.metrics.ObserveSLA})
	}()
	defer func() { <-waited }()
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
	defer b.stopHeartbeat()
	if !b.riverStarted {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := b.river.Stop(ctx); err != nil {
		b.logger.Error("river did not stop in time", "error", fmt.Sprint(err))
	}
	b.stopHeartbeat()
	b.replicaID = <-b.heartbeats
	// Gone, not dead: no other replica waits AX_REPLICA_DEAD_AFTER for it.
	// A job River's stop left running (it timed out) is resumed elsewhere.
	leaveCtx, cancelLeave := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelLeave()
	if n, err := b.replicas.Leave(leaveCtx, b.replicaID, b.replica.RiverClientID); err != nil {
		b.logger.Warn("could not deregister the replica; the others will declare it dead", "replica_id", b.replicaID,
			"error", err.Error())
	} else if n > 0 {
		b.logger.Warn("made the jobs River's stop left running available again", "jobs", n)
	}
}
