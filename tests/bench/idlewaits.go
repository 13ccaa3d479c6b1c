package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Idle-waits targets: what n runs waiting on events may add to the idle
// cost of ax and PostgreSQL.
const (
	// idleWaitsCPUNoise is the largest ax CPU difference (% of one core)
	// taken for noise.
	idleWaitsCPUNoise = 0.5
	// idleWaitsStmtsNoise is the largest statements/s difference taken
	// for noise: a statement per waiting node even once per half hour
	// would be 5.6/s with 10,000 waiting.
	idleWaitsStmtsNoise = 5.0
	// idleWaitsStmtMSNoise is the largest growth of the statements'
	// execution time (ms per second) taken for noise: 0.5% of a core, as
	// for ax. One statement a second whose cost grows with the waiting
	// runs misses it where statements/s does not.
	idleWaitsStmtMSNoise = 5.0
	// idleWaitsProbeEvery is how many runs' keys share one sanity event:
	// one event per this many keys is posted after the windows.
	idleWaitsProbeEvery = 1000
	// idleWaitsPerWorkflow is the runs of one workflow: its
	// max_active_runs, the most a workflow allows.
	idleWaitsPerWorkflow = 1000
)

// idleCost is one idle window's figures, as the idle scenario reports
// them.
type idleCost struct {
	AxCPUPercent    *float64 `json:"ax_cpu_percent,omitempty"` // of one core
	AxRSSMiB        *float64 `json:"ax_rss_mib,omitempty"`
	PGCPUPercent    *float64 `json:"postgres_cpu_percent,omitempty"` // of one core
	PGXactsPerSec   *float64 `json:"postgres_transactions_per_second,omitempty"`
	PGStmtsPerSec   *float64 `json:"postgres_statements_per_second,omitempty"`
	OtherCPUPercent *float64 `json:"other_cpu_percent,omitempty"`
	// PGStmtMSPerSec is the statements' execution time, ms per second of
	// the window (pg_stat_statements): a statement whose cost grows with
	// the waiting runs shows here, not in statements/s.
	PGStmtMSPerSec *float64 `json:"postgres_statement_ms_per_second,omitempty"`
	// Top are the window's statements with the most execution time.
	Top []stmtDelta `json:"top,omitempty"`
}

// stmtDelta is one statement's share of a window.
type stmtDelta struct {
	Query   string  `json:"query"`
	Calls   int64   `json:"calls"`
	TotalMS float64 `json:"total_ms"`
}

// stmtTotals are pg_stat_statements' counters by query id.
type stmtTotals map[int64]stmtDelta

// readStmtTotals reads the database's statements' counters.
func readStmtTotals(ctx context.Context, conn *pgx.Conn) (stmtTotals, error) {
	rows, err := conn.Query(ctx, `SELECT queryid, left(regexp_replace(query, '\s+', ' ', 'g'), 110), calls, total_exec_time
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND query NOT LIKE '%pg_stat_statements%'`)
	if err != nil {
		return nil, err
	}
	out := stmtTotals{}
	var (
		id int64
		d  stmtDelta
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &d.Query, &d.Calls, &d.TotalMS}, func() error {
		out[id] = d
		return nil
	})
	return out, err
}

// since is b − a: every statement that ran in between, most execution
// time first, and their total time.
func (b stmtTotals) since(a stmtTotals) ([]stmtDelta, float64) {
	var out []stmtDelta
	var total float64
	for id, s := range b {
		d := stmtDelta{Query: s.Query, Calls: s.Calls - a[id].Calls, TotalMS: s.TotalMS - a[id].TotalMS}
		if d.Calls <= 0 {
			continue
		}
		total += d.TotalMS
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y stmtDelta) int { return cmp.Compare(y.TotalMS, x.TotalMS) })
	return out, total
}

// costOf is a result's idle figures.
func costOf(r *result) idleCost {
	return idleCost{
		AxCPUPercent: r.AxCPUPercent, AxRSSMiB: r.AxRSSMiB, PGCPUPercent: r.PGCPUPercent,
		PGXactsPerSec: r.PGXactsPerSec, PGStmtsPerSec: r.PGStmtsPerSec, OtherCPUPercent: r.OtherCPUPercent,
	}
}

// String is the figures on one line, the idle scenario's words.
func (c idleCost) String() string {
	s := fmt.Sprintf("ax CPU %s%%, ax RSS %s MiB, postgres CPU %s%%, postgres %s transactions/s",
		fp(c.AxCPUPercent), fp(c.AxRSSMiB), fp(c.PGCPUPercent), fp(c.PGXactsPerSec))
	if c.PGStmtsPerSec != nil {
		s += fmt.Sprintf(", %s statements/s", fp(c.PGStmtsPerSec))
	}
	if c.PGStmtMSPerSec != nil {
		s += fmt.Sprintf(" taking %s ms/s", fp(c.PGStmtMSPerSec))
	}
	return s + fmt.Sprintf(" (other processes: %s%% of a CPU)", fp(c.OtherCPUPercent))
}

// minus is c − base, figure by figure (nil where either is unknown).
func (c idleCost) minus(base idleCost) idleCost {
	sub := func(a, b *float64) *float64 {
		if a == nil || b == nil {
			return nil
		}
		v := math.Round((*a-*b)*10) / 10
		return &v
	}
	return idleCost{
		AxCPUPercent: sub(c.AxCPUPercent, base.AxCPUPercent), AxRSSMiB: sub(c.AxRSSMiB, base.AxRSSMiB),
		PGCPUPercent: sub(c.PGCPUPercent, base.PGCPUPercent), PGXactsPerSec: sub(c.PGXactsPerSec, base.PGXactsPerSec),
		PGStmtsPerSec: sub(c.PGStmtsPerSec, base.PGStmtsPerSec), OtherCPUPercent: sub(c.OtherCPUPercent, base.OtherCPUPercent),
		PGStmtMSPerSec: sub(c.PGStmtMSPerSec, base.PGStmtMSPerSec),
	}
}

// topString is the window's top statements on one line.
func (c idleCost) topString() string {
	var parts []string
	for _, t := range c.Top {
		parts = append(parts, fmt.Sprintf("%d calls %.0f ms: %s", t.Calls, t.TotalMS, t.Query))
	}
	return strings.Join(parts, " | ")
}

// deltaString is a difference on one line, signed.
func (c idleCost) deltaString() string {
	sp := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%+.1f", *v)
	}
	s := fmt.Sprintf("ax CPU %s%%, ax RSS %s MiB, postgres CPU %s%%, postgres %s transactions/s",
		sp(c.AxCPUPercent), sp(c.AxRSSMiB), sp(c.PGCPUPercent), sp(c.PGXactsPerSec))
	if c.PGStmtsPerSec != nil {
		s += fmt.Sprintf(", %s statements/s", sp(c.PGStmtsPerSec))
	}
	if c.PGStmtMSPerSec != nil {
		s += fmt.Sprintf(" taking %s ms/s", sp(c.PGStmtMSPerSec))
	}
	return s
}

// idleWaitsVerdict judges a difference (with waits − without): ax's CPU
// within noise, no statements per waiting node (statements/s, or
// transactions/s without pg_stat_statements, not growing) and, when
// known, the statements' execution time not growing; it says what
// failed.
func idleWaitsVerdict(d idleCost) (bool, []string) {
	var why []string
	if d.AxCPUPercent == nil {
		why = append(why, "ax CPU unknown")
	} else if *d.AxCPUPercent >= idleWaitsCPUNoise {
		why = append(why, fmt.Sprintf("ax CPU grew by %.1f%% of a core (noise: < %.1f)", *d.AxCPUPercent, idleWaitsCPUNoise))
	}
	grew, what := d.PGStmtsPerSec, "statements/s"
	if grew == nil {
		grew, what = d.PGXactsPerSec, "transactions/s"
	}
	switch {
	case grew == nil:
		why = append(why, "postgres statements/s unknown")
	case *grew >= idleWaitsStmtsNoise:
		why = append(why, fmt.Sprintf("postgres %s grew by %.1f (noise: < %.0f)", what, *grew, idleWaitsStmtsNoise))
	}
	if d.PGStmtMSPerSec != nil && *d.PGStmtMSPerSec >= idleWaitsStmtMSNoise {
		why = append(why, fmt.Sprintf("postgres statement time grew by %.1f ms/s (noise: < %.0f)", *d.PGStmtMSPerSec, idleWaitsStmtMSNoise))
	}
	return len(why) == 0, why
}

// probeKeys are the keys the sanity events name: one per every-th of n
// runs' keys.
func probeKeys(n, every int) []string {
	var out []string
	for i := 0; i < n; i += max(every, 1) {
		out = append(out, waitKey(i))
	}
	return out
}

// waitKey is the i-th run's event key.
func waitKey(i int) string { return fmt.Sprintf("k-%06d", i) }

// idleWaits measures what n workflow runs waiting on events cost while
// nothing happens: workflows whose root waits for the event "files.ready"
// with the run's own key (its input k; timeout 24 h), followed by an
// ordinary node; one workflow per idleWaitsPerWorkflow runs, the most
// max_active_runs allows. The idle window is measured twice on the
// same ax and database: first with the workflow and no run (the
// baseline), then after n runs started through the API trigger (o.concurrency
// clients, as production creates them) all wait. Both windows, and the
// difference, are reported; then one event per idleWaitsProbeEvery keys
// is posted, and the runs it matched must reach their second node (the
// waits are real).
func idleWaits(ctx context.Context, st *stack, o options, n int) (*result, error) {
	s, err := open(ctx, st, "idle-waits", true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{
		Scenario: "idle-waits", Tasks: n, WindowSeconds: o.duration.Seconds(),
		Target: fmt.Sprintf("with %d runs waiting: ax CPU within %.1f%% of a core of the baseline, postgres statements/s "+
			"within %.0f/s (none per waiting node) taking within %.0f ms/s more; every probed run advances",
			n, idleWaitsCPUNoise, idleWaitsStmtsNoise, idleWaitsStmtMSNoise),
	}
	// max_active_runs is at most idleWaitsPerWorkflow: run i is a run of
	// workflow i / idleWaitsPerWorkflow, all of the same shape.
	var wfs []string
	for w := range (n + idleWaitsPerWorkflow - 1) / idleWaitsPerWorkflow {
		var wf struct {
			ID string `json:"id"`
		}
		err = s.ax.call(ctx, http.MethodPost, "/v1/workflows", map[string]any{
			"name": fmt.Sprintf("idle-waits-%d", w), "max_active_runs": idleWaitsPerWorkflow, "inputs": map[string]any{"k": ""},
			"nodes": []any{
				map[string]any{"key": "w", "wait_for": map[string]any{
					"event": "files.ready", "key": "{{ .inputs.k }}", "timeout_ms": 24 * 3600 * 1000,
				}},
				map[string]any{"key": "after", "endpoint_id": s.epID, "depends_on": []string{"w"}},
			},
		}, &wf)
		if err != nil {
			return res, fmt.Errorf("create the workflow: %w", err)
		}
		wfs = append(wfs, wf.ID)
	}
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	st.logf("idle-waits: baseline window (no run)")
	base, err := idleWindow(ctx, s, conn, o.duration)
	if err != nil {
		return res, err
	}
	res.IdleBaseline = &base
	res.Notes = append(res.Notes, "baseline (the same ax and database, the workflow and no run): "+base.String())

	// Start the n runs, each with its own key.
	st.logf("idle-waits: triggering %d runs", n)
	start := time.Now()
	var (
		next    atomic.Int64
		errs    atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		samples []string
	)
	for range o.concurrency {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && ctx.Err() == nil; i = next.Add(1) - 1 {
				err := s.ax.call(ctx, http.MethodPost, "/v1/workflows/"+wfs[i/idleWaitsPerWorkflow]+"/trigger",
					map[string]any{"inputs": map[string]any{"k": waitKey(int(i))}}, nil)
				if (i+1)%1000 == 0 {
					st.logf("idle-waits: run %d triggered", i+1)
				}
				if err != nil {
					errs.Add(1)
					mu.Lock()
					if len(samples) < 5 {
						samples = append(samples, err.Error())
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	res.Errors += int(errs.Load())
	res.ErrorSamples = append(res.ErrorSamples, samples...)
	res.CreateSeconds = math.Round(time.Since(start).Seconds()*100) / 100
	res.CreatePerSecond = math.Round(float64(n) / time.Since(start).Seconds())
	want := n - res.Errors
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM workflow_run_nodes
			WHERE state = 'awaiting' AND wait_deadline IS NOT NULL`).Scan(&waiting); err != nil {
			return res, err
		}
		st.logf("idle-waits: %d/%d nodes waiting", waiting, want)
		if waiting >= want {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d nodes were waiting within 10 minutes", waiting, want)
		}
		if err := s.waitUntil(ctx, time.Now().Add(time.Second), "waits starting"); err != nil {
			return res, err
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d runs triggered through the API (%d clients) and all waiting in %.1f s",
		want, o.concurrency, time.Since(start).Seconds()))

	st.logf("idle-waits: window with %d runs waiting", want)
	with, err := idleWindow(ctx, s, conn, o.duration)
	if err != nil {
		return res, err
	}
	res.AxCPUPercent, res.AxRSSMiB, res.PGCPUPercent = with.AxCPUPercent, with.AxRSSMiB, with.PGCPUPercent
	res.PGXactsPerSec, res.PGStmtsPerSec, res.OtherCPUPercent = with.PGXactsPerSec, with.PGStmtsPerSec, with.OtherCPUPercent
	res.Notes = append(res.Notes, fmt.Sprintf("with %d runs waiting: %s", want, with))
	diff := with.minus(base)
	res.Notes = append(res.Notes, "difference (with − without): "+diff.deltaString())
	for _, w := range []struct {
		name string
		c    idleCost
	}{{"baseline", base}, {"with waits", with}} {
		if len(w.c.Top) > 0 {
			res.Notes = append(res.Notes, "statements by time, "+w.name+" window: "+w.c.topString())
		}
	}
	pass, why := idleWaitsVerdict(diff)
	if o, b := with.OtherCPUPercent, base.OtherCPUPercent; (o != nil && *o >= 15) || (b != nil && *b >= 15) {
		res.Notes = append(res.Notes, "other processes used 15% of a CPU or more in a window: the difference is noisier than it reads")
	}

	// The waits are real: one event per idleWaitsProbeEvery keys resolves
	// its run's wait, and the run's second node is delivered.
	keys := probeKeys(n, idleWaitsProbeEvery)
	matched := 0
	for _, k := range keys {
		var ev struct {
			Matched struct {
				Waits int `json:"waits"`
			} `json:"matched"`
		}
		if err := s.ax.call(ctx, http.MethodPost, "/v1/events", map[string]any{"name": "files.ready", "key": k}, &ev); err != nil {
			return res, fmt.Errorf("post the event for %s: %w", k, err)
		}
		matched += ev.Matched.Waits
	}
	res.Expected = len(keys)
	deadline = time.Now().Add(o.grace)
	for s.rcv.count() < len(keys) && time.Now().Before(deadline) {
		if err := s.waitUntil(ctx, time.Now().Add(50*time.Millisecond), "the probed runs' second nodes"); err != nil {
			return res, err
		}
	}
	var resolved int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM workflow_run_nodes
		WHERE key = 'w' AND state = 'succeeded'`).Scan(&resolved); err != nil {
		return res, err
	}
	got := s.rcv.snapshot()
	runs := map[string]bool{}
	for _, d := range got {
		if runs[d.run] {
			res.Duplicates++
		}
		runs[d.run] = true
	}
	res.Delivered = len(runs)
	res.Missing = len(keys) - res.Delivered
	res.Notes = append(res.Notes, fmt.Sprintf("%d events posted (one per %d keys): they matched %d waits, %d waits resolved, "+
		"%d runs' second node delivered", len(keys), idleWaitsProbeEvery, matched, resolved, res.Delivered))
	if matched != len(keys) || resolved != len(keys) || res.Delivered != len(keys) {
		pass = false
		why = append(why, fmt.Sprintf("of %d probed runs, %d matched, %d resolved, %d delivered", len(keys), matched, resolved, res.Delivered))
	}
	if len(why) > 0 {
		res.Notes = append(res.Notes, "missed: "+strings.Join(why, "; "))
	}
	res.Pass = &pass
	s.ax.stop()
	s.finish(ctx, res)
	return res, nil
}

// idleWindow measures one idle window as the idle scenario does, after
// clearing the maintenance debt (VACUUM ANALYZE, CHECKPOINT) and letting
// the machine settle.
func idleWindow(ctx context.Context, s *session, conn *pgx.Conn, d time.Duration) (idleCost, error) {
	for _, q := range []string{"VACUUM ANALYZE", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return idleCost{}, fmt.Errorf("%s: %w", q, err)
		}
	}
	if err := s.waitUntil(ctx, time.Now().Add(5*time.Second), "settling"); err != nil {
		return idleCost{}, err
	}
	var s0 stmtTotals
	if s.st.pgss {
		var err error
		if s0, err = readStmtTotals(ctx, conn); err != nil {
			return idleCost{}, err
		}
	}
	a, err := readDBStats(ctx, conn, s.st.pgss)
	if err != nil {
		return idleCost{}, err
	}
	cpu0 := sampleCPU(s.ax.Pid(), s.st)
	if err := s.waitUntil(ctx, time.Now().Add(d), "idle window ends"); err != nil {
		return idleCost{}, err
	}
	cpu1 := sampleCPU(s.ax.Pid(), s.st)
	time.Sleep(1500 * time.Millisecond) // the window's last statistics
	b, err := readDBStats(ctx, conn, s.st.pgss)
	if err != nil {
		return idleCost{}, err
	}
	var r result
	r.setCPU(cpu0, cpu1)
	secs := cpu1.at.Sub(cpu0.at).Seconds()
	// Less this connection's own, as in idle.
	x := math.Round(float64(b.xacts-a.xacts-2)/secs*10) / 10
	r.PGXactsPerSec = &x
	if s.st.pgss {
		c := math.Round(float64(b.calls-a.calls-2)/secs*10) / 10
		r.PGStmtsPerSec = &c
	}
	out := costOf(&r)
	if s.st.pgss {
		s1, err := readStmtTotals(ctx, conn)
		if err != nil {
			return out, err
		}
		// The bench's own readings are left out (readStmtTotals).
		top, total := s1.since(s0)
		ms := math.Round(total/secs*10) / 10
		out.PGStmtMSPerSec, out.Top = &ms, top[:min(len(top), 3)]
	}
	return out, nil
}
