package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// burstKill: two replicas share o.burst one-shot fires due at one instant;
// o.killAfter that instant, the replica running the most delivery jobs is
// killed with SIGKILL. Target: every delivery it held resumed, and every
// slot it had not started delivered, within 30 s of the kill.
func burstKill(ctx context.Context, e *env) (bool, error) {
	g := newRNG(e.o.seed)
	c, err := startCluster(ctx, e, 2)
	if err != nil {
		return false, err
	}
	defer c.stopAll()
	if err := e.mintToken(ctx); err != nil {
		return false, err
	}
	var ep struct {
		ID string `json:"id"`
	}
	if err := c.call(ctx, g, http.MethodPost, "/v1/endpoints", map[string]any{
		"name": "burst", "url": e.recv.url + "/hook", "timeout_ms": 10000,
	}, &ep); err != nil {
		return false, fmt.Errorf("create endpoint: %w", err)
	}
	// Enough time to create them all: a few milliseconds each on this
	// machine, plus a margin.
	lead := 15*time.Second + time.Duration(e.o.burst)*10*time.Millisecond
	runAt := time.Now().Add(lead).UTC().Truncate(time.Second)
	e.logf("creating %d one-shot tasks due at %s", e.o.burst, fmtT(runAt))
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		next   = make(chan int)
	)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				if err := c.call(ctx, g, http.MethodPost, "/v1/tasks", map[string]any{
					"name": fmt.Sprintf("burst-%d", i), "endpoint_id": ep.ID, "misfire_policy": "fire_all",
					"schedule": map[string]any{"type": "once", "run_at": runAt.Format(time.RFC3339Nano)},
				}, nil); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	for i := range e.o.burst {
		next <- i
	}
	close(next)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return false, fmt.Errorf("%d task creations failed", n)
	}
	if time.Now().After(runAt.Add(-time.Second)) {
		return false, fmt.Errorf("creating %d tasks took past their instant; try a smaller -burst", e.o.burst)
	}
	select {
	case <-time.After(time.Until(runAt.Add(e.o.killAfter))):
	case <-ctx.Done():
		return false, ctx.Err()
	}
	held := map[string]int{}
	rows, err := e.pool.Query(ctx, `SELECT attempted_by[array_upper(attempted_by, 1)], count(*)::int FROM river_job
		WHERE state = 'running' AND kind IN ('deliver', 'deliver_batch') GROUP BY 1`)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return false, err
		}
		held[id] = n
	}
	rows.Close()
	victim := c.replicas[0]
	for _, r := range c.replicas {
		if held[r.proc().replicaID] > held[victim.proc().replicaID] {
			victim = r
		}
	}
	p := victim.proc()
	c.mu.Lock()
	c.faulted[victim] = true
	c.mu.Unlock()
	p.kill()
	killedAt := time.Now()
	tr := trackKill(ctx, e, victim.name, p.replicaID)
	tr.killedAt = killedAt
	c.trackers = append(c.trackers, tr)
	e.logf("SIGKILL %s %s after the instant (running jobs by client: %v)", victim.name, e.o.killAfter, held)

	// Every delivery done (or the deadline).
	settled := waitSettled(ctx, e, trackDeadline)
	allDone := time.Since(killedAt)
	tr.wait()
	c.stopAll()
	res, err := check(ctx, e)
	if err != nil {
		return false, err
	}
	res.kills = c.trackers
	res.print(e.o)
	target := "met"
	if tr.err != nil || tr.delivered < 0 || tr.delivered > 30*time.Second {
		target = "MISSED"
	}
	fmt.Printf("burst-kill: %d fires due at %s, %s killed %s after it holding %d jobs (%d deliveries not final)\n",
		e.o.burst, fmtT(runAt), victim.name, e.o.killAfter, tr.jobs, tr.held)
	fmt.Printf("burst-kill: its deliveries all resumed %s and all final %s after the kill (target 30s: %s); "+
		"every fire final %s after the kill\n", fmtDur(tr.resumed), fmtDur(tr.delivered), target, allDone.Round(10*time.Millisecond))
	if settled != nil {
		fmt.Printf("burst-kill: %v\n", settled)
	}
	return res.ok(), nil
}
