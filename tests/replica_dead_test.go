package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
)

// logCapture keeps a process's log, and passes it on to the test's.
type logCapture struct {
	mu  sync.Mutex
	buf strings.Builder
	t   *testing.T
}

func (l *logCapture) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(b)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func (l *logCapture) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

var replicaIDRE = regexp.MustCompile(`"msg":"ax started".*"replica_id":"([0-9a-f-]{36})"`)

// replicaProc is an ax process with its replica id and log.
type replicaProc struct {
	*proc
	id  string
	log *logCapture
}

func startReplica(t *testing.T, env map[string]string) *replicaProc {
	t.Helper()
	log := &logCapture{t: t}
	p := startAxLogTo(t, log, env)
	// The log is copied from the process's stderr on its own: it may come
	// after the address on stdout.
	var m []string
	require.Eventually(t, func() bool {
		m = replicaIDRE.FindStringSubmatch(log.String())
		return m != nil
	}, 10*time.Second, 10*time.Millisecond, "the start log names the replica")
	return &replicaProc{proc: p, id: m[1], log: log}
}

// deadReplicaEnv is two replicas' environment: a replica is dead after 3 s
// of silence, and River's rescuer is far off, so that only the dead-replica
// path can resume what a dead replica held.
func deadReplicaEnv(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"AX_DATABASE_URL":            dbtest.URL(t),
		"AX_JWT_SECRET":              "dead-replica-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS":   "true",
		"AX_LOG_LEVEL":               "info",
		"AX_REPLICA_DEAD_AFTER":      "3s",
		"AX_JOB_TIMEOUT":             "60s",
		"AX_RESCUE_STUCK_JOBS_AFTER": "10m",
	}
}

// heldHit is one webhook request.
type heldHit struct{ key, attempt string }

// holdReceiver holds the requests of each attempt number until that
// attempt is released (or the sender goes away), then answers with the
// attempt's status.
type holdReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	hits    []heldHit
	release map[string]chan struct{}
	status  map[string]int
	arrived chan heldHit
}

func newHoldReceiver(t *testing.T, status map[string]int) *holdReceiver {
	t.Helper()
	r := &holdReceiver{release: map[string]chan struct{}{}, status: status, arrived: make(chan heldHit, 4096)}
	for a := range status {
		r.release[a] = make(chan struct{})
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		h := heldHit{key: req.Header.Get("Idempotency-Key"), attempt: req.Header.Get("X-Ax-Attempt")}
		r.mu.Lock()
		r.hits = append(r.hits, h)
		release, held := r.release[h.attempt]
		code := r.status[h.attempt]
		r.mu.Unlock()
		r.arrived <- h
		if !held {
			release, code = r.release["*"], r.status["*"]
		}
		select {
		case <-release:
			w.WriteHeader(code)
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(func() {
		r.mu.Lock()
		for _, c := range r.release {
			select {
			case <-c:
			default:
				close(c)
			}
		}
		r.mu.Unlock()
		r.srv.Close()
	})
	return r
}

func (r *holdReceiver) open(attempt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.release[attempt])
}

func (r *holdReceiver) keys() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, h := range r.hits {
		out[h.key]++
	}
	return out
}

func (r *holdReceiver) await(t *testing.T, n int, within time.Duration) []heldHit {
	t.Helper()
	var got []heldHit
	deadline := time.After(within)
	for len(got) < n {
		select {
		case h := <-r.arrived:
			got = append(got, h)
		case <-deadline:
			t.Fatalf("%d of %d requests arrived within %s", len(got), n, within)
		}
	}
	return got
}

// runningByClient counts the running River jobs of each River client.
func runningByClient(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT attempted_by[array_upper(attempted_by, 1)], count(*)::int FROM river_job
		WHERE state = 'running' AND kind IN ('deliver', 'deliver_batch') GROUP BY 1`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var c string
		var n int
		require.NoError(t, rows.Scan(&c, &n))
		out[c] = n
	}
	require.NoError(t, rows.Err())
	return out
}

func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	n, err := loadCount(t.Context(), pool, sql, args...)
	require.NoError(t, err)
	return n
}

// loadCount is countRows returning its error, for a condition of
// Eventually (which runs off the test's goroutine).
func loadCount(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (int, error) {
	var n int
	err := pool.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// TestDeadReplicaDeliveriesResume: two replicas share a burst of one-shot
// fires due at one instant, which the receiver holds; the replica holding
// the most is killed with SIGKILL. The other declares it dead after
// AX_REPLICA_DEAD_AFTER (3 s) and resumes every delivery it held at once,
// with the same idempotency keys — River's rescuer (10 min here) plays no
// part: every execution succeeds, the receiver saw each key, and the
// timeline of each execution the dead replica held says it was resumed
// because its replica was declared dead.
func TestDeadReplicaDeliveriesResume(t *testing.T) {
	t.Parallel()
	const tasks = 150
	env := deadReplicaEnv(t)
	pool, err := pgxpool.New(t.Context(), env["AX_DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	recv := newHoldReceiver(t, map[string]int{"*": http.StatusOK})
	a, b := startReplica(t, env), startReplica(t, env)
	procs := map[string]*replicaProc{a.id: a, b.id: b}
	tok := cliToken(t, env, "dead", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	operator := cliOperatorToken(t, env, "ops-oncall")
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook", "timeout_ms": 60000})

	runAt := time.Now().Add(5 * time.Second).UTC()
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, tasks)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				code, body, err := tryDo(t.Context(), http.MethodPost, a.base+"/v1/tasks", tok, map[string]any{
					"name": fmt.Sprintf("burst-%d", i), "endpoint_id": ep["id"],
					"schedule": map[string]any{"type": "once", "run_at": runAt.Format(time.RFC3339Nano)},
				})
				switch {
				case err != nil:
					errs <- fmt.Errorf("create task %d: %w", i, err)
				case code != http.StatusCreated:
					errs <- fmt.Errorf("create task %d: %d %s", i, code, body)
				}
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
	require.Less(t, time.Now(), runAt, "the tasks were created before their instant")

	// Every first attempt reaches the receiver and is held there.
	recv.await(t, tasks, 30*time.Second)
	held := runningByClient(t, pool)
	var victim *replicaProc
	for id, p := range procs {
		if victim == nil || held[id] > held[victim.id] {
			victim = p
		}
	}
	require.Positive(t, held[victim.id], "a replica holds deliveries: %v", held)
	survivor := a
	if victim == a {
		survivor = b
	}
	victimExecs := countRows(t, pool, `SELECT count(*)::int FROM (
			SELECT args->>'execution_id' FROM river_job WHERE state = 'running' AND kind = 'deliver'
			  AND attempted_by[array_upper(attempted_by, 1)] = $1
			UNION ALL
			SELECT split_part(m, '.', 2) FROM river_job, regexp_split_to_table(args->>'executions', ' ') m
			WHERE state = 'running' AND kind = 'deliver_batch' AND attempted_by[array_upper(attempted_by, 1)] = $1) x`,
		victim.id)
	t.Logf("replica %s holds %d jobs (%d deliveries); the other %d jobs", victim.id, held[victim.id], victimExecs,
		held[survivor.id])

	victim.stop(t, syscall.SIGKILL)
	killedAt := time.Now()
	recv.open("*")

	// Generous: the point is that it is not the rescuer's 10 minutes.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := loadCount(t.Context(), pool, `SELECT count(*)::int FROM executions WHERE state = 'succeeded'`)
		assert.NoError(c, err)
		assert.Equal(c, tasks, n)
	}, 60*time.Second, 200*time.Millisecond, "every delivery completes")
	t.Logf("all %d delivered %s after the kill", tasks, time.Since(killedAt).Round(time.Millisecond))

	require.Equal(t, tasks, countRows(t, pool, `SELECT count(*)::int FROM executions`))
	keys := recv.keys()
	rows, err := pool.Query(t.Context(), `SELECT id::text FROM executions`)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		require.Positive(t, keys[id], "the receiver saw execution %s's idempotency key", id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, keys, tasks, "no key the receiver saw is not an execution's")

	require.Equal(t, victimExecs, countRows(t, pool, `SELECT count(DISTINCT execution_id)::int FROM execution_events
		WHERE type = 'reconciled' AND data->>'replica_id' = $1 AND data->>'reason' = 'replica_dead'`, victim.id),
		"every delivery the dead replica held was resumed by the dead-replica path")
	require.Zero(t, countRows(t, pool, `SELECT count(*)::int FROM river_job WHERE metadata ? 'river:rescue_count'`),
		"River's rescuer rescued nothing")
	require.Equal(t, "dead", func() string {
		var s string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT state FROM replicas WHERE id = $1`, victim.id).Scan(&s))
		return s
	}())

	list := apiGet(t, survivor.base, operator, "/v1/admin/replicas")["items"].([]any)
	require.Len(t, list, 1)
	require.Equal(t, survivor.id, list[0].(map[string]any)["id"])
	metrics := string(rawGet(t, survivor.base+"/metrics"))
	require.Contains(t, metrics, "\nax_replicas_declared_dead_total 1\n")
	require.Contains(t, metrics, "\nax_replicas_live 1\n")
	survivor.stop(t, syscall.SIGTERM)
	require.Zero(t, countRows(t, pool, `SELECT count(*)::int FROM replicas WHERE state = 'alive'`),
		"a replica that stops cleanly deregisters")
}

// TestPausedReplicaIsFenced: the replica sending a delivery is paused
// (SIGSTOP) past AX_REPLICA_DEAD_AFTER; the other declares it dead and
// resumes the delivery as attempt 2. When the paused replica continues and
// its attempt 1 gets its answer, it records nothing: the execution's
// outcome and attempts are attempt 2's. The replica finds it was declared
// dead and registers again under a new id.
func TestPausedReplicaIsFenced(t *testing.T) {
	t.Parallel()
	env := deadReplicaEnv(t)
	pool, err := pgxpool.New(t.Context(), env["AX_DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	recv := newHoldReceiver(t, map[string]int{"1": http.StatusAccepted, "2": http.StatusOK})
	a, b := startReplica(t, env), startReplica(t, env)
	procs := map[string]*replicaProc{a.id: a, b.id: b}
	tok := cliToken(t, env, "paused", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	operator := cliOperatorToken(t, env, "ops-oncall")
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook", "timeout_ms": 60000})
	task := apiPost(t, a.base, tok, "/v1/tasks", map[string]any{
		"name": "once", "endpoint_id": ep["id"],
		"schedule": map[string]any{"type": "once", "run_at": time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)},
	})

	first := recv.await(t, 1, 30*time.Second)[0]
	require.Equal(t, "1", first.attempt)
	execID := first.key
	var holder string
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT attempted_by[array_upper(attempted_by, 1)] FROM river_job
		WHERE state = 'running' AND kind = 'deliver' AND args->>'execution_id' = $1`, execID).Scan(&holder))
	paused := procs[holder]
	require.NotNil(t, paused, "the job's River client is a replica: %s", holder)
	require.NoError(t, paused.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = paused.Signal(syscall.SIGCONT) })

	// The other replica declares it dead and resumes: attempt 2 arrives,
	// same key.
	second := recv.await(t, 1, 30*time.Second)[0]
	require.Equal(t, heldHit{key: execID, attempt: "2"}, second)
	require.Equal(t, "dead", func() string {
		var s string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT state FROM replicas WHERE id = $1`, paused.id).Scan(&s))
		return s
	}())

	// Attempt 1 gets its answer, and its replica continues: nothing of it
	// is recorded over attempt 2, which is still in flight.
	recv.open("1")
	require.NoError(t, paused.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		return strings.Contains(paused.log.String(), "attempt outcome not recorded: a newer run owns the execution")
	}, 30*time.Second, 100*time.Millisecond, "the paused replica's outcome is discarded")
	require.Eventually(t, func() bool {
		return strings.Contains(paused.log.String(), "this replica was declared dead")
	}, 30*time.Second, 100*time.Millisecond, "the paused replica notices")
	ex := apiGet(t, a.base, tok, "/v1/executions/"+execID)
	require.Equal(t, "running", ex["state"], "%v", ex)
	require.EqualValues(t, 2, ex["attempts"])

	recv.open("2")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		x, err := getJSON(t.Context(), a.base, tok, "/v1/executions/"+execID)
		assert.NoError(c, err)
		assert.Equal(c, "succeeded", x["state"])
	}, 30*time.Second, 100*time.Millisecond)
	ex = apiGet(t, a.base, tok, "/v1/executions/"+execID)
	require.EqualValues(t, 2, ex["attempts"])
	require.EqualValues(t, http.StatusOK, ex["last_status_code"], "attempt 2's answer, not attempt 1's 202")
	var types []string
	var outcomes []map[string]any
	for _, e := range ex["events"].([]any) {
		ev := e.(map[string]any)
		types = append(types, ev["type"].(string))
		if ev["type"] == "attempt_succeeded" || ev["type"] == "attempt_failed" {
			outcomes = append(outcomes, ev)
		}
	}
	require.Contains(t, types, "reconciled", "%v", types)
	require.Contains(t, types, "rescued", "%v", types)
	require.Len(t, outcomes, 1, "one outcome, attempt 2's: %v", types)
	require.EqualValues(t, 2, outcomes[0]["attempt"])
	require.EqualValues(t, http.StatusOK, outcomes[0]["status_code"])
	require.Equal(t, map[string]int{execID: 2}, recv.keys(), "sent twice, with the same idempotency key")
	require.Equal(t, task["id"], ex["task_id"])

	// It registered again: two live replicas, the paused one under a new id.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		page, err := getJSON(t.Context(), a.base, operator, "/v1/admin/replicas")
		if !assert.NoError(c, err) {
			return
		}
		var ids []any
		for _, it := range page["items"].([]any) {
			ids = append(ids, it.(map[string]any)["id"])
		}
		assert.Len(c, ids, 2)
		assert.NotContains(c, ids, paused.id)
	}, 15*time.Second, 100*time.Millisecond)
}

func rawGet(t *testing.T, url string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return body
}

// TestBurstSharedBetweenReplicas: a burst of fires due at one instant is
// shared between two replicas instead of being held, unstarted, by the
// first to fetch: with 10 send slots a replica works at most
// service.DeliverBatchWorkers(10) batch jobs at once, so while the
// receiver holds every request, each replica holds a bounded share and the
// rest of the burst waits in River, available to whichever frees first.
func TestBurstSharedBetweenReplicas(t *testing.T) {
	t.Parallel()
	const tasks, slots, lanes = 1000, 10, 2
	maxBatches := service.DeliverBatchWorkers(slots)
	env := deadReplicaEnv(t)
	env["AX_DELIVER_WORKERS"] = strconv.Itoa(slots)
	pool, err := pgxpool.New(t.Context(), env["AX_DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	recv := newHoldReceiver(t, map[string]int{"*": http.StatusOK})
	a, b := startReplica(t, env), startReplica(t, env)
	tok := cliToken(t, env, "burst", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook", "timeout_ms": 60000})

	runAt := time.Now().Add(8 * time.Second).UTC()
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, tasks)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				code, body, err := tryDo(t.Context(), http.MethodPost, a.base+"/v1/tasks", tok, map[string]any{
					"name": fmt.Sprintf("burst-%d", i), "endpoint_id": ep["id"],
					"schedule": map[string]any{"type": "once", "run_at": runAt.Format(time.RFC3339Nano)},
				})
				switch {
				case err != nil:
					errs <- fmt.Errorf("create task %d: %w", i, err)
				case code != http.StatusCreated:
					errs <- fmt.Errorf("create task %d: %d %s", i, code, body)
				}
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
	require.Less(t, time.Now(), runAt, "the tasks were created before their instant")

	// Both replicas fill their send slots; then what each holds is looked at.
	recv.await(t, 2*slots, 30*time.Second)
	var held map[string]int
	require.Eventually(t, func() bool {
		held = map[string]int{}
		rows, err := pool.Query(t.Context(), `SELECT attempted_by[array_upper(attempted_by, 1)], count(*)::int FROM river_job
			WHERE state = 'running' AND kind = 'deliver_batch' GROUP BY 1`)
		if err != nil {
			return false
		}
		defer rows.Close()
		for rows.Next() {
			var c string
			var n int
			if rows.Scan(&c, &n) != nil {
				return false
			}
			held[c] = n
		}
		// A burst may be split between the main and the bulk lane, each
		// with its own batch queue and bound.
		return held[a.id] > 0 && held[b.id] > 0 && held[a.id] <= lanes*maxBatches && held[b.id] <= lanes*maxBatches
	}, 20*time.Second, 100*time.Millisecond, "each replica works its share of batches")
	time.Sleep(time.Second) // and takes no more while its sends are held
	held = runningByClient(t, pool)
	bound := lanes * (maxBatches + slots)
	require.LessOrEqual(t, held[a.id], bound, "replica a holds batches and hand-offs within its bound: %v", held)
	require.LessOrEqual(t, held[b.id], bound, "replica b holds batches and hand-offs within its bound: %v", held)
	waiting := countRows(t, pool, `SELECT count(*)::int FROM river_job WHERE state = 'available' AND kind = 'deliver_batch'`)
	t.Logf("running jobs per replica %v (at most %d batches each); %d batch jobs wait, available to either", held, maxBatches,
		waiting)
	require.Positive(t, waiting, "the rest of the burst waits in River")

	recv.open("*")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := loadCount(t.Context(), pool, `SELECT count(*)::int FROM executions WHERE state = 'succeeded'`)
		assert.NoError(c, err)
		assert.Equal(c, tasks, n)
	}, 120*time.Second, 250*time.Millisecond, "every delivery completes")
	require.Len(t, recv.keys(), tasks, "each execution's key reached the receiver")
}
