package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// The fault of TestHungEndpointDoesNotStarveOthers: one tenant's one-shot
// fires at one instant — fewer than a burst, so the main lane's — to an
// endpoint that accepts them and never answers, beside a quiet tenant's
// tasks firing every second to a fast receiver.
const (
	hungFires      = 450 // more than the main lane's 400 send slots (AX_DELIVER_WORKERS)
	hungLane       = 400
	quietTasks     = 20 // interval 1 s, staggered: 20 fires/s
	quietWindow    = 20 * time.Second
	misfireAfter   = 5 * time.Second // the misfire threshold's default
	hungTimeoutSec = 60
)

// TestHungEndpointDoesNotStarveOthers: while another tenant's deliveries
// hang on an endpoint and hold every one of the main lane's send slots,
// the quiet tenant loses no slot: each slot of a 20 s window is delivered
// exactly once, succeeded, none skipped or counted missed by its
// misfire_policy, each while every hung request is still held open (its
// deliveries keep arriving during the hang, not after it), and each
// within the misfire threshold of its slot (a sanity bound: its typical
// lateness is a benchmark's, tests/bench -scenario hung).
func TestHungEndpointDoesNotStarveOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("a hang of 30 s")
	}
	t.Parallel()
	dbURL := dbtest.URL(t)
	env := map[string]string{
		"AX_DATABASE_URL":          dbURL,
		"AX_JWT_SECRET":            "fairness-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}

	// The hanging endpoint: accepts every request and answers none until
	// the test ends. inflight counts the requests held open; full is when
	// they first filled the lane.
	var (
		inflight atomic.Int64
		fullOnce sync.Once
		full     = make(chan time.Time, 1)
		release  = make(chan struct{})
		answered atomic.Int64
	)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if inflight.Add(1) >= hungLane {
			fullOnce.Do(func() { full <- time.Now() })
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		inflight.Add(-1)
		answered.Add(1)
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) }) // before hang.Close, which waits for the handlers

	// The quiet tenant's receiver: what arrived, and how many hung
	// requests were held open at that moment.
	type delivery struct {
		task, execution string
		slot, at        time.Time
		hung            int64
	}
	var (
		mu  sync.Mutex
		got []delivery
	)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d := delivery{
			task: r.Header.Get("X-Ax-Task-Id"), execution: r.Header.Get("X-Ax-Execution-Id"), at: time.Now(),
			hung: inflight.Load(),
		}
		d.slot, _ = time.Parse(time.RFC3339Nano, r.Header.Get("X-Ax-Scheduled-For"))
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(fast.Close)

	p := startAx(t, env)
	const scope = "tasks:read tasks:write endpoints:read endpoints:write executions:read"
	quietTok, hogTok := cliToken(t, env, "quiet", scope), cliToken(t, env, "hog", scope)
	quietEp := apiPost(t, p.base, quietTok, "/v1/endpoints", map[string]any{"name": "fast", "url": fast.URL})
	hogEp := apiPost(t, p.base, hogTok, "/v1/endpoints", map[string]any{
		"name": "hangs", "url": hang.URL,
		"timeout_ms": hungTimeoutSec * 1000,
	})

	first := time.Now().Add(2 * time.Second).Truncate(time.Second)
	quiet := map[string]time.Time{} // task → its first slot
	for i := range quietTasks {
		start := first.Add(time.Duration(i) * time.Second / quietTasks)
		task := apiPost(t, p.base, quietTok, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("quiet-%02d", i), "endpoint_id": quietEp["id"],
			"schedule": map[string]any{"type": "interval", "interval_seconds": 1, "start_at": start.UTC().Format(time.RFC3339Nano)},
		})
		quiet[task["id"].(string)] = start
	}

	// The hog's fires, created well ahead of their instant (the scheduler
	// claims them a few seconds before it).
	runAt := time.Now().Add(12 * time.Second).Truncate(time.Second)
	var (
		wg     sync.WaitGroup
		next   = make(chan int)
		failed atomic.Int64
	)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if !createOnce(t.Context(), p.base, hogTok, hogEp["id"].(string), fmt.Sprintf("hog-%03d", i), runAt) {
					failed.Add(1)
				}
			}
		})
	}
	for i := range hungFires {
		next <- i
	}
	close(next)
	wg.Wait()
	require.Zero(t, failed.Load(), "creating the hog's tasks")
	require.Greater(t, time.Until(runAt), 4*time.Second, "the hog's tasks were created too late to be fired at their instant")

	// The lane fills with hung requests; the window starts after that.
	var filled time.Time
	select {
	case filled = <-full:
	case <-time.After(time.Until(runAt) + 30*time.Second):
		t.Fatalf("the hanging endpoint got only %d requests: the fault did not happen", inflight.Load())
	}
	from := filled.Truncate(time.Second).Add(time.Second)
	to := from.Add(quietWindow)
	time.Sleep(time.Until(to.Add(misfireAfter + time.Second)))
	require.Zero(t, answered.Load(), "a hung request ended before the checks")

	mu.Lock()
	hits := append([]delivery(nil), got...)
	mu.Unlock()
	bySlot := map[string]int{}
	var late time.Duration
	for _, d := range hits {
		if d.slot.Before(from) || !d.slot.Before(to) {
			continue
		}
		_, ok := quiet[d.task]
		require.True(t, ok, "a delivery of an unknown task %s", d.task)
		bySlot[d.task+" "+d.slot.UTC().Format(time.RFC3339Nano)]++
		late = max(late, d.at.Sub(d.slot))
		require.GreaterOrEqual(t, d.hung, int64(hungLane), "slot %s arrived after the hung requests ended", d.slot)
		require.Less(t, d.at.Sub(d.slot), misfireAfter, "slot %s of task %s arrived past the misfire threshold", d.slot, d.task)
	}
	t.Logf("hung requests held open: %d; quiet slots %s–%s: %d delivered, the latest %s after its slot",
		inflight.Load(), from.Format("15:04:05"), to.Format("15:04:05"), len(bySlot), late.Round(time.Millisecond))
	var lost []string
	for task, start := range quiet {
		for slot := start; slot.Before(to); slot = slot.Add(time.Second) {
			if slot.Before(from) {
				continue
			}
			key := task + " " + slot.UTC().Format(time.RFC3339Nano)
			if n := bySlot[key]; n != 1 && len(lost) < 10 {
				lost = append(lost, fmt.Sprintf("%s: %d deliveries", key, n))
			}
		}
	}
	require.Empty(t, lost, "every slot of the quiet tenant is delivered once during the hang")
	require.Len(t, bySlot, quietTasks*int(quietWindow/time.Second))

	// Its executions agree: each succeeded, none skipped, none missed.
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var succeeded, other, missed int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state <> 'succeeded')
		FROM executions WHERE tenant_id = 'quiet' AND scheduled_for >= $1 AND scheduled_for < $2`, from, to).Scan(&succeeded, &other))
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(sum(missed_count), 0) FROM tasks WHERE tenant_id = 'quiet'`).Scan(&missed))
	require.Equal(t, quietTasks*int(quietWindow/time.Second), succeeded)
	require.Zero(t, other, "no quiet execution of the window was skipped or failed")
	require.Zero(t, missed, "no quiet slot was counted missed")
}

// createOnce creates a one-shot task of the hog's at runAt, reporting
// whether it was created (it runs off the test's goroutine).
func createOnce(ctx context.Context, base, token, endpoint, name string, runAt time.Time) bool {
	body := fmt.Sprintf(`{"name":%q,"endpoint_id":%q,"retry":{"max_attempts":1},"schedule":{"type":"once","run_at":%q}}`,
		name, endpoint, runAt.UTC().Format(time.RFC3339Nano))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tasks", strings.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode == http.StatusCreated
}
