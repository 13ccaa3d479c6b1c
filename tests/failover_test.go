package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/pglocal"
)

// How TestFailover loads ax and fails its database over.
const (
	failoverIntervalTasks = 60 // interval tasks, every second
	failoverCronTasks     = 20 // cron tasks, every second
	failoverOnceTasks     = 20 // once tasks, due from the standby's lag to after the promotion
	// failoverWarmUp is how long the tasks fire before the failover.
	failoverWarmUp = 5 * time.Second
	// failoverLag is how long the standby stops following the primary
	// before the kill: longer than the scheduler writes slots ahead
	// (service.LookAheadDefault), so that with an asynchronous standby
	// slots are fired, delivered and then lost with the primary.
	failoverLag = 6 * time.Second
	// failoverDetect is the time from the primary's death to the
	// standby's promotion: what an HA manager (Patroni, CloudNativePG)
	// takes to notice and decide.
	failoverDetect = time.Second
	// failoverAfter is how long the test keeps firing and calling the API
	// after the promotion; the slots until failoverWindowEndsBefore its
	// end are the last the test requires.
	failoverAfter            = 12 * time.Second
	failoverWindowEndsBefore = 4 * time.Second
	// failoverSettle bounds how long after the window every execution of
	// it must be final. ax runs with its own settings: a River job whose
	// fetch or end the kill left in doubt (committed on the standby, but
	// River got an error) is running under a live replica that is not
	// working it, and that replica makes it available again once it was
	// fetched 30 s ago, looking every 30 s (jobs.RunReplica's stranded
	// jobs): within a minute of the kill.
	failoverSettle = 2 * time.Minute
	// failoverAnswerWithin bounds every API call. While the standby lags,
	// a write waits for it (failoverLag) and fails when the primary dies.
	// While no primary answers, a call fails once its connection attempt
	// does: each host refuses, is read-only, or is given up after
	// connect_timeout (10 s unless the URL says otherwise,
	// db.ConnectTimeoutDefault; here they refuse at once). So 10 s plus a
	// margin for a loaded machine: a call that takes longer hangs.
	failoverAnswerWithin = 15 * time.Second
)

// failoverAnswer is one API call the probe made and what came back.
type failoverAnswer struct {
	replica, call, phase string
	status               int // 0: no answer (err)
	retryAfter, problem  string
	err                  string
	took                 time.Duration
	at                   time.Time // when the answer came
	created              string    // the id of a task a 201 created
}

// failoverProbe calls the API of one replica steadily: a read and a write
// in turn, each answer recorded with the phase it came in.
type failoverProbe struct {
	mu      sync.Mutex
	phase   string // "before", "gap" (primary dead, standby not yet promoted), "after"
	answers []failoverAnswer
}

func (p *failoverProbe) setPhase(phase string) {
	p.mu.Lock()
	p.phase = phase
	p.mu.Unlock()
}

func (p *failoverProbe) currentPhase() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.phase
}

func (p *failoverProbe) run(ctx context.Context, replica, base, tok, endpointID string) {
	client := &http.Client{Timeout: failoverAnswerWithin}
	for i := 0; ctx.Err() == nil; i++ {
		call, method, path := "list tasks", http.MethodGet, "/v1/tasks?limit=1"
		var body []byte
		if i%2 == 1 {
			call, method, path = "create task", http.MethodPost, "/v1/tasks"
			// Never due within the test: it adds no slot.
			body, _ = json.Marshal(map[string]any{
				"name": fmt.Sprintf("probe.%s.%d", replica, i), "endpoint_id": endpointID,
				"schedule": map[string]any{"type": "cron", "cron": "0 0 1 1 *"},
			})
		}
		start := time.Now()
		req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), method, base+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		a := failoverAnswer{replica: replica, call: call}
		res, err := client.Do(req)
		a.at = time.Now()
		a.took = a.at.Sub(start)
		if err != nil {
			a.err = err.Error()
		} else {
			raw, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			a.status, a.retryAfter = res.StatusCode, res.Header.Get("Retry-After")
			if res.StatusCode == http.StatusCreated {
				var out struct {
					ID string `json:"id"`
				}
				_ = json.Unmarshal(raw, &out)
				a.created = out.ID
			}
			if res.StatusCode >= 300 {
				a.problem = res.Header.Get("Content-Type") + " " + strings.TrimSpace(string(raw))
			}
		}
		a.phase = p.currentPhase()
		p.mu.Lock()
		p.answers = append(p.answers, a)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestFailover fails ax's database over under load, as an HA setup does:
// a primary with a synchronous streaming standby, ax given both in a
// multi-host AX_DATABASE_URL with target_session_attrs=read-write, the
// primary killed (postmaster and every server process at once: its host
// dies) while 80 tasks fire every second on two replicas, and the standby
// promoted a second later. The standby is made to fall behind just before
// the kill, so that the primary dies holding commits the standby lacks:
// with an asynchronous standby ax loses acknowledged writes then, and
// fires slots again under new ids (seen with synchronous_standby_names
// unset). ax runs with its default settings and is not restarted. It
// requires:
//
//   - every API call, on both replicas, throughout, answers a success or
//     503 problem+json with a Retry-After (never a 500, never a hang past
//     failoverAnswerWithin), and some fell into the gap (503);
//   - every task a call created (201) is on the new primary: no
//     acknowledged write lost;
//   - both replicas came back by themselves: they heartbeat again, their
//     River clients fetch jobs from the new primary and one of them leads
//     River there, their task-change listeners listen there, and webhooks
//     flow for slots after the promotion;
//   - no slot lost: under misfire_policy fire_all every slot of every task
//     from the first to a few seconds before the end (the once tasks'
//     included, due around the failover) has one execution, succeeded,
//     and the receiver got it;
//   - no slot doubled: the receiver never got one slot under two
//     webhook-ids (idempotency keys), and only under the id of the
//     execution the database holds. (One execution sent again after the
//     kill, under the same id, is at-least-once delivery: counted, not
//     refused.)
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("fails PostgreSQL over under load: a minute or two")
	}
	ctx := t.Context()

	// The primary waits on every commit until the standby has it on disk
	// (synchronous_commit on, the standby named in
	// synchronous_standby_names); the standby, once promoted, has no
	// standby of its own and commits alone.
	primary := startFailoverCluster(t, pglocal.Config{Settings: map[string]string{
		"synchronous_commit": "on", "synchronous_standby_names": "ax_standby",
	}})
	standby := startFailoverCluster(t, pglocal.Config{
		StandbyOf: primary, StandbyName: "ax_standby",
		Settings: map[string]string{"synchronous_commit": "on"},
	})
	admin, err := pgx.Connect(ctx, primary.TCPURL("postgres"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		err := admin.QueryRow(ctx, `SELECT sync_state FROM pg_stat_replication WHERE application_name = 'ax_standby'`).Scan(&state)
		return err == nil && state == "sync"
	}, 60*time.Second, 50*time.Millisecond, "the standby streams synchronously")
	require.NoError(t, admin.Close(ctx))
	require.NoError(t, primary.CreateDatabase(ctx, "ax"))

	// One URL per replica, told apart on the server by application_name.
	dbURL := func(name string) string {
		return fmt.Sprintf("postgres://%s@%s,%s/ax?sslmode=disable&target_session_attrs=read-write&application_name=%s",
			pglocal.Superuser, hostPort(t, primary), hostPort(t, standby), name)
	}
	env := func(name string) map[string]string {
		return map[string]string{
			"AX_DATABASE_URL":          dbURL(name),
			"AX_JWT_SECRET":            "failover-test-secret-0123456789abcdef0123456789",
			"AX_ALLOW_PRIVATE_TARGETS": "true",
		}
	}
	recv := newCrashLoadReceiver(t)
	logs := &logTally{counts: map[string]int{}, first: map[string]string{}}
	t.Cleanup(func() { logs.report(t) })
	replicas := map[string]*proc{}
	replicas["ax-a"] = startAxLogTo(t, logs.writer(), env("ax-a")) // migrates the database
	replicas["ax-b"] = startAxLogTo(t, logs.writer(), env("ax-b"))
	a := replicas["ax-a"]
	tok := cliToken(t, env("ax-a"), "failover", "tasks:read tasks:write endpoints:read endpoints:write executions:read")
	operatorTok := cliOperatorToken(t, env("ax-a"), "ops")
	ep := apiPost(t, a.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook"})
	endpointID := ep["id"].(string)

	// Interval tasks spread over the second from a first slot a few
	// seconds ahead; cron tasks on every second; once tasks due from the
	// moment the standby falls behind to a few seconds after the
	// promotion.
	first := time.Now().Add(5 * time.Second).Truncate(time.Second)
	lagAt := first.Add(failoverWarmUp)
	intervalStart := map[string]time.Time{}
	var cronIDs []string
	onceAt := map[string]time.Time{}
	for i := range failoverIntervalTasks {
		start := first.Add(time.Second * time.Duration(i) / failoverIntervalTasks).Truncate(time.Millisecond)
		id := apiPost(t, a.base, tok, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("interval.%02d", i), "endpoint_id": endpointID, "payload": map[string]any{"i": i},
			"misfire_policy": "fire_all", "overlap_policy": "allow",
			"schedule": map[string]any{"type": "interval", "interval_seconds": 1, "start_at": start.UTC().Format(time.RFC3339Nano)},
		})["id"].(string)
		intervalStart[id] = start
	}
	for i := range failoverCronTasks {
		cronIDs = append(cronIDs, apiPost(t, a.base, tok, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("cron.%02d", i), "endpoint_id": endpointID, "payload": map[string]any{"i": i},
			"misfire_policy": "fire_all", "overlap_policy": "allow",
			"schedule": map[string]any{"type": "cron", "cron": "* * * * * *"},
		})["id"].(string))
	}
	onceSpan := failoverLag + failoverDetect + 3*time.Second
	for i := range failoverOnceTasks {
		at := lagAt.Add(onceSpan * time.Duration(i) / failoverOnceTasks).Truncate(time.Millisecond)
		id := apiPost(t, a.base, tok, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("once.%02d", i), "endpoint_id": endpointID, "payload": map[string]any{"i": i},
			"misfire_policy": "fire_all",
			"schedule":       map[string]any{"type": "once", "run_at": at.UTC().Format(time.RFC3339Nano)},
		})["id"].(string)
		onceAt[id] = at
	}
	// The window of required slots starts at the first whole second after
	// every task exists (a loaded machine may take longer than planned).
	windowStart := first
	if created := time.Now(); !created.Before(windowStart) {
		windowStart = created.Truncate(time.Second).Add(time.Second)
	}
	require.True(t, windowStart.Add(time.Second).Before(lagAt), "the tasks were created %s before the failover only",
		time.Until(lagAt))

	probes := map[string]*failoverProbe{}
	probeCtx, stopProbes := context.WithCancel(ctx)
	var probing sync.WaitGroup
	for name, p := range replicas {
		probe := &failoverProbe{phase: "before"}
		probes[name] = probe
		probing.Go(func() { probe.run(probeCtx, name, p.base, tok, endpointID) })
	}
	setPhase := func(phase string) {
		for _, p := range probes {
			p.setPhase(phase)
		}
	}

	time.Sleep(time.Until(lagAt))
	hooks, _ := recv.snapshot()
	require.NotEmpty(t, hooks, "webhooks flow before the failover")
	// The standby falls behind (its WAL receiver stopped, as on a slow
	// network) just before the primary dies: the primary then holds
	// commits the standby lacks. Synchronous replication acknowledged
	// none of them to ax.
	walReceiver := walReceiverPid(t, standby)
	require.NoError(t, syscall.Kill(walReceiver, syscall.SIGSTOP))
	time.Sleep(failoverLag)
	killed := time.Now()
	setPhase("gap")
	errKill := primary.Kill()
	require.NoError(t, syscall.Kill(walReceiver, syscall.SIGCONT))
	require.NoError(t, errKill)
	time.Sleep(failoverDetect)
	require.NoError(t, standby.Promote(ctx))
	// The standby takes writes from a little before Promote returns (it
	// polls for the end of the promotion): the few calls answered then
	// are counted in the gap.
	promoted := time.Now()
	setPhase("after")
	t.Logf("primary killed at %s, standby promoted %s later", killed.Format("15:04:05.000"),
		promoted.Sub(killed).Round(time.Millisecond))

	time.Sleep(failoverAfter)
	stopProbes()
	probing.Wait()
	windowEnd := promoted.Add(failoverAfter - failoverWindowEndsBefore)

	pool, err := pgxpool.New(ctx, standby.TCPURL("ax"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// Settle: every execution of the window final, within failoverSettle.
	var nonFinal int
	settleStart := time.Now()
	for {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM executions
			WHERE state IN ('pending', 'running', 'retrying') AND scheduled_for < $1`, windowEnd).Scan(&nonFinal)
		if (err == nil && nonFinal == 0) || time.Since(settleStart) > failoverSettle {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("executions of the window final %s after it ended (%d not)", time.Since(windowEnd).Round(time.Millisecond), nonFinal)
	for name, p := range replicas {
		select {
		case <-p.done:
			t.Fatalf("replica %s exited during the failover: %s", name, p.Stdout())
		default:
		}
	}

	// 1. The API's answers: a success, or 503 problem+json with a
	// Retry-After in seconds. Checked independently (assert), so that a
	// failure shows all that went wrong.
	var created []string
	counts := map[string]int{}
	slowest := map[string]time.Duration{}
	var wrong []string
	for name, probe := range probes {
		probe.mu.Lock()
		for _, a := range probe.answers {
			key := fmt.Sprintf("%s %s %d", a.phase, a.call, a.status)
			counts[key]++
			slowest[a.phase] = max(slowest[a.phase], a.took)
			if a.created != "" {
				created = append(created, a.created)
			}
			retry, convErr := strconv.Atoi(a.retryAfter)
			switch {
			case a.err != "":
				wrong = append(wrong, fmt.Sprintf("%s %s (%s): no answer after %s: %s", name, a.call, a.phase, a.took, a.err))
			case a.status == http.StatusOK || a.status == http.StatusCreated:
			case a.status == http.StatusServiceUnavailable && convErr == nil && retry > 0 &&
				strings.HasPrefix(a.problem, "application/problem+json "):
			default:
				wrong = append(wrong, fmt.Sprintf("%s %s (%s): %d Retry-After %q: %s", name, a.call, a.phase, a.status, a.retryAfter, a.problem))
			}
		}
		probe.mu.Unlock()
	}
	t.Logf("API answers (phase, call, status): %v; slowest by phase: %v", counts, slowest)
	assert.Empty(t, wrong, "API answers other than a success or 503 with Retry-After")
	var last503 time.Time
	for _, probe := range probes {
		for _, a := range probe.answers {
			if a.status == http.StatusServiceUnavailable && a.at.After(last503) {
				last503 = a.at
			}
		}
	}
	if !last503.IsZero() {
		t.Logf("last 503 %s after the kill (%s after the promotion)", last503.Sub(killed).Round(time.Millisecond),
			last503.Sub(promoted).Round(time.Millisecond))
	}
	unavailable := 0
	for key, n := range counts {
		if strings.HasSuffix(key, " 503") {
			unavailable += n
		}
	}
	assert.Positive(t, unavailable, "some calls fell into the gap and got 503")
	for _, call := range []string{"list tasks 200", "create task 201"} {
		assert.Positive(t, counts["after "+call], "%s after the promotion", call)
	}

	// 2. No acknowledged write lost.
	var found int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE id::text = ANY($1)`, created).Scan(&found))
	assert.Equal(t, len(created), found, "tasks created (201) before, during and after the failover that the new primary has")

	// 3. Both replicas came back by themselves: each heartbeats after the
	// promotion, its River client fetched jobs from the new primary (River
	// records the fetching client, the replica's id, in attempted_by), a
	// River leader holds its lease there, and each holds its task-change
	// listener's session there (the only session whose last statement is
	// LISTEN ax_task_changed). Each answered the API after it (1).
	live := apiGet(t, a.base, operatorTok, "/v1/admin/replicas")["items"].([]any)
	var liveIDs []string
	for _, r := range live {
		r := r.(map[string]any)
		at, err := time.Parse(time.RFC3339Nano, r["last_heartbeat_at"].(string))
		require.NoError(t, err)
		assert.True(t, at.After(promoted), "replica %s's last heartbeat %s is before the promotion", r["id"], at)
		liveIDs = append(liveIDs, r["id"].(string))
	}
	assert.Len(t, liveIDs, len(replicas), "live replicas: %v", live)
	for _, id := range liveIDs {
		var fetched int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job
			WHERE attempted_at > $1 AND attempted_by[array_upper(attempted_by, 1)] = $2`, promoted, id).Scan(&fetched))
		assert.Positive(t, fetched, "jobs replica %s's River client fetched after the promotion", id)
	}
	assert.Eventually(t, func() bool {
		var leader string
		err := pool.QueryRow(ctx, `SELECT leader_id FROM river_leader WHERE expires_at > now()`).Scan(&leader)
		return err == nil && slices.Contains(liveIDs, leader)
	}, 60*time.Second, 250*time.Millisecond, "a replica leads River on the new primary")
	rows, err := pool.Query(ctx, `SELECT application_name FROM pg_stat_activity
		WHERE datname = 'ax' AND query = 'LISTEN ax_task_changed'`)
	require.NoError(t, err)
	listening, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	for name := range replicas {
		assert.Contains(t, listening, name, "%s listens for task changes on the new primary", name)
	}

	// 4. Deliveries resumed: webhooks for slots after the promotion, the
	// first of them this long after it.
	hooks, bad := recv.snapshot()
	require.Empty(t, bad, "webhooks without the ax headers")
	var firstAfter time.Time
	for _, h := range hooks {
		if h.slot.After(promoted) && (firstAfter.IsZero() || h.at.Before(firstAfter)) {
			firstAfter = h.at
		}
	}
	require.False(t, firstAfter.IsZero(), "no webhook for a slot after the promotion")
	var lastBefore time.Time
	for _, h := range hooks {
		if h.at.Before(killed) && h.at.After(lastBefore) {
			lastBefore = h.at
		}
	}
	// The backlog: when the last slot due before the promotion was first
	// received.
	firstBySlot := map[string]time.Time{}
	for _, h := range hooks {
		k := h.task + h.slot.String()
		if h.slot.Before(promoted) && (firstBySlot[k].IsZero() || h.at.Before(firstBySlot[k])) {
			firstBySlot[k] = h.at
		}
	}
	var backlogDone time.Time
	for _, at := range firstBySlot {
		backlogDone = maxTime(backlogDone, at)
	}
	t.Logf("last webhook %s before the kill; first for a slot after the promotion %s after it; "+
		"every slot due before the promotion received %s after it",
		killed.Sub(lastBefore).Round(time.Millisecond), firstAfter.Sub(promoted).Round(time.Millisecond),
		backlogDone.Sub(promoted).Round(time.Millisecond))

	// 5 and 6. Every slot of the window fired once and was delivered; no
	// slot was received under two ids, or under one the database does not
	// hold.
	type slotKey struct {
		task string
		slot int64 // Unix microseconds, the database's precision
	}
	rows, err = pool.Query(ctx, `SELECT id::text, task_id::text, scheduled_for, state FROM executions
		WHERE tenant_id = 'failover' AND trigger = 'schedule'`)
	require.NoError(t, err)
	type execution struct{ id, state string }
	inDB := map[slotKey][]execution{}
	for rows.Next() {
		var id, task, state string
		var slot time.Time
		require.NoError(t, rows.Scan(&id, &task, &slot, &state))
		k := slotKey{task, slot.UnixMicro()}
		inDB[k] = append(inDB[k], execution{id, state})
	}
	require.NoError(t, rows.Err())
	received := map[slotKey]map[string]int{}
	for _, h := range hooks {
		k := slotKey{h.task, h.slot.UnixMicro()}
		if received[k] == nil {
			received[k] = map[string]int{}
		}
		received[k][h.execution]++
	}

	expected := map[slotKey]bool{}
	for id, start := range intervalStart {
		for s := start; s.Before(windowEnd); s = s.Add(time.Second) {
			if !s.Before(windowStart) {
				expected[slotKey{id, s.UnixMicro()}] = true
			}
		}
	}
	for _, id := range cronIDs {
		for s := windowStart; s.Before(windowEnd); s = s.Add(time.Second) {
			expected[slotKey{id, s.UnixMicro()}] = true
		}
	}
	for id, at := range onceAt {
		expected[slotKey{id, at.UnixMicro()}] = true
	}
	var lost []string
	gap := 0 // slots due between the kill and the promotion
	for k := range expected {
		slot := time.UnixMicro(k.slot)
		if !slot.Before(killed) && slot.Before(promoted) {
			gap++
		}
		execs := inDB[k]
		switch {
		case len(execs) != 1:
			lost = append(lost, fmt.Sprintf("task %s slot %s: %d executions", k.task, slot.Format("15:04:05.000"), len(execs)))
		case execs[0].state != "succeeded":
			lost = append(lost, fmt.Sprintf("task %s slot %s: execution %s %s", k.task, slot.Format("15:04:05.000"), execs[0].id, execs[0].state))
		case received[k][execs[0].id] == 0:
			lost = append(lost, fmt.Sprintf("task %s slot %s: execution %s succeeded but never received", k.task,
				slot.Format("15:04:05.000"), execs[0].id))
		}
	}
	sort.Strings(lost)
	t.Logf("%d slots required (%d due while no primary answered), %d webhooks", len(expected), gap, len(hooks))
	assert.Positive(t, gap, "slots fell due in the gap")
	assert.Empty(t, lost, "slots lost")

	var doubled []string
	resent := 0
	for k, ids := range received {
		var dbIDs []string
		for _, e := range inDB[k] {
			dbIDs = append(dbIDs, e.id)
		}
		if len(ids) > 1 || len(dbIDs) != 1 || ids[dbIDs[0]] == 0 {
			doubled = append(doubled, fmt.Sprintf("task %s slot %s: received %v, database %v", k.task,
				time.UnixMicro(k.slot).Format("15:04:05.000"), ids, dbIDs))
		}
		for _, n := range ids {
			if n > 1 {
				resent++
			}
		}
	}
	sort.Strings(doubled)
	t.Logf("%d executions received more than once under their own id (resumed after the kill)", resent)
	assert.Empty(t, doubled, "slots received under two ids, or under one the database does not hold")
}

// startFailoverCluster starts a throwaway cluster of cfg listening on a
// free TCP port, stopped and removed at the end of the test.
func startFailoverCluster(t *testing.T, cfg pglocal.Config) *pglocal.Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "ax-failover-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cfg.Dir, cfg.TCPPort = dir, pglocal.AnyTCPPort
	c, err := pglocal.Start(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// walReceiverPid is the pid of standby's WAL receiver, the process that
// streams from its primary.
func walReceiverPid(t *testing.T, standby *pglocal.Cluster) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), standby.TCPURL("postgres"))
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var pid int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT pid FROM pg_stat_wal_receiver").Scan(&pid))
	return pid
}

// hostPort is the host:port of c's TCP listener.
func hostPort(t *testing.T, c *pglocal.Cluster) string {
	t.Helper()
	u, err := url.Parse(c.TCPURL("postgres"))
	require.NoError(t, err)
	return u.Host
}
