package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// hung: two tenants on one ax. Tenant A has n one-shot tasks to an
// endpoint that accepts every request and never answers (timeout 60 s),
// due hungPerSecond a second from an instant on — fewer than a burst, so
// the scheduler puts them in the main lane, where the first 400 take every
// send slot (AX_DELIVER_WORKERS) for a minute; tenant B (the bench tenant)
// has hungQuietTasks interval tasks firing every second to the fast
// receiver, from before the instant until after the hang. Measured: B's
// lateness while A's deliveries hang (the target: p99 ≤ 100 ms, no slot
// lost).
const (
	hungPerSecond   = 450
	hungQuietTasks  = 20
	hungTimeout     = 60 * time.Second
	hungWindow      = 50 * time.Second // of the hang, from the instant; it ends at hungTimeout
	hungTenant      = "hung"
	hungTargetP99MS = 100
)

func hung(ctx context.Context, st *stack, o options, n int) (*result, error) {
	s, err := open(ctx, st, "hung", true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{
		Scenario: "hung", Tasks: n, FiresPerSecond: hungQuietTasks, WindowSeconds: hungWindow.Seconds(),
		Target: fmt.Sprintf("tenant B's lateness p99 ≤ %d ms, no slot lost, while %d deliveries of tenant A hang", hungTargetP99MS, n),
	}

	hang, err := startHangingReceiver(ctx)
	if err != nil {
		return nil, err
	}
	defer hang.close()
	a, err := tenantClient(ctx, st, s.ax, hungTenant)
	if err != nil {
		return nil, err
	}
	var ep struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, "/v1/endpoints", map[string]any{
		"name": "hangs", "url": hang.url, "timeout_ms": hungTimeout.Milliseconds(),
	}, &ep); err != nil {
		return nil, fmt.Errorf("tenant A's endpoint: %w", err)
	}

	lead := o.lead
	if lead == 0 {
		lead = 15*time.Second + time.Duration(n)*4*time.Millisecond
	}
	runAt := time.Now().Add(lead).Truncate(time.Second)
	bStart := time.Now().Add(3 * time.Second).Truncate(time.Second)
	st.logf("hung: tenant B: %d interval tasks (1 s) from %s", hungQuietTasks, bStart.Format(time.RFC3339))
	cb := s.ax.createTasks(ctx, hungQuietTasks, o.concurrency, func(i int) map[string]any {
		return map[string]any{
			"name": fmt.Sprintf("b-%02d", i), "endpoint_id": s.epID,
			"schedule": map[string]any{
				"type": "interval", "interval_seconds": 1,
				"start_at": bStart.Add(time.Duration(i) * time.Second / hungQuietTasks).UTC().Format(time.RFC3339Nano),
			},
		}
	})
	if cb.errors > 0 {
		return res, fmt.Errorf("tenant B's tasks: %d failed: %v", cb.errors, cb.samples)
	}
	st.logf("hung: tenant A: %d one-shot tasks, %d a second from %s", n, hungPerSecond, runAt.Format(time.RFC3339))
	ca := a.createTasks(ctx, n, o.concurrency, func(i int) map[string]any {
		at := runAt.Add(time.Duration(i/hungPerSecond) * time.Second)
		return map[string]any{
			"name": fmt.Sprintf("a-%05d", i), "endpoint_id": ep.ID, "retry": map[string]any{"max_attempts": 1},
			"schedule": map[string]any{"type": "once", "run_at": at.UTC().Format(time.RFC3339Nano)},
		}
	})
	res.setCreation(ca)
	if margin := time.Until(runAt); margin < 5*time.Second {
		return res, fmt.Errorf("tenant A's tasks were created only %s before the instant; raise -lead", margin.Round(time.Millisecond))
	}
	s.analyze(ctx, res, st.o.analyze)

	if err := s.waitUntil(ctx, runAt, "the instant"); err != nil {
		return res, err
	}
	cpu0 := sampleCPU(s.ax.Pid(), st)
	end := runAt.Add(hungWindow)
	if err := s.waitUntil(ctx, end, "the end of the hang"); err != nil {
		return res, err
	}
	cpu1 := sampleCPU(s.ax.Pid(), st)
	res.setCPU(cpu0, cpu1)
	held, maxHeld, answered := hang.counts()
	reached := hang.total()
	// B's last slots may still be on their way (within the grace).
	if err := s.waitUntil(ctx, time.Now().Add(min(o.grace, hungTimeout-hungWindow-time.Second)), "B's last slots"); err != nil {
		return res, err
	}
	got := s.rcv.snapshot()
	lanes, lerr := hungLanes(ctx, s.dbURL)
	s.ax.stop()
	s.finish(ctx, res)
	s.stages(ctx, res, runAt, end, "bench")

	var lateness []time.Duration
	perSecond := map[int][]time.Duration{} // by whole seconds after the instant
	au := newAudit(res)
	seen := map[string]bool{}
	for _, d := range got {
		sched, ok := au.check(d)
		if !ok || sched.Before(runAt) || !sched.Before(end) || seen[d.task+d.sched] {
			continue
		}
		seen[d.task+d.sched] = true
		lateness = append(lateness, d.at.Sub(sched))
		sec := int(sched.Sub(runAt) / time.Second)
		perSecond[sec] = append(perSecond[sec], d.at.Sub(sched))
	}
	// When B was late tells which phase of the hang made it so: A's
	// instant, or its waiting deliveries giving up (after 15 s).
	var secs []string
	for sec := range int(hungWindow / time.Second) {
		if l := summarize(perSecond[sec]); l != nil && l.Max > hungTargetP99MS && len(secs) < 30 {
			secs = append(secs, fmt.Sprintf("+%ds %.0f/%.0f", sec, l.P99, l.Max))
		}
	}
	res.Notes = append(res.Notes, "tenant B's p99/max (ms) in the seconds after the instant where its max passed 100 ms: "+
		strings.Join(secs, ", "))
	res.Expected = hungQuietTasks * int(hungWindow/time.Second)
	res.Delivered = len(lateness)
	res.Missing = res.Expected - res.Delivered
	res.Lateness = summarize(lateness)
	res.Early = countNegative(lateness)
	res.Notes = append(res.Notes, fmt.Sprintf("tenant A: %d requests reached the hanging endpoint, %d held open at the end of the window "+
		"(at most %d at once), %d ended in it; lateness is tenant B's", reached, held, maxHeld, answered))
	if lerr != nil {
		res.Notes = append(res.Notes, "tenant A's jobs by queue: "+lerr.Error())
	} else {
		res.Notes = append(res.Notes, "tenant A's jobs by queue (deliver, deliver_batch: main lane): "+lanes)
	}
	pass := res.Lateness != nil && res.Lateness.P99 <= hungTargetP99MS && res.Missing == 0 && res.Duplicates == 0
	res.Pass = &pass
	return res, nil
}

// hungLanes counts tenant A's River jobs (and batches' members) by queue.
func hungLanes(ctx context.Context, dbURL string) (string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT queue, count(*), sum(coalesce(jsonb_array_length(args->'executions'), 1))
		FROM river_job WHERE coalesce(args->>'tenant_id', args->'executions'->0->>'tenant_id') = $1
		GROUP BY queue ORDER BY queue`, hungTenant)
	if err != nil {
		return "", err
	}
	var parts []string
	for rows.Next() {
		var queue string
		var jobs, members int
		if err := rows.Scan(&queue, &jobs, &members); err != nil {
			return "", err
		}
		parts = append(parts, fmt.Sprintf("%s %d jobs (%d executions)", queue, jobs, members))
	}
	return strings.Join(parts, ", "), rows.Err()
}

// hangingReceiver accepts every request and answers none until it is
// closed.
type hangingReceiver struct {
	url      string
	srv      *http.Server
	inflight atomic.Int64
	n        atomic.Int64
	answered atomic.Int64
	mu       sync.Mutex
	max      int64
}

func startHangingReceiver(ctx context.Context) (*hangingReceiver, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &hangingReceiver{url: "http://" + ln.Addr().String() + "/hook"}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.n.Add(1)
		cur := r.inflight.Add(1)
		r.mu.Lock()
		r.max = max(r.max, cur)
		r.mu.Unlock()
		<-req.Context().Done() // ax gives up (its timeout), or the receiver closes
		r.inflight.Add(-1)
		r.answered.Add(1)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *hangingReceiver) total() int64 { return r.n.Load() }

// counts returns the requests held open now, the most at once, and how
// many ended.
func (r *hangingReceiver) counts() (held, most, ended int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inflight.Load(), r.max, r.answered.Load()
}

func (r *hangingReceiver) close() { _ = r.srv.Close() }
