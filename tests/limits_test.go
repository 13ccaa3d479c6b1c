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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// limitReceiver counts the requests in its handler at once (the most
// ever) and every request by execution (Webhook-Id). The first hang
// requests are held until their sender goes away; the others are answered
// 200 after hold.
type limitReceiver struct {
	srv  *httptest.Server
	hold time.Duration
	hang int

	mu          sync.Mutex
	inflight    int
	maxInflight int
	byExecution map[string]int
	order       []string // executions in order of arrival
	hung        chan string
}

func newLimitReceiver(t *testing.T, hold time.Duration, hang int) *limitReceiver {
	t.Helper()
	r := &limitReceiver{hold: hold, hang: hang, byExecution: map[string]int{}, hung: make(chan string, hang)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		id := req.Header.Get("Webhook-Id")
		r.mu.Lock()
		r.inflight++
		r.maxInflight = max(r.maxInflight, r.inflight)
		r.byExecution[id]++
		r.order = append(r.order, id)
		hang := len(r.order) <= r.hang
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.inflight--
			r.mu.Unlock()
		}()
		if hang {
			r.hung <- id
			<-req.Context().Done()
			return
		}
		select {
		case <-time.After(r.hold):
			w.WriteHeader(http.StatusOK)
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// snapshot returns the most requests ever in flight at once, the
// requests by execution and the order of arrival.
func (r *limitReceiver) snapshot() (maxInflight int, byExecution map[string]int, order []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	byExecution = make(map[string]int, len(r.byExecution))
	for k, v := range r.byExecution {
		byExecution[k] = v
	}
	return r.maxInflight, byExecution, append([]string(nil), r.order...)
}

// createOnceTasks creates n one-shot tasks to endpoint, all due at runAt,
// eight at a time.
func createOnceTasks(t *testing.T, base, tok, endpoint string, n int, runAt time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, n)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				code, body, err := tryDo(t.Context(), http.MethodPost, base+"/v1/tasks", tok, map[string]any{
					"name": fmt.Sprintf("limited-%03d", i), "endpoint_id": endpoint,
					// A held fire starts after its slot: sent all the same.
					"misfire_policy": "fire_all",
					"schedule":       map[string]any{"type": "once", "run_at": runAt.UTC().Format(time.RFC3339Nano)},
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
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Greater(t, time.Until(runAt), time.Second, "the tasks were created before they were due; raise the lead time")
}

// TestEndpointConcurrencyAcrossReplicas: two replicas (real binaries) on
// one database send 200 fires due at one instant to an endpoint with
// max_concurrency 3. The receiver never has more than 3 requests in
// flight, and gets each of the 200 executions exactly once.
func TestEndpointConcurrencyAcrossReplicas(t *testing.T) {
	t.Parallel()
	const (
		tasks = 200
		limit = 3
	)
	env := map[string]string{
		"AX_DATABASE_URL":          dbtest.URL(t),
		"AX_JWT_SECRET":            "limits-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	recv := newLimitReceiver(t, 20*time.Millisecond, 0)
	a := startAx(t, env) // migrates the database
	b := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{
		"name": "limited", "url": recv.srv.URL + "/hook", "timeout_ms": 10000, "max_concurrency": limit,
	})
	require.EqualValues(t, limit, apiGet(t, b.base, tok, "/v1/endpoints/"+ep["id"].(string))["max_concurrency"])
	createOnceTasks(t, a.base, tok, ep["id"].(string), tasks, time.Now().Add(15*time.Second))

	pool, err := pgxpool.New(t.Context(), env["AX_DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := loadCount(t.Context(), pool, `SELECT count(*)::int FROM executions WHERE state = 'succeeded'`)
		assert.NoError(c, err)
		assert.Equal(c, tasks, n)
	}, 3*time.Minute, 200*time.Millisecond, "every fire is delivered")

	most, byExecution, _ := recv.snapshot()
	require.LessOrEqual(t, most, limit, "requests in flight at once to an endpoint with max_concurrency %d", limit)
	require.Len(t, byExecution, tasks, "every execution reached the receiver")
	for id, n := range byExecution {
		require.Equal(t, 1, n, "execution %s was received %d times", id, n)
	}
	require.Equal(t, tasks, countRows(t, pool, `SELECT count(*)::int FROM executions`))
	require.Zero(t, countRows(t, pool, `SELECT coalesce(sum(inflight), 0)::int FROM flow_gates`), "every permit is back")
	t.Logf("at most %d requests in flight", most)
}

// TestDeadReplicasPermitsComeBack: a replica is killed (SIGKILL) while it
// holds all the permits of an endpoint with max_concurrency 3 (the
// receiver holds its requests), with more deliveries held behind them. The
// permits come back when their lifetime (AX_JOB_TIMEOUT + 1 min: 75 s) is over,
// through the permit sweep of the replica that is left, and the held
// deliveries then go: never while the dead replica's permits lived. The
// dead replica's own deliveries are not resumed here (AX_REPLICA_DEAD_AFTER
// and the rescuer are an hour off): only the lifetime frees the places.
func TestDeadReplicasPermitsComeBack(t *testing.T) {
	t.Parallel()
	const (
		tasks = 6
		limit = 3
	)
	env := map[string]string{
		"AX_DATABASE_URL":          dbtest.URL(t),
		"AX_JWT_SECRET":            "permits-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
		// The permit lifetime: 15 s + 1 min.
		"AX_JOB_TIMEOUT":             "15s",
		"AX_REPLICA_DEAD_AFTER":      "1h",
		"AX_RESCUE_STUCK_JOBS_AFTER": "1h",
	}
	recv := newLimitReceiver(t, 0, limit)
	victim := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, victim.base, tok, "/v1/endpoints", map[string]any{
		"name": "limited", "url": recv.srv.URL + "/hook", "timeout_ms": 60000, "max_concurrency": limit,
	})
	createOnceTasks(t, victim.base, tok, ep["id"].(string), tasks, time.Now().Add(8*time.Second))

	pool, err := pgxpool.New(t.Context(), env["AX_DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx := t.Context()

	// The victim sends three and holds three; it is killed while the
	// three are in the receiver, before their attempts time out (15 s).
	dead := map[string]bool{}
	for range limit {
		select {
		case id := <-recv.hung:
			dead[id] = true
		case <-time.After(time.Minute):
			t.Fatalf("the first %d deliveries did not arrive", limit)
		}
	}
	// The held ones wait in deliver jobs of their own (handed off by the
	// batch job the three were sent from, which dies with the victim).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		held, err := loadCount(ctx, pool, `SELECT count(*)::int FROM flow_holds`)
		assert.NoError(c, err)
		assert.Equal(c, tasks-limit, held, "holds")
		waiting, err := loadCount(ctx, pool, `SELECT count(*)::int FROM executions e JOIN river_job j ON j.id = e.river_job_id
			WHERE e.state = 'pending' AND j.kind = 'deliver'`)
		assert.NoError(c, err)
		assert.Equal(c, tasks-limit, waiting, "pending in deliver jobs of their own")
	}, 10*time.Second, 20*time.Millisecond, "the rest wait for a place")
	victim.stop(t, syscall.SIGKILL)
	var permits int
	var expires time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*)::int, min(expires_at) FROM flow_permits WHERE started`).
		Scan(&permits, &expires))
	require.Equal(t, limit, permits, "the dead replica holds the endpoint's permits")
	require.Equal(t, tasks-limit, countRows(t, pool, `SELECT count(*)::int FROM flow_holds`), "the rest still wait")

	startAx(t, env)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := loadCount(ctx, pool, `SELECT count(*)::int FROM executions WHERE state = 'succeeded'`)
		assert.NoError(c, err)
		assert.Equal(c, tasks-limit, n)
	}, 3*time.Minute, 200*time.Millisecond, "the held deliveries go once the dead replica's permits expire")

	_, byExecution, order := recv.snapshot()
	require.Len(t, order, tasks, "the receiver got the three sent before the kill and the three held")
	rows, err := pool.Query(ctx, `SELECT id::text, state, started_at FROM executions`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id, state string
		var started *time.Time
		require.NoError(t, rows.Scan(&id, &state, &started))
		require.Equal(t, 1, byExecution[id], "execution %s was received once", id)
		if dead[id] {
			require.Equal(t, "running", state, "the dead replica's delivery %s is not resumed here", id)
			continue
		}
		require.Equal(t, "succeeded", state)
		require.NotNil(t, started)
		require.False(t, started.Before(expires), "held delivery %s started at %s, before the dead replica's permits expired (%s)",
			id, started.Format(time.RFC3339Nano), expires.Format(time.RFC3339Nano))
	}
	require.NoError(t, rows.Err())
	require.Zero(t, countRows(t, pool, `SELECT count(*)::int FROM flow_permits`), "the swept permits are gone, the others released")
	require.Zero(t, countRows(t, pool, `SELECT coalesce(sum(inflight), 0)::int FROM flow_gates`), "every place is back")
}
