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
	"github.com/axhq/ax/service/idempotency"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/retention"
)

// background is the process's background work: River's workers and every
// loop, registered with one jobs.Runner in their start order (they stop in
// the reverse one):
//
//  1. schema: wait until the database is migrated. A server started with
//     AX_AUTO_MIGRATE=false before its migration job finished serves
//     /healthz, fails /readyz, and begins work when the schema arrives.
//  2. replica: register the replica before River fetches anything under
//     its client id; undone last, by deregistering it.
//  3. heartbeat: it goes on while River's stop lets deliveries finish, so
//     that no replica takes them meanwhile.
//  4. the limits' loops, which outlive River's stop as well: the permits
//     that deliveries finishing release are dispatched.
//  5. river: start River; undone by River's stop, with its deadline.
//  6. the scheduler's loops (the task-change listener first), retention,
//     the callback and SLA sweeps, the backfill pump, the workflow sweep.
type background struct {
	runner  *jobs.Runner
	replica *jobs.Replica
	// events makes the first attempt of events' fires in this process
	// (service.NewEventsRunBy).
	events *jobs.EventRunner
}

// backgroundDeps are the services the background work drives.
type backgroundDeps struct {
	db         *database
	enq        *service.Enqueuer
	deliveries *service.Deliveries
	sender     *jobs.Sender
	metrics    *metrics.Metrics
	clock      *service.DBClock
	backfills  *service.Backfills
	workflows  *service.Workflows
	limits     *service.Limits
}

// startBackground builds the runner and starts it; it returns at once.
func startBackground(ctx context.Context, d backgroundDeps, cfg config, logger *slog.Logger) (*background, error) {
	pool := d.db.pool
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
	events := jobs.NewEventRunner()
	rc, err := jobs.NewRiverClient(d.enq, riverCfg, jobs.WorkerDeps{
		Work:       work,
		Events:     events,
		Deliveries: d.deliveries,
		Sender:     d.sender,
		Logger:     logger,
		Metrics:    d.metrics,
		Clock:      d.clock,
		Lanes:      lanes,

		BackfillProgress: d.backfills.Wake,
		Workflows:        d.workflows,
		PublicURL:        cfg.PublicURL,
	})
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	replica := jobs.NewReplica(service.NewReplicas(pool), jobs.ReplicaConfig{
		ID: replicaID, RiverClientID: replicaID, Hostname: host, Version: version(), DeadAfter: cfg.ReplicaDeadAfter,
		Logger: logger, Metrics: d.metrics, Work: work, Clock: d.clock,
	})
	scheduler := service.NewScheduler(pool, d.enq, service.SchedulerConfig{
		FetchAhead:     riverCfg.FetchAhead(),
		BulkFetchAhead: riverCfg.BulkFetchAhead(), Clock: d.clock, Lanes: lanes, Metrics: d.metrics,
	}, logger)
	sweeper := retention.New(pool, retention.Config{Executions: cfg.ExecutionRetention, Audit: cfg.AuditRetention})

	r := jobs.NewRunner(jobs.RunnerConfig{Logger: logger, Metrics: d.metrics})
	r.AddStep(jobs.Step{Name: "schema", Retry: 2 * time.Second, Start: func(ctx context.Context) error {
		if err := db.CheckMigrated(ctx, pool); err != nil {
			return fmt.Errorf("waiting for the database to be migrated before starting the scheduler and workers "+
				"(run `ax migrate`, or set AX_AUTO_MIGRATE=true): %w", err)
		}
		return nil
	}})
	r.AddStep(jobs.Step{Name: "replica", Retry: time.Second, Start: replica.Register, Stop: replica.Leave})
	r.Add(replica.HeartbeatLoop())
	r.Add(jobs.LimitsLoops(d.limits)...)
	r.AddStep(jobs.Step{Name: "river", Start: rc.Start, Stop: func(ctx context.Context) error {
		// Running deliveries get River's soft-stop timeout to finish, then
		// are interrupted (and re-run, with the same idempotency key, by
		// this or another replica).
		ctx, cancel := context.WithTimeout(ctx, cfg.ShutdownTimeout)
		defer cancel()
		if err := rc.Stop(ctx); err != nil {
			return fmt.Errorf("river did not stop in time: %w", err)
		}
		return nil
	}})
	// After River: the claimed jobs' client runs; stopped before it, with
	// the same soft stop.
	r.AddStep(jobs.Step{Name: "event_runner", Start: events.Start, Stop: events.Stop})
	r.Add(events.CancelLoop())
	r.Add(jobs.SchedulerLoops(scheduler, jobs.SchedulerLoopConfig{
		Logger: logger, Metrics: d.metrics,
		ExpireKeys: idempotency.New(pool).ExpireKeys,
	})...)
	r.Add(jobs.RetentionLoop(sweeper, jobs.RetentionLoopConfig{Logger: logger, Metrics: d.metrics}))
	r.Add(jobs.CallbackLoops(d.deliveries, jobs.CallbackLoopConfig{Logger: logger, Metrics: d.metrics})...)
	r.Add(jobs.BackfillLoop(d.backfills, 0), jobs.WorkflowSweepLoop(d.workflows, 0))
	// Its own lifetime: shutdown stops it explicitly, after the HTTP
	// server.
	r.Start(context.WithoutCancel(ctx))
	return &background{runner: r, replica: replica, events: events}, nil
}

// stop stops the loops, River (with its deadline) and the heartbeat, and
// deregisters the replica: the runner's reverse order.
func (b *background) stop() { b.runner.Stop(context.Background()) }
