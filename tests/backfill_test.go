package tests

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// roundReceiver records the deliveries of slots by (slot, round) and the
// most requests it held at once; it answers 500 for the slots in fail.
type roundReceiver struct {
	srv      *httptest.Server
	delay    time.Duration
	mu       sync.Mutex
	got      map[string]map[string]bool // "slot#round" → execution ids
	rounds   map[string][]string        // slot → X-Ax-Round values seen
	fail     map[time.Time]bool
	inFlight atomic.Int32
	maxIn    atomic.Int32
}

func newRoundReceiver(t *testing.T, delay time.Duration) *roundReceiver {
	t.Helper()
	r := &roundReceiver{delay: delay, got: map[string]map[string]bool{}, rounds: map[string][]string{}, fail: map[time.Time]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		slot, _ := time.Parse(time.RFC3339Nano, req.Header.Get("X-Ax-Scheduled-For"))
		// Only backfilled slots (all long past) count towards maxIn: a
		// test crossing one of the task's live fire times also receives
		// that fire, which no backfill's max_concurrency bounds.
		if slot.Before(time.Now().Add(-time.Hour)) {
			n := r.inFlight.Add(1)
			defer r.inFlight.Add(-1)
			for {
				m := r.maxIn.Load()
				if n <= m || r.maxIn.CompareAndSwap(m, n) {
					break
				}
			}
		}
		_, _ = io.Copy(io.Discard, req.Body)
		time.Sleep(r.delay)
		round := req.Header.Get("X-Ax-Round")
		key := slot.UTC().Format(time.RFC3339) + "#" + round
		r.mu.Lock()
		if r.got[key] == nil {
			r.got[key] = map[string]bool{}
		}
		r.got[key][req.Header.Get("Idempotency-Key")] = true
		r.rounds[slot.UTC().Format(time.RFC3339)] = append(r.rounds[slot.UTC().Format(time.RFC3339)], round)
		failing := r.fail[slot.UTC()]
		r.mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *roundReceiver) setFail(slots ...time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.fail)
	for _, s := range slots {
		r.fail[s.UTC()] = true
	}
}

// waitBackfill polls a backfill until it is no longer running.
func waitBackfill(t *testing.T, base, tok, id string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b := apiGet(t, base, tok, "/v1/backfills/"+id)
		if b["state"] != "running" {
			return b
		}
		require.True(t, time.Now().Before(deadline), "backfill %s still running after %s: %v", id, within, b)
		time.Sleep(100 * time.Millisecond)
	}
}

func backfillEnv(t *testing.T) map[string]string {
	t.Helper()
	return map[string]string{
		"AX_DATABASE_URL":          dbtest.URL(t),
		"AX_JWT_SECRET":            "backfill-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
}

// TestBackfillReruns walks a daily task's backfills through every rerun
// mode: missing creates round 1 of each slot, failed re-runs only the
// slots whose latest execution failed (round 2, X-Ax-Round 2), missing
// again has nothing to do, a dry run creates nothing and says what would
// happen, more than 10,000 slots is a 422, and a cancel stops a backfill.
func TestBackfillReruns(t *testing.T) {
	t.Parallel()
	env := backfillEnv(t)
	recv := newRoundReceiver(t, 0)
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "daily", "url": recv.srv.URL + "/hook"})
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "daily", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
		"retry": map[string]any{"max_attempts": 1},
	})
	id := task["id"].(string)
	day := func(d int) time.Time { return time.Date(2026, 3, d, 2, 0, 0, 0, time.UTC) }
	span := map[string]any{"from": "2026-03-01T00:00:00Z", "to": "2026-03-11T00:00:00Z"}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range span {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	// missing: ten slots, two of them fail.
	recv.setFail(day(3), day(5))
	b := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, with(map[string]any{"max_concurrency": 3}), http.StatusAccepted)
	require.Equal(t, "missing", b["rerun"])
	require.EqualValues(t, 10, b["total"])
	b = waitBackfill(t, p.base, tok, b["id"].(string), time.Minute)
	require.Equal(t, "failed", b["state"], "%v", b)
	require.EqualValues(t, 10, b["created"])
	require.EqualValues(t, 8, b["succeeded"])
	require.EqualValues(t, 2, b["failed"])
	require.NotNil(t, b["finished_at"])
	for d := 1; d <= 10; d++ {
		key := day(d).Format(time.RFC3339) + "#1"
		require.Len(t, recv.got[key], 1, "slot %s round 1 delivered once", key)
	}
	list := apiGet(t, p.base, tok, "/v1/executions?task_id="+id+"&limit=100&until=2026-03-11T00:00:00Z")
	require.Len(t, list["items"], 10)
	for _, it := range list["items"].([]any) {
		x := it.(map[string]any)
		require.Equal(t, "backfill", x["trigger"])
		require.EqualValues(t, 1, x["round"])
		require.Equal(t, b["id"], x["backfill_id"])
	}

	// A dry run of failed: the two failed slots are re-run as round 2.
	recv.setFail()
	plan := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, with(map[string]any{"rerun": "failed", "dry_run": true}), http.StatusOK)
	slots := plan["slots"].([]any)
	require.Len(t, slots, 10)
	for i, s := range slots {
		s := s.(map[string]any)
		require.Equal(t, day(i+1).Format(time.RFC3339), s["scheduled_for"])
		if i+1 == 3 || i+1 == 5 {
			require.Equal(t, "rerun", s["action"])
			require.EqualValues(t, 2, s["round"])
		} else {
			require.Equal(t, "keep", s["action"])
		}
	}
	require.Len(t, apiGet(t, p.base, tok, "/v1/executions?task_id="+id+"&limit=100&until=2026-03-11T00:00:00Z")["items"], 10, "a dry run creates nothing")

	b = apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, with(map[string]any{"rerun": "failed"}), http.StatusAccepted)
	require.EqualValues(t, 2, b["total"])
	b = waitBackfill(t, p.base, tok, b["id"].(string), time.Minute)
	require.Equal(t, "succeeded", b["state"], "%v", b)
	require.EqualValues(t, 2, b["succeeded"], "%v %v", b, apiGet(t, p.base, tok, "/v1/executions?task_id="+id+"&limit=100&until=2026-03-11T00:00:00Z"))
	recv.mu.Lock()
	require.Len(t, recv.got[day(3).Format(time.RFC3339)+"#2"], 1, "X-Ax-Round 2")
	require.Len(t, recv.got[day(5).Format(time.RFC3339)+"#2"], 1)
	require.Empty(t, recv.got[day(4).Format(time.RFC3339)+"#2"])
	recv.mu.Unlock()

	// missing again: nothing to do.
	b = apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, with(nil), http.StatusAccepted)
	require.EqualValues(t, 0, b["total"])
	require.Equal(t, "succeeded", b["state"])

	// all: every slot gets a new round (3 for days 3 and 5, 2 elsewhere).
	plan = apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, with(map[string]any{"rerun": "all", "dry_run": true}), http.StatusOK)
	for i, s := range plan["slots"].([]any) {
		s := s.(map[string]any)
		want := 2
		if i+1 == 3 || i+1 == 5 {
			want = 3
		}
		require.Equal(t, "rerun", s["action"])
		require.EqualValues(t, want, s["round"], "day %d", i+1)
	}

	// Bad input.
	for _, bad := range []map[string]any{
		{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
		{"from": "2026-01-01T00:00:00Z"},
		{"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "rerun": "some"},
		{"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "max_concurrency": 101},
		{"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "unknown": 1},
	} {
		code, _, body := rawDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, bad)
		require.Contains(t, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, code, "%v: %s", bad, body)
	}
	every := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "every-minute", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "* * * * *"},
	})
	code, _, body := rawDo(t, http.MethodPost, p.base+"/v1/tasks/"+every["id"].(string)+"/backfill", tok,
		map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-08T00:00:00Z"})
	require.Equal(t, http.StatusUnprocessableEntity, code, "%s", body)
	require.Contains(t, string(body), "more than 10000 slots")

	// cancel: a slow receiver, one at a time; the rest is never created.
	slow := newRoundReceiver(t, 300*time.Millisecond)
	ep2 := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "slow", "url": slow.srv.URL + "/hook"})
	hourly := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "hourly", "endpoint_id": ep2["id"], "schedule": map[string]any{"type": "cron", "cron": "0 * * * *"},
	})
	b = apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+hourly["id"].(string)+"/backfill", tok,
		map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "max_concurrency": 1}, http.StatusAccepted)
	require.EqualValues(t, 24, b["total"])
	time.Sleep(time.Second)
	c := apiDo(t, http.MethodPost, p.base+"/v1/backfills/"+b["id"].(string)+"/cancel", tok, nil, http.StatusOK)
	require.Equal(t, "cancelled", c["state"])
	time.Sleep(time.Second)
	c = apiGet(t, p.base, tok, "/v1/backfills/"+b["id"].(string))
	require.Less(t, int(c["created"].(float64)), 24)
	require.LessOrEqual(t, int(slow.maxIn.Load()), 1)
	listed := apiGet(t, p.base, tok, "/v1/backfills?task_id="+hourly["id"].(string))
	require.Len(t, listed["items"], 1)
	p.stop(t, syscall.SIGTERM)
}

// TestBackfillYearWithRestart backfills a year of hourly slots (8,760)
// with max_concurrency 8 and kills ax (SIGKILL) in the middle: a new
// process finishes it; at no sample were more than 8 of its executions
// unfinished, every slot has exactly one execution (round 1), and every
// slot was delivered, by that execution only.
func TestBackfillYearWithRestart(t *testing.T) {
	t.Parallel()
	env := backfillEnv(t)
	recv := newRoundReceiver(t, 2*time.Millisecond)
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "hourly", "url": recv.srv.URL + "/hook"})
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "hourly", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "0 * * * *"},
	})
	id := task["id"].(string)
	b := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok,
		map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z", "max_concurrency": 8}, http.StatusAccepted)
	require.EqualValues(t, 8760, b["total"])
	bid := b["id"].(string)

	pool, err := pgxpool.New(context.Background(), env["AX_DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var maxUnfinished atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var n int64
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM executions
				WHERE backfill_id = $1 AND state IN ('pending', 'running', 'retrying')`, bid).Scan(&n); err == nil && n > maxUnfinished.Load() {
				maxUnfinished.Store(n)
			}
		}
	}()

	// Kill it once about a quarter is done.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cur := apiGet(t, p.base, tok, "/v1/backfills/"+bid)
		if cur["created"].(float64) >= 2000 {
			break
		}
		require.True(t, time.Now().Before(deadline), "backfill too slow: %v", cur)
		time.Sleep(50 * time.Millisecond)
	}
	p.stop(t, syscall.SIGKILL)
	p2 := startAx(t, env)
	final := waitBackfill(t, p2.base, tok, bid, 10*time.Minute)
	close(stop)
	<-sampled
	require.Equal(t, "succeeded", final["state"], "%v", final)
	require.EqualValues(t, 8760, final["created"])
	require.EqualValues(t, 8760, final["succeeded"])
	require.LessOrEqual(t, maxUnfinished.Load(), int64(8), "never more than max_concurrency unfinished")
	require.LessOrEqual(t, recv.maxIn.Load(), int32(8))

	var slots, execs, rounds int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(DISTINCT scheduled_for), count(*), max(round)
		FROM executions WHERE task_id = $1 AND scheduled_for < '2026-01-01'`, id).Scan(&slots, &execs, &rounds))
	require.Equal(t, 8760, slots)
	require.Equal(t, 8760, execs, "no slot created twice across the restart")
	require.Equal(t, 1, rounds)
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC); at.Before(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); at = at.Add(time.Hour) {
		require.Len(t, recv.got[at.Format(time.RFC3339)+"#1"], 1, "slot %s delivered by one execution", at)
	}
	p2.stop(t, syscall.SIGTERM)
}

// TestConcurrentBackfillsKeepRoundsUnique runs four backfills of the same
// range at once, twice: with rerun missing every slot ends with exactly
// one execution; with rerun all, rounds of a slot are never duplicated.
func TestConcurrentBackfillsKeepRoundsUnique(t *testing.T) {
	t.Parallel()
	env := backfillEnv(t)
	recv := newRoundReceiver(t, time.Millisecond)
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "r", "url": recv.srv.URL + "/hook"})
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "quarter-hour", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "*/15 * * * *"},
	})
	id := task["id"].(string)
	pool, err := pgxpool.New(context.Background(), env["AX_DATABASE_URL"])
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	for _, rerun := range []string{"missing", "all"} {
		type created struct {
			code int
			body []byte
			err  error
		}
		answers := make(chan created, 4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				code, body, err := tryDo(t.Context(), http.MethodPost, p.base+"/v1/tasks/"+id+"/backfill", tok, map[string]any{
					"from": "2026-02-01T00:00:00Z", "to": "2026-02-03T00:00:00Z", "rerun": rerun, "max_concurrency": 16,
				})
				answers <- created{code, body, err}
			})
		}
		wg.Wait()
		close(answers)
		for a := range answers {
			require.NoError(t, a.err)
			require.Equal(t, http.StatusAccepted, a.code, "%s", a.body)
			var b struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(a.body, &b))
			waitBackfill(t, p.base, tok, b.ID, 2*time.Minute)
		}
		var dup int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM (
			SELECT scheduled_for, round FROM executions WHERE task_id = $1 AND scheduled_for < '2026-02-03' GROUP BY 1, 2 HAVING count(*) > 1) d`, id).Scan(&dup))
		require.Zero(t, dup, "no round of a slot twice (%s)", rerun)
		var slots, minPer, maxPer int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), min(n), max(n) FROM (
			SELECT scheduled_for, count(*) AS n FROM executions WHERE task_id = $1 AND scheduled_for < '2026-02-03' GROUP BY 1) s`, id).Scan(&slots, &minPer, &maxPer))
		require.Equal(t, 192, slots)
		if rerun == "missing" {
			require.Equal(t, 1, minPer, "one execution per slot")
			require.Equal(t, 1, maxPer, "one execution per slot")
		} else {
			require.GreaterOrEqual(t, minPer, 2, "every slot re-run at least once")
			require.LessOrEqual(t, maxPer, 5)
		}
	}
	// Every delivery carried its execution's round.
	rows, err := pool.Query(context.Background(), `SELECT scheduled_for, round, id::text FROM executions WHERE task_id = $1 AND scheduled_for < '2026-02-03'`, id)
	require.NoError(t, err)
	recv.mu.Lock()
	for rows.Next() {
		var at time.Time
		var round int
		var xid string
		require.NoError(t, rows.Scan(&at, &round, &xid))
		require.True(t, recv.got[at.UTC().Format(time.RFC3339)+"#"+strconv.Itoa(round)][xid], "%s round %d", at, round)
	}
	recv.mu.Unlock()
	require.NoError(t, rows.Err())
	p.stop(t, syscall.SIGTERM)
}

// TestSkipAndCalendars: a task firing every second. Skipping a future
// slot records it skipped and it is never sent; a time that is not a slot,
// or a past one, is a 422. A calendar that excludes today, added to the
// schedule, stops the fires at once (the materialised ones are cancelled);
// the preview lists excluded slots; the calendar cannot be deleted while
// used; emptied, the task fires again.
func TestSkipAndCalendars(t *testing.T) {
	t.Parallel()
	env := backfillEnv(t)
	recv := newSlotReceiver(t)
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "s", "url": recv.srv.URL + "/hook"})
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "every-second", "endpoint_id": ep["id"], "schedule": map[string]any{"type": "cron", "cron": "* * * * * *"},
	})
	id := task["id"].(string)

	// Far enough ahead for a loaded machine to answer the calls below first.
	skipAt := time.Now().UTC().Truncate(time.Second).Add(20 * time.Second)
	x := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/skip", tok, map[string]any{"scheduled_for": skipAt.Format(time.RFC3339)}, http.StatusOK)
	require.Equal(t, "skipped", x["state"])
	require.Equal(t, "skipped by request", x["last_error"])
	again := apiDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/skip", tok, map[string]any{"scheduled_for": skipAt.Format(time.RFC3339)}, http.StatusOK)
	require.Equal(t, x["id"], again["id"])
	for _, bad := range []string{skipAt.Add(500 * time.Millisecond).Format(time.RFC3339Nano), time.Now().Add(-time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)} {
		code, _, body := rawDo(t, http.MethodPost, p.base+"/v1/tasks/"+id+"/skip", tok, map[string]any{"scheduled_for": bad})
		require.Equal(t, http.StatusUnprocessableEntity, code, "%s: %s", bad, body)
		require.Contains(t, string(body), "scheduled_for")
	}
	require.Eventually(t, func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return len(recv.got[skipAt.Add(2*time.Second)]) > 0
	}, time.Until(skipAt)+time.Minute, 100*time.Millisecond, "the slots after the skipped one are sent")
	recv.mu.Lock()
	require.Empty(t, recv.got[skipAt], "the skipped slot was not sent")
	require.NotEmpty(t, recv.got[skipAt.Add(time.Second)], "the next one was")
	recv.mu.Unlock()

	// A calendar excluding today (and tomorrow, in case the test crosses
	// midnight).
	now := time.Now().UTC()
	cal := apiPost(t, p.base, tok, "/v1/calendars", map[string]any{
		"name": "today", "dates": []string{now.AddDate(0, 0, 1).Format(time.DateOnly), now.Format(time.DateOnly), now.Format(time.DateOnly)},
	})
	require.Equal(t, []any{now.Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly)}, cal["dates"], "sorted, unique")
	code, _, body := rawDo(t, http.MethodPatch, p.base+"/v1/tasks/"+id, tok, map[string]any{
		"schedule": map[string]any{"type": "cron", "cron": "* * * * * *", "exclude_calendars": []string{"01900000-0000-7000-8000-000000000000"}},
	})
	require.Equal(t, http.StatusUnprocessableEntity, code, "%s", body)
	patched := apiDo(t, http.MethodPatch, p.base+"/v1/tasks/"+id, tok, map[string]any{
		"schedule": map[string]any{"type": "cron", "cron": "* * * * * *", "exclude_calendars": []string{cal["id"].(string)}},
	}, http.StatusOK)
	answered := time.Now().UTC()
	require.Equal(t, []any{cal["id"]}, patched["schedule"].(map[string]any)["exclude_calendars"])
	preview := apiGet(t, p.base, tok, "/v1/tasks/"+id+"/preview?count=3")
	require.NotEmpty(t, preview["excluded"])
	for _, it := range preview["items"].([]any) {
		at, err := time.Parse(time.RFC3339, it.(map[string]any)["at"].(string))
		require.NoError(t, err)
		require.True(t, at.After(now.AddDate(0, 0, 2).Truncate(24*time.Hour).Add(-time.Second)), "fires resume after the excluded dates: %s", at)
	}
	code, _, body = rawDo(t, http.MethodDelete, p.base+"/v1/calendars/"+cal["id"].(string), tok, nil)
	require.Equal(t, http.StatusConflict, code, "%s", body)

	time.Sleep(4 * time.Second)
	recv.mu.Lock()
	for slot := range recv.got {
		require.False(t, slot.After(answered.Add(time.Second)), "slot %s fired after the calendar excluded it", slot)
	}
	recv.mu.Unlock()

	// The calendar emptied: the task fires again.
	apiDo(t, http.MethodPatch, p.base+"/v1/calendars/"+cal["id"].(string), tok, map[string]any{"dates": []string{}}, http.StatusOK)
	resumed := time.Now().UTC()
	require.Eventually(t, func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		for slot := range recv.got {
			if slot.After(resumed) {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "fires resume once the calendar no longer excludes today")
	got := apiGet(t, p.base, tok, "/v1/calendars/"+cal["id"].(string))
	require.Empty(t, got["dates"])
	var list struct{ Items []map[string]any }
	_, _, raw := rawDo(t, http.MethodGet, p.base+"/v1/calendars", tok, nil)
	require.NoError(t, json.Unmarshal(raw, &list))
	require.Len(t, list.Items, 1)
	p.stop(t, syscall.SIGTERM)
}
