package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replica states.
const (
	ReplicaAlive = "alive"
	ReplicaDead  = "dead"
	ReplicaGone  = "gone"
)

// Replica is one start of an ax process (the replicas table).
type Replica struct {
	ID                 string    `db:"id"`
	RiverClientID      string    `db:"river_client_id"`
	Hostname           string    `db:"hostname"`
	Version            string    `db:"version"`
	StartedAt          time.Time `db:"started_at"`
	LastHeartbeatAt    time.Time `db:"last_heartbeat_at"`
	DeliveriesInFlight int       `db:"deliveries_in_flight"`
	State              string    `db:"state"`
}

const replicaColumns = `id::text, river_client_id, hostname, version, started_at, last_heartbeat_at, deliveries_in_flight, state`

// RegisterReplica inserts a live replica with heartbeat now (database
// clock). A live row with the same River client ID is a unique violation.
func RegisterReplica(ctx context.Context, q Querier, id, riverClientID, hostname, version string) (Replica, error) {
	rows, err := q.Query(ctx, `INSERT INTO replicas (id, river_client_id, hostname, version)
		VALUES ($1, $2, $3, $4) RETURNING `+replicaColumns, id, riverClientID, hostname, version)
	if err != nil {
		return Replica{}, wrap("register replica", err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Replica])
	return r, wrap("register replica", err)
}

// HeartbeatReplica records that live replica id is alive now (database
// clock), with inFlight deliveries, and returns how many replicas are
// alive. It reports false when the row is not alive any more: another
// replica declared it dead (or it left).
func HeartbeatReplica(ctx context.Context, q Querier, id string, inFlight int) (alive bool, live int, err error) {
	err = q.QueryRow(ctx, `WITH hb AS (
			UPDATE replicas SET last_heartbeat_at = now(), deliveries_in_flight = $2
			WHERE id = $1 AND state = `+replicaAlive+` RETURNING id)
		SELECT EXISTS (SELECT 1 FROM hb), (SELECT count(*) FROM replicas WHERE state = `+replicaAlive+`)::int`,
		id, inFlight).Scan(&alive, &live)
	if err != nil {
		return false, 0, wrap("heartbeat", err)
	}
	return alive, live, nil
}

// LeaveReplica marks live replica id gone (a clean shutdown).
func LeaveReplica(ctx context.Context, q Querier, id string) error {
	_, err := q.Exec(ctx, `UPDATE replicas SET state = `+replicaGone+`, ended_at = now(), deliveries_in_flight = 0
		WHERE id = $1 AND state = `+replicaAlive, id)
	return wrap("deregister replica", err)
}

// ListLiveReplicas returns the live replicas, oldest start first.
func ListLiveReplicas(ctx context.Context, q Querier) ([]Replica, error) {
	rows, err := q.Query(ctx, `SELECT `+replicaColumns+` FROM replicas WHERE state = `+replicaAlive+` ORDER BY started_at, id`)
	if err != nil {
		return nil, wrap("list replicas", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Replica])
	return out, wrap("list replicas", err)
}

// DeclareDeadReplicas marks dead every live replica but by whose last
// heartbeat is more than deadAfter ago (database clock), recording by as
// the declarer, and returns them. The conditional UPDATE is the decision:
// of replicas racing to declare the same one, exactly one gets its row
// back (the others wait for its row lock, then find it no longer alive).
func DeclareDeadReplicas(ctx context.Context, q Querier, by string, deadAfter time.Duration) ([]Replica, error) {
	rows, err := q.Query(ctx, `UPDATE replicas SET state = `+replicaDead+`, ended_at = now(), declared_dead_by = $1
		WHERE state = `+replicaAlive+` AND id <> $1 AND last_heartbeat_at < now() - make_interval(secs => $2)
		RETURNING `+replicaColumns, by, deadAfter.Seconds())
	if err != nil {
		return nil, wrap("declare replicas dead", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[Replica])
	return out, wrap("declare replicas dead", err)
}

// ResumedJob is a River job that a replica no longer alive was running,
// made available again.
type ResumedJob struct {
	ID   int64  `db:"id"`
	Kind string `db:"kind"`
	// RiverClientID is the client that was running it.
	RiverClientID string `db:"client_id"`
}

// RunningJobs selects River jobs that are running under some River
// clients (the last of their attempted_by).
type RunningJobs struct {
	Clients []string
	// Except are jobs left alone.
	Except []int64
	// FetchedBefore, if set, leaves alone the jobs fetched (attempted_at)
	// less than this long ago, by the database's clock.
	FetchedBefore time.Duration
}

// ResumeJobsOf makes the River jobs sel selects available again, as
// River's rescuer would but at once: the next fetch runs them as their
// next attempt, whose lease is above the lost run's, so that a late
// outcome of the lost run is fenced (the execution's lease_attempt). Each
// job's errors get an entry saying why (River UI shows it) and its
// max_attempts admits that next attempt. reason is that entry's message.
// Executions the jobs carry and that still belong to them get an event of
// type event with message and data (plus the job's id).
func ResumeJobsOf(ctx context.Context, q Querier, sel RunningJobs, reason, event, message string, data map[string]any,
) ([]ResumedJob, error) {
	if len(sel.Clients) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `WITH j AS (
			UPDATE river_job SET state = `+jobAvailable+`,
				max_attempts = greatest(max_attempts, attempt + 1),
				errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', $2::text, 'trace', '')),
				metadata = metadata || jsonb_build_object('ax:resumed_from', attempted_by[array_upper(attempted_by, 1)])
			WHERE state = `+jobRunning+` AND attempted_by[array_upper(attempted_by, 1)] = ANY($1::text[])
			  AND NOT (id = ANY(coalesce($6::bigint[], '{}'))) AND attempted_at <= now() - make_interval(secs => $7)
			RETURNING id, kind, args, metadata->>'ax:resumed_from' AS client_id),
		carried AS (
			SELECT j.id AS job_id, j.args->>'tenant_id' AS tenant_id, (j.args->>'execution_id')::uuid AS execution_id
			FROM j WHERE j.kind = 'deliver'
			UNION ALL
			SELECT j.id, m.tenant_id, m.id FROM j, `+batchMembers+` WHERE j.kind = 'deliver_batch'),
		ev AS (
			INSERT INTO execution_events (tenant_id, execution_id, type, message, data)
			SELECT e.tenant_id, e.id, $3, $4, $5::jsonb || jsonb_build_object('job_id', c.job_id)
			FROM carried c JOIN executions e ON e.tenant_id = c.tenant_id AND e.id = c.execution_id
			WHERE e.state IN `+execUnfinished+`
			  AND (e.river_job_id IS NULL OR e.river_job_id = c.job_id))
		SELECT id, kind, client_id FROM j ORDER BY id`, sel.Clients, reason, event, message, data, sel.Except,
		sel.FetchedBefore.Seconds())
	if err != nil {
		return nil, wrap("resume river jobs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[ResumedJob])
	return out, wrap("resume river jobs", err)
}

// DeleteEndedReplicas removes rows of replicas dead or gone for longer
// than olderThan.
func DeleteEndedReplicas(ctx context.Context, q Querier, olderThan time.Duration) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM replicas WHERE state <> `+replicaAlive+` AND ended_at < now() - make_interval(secs => $1)`,
		olderThan.Seconds())
	if err != nil {
		return 0, wrap("delete ended replicas", err)
	}
	return tag.RowsAffected(), nil
}
