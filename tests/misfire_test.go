package tests

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestMisfireAfterAnOutage: tasks firing every second on two replicas;
// both stop (SIGTERM) for longer than the scheduler writes ahead, so the
// fires queued before the stop are picked up long after their slots, and
// the slots after them are claimed late. Each misfire policy must hold
// over both (with overlap_policy allow, whose fires start in batches, and
// skip, whose fires start row by row): skip sends no stale slot, fire_once
// sends exactly one late fire, fire_all sends every missed slot (those
// its overlap policy lets through), each marked late; every stale slot not
// sent is counted in missed_count; and no fire started past the threshold
// claims to be on time.
func TestMisfireAfterAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("an outage of 30 s")
	}
	t.Parallel()
	const (
		threshold = 5 * time.Second // the misfire threshold's default
		outage    = 30 * time.Second
	)
	dbURL := dbtest.URL(t)
	env := map[string]string{
		"AX_DATABASE_URL":          dbURL,
		"AX_JWT_SECRET":            "misfire-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	var (
		mu   sync.Mutex
		hits = map[string]int{} // execution id → requests
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		hits[r.Header.Get("X-Ax-Execution-Id")]++
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)

	a, b := startAx(t, env), startAx(t, env)
	tok := cliToken(t, env, "misfire", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.URL})
	type task struct{ id, misfire, overlap string }
	var tasks []task
	for _, misfire := range []string{"skip", "fire_once", "fire_all"} {
		for _, overlap := range []string{"allow", "skip"} {
			created := apiPost(t, a.base, tok, "/v1/tasks", map[string]any{
				"name": "every-second." + misfire + "." + overlap, "endpoint_id": ep["id"],
				"misfire_policy": misfire, "overlap_policy": overlap,
				"schedule": map[string]any{"type": "interval", "interval_seconds": 1},
			})
			tasks = append(tasks, task{created["id"].(string), misfire, overlap})
		}
	}

	time.Sleep(4 * time.Second)
	a.stop(t, syscall.SIGTERM)
	b.stop(t, syscall.SIGTERM)
	stopped := time.Now()
	time.Sleep(outage)
	restarted := time.Now()
	startAx(t, env)
	startAx(t, env)
	time.Sleep(12 * time.Second)

	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	// The stale slots: after the last one that could have been sent before
	// the stop, and more than the threshold before the restart.
	from, to := stopped.Add(time.Second), restarted.Add(-threshold-time.Second)
	for _, tk := range tasks {
		rows, err := conn.Query(ctx, `SELECT id::text, state, late, coalesce(last_error, ''),
				coalesce(started_at - scheduled_for > make_interval(secs => $4), false)
			FROM executions WHERE task_id = $1 AND trigger = 'schedule' AND scheduled_for >= $2 AND scheduled_for < $3
			ORDER BY scheduled_for`, tk.id, from, to, threshold.Seconds())
		require.NoError(t, err)
		type exec struct {
			id, state, lastError string
			late, startedLate    bool
		}
		execs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (exec, error) {
			var e exec
			return e, r.Scan(&e.id, &e.state, &e.late, &e.lastError, &e.startedLate)
		})
		require.NoError(t, err)
		var missed int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT missed_count FROM tasks WHERE id = $1`, tk.id).Scan(&missed))
		// Late fires over the whole run: the outage's only ones.
		rows, err = conn.Query(ctx, `SELECT id::text FROM executions WHERE task_id = $1 AND late`, tk.id)
		require.NoError(t, err)
		lateIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		// The fires of the outage's slots, the last seconds of it included.
		rows, err = conn.Query(ctx, `SELECT id::text FROM executions WHERE task_id = $1 AND scheduled_for >= $2
			AND scheduled_for < $3`, tk.id, from, restarted)
		require.NoError(t, err)
		outageIDs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		lateSent, outageSent := 0, 0
		sent, skipped := 0, 0
		mu.Lock()
		for _, e := range execs {
			if hits[e.id] > 0 {
				sent++
				require.True(t, e.late, "%s/%s: a stale slot sent is marked late", tk.misfire, tk.overlap)
			}
			if e.state == "skipped" {
				skipped++
				if tk.overlap == "allow" || tk.misfire != "fire_all" {
					require.Contains(t, e.lastError, "misfire_policy "+tk.misfire, "%s/%s: the policy that decided", tk.misfire, tk.overlap)
				}
			}
			require.False(t, e.startedLate && !e.late, "%s/%s: started past the threshold but not late", tk.misfire, tk.overlap)
		}
		for _, id := range lateIDs {
			if hits[id] > 0 {
				lateSent++
			}
		}
		for _, id := range outageIDs {
			if hits[id] > 0 {
				outageSent++
			}
		}
		mu.Unlock()
		window := int(to.Sub(from) / time.Second)
		t.Logf("%s/%s: %d stale slots written, %d sent, %d skipped; %d late fires sent; missed_count %d; window %d s",
			tk.misfire, tk.overlap, len(execs), sent, skipped, lateSent, missed, window)
		switch tk.misfire {
		case "skip":
			require.Zero(t, sent, "skip sends no stale slot")
			require.Zero(t, lateSent, "skip sends no late fire")
			require.GreaterOrEqual(t, missed, int64(window-1), "every stale slot is counted missed")
		case "fire_once":
			// One late fire stands for the missed slots (the outage's last
			// seconds, within the threshold, fire on time).
			require.Equal(t, 1, lateSent, "fire_once sends exactly one late fire")
			require.LessOrEqual(t, sent, 1)
			require.Positive(t, outageSent, "a fire stands for the missed slots")
			require.GreaterOrEqual(t, missed, int64(window-2), "the others are counted missed")
		case "fire_all":
			if tk.overlap == "allow" {
				require.GreaterOrEqual(t, sent, window-1, "fire_all sends every missed slot")
				require.Zero(t, skipped)
			} else {
				// Sent one after the other: a fire that starts while the one
				// before it runs is skipped by overlap_policy skip.
				require.Equal(t, len(execs), sent+skipped)
				require.Positive(t, lateSent)
			}
		}
	}
	// Nothing was sent twice, and the tasks fire on time again.
	mu.Lock()
	for id, n := range hits {
		require.Equal(t, 1, n, "execution %s was sent %d times", id, n)
	}
	mu.Unlock()
	var recent int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM executions
		WHERE scheduled_for > now() - interval '4 seconds' AND scheduled_for < now() - interval '1 second'
		  AND state = 'succeeded' AND NOT late`).Scan(&recent))
	require.GreaterOrEqual(t, recent, 2*len(tasks), "every task fires on time after the outage")
}

// TestFireOnceOneLateFireAfterAnOutage: what fire_once promises. Tasks
// firing every second; ax stops (SIGTERM) for 12 s and starts again: the
// fires it queued before the stop, the slots its scheduler claims late and
// those due while the backlog drains are picked up past the misfire
// threshold (5 s) one after the other, each in its turn. Each task sends
// exactly one late fire for the slots it missed — not none (the latest
// queued misfire missed because a later slot had already been sent on
// time), not a second one as the next slot crosses the threshold — and
// then fires on time again; nothing is sent twice.
func TestFireOnceOneLateFireAfterAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("an outage of 12 s")
	}
	t.Parallel()
	const (
		tasks  = 50
		outage = 12 * time.Second
	)
	dbURL := dbtest.URL(t)
	env := map[string]string{
		"AX_DATABASE_URL":          dbURL,
		"AX_JWT_SECRET":            "fire-once-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
		// Four senders and a receiver that takes 40 ms: the fires of a
		// backlog are sent about twice as fast as the tasks' slots come
		// due (100 sends a second, 50 slots), not at once, so that its
		// slots cross the threshold one after the other while it drains.
		"AX_DELIVER_WORKERS": "4",
	}
	var (
		mu   sync.Mutex
		hits = map[string]int{} // execution id → requests
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		hits[r.Header.Get("X-Ax-Execution-Id")]++
		mu.Unlock()
		time.Sleep(40 * time.Millisecond)
	}))
	t.Cleanup(recv.Close)

	p := startAx(t, env)
	tok := cliToken(t, env, "fire-once", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.URL})
	ids := make([]string, tasks)
	for i := range ids {
		created := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("every-second-%d", i), "endpoint_id": ep["id"], "misfire_policy": "fire_once",
			"schedule": map[string]any{"type": "interval", "interval_seconds": 1},
		})
		ids[i] = created["id"].(string)
	}

	time.Sleep(4 * time.Second)
	p.stop(t, syscall.SIGTERM)
	time.Sleep(outage)
	startAx(t, env)
	resumed := time.Now()
	time.Sleep(15 * time.Second)

	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var wrong []string
	histogram := map[int]int{}
	for i, id := range ids {
		rows, err := conn.Query(ctx, `SELECT id::text, late, scheduled_for FROM executions
			WHERE task_id = $1 AND trigger = 'schedule' ORDER BY scheduled_for`, id)
		require.NoError(t, err)
		type exec struct {
			id   string
			late bool
			slot time.Time
		}
		execs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (exec, error) {
			var e exec
			return e, r.Scan(&e.id, &e.late, &e.slot)
		})
		require.NoError(t, err)
		var lateSent []time.Time
		onTimeAfter := 0
		mu.Lock()
		for _, e := range execs {
			switch {
			case hits[e.id] == 0:
			case e.late:
				lateSent = append(lateSent, e.slot)
			case e.slot.After(resumed.Add(5 * time.Second)):
				onTimeAfter++
			}
		}
		mu.Unlock()
		histogram[len(lateSent)]++
		if len(lateSent) != 1 {
			wrong = append(wrong, fmt.Sprintf("task %d: %d late fires (slots %v)", i, len(lateSent), lateSent))
		}
		require.GreaterOrEqual(t, onTimeAfter, 3, "task %d fires on time again after the outage", i)
	}
	t.Logf("tasks by late fires: %v", histogram)
	require.Empty(t, wrong, "fire_once: exactly one late fire per task for the slots the outage missed")
	mu.Lock()
	defer mu.Unlock()
	for id, n := range hits {
		require.Equal(t, 1, n, "execution %s was sent %d times", id, n)
	}
}
