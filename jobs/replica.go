package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/dbclock"
	"github.com/axhq/ax/service/metrics"
)

// heartbeatMin is the shortest time between two heartbeats of a replica.
const heartbeatMin = time.Second

// strandedAfter is how long a River job must have been fetched, and its
// work over, before a replica takes it for stranded (ReleaseStranded):
// River's completer gives up recording an end after a few seconds of
// failures; and how often a replica looks.
const strandedAfter = 30 * time.Second

// ClockWarnEvery is how often a replica whose clock drifts from the
// database's says so in its log.
const ClockWarnEvery = time.Minute

// LoopHeartbeat is the replica's heartbeat loop name.
const LoopHeartbeat = "heartbeat"

// ReplicaConfig configures a Replica.
type ReplicaConfig struct {
	// ID is the replica's first id. Required.
	ID string
	// RiverClientID is the River client the process works under
	// (RiverConfig.ClientID). Required.
	RiverClientID string
	// Hostname and Version are registered with each id.
	Hostname, Version string
	// DeadAfter is how long a replica may go without a heartbeat before
	// another declares it dead. Default service.ReplicaDeadAfterDefault.
	DeadAfter time.Duration
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Metrics records the live replicas, the replicas declared dead and
	// the jobs resumed, and supplies the deliveries in flight. Default:
	// metrics on a private registry.
	Metrics *metrics.Metrics
	// OnRegister, if set, is called with the replica's new id when it
	// registers again after being declared dead.
	OnRegister func(id string)
	// Clock, if set, is the estimate of the database's clock: each
	// heartbeat reports this replica's drift from it (ax_clock_offset_seconds)
	// and, above dbclock.OffsetWarn, logs a warning at most every
	// ClockWarnEvery.
	Clock *service.DBClock
	// Work, if set, is the River client's WorkTracker: every 30 s the
	// replica makes available again the jobs River shows running under
	// its client that it is not working (service.Replicas.ReleaseStranded).
	Work *WorkTracker
}

// Replica is this process's row in the replicas table, through its life:
// registered before River starts (Register), kept alive by the heartbeat
// loop (HeartbeatLoop) while River runs and stops, deregistered last
// (Leave). cmd/server registers the first and the last as a Runner step
// around the loop.
type Replica struct {
	replicas *service.Replicas
	cfg      ReplicaConfig

	mu sync.Mutex
	id string // the current id: the heartbeat loop changes it
}

// NewReplica returns the replica cfg.ID, not registered yet.
func NewReplica(replicas *service.Replicas, cfg ReplicaConfig) *Replica {
	cfg.DeadAfter = cmp.Or(cfg.DeadAfter, service.ReplicaDeadAfterDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	return &Replica{replicas: replicas, cfg: cfg, id: cfg.ID}
}

// ID returns the replica's current id: cfg.ID, or the id it registered
// under after it was declared dead.
func (r *Replica) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id
}

func (r *Replica) setID(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id = id
}

// Register registers the replica under its current id, before River
// fetches anything under its client id.
func (r *Replica) Register(ctx context.Context) error {
	id := r.ID()
	if _, err := r.replicas.Register(ctx, id, r.cfg.RiverClientID, r.cfg.Hostname, r.cfg.Version); err != nil {
		return fmt.Errorf("register replica %s: %w", id, err)
	}
	return nil
}

// Leave deregisters the replica — gone, not dead: no other replica waits
// DeadAfter for it — and makes the River jobs its client still shows
// running (River's stop timed out on them) available again, to be resumed
// elsewhere. Call it after River stopped and the heartbeat loop ended; it
// bounds its own wait (5 s).
func (r *Replica) Leave(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	id := r.ID()
	n, err := r.replicas.Leave(ctx, id, r.cfg.RiverClientID)
	if err != nil {
		return fmt.Errorf("could not deregister replica %s; the others will declare it dead: %w", id, err)
	}
	if n > 0 {
		r.cfg.Logger.WarnContext(ctx, "made the jobs River's stop left running available again", "jobs", n)
	}
	return nil
}

// HeartbeatInterval is how often a replica heartbeats: a fifth of
// deadAfter, at least a second.
func HeartbeatInterval(deadAfter time.Duration) time.Duration {
	return max(deadAfter/5, heartbeatMin)
}

// HeartbeatLoop is the loop that heartbeats the replica every
// HeartbeatInterval, and after each heartbeat declares dead the replicas
// silent for DeadAfter (their running deliveries are resumed at once:
// service.Replicas.DeclareDead). Register it after the step that
// registers the replica and before River, so that it goes on while River's
// stop lets deliveries finish, and no replica takes them meanwhile.
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
func (r *Replica) HeartbeatLoop() Loop {
	cfg := r.cfg
	// healthySince is when the current run of successful heartbeats began
	// (zero: the last one failed); last is the last success.
	var healthySince, last, strandedChecked, clockWarned time.Time
	return Loop{Name: LoopHeartbeat, Every: HeartbeatInterval(cfg.DeadAfter), Pass: func(ctx context.Context) (time.Duration, error) {
		if last.IsZero() { // the first pass
			healthySince, last, strandedChecked = time.Now(), time.Now(), time.Now()
		}
		id := r.ID()
		alive, live, err := r.replicas.Heartbeat(ctx, id, cfg.Metrics.DeliveriesInFlight())
		if err != nil {
			healthySince = time.Time{}
			return 0, fmt.Errorf("replica %s heartbeat: %w", id, err)
		}
		now := time.Now()
		if healthySince.IsZero() || now.Sub(last) > cfg.DeadAfter {
			healthySince = now
		}
		last = now
		if !alive {
			old := id
			id = service.NewID()
			r.setID(id)
			cfg.Logger.ErrorContext(ctx, "this replica was declared dead by another one (no heartbeat reached the database for "+
				cfg.DeadAfter.String()+": a pause, an overload or a network partition); the deliveries it was running "+
				"were resumed elsewhere with the same idempotency keys and its late outcomes are discarded; "+
				"registering again", "replica_id", old, "new_replica_id", id)
			if err := r.Register(ctx); err != nil {
				// The heartbeat of an unregistered id finds no row: the
				// next pass registers another.
				return 0, err
			}
			if cfg.OnRegister != nil {
				cfg.OnRegister(id)
			}
			healthySince = now
			return 0, nil
		}
		cfg.Metrics.ReplicasLive.Set(float64(live))
		if cfg.Clock != nil {
			drift, warn := cfg.Clock.Drift()
			cfg.Metrics.ClockOffset.Set(drift.Seconds())
			if warn && now.Sub(clockWarned) >= ClockWarnEvery {
				clockWarned = now
				cfg.Logger.WarnContext(ctx, "this replica's clock drifts from the database's by more than "+dbclock.OffsetWarn.String()+
					"; ax fires by the database's clock, but logs, tokens' expiry and the console's times read this one: "+
					"check its time synchronisation (NTP)", "drift_ms", drift.Milliseconds(), "replica_id", id)
			}
		}
		var errs []error
		if cfg.Work != nil && now.Sub(strandedChecked) >= strandedAfter {
			strandedChecked = now
			n, err := r.replicas.ReleaseStranded(ctx, id, cfg.RiverClientID, cfg.Work.Busy(strandedAfter), strandedAfter)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("look for stranded jobs: %w", err))
			case n > 0:
				cfg.Metrics.ReplicaJobsResumed.Add(float64(n))
				cfg.Logger.WarnContext(ctx, "made available again jobs whose end River could not record (the database was "+
					"unreachable); their deliveries resume with the same idempotency keys", "jobs", n, "replica_id", id)
			}
		}
		if now.Sub(healthySince) < cfg.DeadAfter {
			return 0, errors.Join(errs...)
		}
		dead, err := r.replicas.DeclareDead(ctx, id, cfg.DeadAfter)
		if err != nil {
			return 0, errors.Join(append(errs, fmt.Errorf("look for dead replicas: %w", err))...)
		}
		cfg.Metrics.ReplicasLive.Sub(float64(len(dead)))
		for _, d := range dead {
			cfg.Metrics.ReplicasDeclaredDead.Inc()
			cfg.Metrics.ReplicaJobsResumed.Add(float64(len(d.ResumedJobs)))
			cfg.Logger.WarnContext(ctx, "declared a replica dead and resumed the jobs it was running", "dead_replica_id", d.ID,
				"hostname", d.Hostname, "last_heartbeat_at", d.LastHeartbeatAt, "jobs", len(d.ResumedJobs), "replica_id", id)
		}
		return 0, errors.Join(errs...)
	}}
}
