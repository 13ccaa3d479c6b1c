package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/pglocal"
)

// How TestPostgresCrash loads ax and crashes its database.
const (
	crashTasks     = 200             // interval tasks, every second: 200 fires a second
	crashSkipEvery = 4               // every 4th task has overlap_policy skip
	crashWarmUp    = 5 * time.Second // firing before the first kill
	crashUp        = 4 * time.Second // at least, between a restart and the next kill
	crashLongDown  = 30 * time.Second
)

// crashOutages is how long the database stays down after each kill: a few
// seconds, once crashLongDown.
var crashOutages = []time.Duration{
	3 * time.Second, 4 * time.Second, 5 * time.Second, 3 * time.Second, 4 * time.Second,
	crashLongDown, 3 * time.Second, 5 * time.Second, 4 * time.Second, 3 * time.Second,
}

// What TestPostgresCrash requires once the kills stop.
const (
	// crashSettle bounds how long after the last restart every execution
	// whose slot is older than crashInFlight must be final: a delivery the
	// crashes interrupted is resumed within it (River's rescuer, shortened
	// to seconds below, or ax's own recovery), or it never will be.
	crashSettle = 90 * time.Second
	// crashInFlight: executions of the last seconds may still be on their
	// way, and are not required to be final.
	crashInFlight = 5 * time.Second
	// crashRecent is the window, before crashInFlight, in which every task
	// must have succeeded executions at the end: still firing.
	crashRecent = 10 * time.Second
)

// crashHook is one webhook the receiver got.
type crashHook struct {
	task, execution, attempt string
	slot, at                 time.Time
}

// crashLoadReceiver answers every webhook 200 at once and records it; one
// whose webhook-id, idempotency key and execution id differ is bad.
type crashLoadReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	hooks []crashHook
	bad   []string
}

func newCrashLoadReceiver(t *testing.T) *crashLoadReceiver {
	t.Helper()
	r := &crashLoadReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		h := crashHook{
			task: req.Header.Get("X-Ax-Task-Id"), execution: req.Header.Get("Webhook-Id"),
			attempt: req.Header.Get("X-Ax-Attempt"), at: time.Now(),
		}
		slot, err := time.Parse(time.RFC3339Nano, req.Header.Get("X-Ax-Scheduled-For"))
		h.slot = slot
		r.mu.Lock()
		if err != nil || h.task == "" || h.execution == "" || req.Header.Get("X-Ax-Execution-Id") != h.execution ||
			req.Header.Get("Idempotency-Key") != h.execution {
			r.bad = append(r.bad, fmt.Sprintf("%v", req.Header))
		}
		r.hooks = append(r.hooks, h)
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *crashLoadReceiver) snapshot() ([]crashHook, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hooks), slices.Clone(r.bad)
}

// apiProbe calls the API of each replica a few times a second and counts
// the answers by phase: "down" (the whole call while the database was
// down), "edge" (it was being killed or restarted during the call) and
// "up".
type apiProbe struct {
	// outage counts the transitions: incremented before and after each
	// kill and each restart, so it is 0 mod 4 while the database is up
	// and 2 mod 4 while it is down (killed, not yet restarting).
	outage  atomic.Int64
	mu      sync.Mutex
	counts  map[string]int           // "down 503", "up 200", "edge 503", …
	samples map[string]string        // the first answer of each kind that is not allowed
	slowest map[string]time.Duration // by phase
}

// probeAllowed are the answers the API may give, by phase: while the
// database is down, only 503 problem+json with a Retry-After (docs/
// operations.md, Health); around a kill or a restart and while the pool
// recovers after one, that or 200.
var probeAllowed = map[string]bool{
	"down 503": true,
	"edge 200": true, "edge 503": true,
	"up 200": true, "up 503": true,
}

func (p *apiProbe) run(ctx context.Context, base, token string) {
	client := &http.Client{Timeout: 10 * time.Second}
	for ctx.Err() == nil {
		before := p.outage.Load()
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/tasks?limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := client.Do(req)
		answer, detail := "error", fmt.Sprint(err)
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			answer, detail = probeAnswer(res, body)
		}
		took := time.Since(start)
		if ctx.Err() != nil {
			return
		}
		phase := "edge"
		if after := p.outage.Load(); after == before && before%4 == 0 {
			phase = "up"
		} else if after == before && before%4 == 2 {
			phase = "down"
		}
		key := phase + " " + answer
		p.mu.Lock()
		p.counts[key]++
		if _, seen := p.samples[key]; !seen && !probeAllowed[key] {
			p.samples[key] = detail
		}
		p.slowest[phase] = max(p.slowest[phase], took)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probeAnswer names an answer: its status, and for a 503 what it lacks of
// the documented one (problem+json, type …/unavailable, a positive
// Retry-After), with the answer itself as the detail.
func probeAnswer(res *http.Response, body []byte) (answer, detail string) {
	answer = strconv.Itoa(res.StatusCode)
	detail = fmt.Sprintf("%d %v %s", res.StatusCode, res.Header, body)
	if res.StatusCode != http.StatusServiceUnavailable {
		return answer, detail
	}
	var prob struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if retry, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || retry <= 0 {
		answer += " without a Retry-After"
	}
	if res.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &prob) != nil ||
		prob.Type != "https://ax.dev/problems/unavailable" || prob.Status != http.StatusServiceUnavailable {
		answer += " not the unavailable problem"
	}
	return answer, detail
}

// logTally counts the lines of ax's JSON log by level and message, instead
// of writing the thousands that the outages cause to the test's log.
type logTally struct {
	mu     sync.Mutex
	counts map[string]int
	first  map[string]string
}

// writer returns a writer for one process's log (lines are split across
// writes), feeding the tally.
func (l *logTally) writer() io.Writer { return &tallyWriter{tally: l} }

type tallyWriter struct {
	tally *logTally
	buf   []byte
}

func (w *tallyWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.tally.add(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func (l *logTally) add(line string) {
	var rec struct{ Level, Msg string }
	key := line
	if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != "" {
		key = rec.Level + " " + rec.Msg
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts[key] == 0 {
		l.first[key] = line
	}
	l.counts[key]++
}

// report logs each distinct message with its count and its first line.
func (l *logTally) report(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.counts))
	for k := range l.counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return l.counts[keys[i]] > l.counts[keys[j]] })
	for _, k := range keys {
		first := l.first[k]
		if len(first) > 400 {
			first = first[:400] + "…"
		}
		t.Logf("ax log ×%d: %s", l.counts[k], first)
	}
}

// TestPostgresCrash kills PostgreSQL (SIGKILL to the postmaster and all its
// processes, as a crash of its host or container does) again and again
// under 200 fires a second on two replicas, restarts it each time, then
// stops killing and requires that ax converges: every execution not of the
// last few seconds is final within crashSettle, no slot fired twice, and
// every task — the overlap_policy skip ones above all, which a stuck
// execution would silence for good — still fires at the end.
//
// The cluster is the test's own (it is killed), listening on TCP as a
// deployment's server does, with synchronous_commit on as PostgreSQL's
// default (ax turns it off only for the start of an attempt); fsync stays
// off as in every test cluster, which loses nothing here since the kernel
// outlives the killed processes.
func TestPostgresCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills PostgreSQL ten times under load: minutes")
	}
	require.Len(t, crashOutages, 10)
	ctx := t.Context()
	dir, err := os.MkdirTemp("", "ax-crash-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cluster, err := pglocal.Start(ctx, pglocal.Config{
		Dir: dir, TCPPort: pglocal.AnyTCPPort,
		Settings: map[string]string{"synchronous_commit": "on"},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cluster.Stop(stopCtx)
	})
	require.NoError(t, cluster.CreateDatabase(ctx, "ax"))
	dbURL := cluster.TCPURL("ax")

	env := map[string]string{
		"AX_DATABASE_URL":          dbURL,
		"AX_JWT_SECRET":            "pg-crash-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
		// A job whose run a crash cut short stays running in River until
		// its rescuer retries it: make that seconds, not minutes.
		"AX_JOB_TIMEOUT":             "5s",
		"AX_RESCUE_STUCK_JOBS_AFTER": "6s",
	}
	recv := newCrashLoadReceiver(t)
	logs := &logTally{counts: map[string]int{}, first: map[string]string{}}
	t.Cleanup(func() { logs.report(t) })
	a := startAxLogTo(t, logs.writer(), env) // migrates the database
	b := startAxLogTo(t, logs.writer(), env)
	tok := cliToken(t, env, "pgcrash", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook"})

	// The tasks' slots spread over the second, from a first one a few
	// seconds ahead.
	first := time.Now().Add(5 * time.Second).Truncate(time.Second)
	var (
		wg      sync.WaitGroup
		next    = make(chan int)
		errs    = make(chan error, crashTasks)
		skipIDs sync.Map
	)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				policy := "allow"
				if i%crashSkipEvery == 0 {
					policy = "skip"
				}
				id, err := createCrashTask(ctx, a.base, tok, ep["id"].(string), i,
					first.Add(time.Second*time.Duration(i)/crashTasks), policy)
				if err != nil {
					errs <- err
					continue
				}
				if policy == "skip" {
					skipIDs.Store(id, true)
				}
			}
		})
	}
	for i := range crashTasks {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	probe := &apiProbe{counts: map[string]int{}, samples: map[string]string{}, slowest: map[string]time.Duration{}}
	probeCtx, stopProbe := context.WithCancel(ctx)
	var probes sync.WaitGroup
	for _, p := range []*proc{a, b} {
		probes.Go(func() { probe.run(probeCtx, p.base, tok) })
	}

	// Kill, wait, restart, let it fire a few seconds; again. Each kill
	// lands at a random instant of the second, among deliveries in flight.
	time.Sleep(time.Until(first.Add(crashWarmUp)))
	var kills, restarts []time.Time
	for i, down := range crashOutages {
		time.Sleep(crashUp + rand.N(time.Second))
		probe.outage.Add(1)
		kills = append(kills, time.Now())
		require.NoError(t, cluster.Kill())
		probe.outage.Add(1)
		time.Sleep(down)
		probe.outage.Add(1)
		require.NoError(t, cluster.Restart(ctx))
		restarts = append(restarts, time.Now())
		probe.outage.Add(1)
		hooks, _ := recv.snapshot()
		t.Logf("kill %d at %s, down %s; %d webhooks so far", i+1, kills[i].Format("15:04:05.000"),
			restarts[i].Sub(kills[i]).Round(time.Millisecond), len(hooks))
	}
	lastRestart := restarts[len(restarts)-1]

	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// Settle: wait until every execution but those of the last seconds is
	// final, for crashSettle at most.
	var nonFinal int
	for {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM executions
			WHERE state IN ('pending', 'running', 'retrying') AND scheduled_for < now() - $1::interval`,
			crashInFlight).Scan(&nonFinal)
		if (err == nil && nonFinal == 0) || time.Since(lastRestart) > crashSettle {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("settled %s after the last restart: %d executions older than %s not final",
		time.Since(lastRestart).Round(time.Millisecond), nonFinal, crashInFlight)
	// A skip task fires again only once what blocked it is final: let the
	// window that requirement 3 looks at pass after the settling.
	time.Sleep(crashInFlight + crashRecent)
	stopProbe()
	probes.Wait()
	for _, p := range []*proc{a, b} {
		select {
		case <-p.done:
			t.Errorf("replica %s exited during the crashes: %s", p.base, p.Stdout())
		default:
		}
	}

	// How ax behaved: the API's answers while the database was down and
	// up, and how long after each restart webhooks flowed again.
	hooks, bad := recv.snapshot()
	t.Logf("API answers (GET /v1/tasks, both replicas): %v; slowest: %v", probe.counts, probe.slowest)
	// 0. While the database is down the API answers 503 with a
	// Retry-After, never a 500 or nothing; around the outages, that or 200.
	var wrong []string
	for k, n := range probe.counts {
		if !probeAllowed[k] {
			wrong = append(wrong, fmt.Sprintf("%s ×%d, the first: %s", k, n, probe.samples[k]))
		}
	}
	sort.Strings(wrong)
	assert.Empty(t, wrong, "API answers other than 503 with Retry-After while the database was down (or than 200 and that around it)")
	assert.Positive(t, probe.counts["down 503"], "the probe saw the outages")
	for i, r := range restarts {
		var firstAfter time.Time
		for _, h := range hooks {
			if h.at.After(r) && (firstAfter.IsZero() || h.at.Before(firstAfter)) {
				firstAfter = h.at
			}
		}
		if !firstAfter.IsZero() {
			t.Logf("restart %d: first webhook %s later", i+1, firstAfter.Sub(r).Round(time.Millisecond))
		}
	}
	require.Empty(t, bad, "webhooks without the ax headers")
	perExecution := map[string]int{}
	for _, h := range hooks {
		perExecution[h.execution]++
	}

	// The three requirements are checked independently (assert), so that
	// a failure shows all that went wrong.
	//
	// 1. Nothing stuck: every execution older than the last seconds is
	// final. Each one that is not is shown with the River job that carries
	// it (its own, or the batch it is a member of) and the kill nearest
	// its slot.
	type stuck struct {
		ID, TaskID, State, Policy string
		ScheduledFor              time.Time
		Attempts, Lease           int
		RiverJobID                *int64
		JobID                     *int64
		JobKind, JobState         *string
		JobAttempt                *int
		JobFinalizedAt, StartedAt *time.Time
		JobAttemptedAt            *time.Time
		JobAttemptedBy            *string
	}
	rows, err := pool.Query(ctx, `SELECT e.id::text, e.task_id::text, e.state, t.overlap_policy, e.scheduled_for,
			e.attempts, e.lease_attempt, e.river_job_id, j.id, j.kind, j.state::text, j.attempt, j.finalized_at, e.started_at,
			j.attempted_at, array_to_string(j.attempted_by, ',')
		FROM executions e
		JOIN tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
		LEFT JOIN LATERAL (
			SELECT id, kind, state, attempt, finalized_at, attempted_at, attempted_by FROM river_job
			WHERE id = e.river_job_id
			   OR (e.river_job_id IS NULL AND kind = 'deliver_batch' AND args->>'executions' LIKE '%.' || e.id::text || '.%')
			ORDER BY id DESC LIMIT 1) j ON true
		WHERE e.state IN ('pending', 'running', 'retrying') AND e.scheduled_for < now() - $1::interval
		ORDER BY e.scheduled_for`, crashInFlight)
	require.NoError(t, err)
	stuckRows, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stuck])
	require.NoError(t, err)
	summary := map[string]int{}
	var lines []string
	str := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	for _, s := range stuckRows {
		key := fmt.Sprintf("%s, river_job_id %v, job %s %s", s.State, s.RiverJobID != nil, str(s.JobKind), str(s.JobState))
		summary[key]++
		nearest := kills[0]
		for _, k := range kills {
			if k.Sub(s.ScheduledFor).Abs() < nearest.Sub(s.ScheduledFor).Abs() {
				nearest = k
			}
		}
		job := "none"
		if s.JobID != nil {
			job = fmt.Sprintf("%d %s %s, attempt %d", *s.JobID, *s.JobKind, *s.JobState, *s.JobAttempt)
			if s.JobFinalizedAt != nil {
				job += ", finalized " + s.JobFinalizedAt.Format("15:04:05.000")
			}
			if s.JobAttemptedAt != nil {
				job += fmt.Sprintf(", fetched %s by %s", s.JobAttemptedAt.Format("15:04:05.000"), str(s.JobAttemptedBy))
			}
		}
		started := "-"
		if s.StartedAt != nil {
			started = s.StartedAt.Format("15:04:05.000")
		}
		lines = append(lines, fmt.Sprintf("execution %s (task %s, %s) slot %s (%+dms from a kill) %s, started %s, attempts %d, lease %d, received %d times; job %s",
			s.ID, s.TaskID, s.Policy, s.ScheduledFor.Format("15:04:05.000"), s.ScheduledFor.Sub(nearest).Milliseconds(),
			s.State, started, s.Attempts, s.Lease, perExecution[s.ID], job))
	}
	if len(lines) > 0 {
		t.Logf("%d executions not final %s after the last restart, by state and job: %v", len(stuckRows),
			time.Since(lastRestart).Round(time.Second), summary)
	}
	assert.Empty(t, lines, "executions older than %s not final %s after the last restart", crashInFlight, crashSettle)

	// 2. No slot fired twice: one execution per slot in the database, and
	// the receiver got each slot under one execution id only — the one
	// the database holds. (An execution sent again after a crash, with
	// the same id, is at-least-once delivery; it is counted, not refused.)
	var twice int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM executions WHERE trigger = 'schedule'
		GROUP BY task_id, scheduled_for HAVING count(*) > 1) d`).Scan(&twice))
	assert.Zero(t, twice, "slots with two executions")
	rows, err = pool.Query(ctx, `SELECT id::text, task_id::text, scheduled_for FROM executions WHERE tenant_id = 'pgcrash'`)
	require.NoError(t, err)
	type slotKey struct {
		task string
		slot int64
	}
	bySlot := map[slotKey]string{}
	for rows.Next() {
		var id, task string
		var slot time.Time
		require.NoError(t, rows.Scan(&id, &task, &slot))
		bySlot[slotKey{task, slot.UnixMicro()}] = id
	}
	require.NoError(t, rows.Err())
	received := map[slotKey]map[string]bool{}
	perAttempt := map[string]int{}
	for _, h := range hooks {
		k := slotKey{h.task, h.slot.UnixMicro()}
		if received[k] == nil {
			received[k] = map[string]bool{}
		}
		received[k][h.execution] = true
		perAttempt[h.execution+"#"+h.attempt]++
	}
	var doubles []string
	for k, ids := range received {
		if len(ids) > 1 || !ids[bySlot[k]] {
			doubles = append(doubles, fmt.Sprintf("task %s slot %s: received %v, database %q",
				k.task, time.UnixMicro(k.slot).Format("15:04:05.000"), ids, bySlot[k]))
		}
	}
	sort.Strings(doubles)
	assert.Empty(t, doubles, "slots fired twice, or received under an id the database does not hold")
	var resent, sameAttempt int
	for _, n := range perExecution {
		if n > 1 {
			resent++
		}
	}
	for _, n := range perAttempt {
		if n > 1 {
			sameAttempt++
		}
	}
	// The resent ones by their attempt numbers in order of arrival ("1,2":
	// resumed after a crash), and how long after the first the last came.
	attemptsOf := map[string][]string{}
	span := map[string][2]time.Time{}
	for _, h := range hooks {
		if perExecution[h.execution] > 1 {
			attemptsOf[h.execution] = append(attemptsOf[h.execution], h.attempt)
			sp, ok := span[h.execution]
			if !ok {
				sp[0] = h.at
			}
			sp[1] = h.at
			span[h.execution] = sp
		}
	}
	patterns := map[string]int{}
	var gaps []time.Duration
	for id, as := range attemptsOf {
		patterns[strings.Join(as, ",")]++
		gaps = append(gaps, span[id][1].Sub(span[id][0]))
	}
	slices.Sort(gaps)
	t.Logf("%d webhooks, %d slots; %d executions received more than once (%d times an attempt number twice), by attempts: %v",
		len(hooks), len(received), resent, sameAttempt, patterns)
	if len(gaps) > 0 {
		t.Logf("resent after p50 %s, max %s", gaps[len(gaps)/2].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond))
	}

	// 3. Every task still fires at the end: it has succeeded executions in
	// the last seconds before the in-flight ones. A skip task that a stuck
	// execution silenced has only skipped ones.
	rows, err = pool.Query(ctx, `SELECT t.id::text, t.overlap_policy, t.state,
			count(*) FILTER (WHERE e.state = 'succeeded'), string_agg(DISTINCT e.state, ',')
		FROM tasks t LEFT JOIN executions e ON e.tenant_id = t.tenant_id AND e.task_id = t.id
			AND e.scheduled_for BETWEEN now() - $1::interval - $2::interval AND now() - $1::interval
		WHERE t.tenant_id = 'pgcrash'
		GROUP BY t.id, t.overlap_policy, t.state`, crashInFlight, crashRecent)
	require.NoError(t, err)
	var silent []string
	var tasks, skipTasks int
	for rows.Next() {
		var id, policy, state string
		var succeeded int
		var states *string
		require.NoError(t, rows.Scan(&id, &policy, &state, &succeeded, &states))
		tasks++
		if _, ok := skipIDs.Load(id); ok {
			skipTasks++
			require.Equal(t, "skip", policy)
		}
		if succeeded == 0 {
			silent = append(silent, fmt.Sprintf("task %s (%s, %s): executions of the last %s: %s", id, policy, state, crashRecent, str(states)))
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, crashTasks, tasks)
	require.Equal(t, crashTasks/crashSkipEvery, skipTasks)
	sort.Strings(silent)
	require.Empty(t, silent, "tasks that no longer fire")
}

func createCrashTask(ctx context.Context, base, tok, endpointID string, i int, start time.Time, overlap string) (string, error) {
	body, err := json.Marshal(map[string]any{
		"name": fmt.Sprintf("crash.%03d", i), "endpoint_id": endpointID, "payload": map[string]any{"i": i},
		"overlap_policy": overlap,
		"schedule":       map[string]any{"type": "interval", "interval_seconds": 1, "start_at": start.UTC().Format(time.RFC3339Nano)},
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tasks", bytes.NewReader(body))
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
		return "", fmt.Errorf("create task %d: %d %s", i, res.StatusCode, strings.TrimSpace(string(raw)))
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}
