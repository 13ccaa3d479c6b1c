package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// shape is how a precision scenario sets ax up.
type shape struct {
	// tcp: ax reaches PostgreSQL over TCP on 127.0.0.1 instead of the
	// cluster's Unix socket.
	tcp bool
	// startAt: each task gets a start_at (staggered over the interval with
	// -stagger, else shared); without one, a task's slots are anchored on
	// its creation time.
	startAt bool
	// analyze: ANALYZE the database before the window (with -analyze).
	analyze bool
	// prepare, if set, runs once ax, the receiver and the endpoint are up,
	// before the tasks are created (retention: seed old history).
	prepare func(ctx context.Context, s *session, res *result) error
	// after, if set, runs after the window, while ax still runs.
	after func(ctx context.Context, s *session, res *result)
	// task, if set, adjusts the body that creates task i (templated:
	// a templated payload).
	task func(i int, body map[string]any)
}

// benchShape is the shape of precision and sustained: the cluster's socket,
// start_at set, ANALYZE as -analyze says.
func benchShape(o options) shape { return shape{startAt: true, analyze: o.analyze} }

// deployedShape is how a user deploys ax: PostgreSQL over TCP, tasks
// created without start_at, no ANALYZE by hand. -deployed keeps only some
// of these differences (deployedParts), the others as benchShape has
// them, to tell which one costs what.
func deployedShape(o options) shape {
	sh := benchShape(o)
	for _, part := range strings.Split(o.deployed, ",") {
		switch strings.TrimSpace(part) {
		case "tcp":
			sh.tcp = true
		case "anchored":
			sh.startAt = false
		case "unanalyzed":
			sh.analyze = false
		}
	}
	return sh
}

// deployedParts are the differences of deployedShape that -deployed names.
var deployedParts = []string{"tcp", "anchored", "unanalyzed"}

// session is one scenario's ax process, database and receiver.
type session struct {
	st    *stack
	name  string
	dbURL string
	ax    *axProc
	rcv   *receiver
	epID  string
	// replicas are further ax processes on the same database
	// (addReplicas); ax is the first.
	replicas []*axProc
}

// addReplicas starts n more ax processes on the session's database, as a
// deployment with n+1 replicas has.
func (s *session) addReplicas(ctx context.Context, n int) error {
	for i := range n {
		p, err := s.st.startAx(ctx, fmt.Sprintf("%s-replica%d", s.name, i+2), s.dbURL)
		if err != nil {
			return err
		}
		s.replicas = append(s.replicas, p)
	}
	return nil
}

// open starts a fresh database, ax on it and a receiver, and registers the
// receiver as an endpoint. withReceiver false skips the receiver; tcp
// points ax at PostgreSQL's TCP address rather than its socket.
func open(ctx context.Context, st *stack, name string, withReceiver, tcp bool) (*session, error) {
	s := &session{st: st, name: name}
	var err error
	db := "bench_" + strings.ReplaceAll(name, "-", "_")
	if s.dbURL, err = st.createDatabase(ctx, db); err != nil {
		return nil, err
	}
	axURL := s.dbURL
	if tcp {
		axURL = st.cluster.TCPURL(db)
	}
	if st.o.topQueries > 0 {
		// The cluster's WAL and checkpoint counters, from here on (finish).
		if err := resetSharedStats(ctx, s.dbURL); err != nil {
			return nil, err
		}
	}
	st.logf("starting ax for %s", name)
	if s.ax, err = st.startAx(ctx, name, axURL); err != nil {
		return nil, err
	}
	if !withReceiver {
		return s, nil
	}
	if s.rcv, err = startReceiver(ctx, st.o.receiver); err == nil {
		s.epID, err = s.ax.createEndpoint(ctx, s.rcv.url)
	}
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// close stops ax (SIGTERM, wait) and the receiver.
func (s *session) close() {
	if s.ax != nil {
		s.ax.stop()
	}
	for _, p := range s.replicas {
		p.stop()
	}
	if s.rcv != nil {
		s.rcv.close()
	}
}

// finish adds what every scenario reports at its end.
func (s *session) finish(ctx context.Context, res *result) {
	if s.rcv != nil {
		res.ReceiverConnections = s.rcv.conns.Load()
	}
	if n := s.st.o.topQueries; n > 0 && s.st.pgss {
		top, err := topStatements(ctx, s.dbURL, n)
		if err != nil {
			res.Notes = append(res.Notes, "pg_stat_statements: "+err.Error())
		}
		res.TopStatements = top
		if res.Tables, err = tableStats(ctx, s.dbURL); err != nil {
			res.Notes = append(res.Notes, "table statistics: "+err.Error())
		}
		if res.WAL, err = walStats(ctx, s.dbURL); err != nil {
			res.Notes = append(res.Notes, "WAL statistics: "+err.Error())
		}
	}
	for _, p := range append([]*axProc{s.ax}, s.replicas...) {
		if p != nil && p.exitedEarly() {
			res.Notes = append(res.Notes, "ax exited during the run; its log: "+tail(p.logPath, 5))
		}
	}
}

// analyze runs ANALYZE on the scenario's database when -analyze is set: a
// database created seconds ago has no statistics, and until autovacuum's
// first pass (up to a minute) the planner may pick plans a running server
// would not.
func (s *session) analyze(ctx context.Context, res *result, on bool) {
	if !on {
		res.Notes = append(res.Notes, "no ANALYZE before measuring: a freshly created database")
		return
	}
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err == nil {
		_, err = conn.Exec(ctx, "ANALYZE")
		_ = conn.Close(ctx)
	}
	if err != nil {
		res.Notes = append(res.Notes, "ANALYZE: "+err.Error())
	}
}

// stages adds the latency breakdown of the slots in [from, to), of one
// tenant's executions when tenant is not empty.
func (s *session) stages(ctx context.Context, res *result, from, to time.Time, tenant string) {
	st, err := stageStats(ctx, s.dbURL, from, to, tenant)
	if err != nil {
		res.Notes = append(res.Notes, "latency breakdown: "+err.Error())
		return
	}
	res.Stages = st
}

// sampleWaits starts the wait-event sampler when -waits is set.
func (s *session) sampleWaits(ctx context.Context, res *result) *waitSampler {
	if !s.st.o.waits {
		return nil
	}
	w, err := startWaitSampler(ctx, s.dbURL, s.waitsLog())
	if err != nil {
		res.Notes = append(res.Notes, "wait sampler: "+err.Error())
		return nil
	}
	return w
}

// waitUntil sleeps until t, logging progress every 5 s; it returns early
// with ctx's error, or when ax exits.
func (s *session) waitUntil(ctx context.Context, t time.Time, what string) error {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ax.Done():
			return fmt.Errorf("ax exited; its log:\n%s", tail(s.ax.logPath, 20))
		case <-tick.C:
			if s.rcv != nil {
				s.st.logf("%s: %s in %s, %d requests received", s.name, what, time.Until(t).Round(time.Second), s.rcv.count())
			}
		}
	}
}

// precision runs n interval tasks (so n/interval fires per second) and
// measures the lateness of every slot in a window after a warm-up.
func precision(ctx context.Context, st *stack, o options, name string, n int, sh shape) (*result, error) {
	s, err := open(ctx, st, name, true, sh.tcp)
	if err != nil {
		return nil, err
	}
	defer s.close()
	iv := time.Duration(o.interval) * time.Second
	stagger := o.stagger && sh.startAt
	res := &result{
		Scenario: name, Tasks: n, IntervalSeconds: o.interval, Staggered: &stagger,
		FiresPerSecond: float64(n) / iv.Seconds(),
	}
	if sh.prepare != nil {
		if err := sh.prepare(ctx, s, res); err != nil {
			return res, err
		}
	}
	if sh.tcp {
		res.Notes = append(res.Notes, "ax reaches PostgreSQL over TCP on 127.0.0.1")
	}
	if !sh.startAt {
		res.Notes = append(res.Notes, "tasks created through the API without start_at: slots anchored on their creation times")
	}
	// sustainedRate: the sustained rows' target load (0: a precision row).
	sustainedRate := 0.0
	switch name {
	case "sustained", "deployed-sustained":
		sustainedRate = 5000
	case "sustained-10k":
		sustainedRate = 10_000
	}
	if sustainedRate > 0 {
		res.Target = fmt.Sprintf("≥ %s fires/s delivered, p99 ≤ %d ms, nothing missing or duplicated", thousands(sustainedRate), sustainedP99MS)
	} else {
		res.Target = "p99 ≤ 50 ms, nothing missing or duplicated"
	}

	// The first slot comes after a generous guess of the creation time; a
	// late guess only shortens the warm-up (the window starts after both).
	base := time.Now().Add(3*time.Second + time.Duration(n)*time.Millisecond).Truncate(time.Second)
	offset := func(i int) time.Duration {
		if !stagger {
			return 0
		}
		return (iv * time.Duration(i) / time.Duration(n)).Truncate(time.Microsecond)
	}
	st.logf("%s: creating %d interval tasks (every %s, first slot %s)", name, n, iv, base.Format(time.RFC3339))
	cr := s.ax.createTasks(ctx, n, o.concurrency, func(i int) map[string]any {
		sched := map[string]any{"type": "interval", "interval_seconds": o.interval}
		if sh.startAt {
			sched["start_at"] = base.Add(offset(i)).UTC().Format(time.RFC3339Nano)
		}
		body := map[string]any{
			"name": fmt.Sprintf("%s-%07d", name, i), "endpoint_id": s.epID, "schedule": sched,
			"payload": map[string]any{"i": i},
		}
		if sh.task != nil {
			sh.task(i, body)
		}
		return body
	})
	res.setCreation(cr)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if cr.errors == n {
		return res, fmt.Errorf("no task could be created: %v", cr.samples)
	}
	created := time.Now()
	st.logf("%s: created %d tasks in %s (%.0f/s)", name, n-cr.errors, cr.elapsed.Round(time.Millisecond), cr.perSec())

	// Task i's slots are first[i] + k·iv, k ≥ 0: its start_at, or the first
	// slot ax planned from its creation time.
	first := make([]time.Time, n)
	for i := range first {
		first[i] = base.Add(offset(i))
		if !sh.startAt {
			first[i] = cr.nextRunAt[i]
		}
	}
	w0 := base
	if created.After(w0) || !sh.startAt {
		w0 = created
	}
	w0 = w0.Add(o.warmup)
	w1 := w0.Add(o.duration)
	res.WindowSeconds = o.duration.Seconds()
	res.TrendSeconds = o.trend.Seconds()
	res.WindowStart = &w0

	if err := s.waitUntil(ctx, w0.Add(-time.Second), "analyze"); err != nil {
		return res, err
	}
	s.analyze(ctx, res, sh.analyze)
	if err := s.waitUntil(ctx, w0, "window starts"); err != nil {
		return res, err
	}
	cpu0 := sampleCPU(s.ax.Pid(), st)
	waits := s.sampleWaits(ctx, res)
	profiled := s.profileAx(ctx, o.duration)
	if err := s.waitUntil(ctx, w1, "window ends"); err != nil {
		return res, err
	}
	cpu1 := sampleCPU(s.ax.Pid(), st)
	profiled()
	if waits != nil {
		res.Waits = waits.result(12)
	}
	res.setCPU(cpu0, cpu1)
	if err := s.waitUntil(ctx, w1.Add(o.grace), "grace ends"); err != nil {
		return res, err
	}
	got := s.rcv.snapshot()
	if sh.after != nil {
		sh.after(ctx, s, res)
	}
	s.ax.stop()
	s.finish(ctx, res)
	s.stages(ctx, res, w0, w1, "")

	// Expected slots: every k ≥ 0 with w0 ≤ base_i + k·iv < w1.
	idx := make(map[string]int, n)
	for i, id := range cr.ids {
		if id == "" {
			continue
		}
		idx[id] = i
		bi := first[i]
		res.Expected += int(ceilDiv(w1.Sub(bi), iv) - max(ceilDiv(w0.Sub(bi), iv), 0))
	}
	type slot struct {
		task int
		k    int64
	}
	firstExec := make(map[slot]string, res.Expected)
	var (
		lateness []time.Duration
		trend    [][]time.Duration // lateness by slot time, o.trend each
	)
	a := newAudit(res)
	for _, d := range got {
		sched, ok := a.check(d)
		if !ok {
			continue
		}
		i, ok := idx[d.task]
		if !ok {
			a.fail("a webhook for an unknown task " + d.task)
			continue
		}
		if sched.Before(w0) || !sched.Before(w1) {
			continue // warm-up or after the window
		}
		rel := sched.Sub(first[i])
		if rel%iv != 0 {
			a.fail(fmt.Sprintf("slot %s of task %d is off its grid", sched.Format(time.RFC3339Nano), i))
			continue
		}
		k := slot{i, int64(rel / iv)}
		if prev, seen := firstExec[k]; seen {
			if prev != d.exec {
				res.DuplicateSlots++
			}
			continue
		}
		firstExec[k] = d.exec
		lateness = append(lateness, d.at.Sub(sched))
		b := int(sched.Sub(w0) / o.trend)
		for len(trend) <= b {
			trend = append(trend, nil)
		}
		trend[b] = append(trend[b], d.at.Sub(sched))
	}
	for i, ds := range trend {
		if l := summarize(ds); l != nil {
			res.Trend = append(res.Trend, trendPoint{From: (time.Duration(i) * o.trend).Seconds(), N: l.N, P50: l.P50, P99: l.P99})
		}
	}
	res.Delivered = len(firstExec)
	res.Missing = res.Expected - res.Delivered
	// Throughput is every request that arrived during the window, whatever
	// its slot: behind a backlog, ax may be busy with warm-up slots.
	inWindow := 0
	for _, d := range got {
		if !d.at.Before(w0) && d.at.Before(w1) {
			inWindow++
		}
	}
	res.DeliveriesPerSecond = math.Round(float64(inWindow) / o.duration.Seconds())
	res.setCPUPerDelivery(inWindow)
	if res.Delivered == 0 && res.Expected > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("no slot of the window arrived within the grace: ax fell behind by more "+
			"than the warm-up, window and grace together (%d requests arrived in all, for earlier slots)", len(got)))
	}
	res.Lateness = summarize(lateness)
	res.Early = countNegative(lateness)
	complete := res.Lateness != nil && res.Missing == 0 && res.Duplicates == 0 && res.DuplicateSlots == 0
	pass := complete && res.Lateness.P99 <= 50
	if sustainedRate > 0 {
		pass = complete && res.FiresPerSecond >= sustainedRate && res.Lateness.P99 <= sustainedP99MS
	}
	res.Pass = &pass
	return res, nil
}

// sustainedP99MS is the sustained rows' lateness target, p99 in ms (250
// until the third wave's performance work; 100 since).
const sustainedP99MS = 100

// burst creates n one-shot tasks due at the same instant and measures how
// long after it the last one is delivered.
func burst(ctx context.Context, st *stack, o options, name string, n, shards int) (*result, error) {
	s, err := open(ctx, st, name, true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{Scenario: name, Tasks: n, Target: "all delivered ≤ 3 s after the instant"}
	// noCliff: the burst-100k row's target, a large burst without a cliff.
	noCliff := name == "burst-100k"
	if noCliff {
		res.Target = fmt.Sprintf("all delivered, the last ≤ %.0f s after the instant, no %.0f s window below half the first's rate",
			cliffLast.Seconds(), cliffWindow.Seconds())
	}
	if shards > 1 {
		res.Target = fmt.Sprintf("all %d shard deliveries ≤ 3 s after the instant", n*shards)
		res.Notes = append(res.Notes, fmt.Sprintf("%d tasks × %d shards", n, shards))
	}

	lead := o.lead
	if lead == 0 {
		// Creation runs at several hundred tasks/s with fsync on; leave
		// ample room so every task exists well before the instant.
		lead = 10*time.Second + time.Duration(n)*3*time.Millisecond
	}
	runAt := time.Now().Add(lead).Truncate(time.Second)
	st.logf("burst: creating %d one-shot tasks due at %s", n, runAt.Format(time.RFC3339))
	cr := s.ax.createTasks(ctx, n, o.concurrency, func(i int) map[string]any {
		t := map[string]any{
			"name":        fmt.Sprintf("burst-%07d", i),
			"endpoint_id": s.epID,
			"schedule":    map[string]any{"type": "once", "run_at": runAt.UTC().Format(time.RFC3339Nano)},
			"payload":     map[string]any{"i": i},
		}
		if shards > 1 {
			t["shards"] = shards
		}
		return t
	})
	res.setCreation(cr)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	created := time.Now()
	st.logf("burst: created %d tasks in %s (%.0f/s), %s before the instant",
		n-cr.errors, cr.elapsed.Round(time.Millisecond), cr.perSec(), time.Until(runAt).Round(time.Millisecond))
	// The scheduler materialises slots up to a few seconds ahead; creation
	// still running then would compete with it and skew the measurement.
	if margin := runAt.Sub(created); margin < 5*time.Second {
		return res, fmt.Errorf("the tasks were created only %s before the instant (want 5 s or more); raise -lead (now %s)",
			margin.Round(time.Millisecond), lead)
	}
	want := (n - cr.errors) * shards
	s.analyze(ctx, res, st.o.analyze)

	// Wait for every task's delivery, at most a minute past the instant.
	deadline := runAt.Add(60 * time.Second)
	if err := s.waitUntil(ctx, runAt.Add(-time.Second), "the instant"); err != nil {
		return res, err
	}
	cpu0 := sampleCPU(s.ax.Pid(), st)
	waits := s.sampleWaits(ctx, res)
	// The profile spans about the burst on a busy machine, from a
	// second before the instant.
	profiled := s.profileAx(ctx, time.Second+max(5*time.Second, time.Duration(want)*300*time.Microsecond))
	var fires fireCounter
	for fires.count(s.rcv) < want && time.Now().Before(deadline) {
		if err := s.waitUntil(ctx, time.Now().Add(20*time.Millisecond), "next check"); err != nil {
			return res, err
		}
	}
	cpu1 := sampleCPU(s.ax.Pid(), st)
	profiled()
	if waits != nil {
		res.Waits = waits.result(12)
	}
	res.setCPU(cpu0, cpu1)
	// A moment more, so that a duplicate right behind the last one is seen.
	if err := s.waitUntil(ctx, time.Now().Add(2*time.Second), "duplicates"); err != nil {
		return res, err
	}
	got := s.rcv.snapshot()
	s.ax.stop()
	s.finish(ctx, res)
	s.stages(ctx, res, runAt, runAt.Add(time.Microsecond), "")

	idx := make(map[string]bool, n)
	for _, id := range cr.ids {
		if id != "" {
			idx[id] = true
		}
	}
	res.Expected = want
	first := make(map[string]string, want) // task (and shard) → first execution id
	var lateness []time.Duration
	var firstAt, lastAt time.Time
	a := newAudit(res)
	for _, d := range got {
		sched, ok := a.check(d)
		if !ok {
			continue
		}
		if !idx[d.task] {
			a.fail("a webhook for an unknown task " + d.task)
			continue
		}
		if !sched.Equal(runAt) {
			a.fail(fmt.Sprintf("scheduled for %s, not the instant %s", d.sched, runAt.Format(time.RFC3339Nano)))
		}
		key := d.task + "/" + d.shard
		if prev, seen := first[key]; seen {
			if prev != d.exec {
				res.DuplicateSlots++
			}
			continue
		}
		first[key] = d.exec
		lateness = append(lateness, d.at.Sub(runAt))
		if firstAt.IsZero() || d.at.Before(firstAt) {
			firstAt = d.at
		}
		if d.at.After(lastAt) {
			lastAt = d.at
		}
	}
	res.Delivered = len(first)
	res.Missing = want - res.Delivered
	res.setCPUPerDelivery(res.Delivered) // the CPU window ends at the last delivery
	res.Lateness = summarize(lateness)
	res.Early = countNegative(lateness)
	for _, l := range lateness {
		b := max(int(l/burstBucket), 0)
		for len(res.Trend) <= b {
			res.Trend = append(res.Trend, trendPoint{From: (time.Duration(len(res.Trend)) * burstBucket).Seconds()})
		}
		res.Trend[b].N++
	}
	if res.Delivered > 0 {
		res.FirstDeliveryMS = ms(firstAt.Sub(runAt))
		res.LastDeliveryMS = ms(lastAt.Sub(runAt))
		if span := lastAt.Sub(firstAt); span > 0 {
			res.DeliveriesPerSecond = float64(res.Delivered) / span.Seconds()
		}
		for _, l := range lateness {
			if l <= 3*time.Second {
				res.WithinTarget++
			}
		}
	}
	res.Windows = windowRates(lateness, lastAt.Sub(runAt))
	within := 3 * time.Second
	if noCliff {
		within = cliffLast
	}
	pass := res.Delivered > 0 && res.Missing == 0 && res.LastDeliveryMS != nil && *res.LastDeliveryMS <= float64(within.Milliseconds()) &&
		res.Duplicates == 0 && res.DuplicateSlots == 0
	if noCliff && pass {
		for i, w := range res.Windows {
			if w.PerSecond < res.Windows[0].PerSecond/2 {
				pass = false
				res.Notes = append(res.Notes, fmt.Sprintf("window %d (from %.0f s) delivered %.0f/s, less than half the first's %.0f/s",
					i+1, w.From, w.PerSecond, res.Windows[0].PerSecond))
				break
			}
		}
	}
	res.Pass = &pass
	return res, nil
}

// The burst-100k row's target: the last delivery within cliffLast of the
// instant, and no cliffWindow-long window after the instant delivering at
// less than half the first window's rate.
const (
	cliffLast   = 15 * time.Second
	cliffWindow = 5 * time.Second
)

// windowRates returns the delivery rates of a burst in cliffWindow-long
// windows from the instant up to the last delivery, last after it. The
// last window, cut short by the last delivery, is rated over its part; a
// part under a second is merged into the window before it (a handful of
// deliveries over a few milliseconds makes no rate). lateness is each
// delivery's time after the instant.
func windowRates(lateness []time.Duration, last time.Duration) []windowRate {
	if len(lateness) == 0 || last < 0 {
		return nil
	}
	n := int(last/cliffWindow) + 1
	if n > 1 && last-time.Duration(n-1)*cliffWindow < time.Second {
		n--
	}
	counts := make([]int, n)
	for _, l := range lateness {
		counts[min(max(int(l/cliffWindow), 0), n-1)]++
	}
	out := make([]windowRate, n)
	for i, c := range counts {
		from := time.Duration(i) * cliffWindow
		span := cliffWindow
		if i == n-1 {
			span = max(last-from, time.Millisecond)
		}
		out[i] = windowRate{From: from.Seconds(), N: c, PerSecond: math.Round(float64(c) / span.Seconds())}
	}
	return out
}

// thousands formats a whole number with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// burstBucket is the width of the burst trend's buckets.
const burstBucket = 500 * time.Millisecond

// audit checks each delivery's headers and counts duplicate execution ids
// and retries into a result.
type audit struct {
	res   *result
	execs map[string]int
}

func newAudit(res *result) *audit { return &audit{res: res, execs: map[string]int{}} }

func (a *audit) fail(msg string) {
	a.res.Errors++
	if len(a.res.ErrorSamples) < 10 {
		a.res.ErrorSamples = append(a.res.ErrorSamples, msg)
	}
}

// check parses the scheduled time and records the execution id; ok is false
// for a request that cannot be attributed.
func (a *audit) check(d delivery) (time.Time, bool) {
	if d.exec == "" || d.task == "" {
		a.fail("a webhook without X-Ax-Execution-Id or X-Ax-Task-Id")
		return time.Time{}, false
	}
	a.execs[d.exec]++
	if a.execs[d.exec] > 1 {
		a.res.Duplicates++
	}
	if n, err := strconv.Atoi(d.attempt); err != nil || n < 1 {
		a.fail(fmt.Sprintf("X-Ax-Attempt %q", d.attempt))
	} else if n > 1 {
		a.res.Retries++
	}
	sched, err := time.Parse(time.RFC3339Nano, d.sched)
	if err != nil {
		a.fail(fmt.Sprintf("X-Ax-Scheduled-For %q", d.sched))
		return time.Time{}, false
	}
	return sched, true
}

// fireCounter counts the distinct fires (task, and shard) a receiver got,
// reading at each count only the requests that arrived since the last: a
// burst's wait checks every 20 ms, and recounting every request at each
// check (a copy and a map of 100,000 at the end of burst-100k) cost the
// bench, which shares the cores with ax, more than receiving them.
type fireCounter struct {
	seen map[fireKey]struct{}
	read int // requests counted
}

type fireKey struct{ task, shard string }

func (c *fireCounter) count(r *receiver) int {
	got := r.since(c.read)
	if c.seen == nil {
		c.seen = make(map[fireKey]struct{}, len(got))
	}
	for _, d := range got {
		c.seen[fireKey{d.task, d.shard}] = struct{}{}
	}
	c.read += len(got)
	return len(c.seen)
}

// ceilDiv is ⌈a/b⌉ for durations, b > 0.
func ceilDiv(a, b time.Duration) int64 {
	q := int64(a / b)
	if a%b > 0 {
		q++
	}
	return q
}

func countNegative(ds []time.Duration) int {
	n := 0
	for _, d := range ds {
		if d < 0 {
			n++
		}
	}
	return n
}

// waitsLog is where the wait sampler writes its timeline: with -waits and
// -keep, <scenario>.waits.log in the kept directory; otherwise nowhere.
func (s *session) waitsLog() string {
	if !s.st.o.keep {
		return ""
	}
	return filepath.Join(s.st.dir, s.name+".waits.log")
}
