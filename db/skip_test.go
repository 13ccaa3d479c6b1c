package db_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
)

// skipRace is one round of TestSkipSlotRacesTheScheduler: how the skip
// and the scheduler's claim of the same fresh slot meet.
type skipRace int

const (
	// The scheduler's claim commits before the skip starts.
	schedulerBefore skipRace = iota
	// The scheduler has inserted the slot, uncommitted, when the skip
	// starts; it commits while the skip waits for it.
	schedulerDuring
	// The skip has recorded the slot, uncommitted, when the scheduler's
	// claim inserts it; the skip commits while the claim waits for it.
	schedulerAfter
	// Both start at once, unordered.
	schedulerRacing
	skipRaces
)

func (r skipRace) String() string {
	return [...]string{"scheduler before", "scheduler during", "scheduler after", "racing"}[r]
}

// TestSkipSlotRacesTheScheduler skips a fresh future slot of a task while
// the scheduler's claim materialises that very slot (pending, with its
// shards), 2,000 times, in every order: the claim committed before the
// skip, inserting while the skip runs, inserting after the skip's insert,
// and both at once. The skip must answer with the slot's execution every
// time — nothing has started, so never "" (the API's 409) — and the slot
// must end with its shards skipped, those the claim inserted moved to
// skipped (their deliver jobs then find them final), none ever started.
func TestSkipSlotRacesTheScheduler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	ep := uuid.NewString()
	_, err := pool.Exec(ctx, `INSERT INTO tenants (id) VALUES ('t');
		INSERT INTO endpoints (tenant_id, id, name, url, secret) VALUES ('t', '`+ep+`', 'e', 'https://example.com', 'whsec_x')`)
	require.NoError(t, err)
	tasks := map[int32]string{}
	for _, shards := range []int32{1, 3} {
		tasks[shards] = uuid.NewString()
		_, err := pool.Exec(ctx, `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds, shards)
			VALUES ('t', $1, $2, $3, 'interval', 1, $4)`, tasks[shards], fmt.Sprintf("every-second-%d", shards), ep, shards)
		require.NoError(t, err)
	}
	conns := make([]*pgxpool.Conn, 3)
	for i := range conns {
		conns[i], err = pool.Acquire(ctx)
		require.NoError(t, err)
		defer conns[i].Release()
	}
	schedConn, skipConn, watch := conns[0], conns[1], conns[2]

	const rounds = 2000
	base := time.Now().UTC().Truncate(time.Second).Add(time.Hour)
	seen := map[skipRace]int{}
	for i := range rounds {
		race := skipRace(i % int(skipRaces))
		shards := int32(1 + 2*(i/int(skipRaces)%2))
		task := tasks[shards]
		slot := base.Add(time.Duration(i) * time.Second)
		var fires []db.NewExecution
		for s := range shards {
			fires = append(fires, db.NewExecution{
				TenantID: "t", ID: uuid.Must(uuid.NewV7()).String(), TaskID: task,
				ScheduledFor: slot, Shard: s, ShardCount: shards,
			})
		}
		skipIDs := make([]string, shards)
		for s := range skipIDs {
			skipIDs[s] = uuid.Must(uuid.NewV7()).String()
		}
		r := runSkipRace(ctx, t, race, watch, schedConn, skipConn, task, fires, skipIDs)
		require.NoError(t, r.schedErr, "round %d (%s): the claim", i, race)
		require.NoError(t, r.skipErr, "round %d (%s): the skip", i, race)
		require.NotEmpty(t, r.skipped, "round %d (%s, %d shards): nothing started, yet the skip found the slot taken", i, race, shards)

		rows, err := pool.Query(ctx, `SELECT id::text, shard, state, first_started_at IS NOT NULL FROM executions
			WHERE task_id = $1 AND scheduled_for = $2 AND NOT rescheduled ORDER BY shard`, task, slot)
		require.NoError(t, err)
		type execRow struct {
			id      string
			shard   int32
			state   string
			started bool
		}
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (execRow, error) {
			var e execRow
			return e, r.Scan(&e.id, &e.shard, &e.state, &e.started)
		})
		require.NoError(t, err)
		require.Len(t, got, int(shards), "round %d (%s): one execution per shard", i, race)
		require.Equal(t, got[0].id, r.skipped, "round %d (%s): the skip answers with shard 0's execution", i, race)
		for s, e := range got {
			require.Equal(t, int32(s), e.shard)
			require.Equal(t, "skipped", e.state, "round %d (%s): shard %d", i, race, s)
			if r.claimed[e.id] {
				seen[race]++ // the claim's own row was moved to skipped
			}
			require.False(t, e.started, "round %d (%s): shard %d both skipped and started", i, race, s)
		}
	}
	t.Logf("rounds whose claim inserted the slot and the skip moved it, by order: %v", seen)
	require.Positive(t, seen[schedulerBefore])
	require.Positive(t, seen[schedulerDuring], "the skip met the claim's uncommitted slot")
	require.Zero(t, seen[schedulerAfter], "a claim after the skip inserts nothing")
}

// skipRaceResult is what one round's two sides did.
type skipRaceResult struct {
	skipped           string
	skipErr, schedErr error
	// claimed are the executions the claim inserted.
	claimed map[string]bool
}

// runSkipRace runs one round: the scheduler's claim (the task's row lock,
// then the slot's insert) on schedConn and the skip on skipConn, met in
// the order race says; watch sees whether a side waits for a lock.
func runSkipRace(ctx context.Context, t *testing.T, race skipRace, watch, schedConn, skipConn *pgxpool.Conn,
	task string, fires []db.NewExecution, skipIDs []string,
) skipRaceResult {
	t.Helper()
	res := skipRaceResult{claimed: map[string]bool{}}
	claimInsert := func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM tasks WHERE tenant_id = 't' AND id = $1 FOR UPDATE SKIP LOCKED`, task); err != nil {
			return err
		}
		ins, err := db.InsertScheduledExecutions(ctx, tx, fires)
		for _, e := range ins {
			res.claimed[e.ID] = true
		}
		return err
	}
	claim := func() error { return pgx.BeginFunc(ctx, schedConn, claimInsert) }
	skipTx := func(tx pgx.Tx) error {
		id, _, err := db.SkipSlot(ctx, tx, "t", task, skipIDs, fires[0].ScheduledFor, "skipped by request")
		res.skipped = id
		return err
	}
	skip := func() error { return pgx.BeginFunc(ctx, skipConn, skipTx) }
	// waitForLock returns once the backend of c waits for a lock, or done
	// is closed.
	waitForLock := func(c *pgxpool.Conn, done <-chan struct{}) error {
		pid := c.Conn().PgConn().PID()
		for {
			select {
			case <-done:
				return nil
			default:
			}
			var waiting bool
			err := watch.QueryRow(ctx, `SELECT coalesce((SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1), false)`,
				pid).Scan(&waiting)
			if err != nil || waiting {
				return err
			}
		}
	}
	switch race {
	case schedulerBefore:
		res.schedErr = claim()
		res.skipErr = skip()
	case schedulerDuring, schedulerAfter:
		first, second := schedConn, skipConn
		firstFn, secondFn := claimInsert, skip
		errFirst, errSecond := &res.schedErr, &res.skipErr
		if race == schedulerAfter {
			first, second = skipConn, schedConn
			firstFn, secondFn = skipTx, claim
			errFirst, errSecond = &res.skipErr, &res.schedErr
		}
		tx, err := first.Begin(ctx)
		if err != nil {
			*errFirst = err
			return res
		}
		if err := firstFn(tx); err != nil {
			_ = tx.Rollback(ctx)
			*errFirst = err
			return res
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			*errSecond = secondFn()
		}()
		if err := waitForLock(second, done); err != nil {
			*errFirst = errors.Join(err, tx.Rollback(ctx))
			<-done
			return res
		}
		*errFirst = tx.Commit(ctx)
		<-done
	case schedulerRacing:
		done := make(chan struct{})
		go func() {
			defer close(done)
			res.schedErr = claim()
		}()
		res.skipErr = skip()
		<-done
	}
	return res
}
