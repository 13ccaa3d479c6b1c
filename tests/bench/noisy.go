package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// noisy: two tenants on one ax. Tenant A (the noisy neighbour) has n
// one-shot tasks due at one instant to an endpoint that answers in 1 s;
// tenant B (the bench tenant) has 200 interval tasks firing every second,
// spread over the second, to the fast receiver, from well before the
// instant until well after. Measured: B's lateness during A's burst (the
// target: p99 ≤ 100 ms) and the rate at which A's burst is delivered.
const (
	noisyBTasks      = 200
	noisySlowLatency = time.Second
	noisyTenant      = "noisy"
)

func noisy(ctx context.Context, st *stack, o options, n int) (*result, error) {
	s, err := open(ctx, st, "noisy", true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{
		Scenario: "noisy", Tasks: n,
		Target: fmt.Sprintf("tenant B's lateness p99 ≤ 100 ms during tenant A's burst of %d to a 1 s endpoint", n),
	}

	slow, err := startSlowReceiver(ctx, noisySlowLatency)
	if err != nil {
		return nil, err
	}
	defer slow.close()
	a, err := tenantClient(ctx, st, s.ax, noisyTenant)
	if err != nil {
		return nil, err
	}
	var ep struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, "/v1/endpoints", map[string]any{
		"name": "slow-receiver", "url": slow.url, "timeout_ms": 30000,
	}, &ep); err != nil {
		return nil, fmt.Errorf("tenant A's endpoint: %w", err)
	}

	lead := o.lead
	if lead == 0 {
		lead = 20*time.Second + time.Duration(n)*4*time.Millisecond
	}
	runAt := time.Now().Add(lead).Truncate(time.Second)

	// Tenant B: 200 fires a second, from before A's tasks exist.
	bStart := time.Now().Add(5 * time.Second).Truncate(time.Second)
	st.logf("noisy: tenant B: %d interval tasks (1 s) from %s", noisyBTasks, bStart.Format(time.RFC3339))
	cb := s.ax.createTasks(ctx, noisyBTasks, o.concurrency, func(i int) map[string]any {
		at := bStart.Add(time.Duration(i) * time.Second / noisyBTasks)
		return map[string]any{
			"name": fmt.Sprintf("b-%04d", i), "endpoint_id": s.epID,
			"schedule": map[string]any{
				"type": "interval", "interval_seconds": 1,
				"start_at": at.UTC().Format(time.RFC3339Nano),
			},
		}
	})
	if cb.errors > 0 {
		return res, fmt.Errorf("tenant B's tasks: %d failed: %v", cb.errors, cb.samples)
	}

	st.logf("noisy: tenant A: %d one-shot tasks due at %s", n, runAt.Format(time.RFC3339))
	ca := a.createTasks(ctx, n, o.concurrency, func(i int) map[string]any {
		return map[string]any{
			"name": fmt.Sprintf("a-%07d", i), "endpoint_id": ep.ID,
			"schedule": map[string]any{"type": "once", "run_at": runAt.UTC().Format(time.RFC3339Nano)},
		}
	})
	res.setCreation(ca)
	if margin := time.Until(runAt); margin < 5*time.Second {
		return res, fmt.Errorf("tenant A's tasks were created only %s before the instant; raise -lead", margin.Round(time.Millisecond))
	}
	wantA := n - ca.errors
	s.analyze(ctx, res, st.o.analyze)

	if err := s.waitUntil(ctx, runAt.Add(-time.Second), "the instant"); err != nil {
		return res, err
	}
	cpu0 := sampleCPU(s.ax.Pid(), st)
	deadline := runAt.Add(o.duration + 10*time.Minute)
	for slow.count() < wantA && time.Now().Before(deadline) {
		if err := s.waitUntil(ctx, time.Now().Add(100*time.Millisecond), "next check"); err != nil {
			return res, err
		}
	}
	burstEnd := time.Now()
	cpu1 := sampleCPU(s.ax.Pid(), st)
	res.setCPU(cpu0, cpu1)
	if err := s.waitUntil(ctx, time.Now().Add(o.grace), "B's last slots"); err != nil {
		return res, err
	}
	got := s.rcv.snapshot()
	s.ax.stop()
	s.finish(ctx, res)
	s.stages(ctx, res, runAt, burstEnd, "bench") // where B's lateness comes from

	// B's slots during A's burst: from the instant to its last delivery.
	var lateness []time.Duration
	perSecond := map[int][]time.Duration{} // by whole seconds after the instant
	au := newAudit(res)
	seen := map[string]bool{}
	for _, d := range got {
		sched, ok := au.check(d)
		if !ok || sched.Before(runAt) || !sched.Before(burstEnd) || seen[d.exec] {
			continue
		}
		seen[d.exec] = true
		lateness = append(lateness, d.at.Sub(sched))
		sec := int(sched.Sub(runAt) / time.Second)
		perSecond[sec] = append(perSecond[sec], d.at.Sub(sched))
	}
	// B's p99 second by second, where its max passes 100 ms: when the
	// lateness happens tells which phase of A's burst causes it.
	var secs []string
	for sec := range int(burstEnd.Sub(runAt)/time.Second) + 1 {
		if l := summarize(perSecond[sec]); l != nil && l.Max > 100 && len(secs) < 30 {
			secs = append(secs, fmt.Sprintf("+%ds %.0f/%.0f", sec, l.P99, l.Max))
		}
	}
	res.Notes = append(res.Notes, "tenant B's p99/max (ms) in the seconds after the instant where its max passed 100 ms: "+strings.Join(secs, ", "))
	res.Expected = int(burstEnd.Sub(runAt).Seconds()) * noisyBTasks
	res.Delivered = len(lateness)
	res.Lateness = summarize(lateness)
	res.Early = countNegative(lateness)
	aFirst, aLast, aCount := slow.span()
	res.WindowSeconds = burstEnd.Sub(runAt).Seconds()
	if aCount > 0 && aLast.After(aFirst) {
		res.DeliveriesPerSecond = float64(aCount) / aLast.Sub(aFirst).Seconds()
		res.LastDeliveryMS = ms(aLast.Sub(runAt))
		res.FirstDeliveryMS = ms(aFirst.Sub(runAt))
	}
	res.Missing = wantA - aCount
	res.Notes = append(res.Notes, fmt.Sprintf("tenant A: %d of %d delivered, %.0f/s (first %s, last %s after the instant); "+
		"deliveries_per_second and first/last_delivery_ms are A's, lateness is B's", aCount, wantA,
		res.DeliveriesPerSecond, aFirst.Sub(runAt).Round(time.Millisecond), aLast.Sub(runAt).Round(time.Millisecond)))
	pass := res.Lateness != nil && res.Lateness.P99 <= 100 && res.Missing == 0 &&
		res.Duplicates == 0
	res.Pass = &pass
	return res, nil
}

// apiClient calls ax's API as one tenant.
type apiClient struct {
	base   string
	token  string
	client *http.Client
}

// tenantClient mints a token for tenant with `ax token` under ax's
// configuration.
func tenantClient(ctx context.Context, st *stack, p *axProc, tenant string) (*apiClient, error) {
	cmd := exec.CommandContext(ctx, st.axBin, "token", "--tenant", tenant, "--ttl", "12h")
	cmd.Env = p.env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ax token --tenant %s: %w", tenant, err)
	}
	return &apiClient{base: p.base, token: strings.TrimSpace(string(out)), client: p.client}, nil
}

func (c *apiClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &apiError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b[:min(len(b), 300)]))}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// createTasks POSTs n tasks, body(i) each, concurrently.
func (c *apiClient) createTasks(ctx context.Context, n, concurrency int, body func(i int) map[string]any) createResult {
	res := createResult{ids: make([]string, n), nextRunAt: make([]time.Time, n)}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan int)
	)
	start := time.Now()
	for range min(concurrency, n) {
		wg.Go(func() {
			for i := range next {
				var t struct {
					ID        string    `json:"id"`
					NextRunAt time.Time `json:"next_run_at"`
				}
				if err := c.call(ctx, http.MethodPost, "/v1/tasks", body(i), &t); err != nil {
					mu.Lock()
					res.errors++
					if len(res.samples) < 5 {
						res.samples = append(res.samples, "create task: "+err.Error())
					}
					mu.Unlock()
					continue
				}
				res.ids[i], res.nextRunAt[i] = t.ID, t.NextRunAt
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// slowReceiver answers every webhook after a fixed delay and records when
// each execution first arrived, and every request's arrival with the
// number of requests in its handler at that moment (itself included): the
// endpoint-limit scenarios read concurrency and per-second rates from them.
type slowReceiver struct {
	url   string
	srv   *http.Server
	mu    sync.Mutex
	seen  map[string]bool
	first time.Time
	last  time.Time
	n     atomic.Int64

	inflight    atomic.Int64 // requests in the handler now
	arrivals    []time.Time  // every request, in arrival order
	inflightAt  []int        // inflight at each arrival, this one included
	maxInflight int
	dups        int // requests repeating an execution id already seen
}

func startSlowReceiver(ctx context.Context, delay time.Duration) (*slowReceiver, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &slowReceiver{url: "http://" + ln.Addr().String() + "/hook", seen: map[string]bool{}}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		cur := int(r.inflight.Add(1))
		// net/http sends the response once the handler has returned, so
		// the count drops before ax can see this request finish.
		defer r.inflight.Add(-1)
		exec := req.Header.Get("X-Ax-Execution-Id")
		r.mu.Lock()
		r.arrivals = append(r.arrivals, at)
		r.inflightAt = append(r.inflightAt, cur)
		r.maxInflight = max(r.maxInflight, cur)
		if r.seen[exec] {
			r.dups++
		} else {
			r.seen[exec] = true
			r.n.Add(1)
			if r.first.IsZero() || at.Before(r.first) {
				r.first = at
			}
			if at.After(r.last) {
				r.last = at
			}
		}
		r.mu.Unlock()
		time.Sleep(delay)
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *slowReceiver) count() int { return int(r.n.Load()) }

func (r *slowReceiver) span() (first, last time.Time, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first, r.last, len(r.seen)
}

// requests returns every request's arrival, the in-flight count at each,
// the most ever in flight and the number of repeated executions.
func (r *slowReceiver) requests() (arrivals []time.Time, inflightAt []int, maxInflight, dups int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.arrivals), slices.Clone(r.inflightAt), r.maxInflight, r.dups
}

func (r *slowReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}
