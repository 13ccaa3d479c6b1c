package jobs

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/axhq/ax/service"
)

// heartbeatMin is the shortest time between two heartbeats of a replica.
const heartbeatMin = time.Second

// strandedAfter is how long a River job must have been fetched, and its
// work over, before a replica takes it for stranded (ReleaseStranded):
// River's completer gives up recording an end after a few seconds of
// failures; and how often a replica looks.
const strandedAfter = 30 * time.Second

// ReplicaLoopConfig configures RunReplica.
type ReplicaLoopConfig struct {
	// ID is the replica's id, registered (service.Replicas.Register)
	// before River started. Required.
	ID string
	// RiverClientID is the River client the process works under
	// (RiverConfig.ClientID). Required.
	RiverClientID string
	// Hostname and Version are registered again with a new id when the
	// replica finds itself declared dead.
	Hostname, Version string
	// DeadAfter is how long a replica may go without a heartbeat before
	// another declares it dead. Default service.ReplicaDeadAfterDefault.
	DeadAfter time.Duration
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Metrics records the live replicas, the replicas declared dead and
	// the jobs resumed, and supplies the deliveries in flight. Default:
	// metrics on a private registry.
	Metrics *Metrics
	// OnRegister, if set, is called with the replica's new id when it
	// registers again after being declared dead.
	OnRegister func(id string)
	// Work, if set, is the River client's WorkTracker: every 30 s the
	// replica makes available again the jobs River shows running under
	// its client that it is not working (service.Replicas.ReleaseStranded).
	Work *WorkTracker
}

// HeartbeatInterval is how often a replica heartbeats: a fifth of
// deadAfter, at least a second.
func HeartbeatInterval(deadAfter time.Duration) time.Duration {
	return max(deadAfter/5, heartbeatMin)
}

// RunReplica heartbeats replica cfg.ID until ctx is done, and after each
// heartbeat declares dead the replicas silent for DeadAfter (their running
// deliveries are resumed at once: service.Replicas.DeclareDead).
//
// A replica declares others dead only once its own heartbeats have
// succeeded, each within DeadAfter of the one before, for DeadAfter: after
// an outage of the database (or a pause of this process) every replica's
// last heartbeat is old, and the first one back must not take the others'
// deliveries before they had the time to heartbeat.
//
// A replica that finds its row declared dead (it was paused, or cut off
// from the database, for longer than DeadAfter) logs it and registers
// again under a new id with the same River client. Its River jobs were made
// available when it was declared dead; the attempts it still has in flight
// record nothing over the resumed ones (their lease is older), and what it
// fetches from now on is its own again.
// It returns the replica's last id.
func RunReplica(ctx context.Context, replicas *service.Replicas, cfg ReplicaLoopConfig) string {
	cfg.DeadAfter = cmp.Or(cfg.DeadAfter, service.ReplicaDeadAfterDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	every := HeartbeatInterval(cfg.DeadAfter)
	id := cfg.ID
	// healthySince is when the current run of successful heartbeats began
	// (zero: the last one failed); last is the last success.
	healthySince, last, strandedChecked := time.Now(), time.Now(), time.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return id
		case <-t.C:
		}
		alive, live, err := replicas.Heartbeat(ctx, id, cfg.Metrics.DeliveriesInFlight())
		if err != nil {
			if ctx.Err() != nil {
				return id
			}
			if !healthySince.IsZero() {
				cfg.Logger.Warn("replica heartbeat failed", "replica_id", id, "error", err.Error())
			}
			healthySince = time.Time{}
			continue
		}
		now := time.Now()
		if healthySince.IsZero() || now.Sub(last) > cfg.DeadAfter {
			healthySince = now
		}
		last = now
		if !alive {
			old := id
			id = service.NewID()
			cfg.Logger.Error("this replica was declared dead by another one (no heartbeat reached the database for "+
				cfg.DeadAfter.String()+": a pause, an overload or a network partition); the deliveries it was running "+
				"were resumed elsewhere with the same idempotency keys and its late outcomes are discarded; "+
				"registering again", "replica_id", old, "new_replica_id", id)
			if _, err := replicas.Register(ctx, id, cfg.RiverClientID, cfg.Hostname, cfg.Version); err != nil {
				if ctx.Err() != nil {
					return id
				}
				// The heartbeat of an unregistered id finds no row: the
				// next tick registers another.
				cfg.Logger.Error("could not register the replica again", "replica_id", id, "error", err.Error())
				continue
			}
			if cfg.OnRegister != nil {
				cfg.OnRegister(id)
			}
			healthySince = now
			continue
		}
		cfg.Metrics.ReplicasLive.Set(float64(live))
		if cfg.Work != nil && now.Sub(strandedChecked) >= strandedAfter {
			strandedChecked = now
			n, err := replicas.ReleaseStranded(ctx, id, cfg.RiverClientID, cfg.Work.Busy(strandedAfter), strandedAfter)
			switch {
			case err != nil && ctx.Err() == nil:
				cfg.Logger.Warn("could not look for stranded jobs", "error", err.Error())
			case n > 0:
				cfg.Metrics.ReplicaJobsResumed.Add(float64(n))
				cfg.Logger.Warn("made available again jobs whose end River could not record (the database was "+
					"unreachable); their deliveries resume with the same idempotency keys", "jobs", n, "replica_id", id)
			}
		}
		if now.Sub(healthySince) < cfg.DeadAfter {
			continue
		}
		dead, err := replicas.DeclareDead(ctx, id, cfg.DeadAfter)
		if err != nil {
			if ctx.Err() == nil {
				cfg.Logger.Warn("could not look for dead replicas", "error", err.Error())
			}
			continue
		}
		cfg.Metrics.ReplicasLive.Sub(float64(len(dead)))
		for _, d := range dead {
			cfg.Metrics.ReplicasDeclaredDead.Inc()
			cfg.Metrics.ReplicaJobsResumed.Add(float64(len(d.ResumedJobs)))
			cfg.Logger.Warn("declared a replica dead and resumed the jobs it was running", "dead_replica_id", d.ID,
				"hostname", d.Hostname, "last_heartbeat_at", d.LastHeartbeatAt, "jobs", len(d.ResumedJobs), "replica_id", id)
		}
	}
}
