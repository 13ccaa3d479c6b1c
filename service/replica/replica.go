// Package replica keeps the replica rows: every running ax process
// registers, heartbeats and leaves (Registry), and a live one declares the
// silent ones dead and resumes their deliveries.
package replica

import (
	"context"
	"fmt"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Replica liveness. Every ax process registers a replica row when it
// starts (a new id every start), heartbeats it by the database's clock, and
// marks it gone when it stops cleanly. A replica silent for DeadAfter is
// declared dead by another live replica — one conditional UPDATE, so of
// replicas racing exactly one decides — and, in the same transaction, the
// River jobs its River client was running are made available again: the
// deliveries a crashed process held are resumed within seconds, with the
// same idempotency keys, instead of after River's rescuer
// (AX_RESCUE_STUCK_JOBS_AFTER). Their next run is the job's next River
// attempt, so its lease is above the lost run's and a late outcome of a
// replica that was only paused is fenced (decideFinish: stale).
const (
	// DeadAfterDefault is how long a replica may go without a heartbeat
	// before another declares it dead.
	DeadAfterDefault = 15 * time.Second
	// DeadAfterMin keeps the heartbeat (at least a second apart) well
	// inside the dead-after time.
	DeadAfterMin = 3 * time.Second
	// DeadAfterMax bounds it: past River's rescuer it is moot.
	DeadAfterMax = time.Hour
	// history is how long rows of dead and gone replicas are kept.
	history = 7 * 24 * time.Hour
)

// Replica states.
const (
	StateAlive = db.ReplicaAlive
	StateDead  = db.ReplicaDead
	StateGone  = db.ReplicaGone
)

// Replica is one start of an ax process.
type Replica struct {
	ID string
	// RiverClientID is the River client the process works under
	// (river_job.attempted_by names it).
	RiverClientID      string
	Hostname           string
	Version            string
	StartedAt          time.Time
	LastHeartbeatAt    time.Time
	DeliveriesInFlight int
	State              string
}

func replicaOf(r db.Replica) Replica {
	return Replica{
		ID: r.ID, RiverClientID: r.RiverClientID, Hostname: r.Hostname, Version: r.Version,
		StartedAt: r.StartedAt, LastHeartbeatAt: r.LastHeartbeatAt, DeliveriesInFlight: r.DeliveriesInFlight, State: r.State,
	}
}

// Dead is a replica declared dead, with the River jobs it was running
// that were made available again.
type Dead struct {
	Replica
	ResumedJobs []int64
}

// Registry keeps the replica rows.
type Registry struct {
	pool *db.Pool
	// resumed is the type of the event a resumed execution's timeline
	// gets.
	resumed string
}

// New returns the replica registry on pool. A delivery it resumes (its
// replica stopped or was declared dead, or its job was stranded) gets an
// event of type resumed on its execution's timeline (service's
// r.resumed).
func New(pool *db.Pool, resumed string) *Registry {
	return &Registry{pool: pool, resumed: resumed}
}

// Register records a live replica id (a new id every start of a process,
// and every time it finds itself declared dead) working under River client
// riverClientID.
func (r *Registry) Register(ctx context.Context, id, riverClientID, hostname, version string) (Replica, error) {
	row, err := db.RegisterReplica(ctx, r.pool, id, riverClientID, hostname, version)
	if err != nil {
		return Replica{}, errs.Store(err, "register replica "+id)
	}
	return replicaOf(row), nil
}

// Heartbeat records that replica id is alive, with inFlight deliveries in
// flight, and returns how many replicas are alive. It reports false when
// the replica is no longer alive: another replica declared it dead (its
// deliveries were resumed elsewhere).
func (r *Registry) Heartbeat(ctx context.Context, id string, inFlight int) (alive bool, live int, err error) {
	alive, live, err = db.HeartbeatReplica(ctx, r.pool, id, inFlight)
	if err != nil {
		return false, 0, errs.Store(err, "heartbeat")
	}
	return alive, live, nil
}

// Leave marks replica id gone (a clean shutdown, after River stopped) and
// makes any River job its client riverClientID still holds available again
// (none, unless River's stop timed out), in one transaction.
func (r *Registry) Leave(ctx context.Context, id, riverClientID string) (int, error) {
	var n int
	err := db.InTx(ctx, r.pool, func(tx db.Tx) error {
		if err := db.LeaveReplica(ctx, tx, id); err != nil {
			return err
		}
		jobs, err := db.ResumeJobsOf(ctx, tx, db.RunningJobs{Clients: []string{riverClientID}},
			"ax replica "+id+" stopped while the job ran", r.resumed,
			"the replica that ran it stopped before its outcome was recorded; resuming with the same idempotency key",
			map[string]any{"replica_id": id, "reason": "replica_stopped"})
		n = len(jobs)
		return err
	})
	if err != nil {
		return 0, errs.Store(err, "deregister replica "+id)
	}
	return n, nil
}

// DeclareDead declares dead, on behalf of live replica by, every replica
// whose last heartbeat is more than deadAfter ago (database clock), and
// makes the River jobs each was running available again, in one
// transaction: their next runs resume the deliveries with the same
// idempotency keys. Every unfinished execution those jobs carry gets a
// reconciled event naming the dead replica and the job. Replicas may call
// it at once: each dead replica is declared, and its jobs resumed, exactly
// once.
func (r *Registry) DeclareDead(ctx context.Context, by string, deadAfter time.Duration) ([]Dead, error) {
	var out []Dead
	err := db.InTx(ctx, r.pool, func(tx db.Tx) error {
		out = out[:0]
		dead, err := db.DeclareDeadReplicas(ctx, tx, by, deadAfter)
		if err != nil {
			return err
		}
		for _, d := range dead {
			msg := fmt.Sprintf("replica %s (%s) sent no heartbeat for %s and was declared dead; its deliveries "+
				"are resumed with the same idempotency key", d.ID, d.Hostname, deadAfter)
			jobs, err := db.ResumeJobsOf(ctx, tx, db.RunningJobs{Clients: []string{d.RiverClientID}},
				fmt.Sprintf("ax replica %s (%s) was declared dead by replica %s", d.ID, d.Hostname, by), r.resumed, msg,
				map[string]any{"replica_id": d.ID, "hostname": d.Hostname, "declared_by": by, "reason": "replica_dead"})
			if err != nil {
				return err
			}
			dr := Dead{Replica: replicaOf(d)}
			for _, j := range jobs {
				dr.ResumedJobs = append(dr.ResumedJobs, j.ID)
			}
			out = append(out, dr)
		}
		_, err = db.DeleteEndedReplicas(ctx, tx, history)
		return err
	})
	if err != nil {
		return nil, errs.Store(err, "declare dead replicas")
	}
	return out, nil
}

// ReleaseStranded makes available again the River jobs that River shows
// running under this process's client riverClientID, fetched more than
// olderThan ago, that the process is not working (busy: the jobs it is
// working, or finished lately): their end was never recorded, because
// River's completer gave up while the database was unreachable, and
// otherwise they would wait for River's rescuer. The next run of each
// resumes, finishes or leaves alone what the lost one left, like a run
// after a crash; unfinished executions they carry get a reconciled event.
// It returns how many jobs it released.
func (r *Registry) ReleaseStranded(ctx context.Context, replicaID, riverClientID string, busy []int64, olderThan time.Duration,
) (int, error) {
	if busy == nil {
		busy = []int64{}
	}
	jobs, err := db.ResumeJobsOf(ctx, r.pool, db.RunningJobs{Clients: []string{riverClientID}, Except: busy, FetchedBefore: olderThan},
		"ax replica "+replicaID+" is no longer working the job (its end was not recorded)", r.resumed,
		"the replica working it could not record the end of its job (the database was unreachable); resuming with the same "+
			"idempotency key", map[string]any{"replica_id": replicaID, "reason": "job_stranded"})
	if err != nil {
		return 0, errs.Store(err, "release stranded jobs")
	}
	return len(jobs), nil
}

// Live lists the live replicas, oldest first.
func (r *Registry) Live(ctx context.Context) ([]Replica, error) {
	rows, err := db.ListLiveReplicas(ctx, r.pool)
	if err != nil {
		return nil, errs.Store(err, "list replicas")
	}
	out := make([]Replica, len(rows))
	for i, row := range rows {
		out[i] = replicaOf(row)
	}
	return out, nil
}
