package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// replicaHit is one webhook the receiver got.
type replicaHit struct {
	task, execution, attempt string
	slot, at                 time.Time
}

// replicaReceiver records every webhook and answers 200, so nothing is
// retried: each execution must arrive exactly once.
type replicaReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []replicaHit
	bad  []string
}

func newReplicaReceiver(t *testing.T) *replicaReceiver {
	t.Helper()
	r := &replicaReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		h := replicaHit{
			task: req.Header.Get("X-Ax-Task-Id"), execution: req.Header.Get("X-Ax-Execution-Id"),
			attempt: req.Header.Get("X-Ax-Attempt"), at: time.Now(),
		}
		slot, err := time.Parse(time.RFC3339Nano, req.Header.Get("X-Ax-Scheduled-For"))
		r.mu.Lock()
		if err != nil || h.task == "" || h.execution == "" || req.Header.Get("Webhook-Id") != h.execution {
			r.bad = append(r.bad, fmt.Sprintf("%v", req.Header))
		}
		h.slot = slot
		r.hits = append(r.hits, h)
		r.mu.Unlock()
		// Hold the delivery a little, so that some are in flight when a
		// replica is stopped.
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replicaReceiver) snapshot() ([]replicaHit, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hits), slices.Clone(r.bad)
}

// TestReplicas runs two ax processes on one database with 200 tasks firing
// every second (their slots spread over the second): every slot is
// delivered exactly once with no gaps, both replicas deliver (each at least
// a tenth), and after one is stopped with SIGTERM the other carries on
// without losing or repeating a slot.
func TestReplicas(t *testing.T) {
	t.Parallel()
	const (
		tasks  = 200
		before = 6 * time.Second  // both replicas firing, from the first slot
		after  = 6 * time.Second  // after replica B exited
		settle = 30 * time.Second // at most, for the last slots to arrive
	)
	dbURL := dbtest.URL(t)
	env := map[string]string{
		"AX_DATABASE_URL":          dbURL,
		"AX_JWT_SECRET":            "replicas-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	recv := newReplicaReceiver(t)
	a, b := startAx(t, env), startAx(t, env)
	tok := cliToken(t, env, "replicas", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook"})

	// Create the tasks through replica A, a few at a time, their slots
	// spread over the second from a first one a few seconds ahead: fires
	// due within 20 ms share a batch job, so this makes about 50 jobs a
	// second for the replicas to share out (with every task on one instant
	// they were one or two a second, and one replica could take them all).
	// The lead leaves room for creating 200 tasks through the API while
	// the rest of the suite runs in parallel (over 6 s on a loaded
	// two-core machine).
	first := time.Now().Add(20 * time.Second).Truncate(time.Second)
	start := func(i int) time.Time { return first.Add(time.Second * time.Duration(i) / tasks) }
	ids := make([]string, tasks)
	errs := make(chan error, tasks)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				id, err := createIntervalTask(t, a.base, tok, ep["id"].(string), i, start(i))
				if err != nil {
					errs <- err
				}
				ids[i] = id
			}
		})
	}
	for i := range tasks {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Less(t, time.Now(), first, "the tasks were created before their first slot")
	taskStart := map[string]time.Time{}
	for i, id := range ids {
		taskStart[id] = start(i)
	}

	// Stop B while both deliver, mid-second.
	time.Sleep(time.Until(first.Add(before + 500*time.Millisecond)))
	killAt := time.Now()
	b.stop(t, syscall.SIGTERM)
	exitedAt := time.Now()
	require.Zero(t, b.ExitCode(), "replica B shuts down cleanly")
	t.Logf("replica B stopped in %s", exitedAt.Sub(killAt).Round(time.Millisecond))
	time.Sleep(after)
	end := time.Now()

	// Wait for every slot due by the end to be fired and finished: how late
	// they were is reported below; whether they arrived is the test.
	pool, err := pgxpool.New(ctxT(t), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.Eventually(t, func() bool {
		// Each task has one slot in the last second before the end.
		var fired, unfinished int
		err := pool.QueryRow(ctxT(t), `SELECT count(*) FILTER (WHERE scheduled_for > $1::timestamptz - interval '1 second'),
				count(*) FILTER (WHERE state NOT IN ('succeeded', 'failed', 'cancelled', 'skipped'))
			FROM executions WHERE tenant_id = 'replicas' AND scheduled_for <= $1`, end).Scan(&fired, &unfinished)
		return err == nil && fired == tasks && unfinished == 0
	}, settle, 100*time.Millisecond, "every slot due by the end fires and finishes")
	hits, bad := recv.snapshot()
	require.Empty(t, bad, "webhooks without the ax headers")

	// Exactly once: each execution and each (task, slot) arrived once, at
	// attempt 1.
	perExecution := map[string]int{}
	perSlot := map[string]int{}
	slots := map[string][]time.Time{}
	for _, h := range hits {
		require.Equal(t, "1", h.attempt, "execution %s: a 200 is never retried", h.execution)
		perExecution[h.execution]++
		perSlot[h.task+"@"+h.slot.Format(time.RFC3339Nano)]++
		if !h.slot.After(end) {
			slots[h.task] = append(slots[h.task], h.slot)
		}
	}
	var dups []string
	for k, n := range perExecution {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("execution %s ×%d", k, n))
		}
	}
	for k, n := range perSlot {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("slot %s ×%d", k, n))
		}
	}
	require.Empty(t, dups, "delivered more than once")

	// No gaps: each task's slots are consecutive seconds from its start_at
	// to the last second of the run.
	require.Len(t, slots, tasks, "every task fired")
	var gaps []string
	for task, ss := range slots {
		sort.Slice(ss, func(i, j int) bool { return ss[i].Before(ss[j]) })
		for i := 1; i < len(ss); i++ {
			if d := ss[i].Sub(ss[i-1]); d != time.Second {
				gaps = append(gaps, fmt.Sprintf("task %s: %s → %s", task, ss[i-1].Format(time.TimeOnly), ss[i].Format(time.TimeOnly)))
			}
		}
		require.True(t, ss[0].Equal(taskStart[task]), "task %s: first slot %s, start_at %s", task, ss[0], taskStart[task])
		last := ss[len(ss)-1]
		require.True(t, last.After(end.Add(-time.Second)) && !last.After(end), "task %s: last slot %s, end %s", task, last, end)
	}
	require.Empty(t, gaps, "slots never delivered")

	// The database agrees: every execution due by the end succeeded and
	// was received; no slot was missed or caught up late.
	type execution struct {
		ID, State    string
		ScheduledFor time.Time
		Late         bool
	}
	rows, err := pool.Query(ctxT(t), `SELECT id::text, state, scheduled_for, late FROM executions
		WHERE tenant_id = 'replicas' AND scheduled_for <= $1`, end)
	require.NoError(t, err)
	executions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[execution])
	require.NoError(t, err)
	for _, x := range executions {
		require.Equal(t, "succeeded", x.State, "execution %+v", x)
		require.False(t, x.Late, "execution %+v was a misfire catch-up", x)
		require.Equal(t, 1, perExecution[x.ID], "execution %+v was not received", x)
	}
	var missed int64
	require.NoError(t, pool.QueryRow(ctxT(t), `SELECT coalesce(sum(missed_count), 0) FROM tasks WHERE tenant_id = 'replicas'`).Scan(&missed))
	require.Zero(t, missed, "slots skipped by the misfire policy")
	var checked int
	for _, ss := range slots {
		checked += len(ss)
	}
	require.Len(t, executions, checked, "every received slot is an execution and vice versa")

	// Both replicas delivered while both ran; only one did after B exited.
	// River records the client (one per process) that ran each job.
	type share struct {
		Client        string
		Before, After int
	}
	// A deliver_batch job counts for each execution it carries.
	rows, err = pool.Query(ctxT(t), `SELECT attempted_by[cardinality(attempted_by)],
			coalesce(sum(n) FILTER (WHERE finalized_at < $1), 0), coalesce(sum(n) FILTER (WHERE finalized_at > $2), 0)
		FROM (SELECT attempted_by, finalized_at,
				CASE WHEN kind = 'deliver_batch' THEN array_length(string_to_array(args->>'executions', ' '), 1) ELSE 1 END AS n
			FROM river_job WHERE kind IN ('deliver', 'deliver_batch') AND state = 'completed') j
		GROUP BY 1`, killAt, exitedAt)
	require.NoError(t, err)
	shares, err := pgx.CollectRows(rows, pgx.RowToStructByPos[share])
	require.NoError(t, err)
	var (
		beforeKill  = map[string]int{}
		afterExit   = map[string]int{}
		totalBefore int
	)
	for _, s := range shares {
		if s.Before > 0 {
			beforeKill[s.Client] = s.Before
		}
		if s.After > 0 {
			afterExit[s.Client] = s.After
		}
		totalBefore += s.Before
	}
	t.Logf("deliveries per River client before the stop: %v of %d; after: %v", beforeKill, totalBefore, afterExit)
	// Both replicas take a share. River hands a due job to the first client
	// that polls after it is due (each poll is jittered), so at this load
	// (200 a second, far below one replica's workers) each of the ~50 jobs
	// a second goes to one replica or the other: splits from 32/68 to 50/50
	// in repeated runs. With every task's slots on one instant there were
	// only one or two jobs a second, and one replica could take all of them.
	require.Len(t, beforeKill, 2, "both replicas delivered")
	for client, n := range beforeKill {
		require.GreaterOrEqual(t, n*10, totalBefore, "replica %s delivered %d of %d", client, n, totalBefore)
	}
	require.Len(t, afterExit, 1, "only the surviving replica delivers after the stop")
	for client := range afterExit {
		require.Contains(t, beforeKill, client)
	}

	// Lateness, reported honestly: how long after its slot each delivery
	// arrived, overall and for the slots around the stop.
	var all, aroundStop []time.Duration
	for _, h := range hits {
		if h.slot.After(end) {
			continue
		}
		d := h.at.Sub(h.slot)
		all = append(all, d)
		if !h.slot.Before(killAt.Add(-time.Second)) && !h.slot.After(exitedAt.Add(2*time.Second)) {
			aroundStop = append(aroundStop, d)
		}
	}
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		var late int
		for _, d := range ds {
			if d > time.Second {
				late++
			}
		}
		if len(ds) == 0 {
			return
		}
		t.Logf("%s: %d deliveries, lateness p50 %s p99 %s max %s; %d more than 1 s late", name, len(ds),
			ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)*99/100].Round(time.Millisecond),
			ds[len(ds)-1].Round(time.Millisecond), late)
	}
	report("all slots", all)
	report("slots around the stop", aroundStop)
	require.NotEmpty(t, aroundStop)
}

func createIntervalTask(t *testing.T, base, tok, endpointID string, i int, start time.Time) (string, error) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"name": fmt.Sprintf("replica.%03d", i), "endpoint_id": endpointID, "payload": map[string]any{"i": i},
		"schedule": map[string]any{"type": "interval", "interval_seconds": 1, "start_at": start.UTC().Format(time.RFC3339Nano)},
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, base+"/v1/tasks", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create task %d: %d %s", i, res.StatusCode, raw)
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}
