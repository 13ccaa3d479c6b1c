package db

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The waits of wait_for workflow nodes (workflow_run_nodes, migration
// 0027). A node awaiting its event is a row in state awaiting with its
// event's name, its rendered key and its deadline; the partial indexes
// workflow_run_nodes_wait_idx (tenant, name, key) and
// workflow_run_nodes_deadline_idx hold the awaiting nodes only. Every
// statement that ends a wait is conditional on the node still awaiting,
// so of two transactions ending one wait (two events, an event and the
// expiry, an event and a person) one changes it and the other finds
// nothing.

// NodeWait is what a wait_for node whose rule is met waits for.
type NodeWait struct {
	Key   string
	Event string
	// WaitKey is the rendered key (nil: any event of that name).
	WaitKey *string
	Timeout time.Duration
}

// SetRunNodesAwaiting makes nodes of a run await their events from now
// (the transaction's clock), or from the run's slot when that is later (a
// run the scheduler starts a little ahead of its slot), until then +
// their timeout.
func SetRunNodesAwaiting(ctx context.Context, q Querier, tenant, runID string, slot time.Time, waits []NodeWait) error {
	if len(waits) == 0 {
		return nil
	}
	keys, events, wkeys := make([]string, len(waits)), make([]string, len(waits)), make([]*string, len(waits))
	ms := make([]int64, len(waits))
	for i, w := range waits {
		keys[i], events[i], wkeys[i], ms[i] = w.Key, w.Event, w.WaitKey, w.Timeout.Milliseconds()
	}
	_, err := q.Exec(ctx, `UPDATE workflow_run_nodes n SET state = `+nodeAwaiting+`, updated_at = now(),
			rule_met_at = coalesce(n.rule_met_at, now()), wait_event = c.event, wait_key = c.wkey,
			wait_since = greatest(now(), $7), wait_deadline = greatest(now(), $7) + make_interval(secs => c.ms / 1000.0)
		FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[]) AS c(key, event, wkey, ms)
		WHERE n.tenant_id = $1 AND n.run_id = $2 AND n.key = c.key`, tenant, runID, keys, events, wkeys, ms, slot)
	return wrap("set run nodes awaiting", err)
}

// FailRunNode fails a wait_for node of a run without waiting (its key
// does not render): errorClass and reason say why.
func FailRunNode(ctx context.Context, q Querier, tenant, runID, key, errorClass, reason string) error {
	_, err := q.Exec(ctx, `UPDATE workflow_run_nodes SET state = `+nodeFailed+`, updated_at = now(),
			rule_met_at = coalesce(rule_met_at, now()), finished_at = now(), error_class = $4, last_error = $5
		WHERE tenant_id = $1 AND run_id = $2 AND key = $3`, tenant, runID, key, errorClass, reason)
	return wrap("fail run node", err)
}

// WaitingRuns returns the runs (ordered by id) of tenant with a node
// awaiting event name with key (nil: the event has none) since before
// at: one probe of workflow_run_nodes_wait_idx. It locks nothing: the
// caller locks each run, then ends its waits (ResolveWaits).
func WaitingRuns(ctx context.Context, q Querier, tenant, name string, key *string, at time.Time) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT run_id::text FROM workflow_run_nodes
		WHERE tenant_id = $1 AND state = `+nodeAwaiting+` AND wait_event = $2 AND (wait_key IS NULL OR wait_key = $3)
		  AND wait_since < $4
		ORDER BY 1`, tenant, name, key, at)
	if err != nil {
		return nil, wrap("find waiting runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap("find waiting runs", err)
}

// WaitResolution is an event as the waits it ends record it.
type WaitResolution struct {
	Name    string
	Key     *string
	EventID string
	Payload json.RawMessage // nil: none
	At      time.Time
}

// LockRuns locks the runs ids of tenant in id order (FOR UPDATE) and
// returns them: a caller that ends waits of several runs takes every
// run's lock before it advances any (an advance may then lock a
// workflow), so that two such callers cannot each hold what the other
// waits for.
func LockRuns(ctx context.Context, q Querier, tenant string, ids []string) ([]WorkflowRun, error) {
	uids, err := uuidArray(ids)
	if err != nil {
		return nil, wrap("lock workflow runs", err)
	}
	rows, err := q.Query(ctx, `SELECT `+runColumns+` FROM workflow_runs r
		WHERE r.tenant_id = $1 AND r.id = ANY($2::uuid[]) ORDER BY r.id FOR UPDATE`, tenant, uids)
	if err != nil {
		return nil, wrap("lock workflow runs", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[WorkflowRun])
	return out, wrap("lock workflow runs", err)
}

// ResolvedWait is a node whose wait an event ended.
type ResolvedWait struct {
	RunID string `db:"run_id"`
	Key   string `db:"key"`
}

// ResolveWaits ends, succeeded, the nodes of runs (locked by the caller)
// still awaiting event ev (ev.Name, a key equal to ev.Key or none, since
// before ev.At), with its id and payload as their output, and returns
// them. The state = awaiting condition is what makes an event consume a
// wait at most once: a transaction that found the node awaiting before
// another ended it finds it ended once it holds the run.
func ResolveWaits(ctx context.Context, q Querier, tenant string, runIDs []string, ev WaitResolution) ([]ResolvedWait, error) {
	var payload *string
	if ev.Payload != nil {
		p := string(ev.Payload)
		payload = &p
	}
	uids, err := uuidArray(runIDs)
	if err != nil {
		return nil, wrap("resolve waits", err)
	}
	rows, err := q.Query(ctx, `UPDATE workflow_run_nodes SET state = `+nodeSucceeded+`, updated_at = now(),
			finished_at = now(), event_id = $5, output = $6::text::jsonb
		WHERE tenant_id = $1 AND run_id = ANY($2::uuid[]) AND state = `+nodeAwaiting+` AND wait_event = $3
		  AND (wait_key IS NULL OR wait_key = $4) AND wait_since < $7
		RETURNING run_id::text AS run_id, key`, tenant, uids, ev.Name, ev.Key, ev.EventID, payload, ev.At)
	if err != nil {
		return nil, wrap("resolve waits", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[ResolvedWait])
	return out, wrap("resolve waits", err)
}

// ResolveWaitByHand ends a wait_for node of a run that is waiting,
// blocked or awaiting its event: state succeeded (output, nil: none) or
// skipped. It reports whether the node was in one of those states.
func ResolveWaitByHand(ctx context.Context, q Querier, tenant, runID, key, state string, output json.RawMessage) (bool, error) {
	var out *string
	if output != nil {
		o := string(output)
		out = &o
	}
	tag, err := q.Exec(ctx, `UPDATE workflow_run_nodes SET state = $4, updated_at = now(), finished_at = now(),
			rule_met_at = coalesce(rule_met_at, now()), output = $5::text::jsonb
		WHERE tenant_id = $1 AND run_id = $2 AND key = $3 AND state IN `+nodeOpen,
		tenant, runID, key, state, out)
	if err != nil {
		return false, wrap("resolve wait", err)
	}
	return tag.RowsAffected() == 1, nil
}

// OverdueWaitRuns returns up to limit runs with a node awaiting its event
// past its deadline, by the database's clock
// (workflow_run_nodes_deadline_idx).
func OverdueWaitRuns(ctx context.Context, q Querier, limit int) ([]RunRef, error) {
	// Cross-tenant by design: the expiry serves every tenant.
	rows, err := q.Query(ctx, `SELECT DISTINCT o.tenant_id, o.run_id::text AS id FROM (
			SELECT tenant_id, run_id FROM workflow_run_nodes
			WHERE state = `+nodeAwaiting+` AND wait_deadline <= now()
			ORDER BY wait_deadline LIMIT $1) o`, limit)
	if err != nil {
		return nil, wrap("overdue waits", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[RunRef])
	return out, wrap("overdue waits", err)
}

// ExpireWaits fails the nodes of a run awaiting their event past their
// deadline (error class errorClass) and returns their keys.
func ExpireWaits(ctx context.Context, q Querier, tenant, runID, errorClass string) ([]string, error) {
	rows, err := q.Query(ctx, `UPDATE workflow_run_nodes SET state = `+nodeFailed+`, updated_at = now(), finished_at = now(),
			error_class = $3, last_error = 'no event ' || wait_event ||
				coalesce(' with key ' || wait_key, '') || ' arrived by ' || to_char(wait_deadline AT TIME ZONE 'UTC',
				'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
		WHERE tenant_id = $1 AND run_id = $2 AND state = `+nodeAwaiting+` AND wait_deadline <= now()
		RETURNING key`, tenant, runID, errorClass)
	if err != nil {
		return nil, wrap("expire waits", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, wrap("expire waits", err)
}

// CountRunWaits brings up to date the awaiting_nodes of up to limit runs
// with a node whose wait started or ended since it was last counted
// (workflow_run_nodes_uncounted_idx, migration 0028) and returns how many
// nodes it counted. Each node's wait_counted flips with its run's count in
// one statement, so a run's awaiting_nodes is always the number of its
// nodes with wait_counted. It locks each run first (FOR NO KEY UPDATE, as
// the update does: an insert that references the run is not held up),
// skipping a run locked by a transaction (one that changes its nodes
// holds it FOR UPDATE: the next pass counts them), so it never waits, and
// it writes the run once (the
// statements that start and end waits do not write it: migration 0028
// says why).
func CountRunWaits(ctx context.Context, q Querier, limit int) (int64, error) {
	// Cross-tenant by design: the sweep serves every tenant.
	tag, err := q.Exec(ctx, `WITH todo AS (
			SELECT DISTINCT tenant_id, run_id FROM workflow_run_nodes
			WHERE (state = `+nodeAwaiting+`) <> wait_counted
			LIMIT $1
		), locked AS (
			-- A probe of the primary key per run, locking it: the planner,
			-- which cannot estimate the index's predicate, would rather
			-- hash every run.
			SELECT l.tenant_id, l.id FROM todo t CROSS JOIN LATERAL (
				SELECT r.tenant_id, r.id FROM workflow_runs r WHERE r.tenant_id = t.tenant_id AND r.id = t.run_id
				FOR NO KEY UPDATE SKIP LOCKED) l
		), counted AS (
			UPDATE workflow_run_nodes n SET wait_counted = NOT n.wait_counted
			FROM locked l WHERE n.tenant_id = l.tenant_id AND n.run_id = l.id AND (n.state = `+nodeAwaiting+`) <> n.wait_counted
			RETURNING n.tenant_id, n.run_id, n.wait_counted
		), runs AS (
			UPDATE workflow_runs r SET awaiting_nodes = r.awaiting_nodes + d.delta
			FROM (SELECT tenant_id, run_id, sum(CASE WHEN wait_counted THEN 1 ELSE -1 END) AS delta FROM counted
				GROUP BY tenant_id, run_id) d
			WHERE r.tenant_id = d.tenant_id AND r.id = d.run_id
		)
		SELECT 1 FROM counted`, limit)
	if err != nil {
		return 0, wrap("count run waits", err)
	}
	return tag.RowsAffected(), nil
}

// CountWaitingNodes counts the nodes of every tenant awaiting their event
// (an index-only count of workflow_run_nodes_deadline_idx), for the
// ax_waiting_nodes gauge.
func CountWaitingNodes(ctx context.Context, q Querier) (int64, error) {
	// Cross-tenant by design: a process-wide gauge.
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM workflow_run_nodes WHERE state = `+nodeAwaiting+` AND wait_deadline IS NOT NULL`).Scan(&n)
	return n, wrap("count waiting nodes", err)
}

// Waits and events meet under transaction-scoped advisory locks: one of
// (tenant, event name) and one of (tenant, event name, key). An event's
// transaction holds its name's lock and, with a key, its key's, both
// shared (LockEvent: events never block each other); a transaction that
// starts waits holds exclusive the lock of each wait's key, or of its
// name for a wait of any key (TryLockWaits, or LockWaits in a transaction
// of its own), and, after recording them, looks for the events already
// committed (ConsumeArrivedEvents). Under READ COMMITTED an event whose
// transaction overlaps the wait's would otherwise miss it both ways: the
// event's lookup does not see the uncommitted wait, and the wait,
// recorded before the event committed, never looked. With the lock, of
// an event and a wait it may end one holds the lock first and commits
// before the other's next statement (which takes a fresh snapshot):
// either the wait's lookup sees the event, or the event's lookup
// (WaitingRuns, after the lock) sees the wait. Both compare the same
// stored times (the event's arrival after the wait's since), so the match
// holds whichever side finds it. A wait blocks only the events it may
// match: those of its key (any key: of its name).
//
// The locks' 64-bit keys: the name's hash seeded by the tenant's, the
// key's seeded by that ($1 the tenant, $2 the name, $3 the key). Two
// that share a key only share a lock.
const (
	nameLockKey = `hashtextextended($2::text, hashtextextended($1::text, 0))`
	keyLockKey  = `hashtextextended($3::text, ` + nameLockKey + `)`
)

// LockEvent takes the shared locks of tenant's event name and key (nil:
// none) until the transaction q ends, name first: one statement per
// event transaction, before its lookup of the waits (its cost for a
// tenant that never waits).
func LockEvent(ctx context.Context, q Querier, tenant, name string, key *string) error {
	var err error
	if key == nil {
		_, err = q.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+nameLockKey+`)`, tenant, name)
	} else {
		// The target list is evaluated in order: the name's lock first,
		// as LockWaits orders them.
		_, err = q.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(`+nameLockKey+`), pg_advisory_xact_lock_shared(`+keyLockKey+`)`,
			tenant, name, *key)
	}
	return wrap("lock event", err)
}

// WaitLock is the lock a wait takes: its event's name and key (nil: a
// wait of any key, which takes the name's).
type WaitLock struct {
	Event string  `json:"event"`
	Key   *string `json:"key,omitempty"`
}

// LockWaits takes the exclusive locks of tenant's waits until the
// transaction q ends, names before keys (as LockEvent), waiting for the
// event transactions that hold them. Only a transaction that holds no
// other lock yet may wait so (a deferred lookup, WaitLookupArgs in
// service): an event transaction holding one may wait for rows it holds.
func LockWaits(ctx context.Context, q Querier, tenant string, locks []WaitLock) error {
	_, err := lockWaits(ctx, q, `pg_advisory_xact_lock`, tenant, locks)
	return err
}

// TryLockWaits takes the exclusive locks of tenant's waits that no event
// transaction holds, until the transaction q ends, without waiting; all
// says whether it got every one.
func TryLockWaits(ctx context.Context, q Querier, tenant string, locks []WaitLock) (all bool, err error) {
	return lockWaits(ctx, q, `pg_try_advisory_xact_lock`, tenant, locks)
}

func lockWaits(ctx context.Context, q Querier, fn, tenant string, locks []WaitLock) (all bool, err error) {
	locks = slices.Clone(locks)
	slices.SortFunc(locks, func(a, b WaitLock) int {
		switch {
		case (a.Key == nil) != (b.Key == nil):
			if a.Key == nil {
				return -1
			}
			return 1
		case a.Event != b.Event:
			return strings.Compare(a.Event, b.Event)
		case a.Key == nil:
			return 0
		}
		return strings.Compare(*a.Key, *b.Key)
	})
	all = true
	for _, l := range locks {
		sql, args := `SELECT `+fn+`(`+nameLockKey+`)::text`, []any{tenant, l.Event}
		if l.Key != nil {
			sql, args = `SELECT `+fn+`(`+keyLockKey+`)::text`, append(args, *l.Key)
		}
		var got string // "true", "false", or "" (the waiting function's void)
		if err := q.QueryRow(ctx, sql, args...).Scan(&got); err != nil {
			return false, wrap("lock waits", err)
		}
		all = all && got != "false"
	}
	return all, nil
}

// ArrivedEvent is an event ConsumeArrivedEvents ended a wait with.
type ArrivedEvent struct {
	Key     string `db:"key"`
	EventID string `db:"event_id"`
}

// ConsumeArrivedEvents ends, succeeded, each node keys of a run (locked
// by the caller) still awaiting its event for which a matching event
// (name, a key equal to its own or none) arrived after its since and is
// visible to this statement: the earliest one, with its id and payload as
// the node's output, as ResolveWaits would have. The caller holds the
// waits' locks (LockWaits), so the events it finds are those that
// committed before it; it records each node in its event's detail
// (AddEventWaits).
func ConsumeArrivedEvents(ctx context.Context, q Querier, tenant, runID string, keys []string) ([]ArrivedEvent, error) {
	rows, err := q.Query(ctx, `WITH m AS (
			SELECT n.key, e.id, e.payload FROM workflow_run_nodes n
			CROSS JOIN LATERAL (SELECT p.id, p.payload FROM posted_events p
				WHERE p.tenant_id = n.tenant_id AND p.name = n.wait_event AND (n.wait_key IS NULL OR p.key = n.wait_key)
				  AND p.received_at > n.wait_since
				ORDER BY p.received_at, p.id LIMIT 1) e
			WHERE n.tenant_id = $1 AND n.run_id = $2 AND n.key = ANY($3::text[]) AND n.state = `+nodeAwaiting+`
		)
		UPDATE workflow_run_nodes n SET state = `+nodeSucceeded+`, updated_at = now(), finished_at = now(),
			event_id = m.id, output = m.payload
		FROM m WHERE n.tenant_id = $1 AND n.run_id = $2 AND n.key = m.key AND n.state = `+nodeAwaiting+`
		RETURNING n.key, m.id::text AS event_id`, tenant, runID, keys)
	if err != nil {
		return nil, wrap("consume arrived events", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[ArrivedEvent])
	return out, wrap("consume arrived events", err)
}

// AddEventWaits adds to event id's detail the waits it ended after it
// was stored (n more in matched_waits; list, a JSON array, appended to
// matched).
func AddEventWaits(ctx context.Context, q Querier, tenant, id string, n int, list []byte) error {
	_, err := q.Exec(ctx, `UPDATE posted_events SET matched_waits = matched_waits + $3, matched = matched || $4::text::jsonb
		WHERE tenant_id = $1 AND id = $2`, tenant, id, n, string(list))
	return wrap("add event waits", err)
}
