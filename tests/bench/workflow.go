package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// dagShape builds a workflow's nodes (all to the bench endpoint) and
// each node's upstreams.
type dagShape func(endpointID string) (nodes []any, deps map[string][]string)

// fanDAG is 10 nodes: a root, a fan-out of eight, a fan-in.
func fanDAG(ep string) ([]any, map[string][]string) {
	const fan = 8
	deps := map[string][]string{"root": nil}
	nodes := []any{map[string]any{"key": "root", "endpoint_id": ep}}
	var mids []string
	for i := range fan {
		k := fmt.Sprintf("mid-%d", i)
		mids = append(mids, k)
		deps[k] = []string{"root"}
		nodes = append(nodes, map[string]any{"key": k, "endpoint_id": ep, "depends_on": []string{"root"}})
	}
	deps["join"] = mids
	nodes = append(nodes, map[string]any{"key": "join", "endpoint_id": ep, "depends_on": mids})
	return nodes, deps
}

// diamondDAG is 5 nodes: a → b, c, d → e.
func diamondDAG(ep string) ([]any, map[string][]string) {
	deps := map[string][]string{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"a"}, "e": {"b", "c", "d"}}
	var nodes []any
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		n := map[string]any{"key": k, "endpoint_id": ep}
		if len(deps[k]) > 0 {
			n["depends_on"] = deps[k]
		}
		nodes = append(nodes, n)
	}
	return nodes, deps
}

// workflowScenario starts n runs of a DAG of the given shape at the same
// instant and measures the step latency: a downstream node's arrival at
// the receiver minus the arrival of the last of its upstreams (an upper
// bound of "upstream final → downstream sent": it also holds the
// upstream's response and its recording). It counts nodes that arrived
// twice, early (before an upstream) or never.
//
// rate > 0 triggers the runs at that many per second instead of all at
// once: the step latency of runs that do not queue behind each other.
func workflowScenario(ctx context.Context, st *stack, o options, name string, n int, shape dagShape, rate float64) (*result, error) {
	s, err := open(ctx, st, name, true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{
		Scenario: name, Tasks: n,
		Target: "every node of every run once, never early; step latency p99 ≤ 100 ms",
	}

	nodes, deps := shape(s.epID)
	var wf struct {
		ID string `json:"id"`
	}
	if err := s.ax.call(ctx, http.MethodPost, "/v1/workflows", map[string]any{
		"name": "bench.dag", "max_active_runs": 1000, "nodes": nodes,
	}, &wf); err != nil {
		return res, fmt.Errorf("create workflow: %w", err)
	}
	s.analyze(ctx, res, st.o.analyze)

	// Start the n runs together: o.concurrency triggers at a time.
	st.logf("workflow: triggering %d runs of a %d-node DAG", n, len(nodes))
	start := time.Now()
	cpu0 := sampleCPU(s.ax.Pid(), st)
	waits := s.sampleWaits(ctx, res)
	profiled := s.profileAx(ctx, 4*time.Second) // 500 runs × 10 nodes take about that
	var (
		next   atomic.Int64
		errs   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		sample []string
	)
	for range max(o.concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := next.Add(1); k <= int64(n) && ctx.Err() == nil; k = next.Add(1) {
				if rate > 0 { // the k-th run starts at its place in the steady rate
					if err := s.waitUntil(ctx, start.Add(time.Duration(float64(k-1)/rate*float64(time.Second))), "next run"); err != nil {
						return
					}
				}
				if err := s.ax.call(ctx, http.MethodPost, "/v1/workflows/"+wf.ID+"/trigger", map[string]any{}, nil); err != nil {
					errs.Add(1)
					mu.Lock()
					if len(sample) < 5 {
						sample = append(sample, err.Error())
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res.Errors += int(errs.Load())
	res.ErrorSamples = append(res.ErrorSamples, sample...)
	want := (n - int(errs.Load())) * len(nodes)
	res.Expected = want
	deadline := time.Now().Add(120 * time.Second)
	for s.rcv.count() < want && time.Now().Before(deadline) {
		if err := s.waitUntil(ctx, time.Now().Add(50*time.Millisecond), "next check"); err != nil {
			return res, err
		}
	}
	elapsed := time.Since(start)
	cpu1 := sampleCPU(s.ax.Pid(), st)
	if waits != nil {
		res.Waits = waits.result(12)
	}
	profiled()
	res.setCPU(cpu0, cpu1)
	if err := s.waitUntil(ctx, time.Now().Add(2*time.Second), "duplicates"); err != nil {
		return res, err
	}
	got := s.rcv.snapshot()
	s.ax.stop()
	s.finish(ctx, res)

	arrival := map[string]map[string]time.Time{} // run → node → first arrival
	for _, d := range got {
		if d.run == "" {
			res.Errors++
			continue
		}
		m := arrival[d.run]
		if m == nil {
			m = map[string]time.Time{}
			arrival[d.run] = m
		}
		if _, dup := m[d.node]; dup {
			res.Duplicates++
			continue
		}
		m[d.node] = d.at
	}
	var steps []time.Duration
	for _, m := range arrival {
		for node, at := range m {
			var last time.Time
			complete := true
			for _, u := range deps[node] {
				ua, ok := m[u]
				if !ok {
					complete = false
					continue
				}
				if ua.After(last) {
					last = ua
				}
			}
			switch {
			case !complete:
				res.Early++
			case len(deps[node]) > 0 && at.Before(last):
				res.Early++
			case len(deps[node]) > 0:
				steps = append(steps, at.Sub(last))
			}
		}
		res.Delivered += len(m)
	}
	res.Missing = want - res.Delivered
	res.Lateness = summarize(steps)
	if elapsed > 0 {
		res.DeliveriesPerSecond = float64(len(got)) / elapsed.Seconds()
	}
	// Every node once and never early is the target of both; the step
	// latency's (p99 ≤ 100 ms) is the diamond's, whose runs are spread so
	// that none queues behind another: 500 runs started at one instant
	// queue by design, and their latency is reported, not judged.
	pass := res.Missing == 0 && res.Duplicates == 0 && res.Early == 0 && res.Lateness != nil &&
		(name != "diamond" || res.Lateness.P99 <= 100)
	res.Pass = &pass
	res.Notes = append(res.Notes, fmt.Sprintf("%d runs × %d nodes in %s; lateness_ms is the step latency",
		n, len(nodes), elapsed.Round(time.Millisecond)))
	return res, nil
}
