package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// rng is a random source shared by the soak's goroutines.
type rng struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRNG(seed uint64) *rng { return &rng{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} } //nolint:gosec // fault injection

func (g *rng) intN(n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.IntN(n)
}

// between returns a duration in [lo, hi).
func (g *rng) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(g.intN(int((hi-lo)/time.Millisecond)))*time.Millisecond
}

// cluster is the replicas of a scenario, with which of them a fault holds.
type cluster struct {
	e        *env
	replicas []*replica
	mu       sync.Mutex
	faulted  map[*replica]bool // down, being stopped or started, or SIGSTOPped
	wg       sync.WaitGroup    // restarts and SIGCONTs under way
	trackers []*killTracker
}

func startCluster(ctx context.Context, e *env, n int) (*cluster, error) {
	c := &cluster{e: e, faulted: map[*replica]bool{}}
	for i := range n {
		r := &replica{name: fmt.Sprintf("ax%d", i+1)}
		if _, err := e.startAxRetry(ctx, r); err != nil {
			c.stopAll()
			return nil, err
		}
		c.replicas = append(c.replicas, r)
	}
	return c, nil
}

// healthy returns a random replica no fault holds, or nil.
func (c *cluster) healthy(g *rng) *replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ok []*replica
	for _, r := range c.replicas {
		if !c.faulted[r] && r.proc() != nil {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return ok[g.intN(len(ok))]
}

// take marks a healthy replica as faulted, keeping at least one healthy.
func (c *cluster) take(g *rng) *replica {
	c.mu.Lock()
	n := 0
	for _, r := range c.replicas {
		if c.faulted[r] {
			n++
		}
	}
	c.mu.Unlock()
	if n >= len(c.replicas)-1 {
		return nil
	}
	r := c.healthy(g)
	if r == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.faulted[r] {
		return nil
	}
	c.faulted[r] = true
	return r
}

func (c *cluster) release(r *replica) {
	c.mu.Lock()
	delete(c.faulted, r)
	c.mu.Unlock()
}

// restartLater starts r again after d (or at once when ctx ends).
func (c *cluster) restartLater(ctx context.Context, r *replica, d time.Duration) {
	c.wg.Go(func() {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		if _, err := c.e.startAxRetry(context.WithoutCancel(ctx), r); err != nil {
			c.e.logf("%s: start: %v", r.name, err)
		}
		c.release(r)
	})
}

// stopAll ends every replica with SIGTERM.
func (c *cluster) stopAll() {
	for _, r := range c.replicas {
		if p := r.proc(); p != nil {
			p.terminate()
		}
	}
}

// base is the URL of a healthy replica's API.
func (c *cluster) base(g *rng) string {
	if r := c.healthy(g); r != nil {
		if p := r.proc(); p != nil {
			return p.base
		}
	}
	return ""
}

// call sends an API request to a healthy replica, trying again (another
// replica, PostgreSQL back) for up to a minute on errors that are not a
// definite refusal (4xx other than 429).
func (c *cluster) call(ctx context.Context, g *rng, method, path string, in, out any) error {
	deadline := time.Now().Add(time.Minute)
	for {
		base := c.base(g)
		var err error
		if base == "" {
			err = errors.New("no healthy replica")
		} else {
			err = c.e.call(ctx, base, method, path, in, out)
		}
		var ae *apiError
		if err == nil || (errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusTooManyRequests) ||
			ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// retryPolicy lets a delivery outlast the receiver's faults (each lasts at
// most 15 s).
var retryPolicy = map[string]any{"max_attempts": 12, "initial_backoff_ms": 500, "max_backoff_ms": 4000}

func soak(ctx context.Context, e *env) (bool, error) {
	g := newRNG(e.o.seed)
	c, err := startCluster(ctx, e, 3)
	if err != nil {
		return false, err
	}
	defer c.stopAll()
	if err := e.mintToken(ctx); err != nil {
		return false, err
	}
	var ep, epRetry struct {
		ID string `json:"id"`
	}
	if err := c.call(ctx, g, http.MethodPost, "/v1/endpoints", map[string]any{
		"name": "soak", "url": e.recv.url + "/hook", "timeout_ms": 5000,
	}, &ep); err != nil {
		return false, fmt.Errorf("create endpoint: %w", err)
	}
	if err := c.call(ctx, g, http.MethodPost, "/v1/endpoints", map[string]any{
		"name": "soak-retry", "url": e.recv.url + "/hook/retry", "timeout_ms": 5000,
	}, &epRetry); err != nil {
		return false, fmt.Errorf("create endpoint: %w", err)
	}

	// The recurring tasks: interval (some of them paused and resumed now
	// and then), cron with seconds, and interval tasks whose receiver fails
	// their first two attempts.
	start := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
	var pausable []string
	create := func(body map[string]any) (string, error) {
		var t struct {
			ID string `json:"id"`
		}
		body["misfire_policy"] = "fire_all"
		body["retry"] = retryPolicy
		if err := c.call(ctx, g, http.MethodPost, "/v1/tasks", body, &t); err != nil {
			return "", fmt.Errorf("create task %s: %w", body["name"], err)
		}
		return t.ID, nil
	}
	intervals := []int{1, 2, 3, 5}
	for i := range 30 {
		id, err := create(map[string]any{
			"name": fmt.Sprintf("interval-%d", i), "endpoint_id": ep.ID,
			"schedule": map[string]any{
				"type": "interval", "interval_seconds": intervals[i%len(intervals)],
				"start_at": start.Add(time.Duration(i) * 37 * time.Millisecond).Format(time.RFC3339Nano),
			},
		})
		if err != nil {
			return false, err
		}
		if i%3 == 0 {
			pausable = append(pausable, id)
		}
	}
	steps := []int{2, 3, 5, 10}
	for i := range 12 {
		if _, err := create(map[string]any{
			"name": fmt.Sprintf("cron-%d", i), "endpoint_id": ep.ID,
			"schedule": map[string]any{"type": "cron", "cron": fmt.Sprintf("*/%d * * * * *", steps[i%len(steps)])},
		}); err != nil {
			return false, err
		}
	}
	for i := range 10 {
		if _, err := create(map[string]any{
			"name": fmt.Sprintf("retry-%d", i), "endpoint_id": epRetry.ID,
			"schedule": map[string]any{
				"type": "interval", "interval_seconds": 4,
				"start_at": start.Add(time.Duration(i) * 211 * time.Millisecond).Format(time.RFC3339Nano),
			},
		}); err != nil {
			return false, err
		}
	}
	e.logf("created 52 recurring tasks; faults for %s", e.o.duration)

	loadCtx, stopLoad := context.WithTimeout(ctx, e.o.duration)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { onceLoad(loadCtx, c, g, ep.ID) })
	wg.Go(func() { pauseLoad(loadCtx, c, g, pausable) })
	wg.Go(func() { nemesis(loadCtx, c, g) })
	wg.Wait()
	if ctx.Err() != nil {
		return false, ctx.Err()
	}

	// Heal: whatever is still down starts again, the receiver answers.
	e.recv.setMode(modeNormal)
	c.wg.Wait()
	e.logf("faults over; every replica up; quiet for %s", e.o.drain)
	select {
	case <-time.After(e.o.drain):
	case <-ctx.Done():
		return false, ctx.Err()
	}
	if err := freeze(ctx, c, g); err != nil {
		return false, err
	}
	if err := waitSettled(ctx, e, 3*time.Minute); err != nil {
		fmt.Printf("soak: %v\n", err)
	}
	for _, t := range c.trackers {
		t.wait()
	}
	c.stopAll()
	res, err := check(ctx, e)
	if err != nil {
		return false, err
	}
	res.kills = c.trackers
	res.print(e.o)
	return res.ok(), nil
}

// onceLoad creates a one-shot task due 3–10 s later about twice a second.
func onceLoad(ctx context.Context, c *cluster, g *rng, endpoint string) {
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.between(200*time.Millisecond, 800*time.Millisecond)):
		}
		runAt := time.Now().Add(g.between(3*time.Second, 10*time.Second)).UTC()
		err := c.call(ctx, g, http.MethodPost, "/v1/tasks", map[string]any{
			"name": fmt.Sprintf("once-%d", i), "endpoint_id": endpoint, "misfire_policy": "fire_all", "retry": retryPolicy,
			"schedule": map[string]any{"type": "once", "run_at": runAt.Format(time.RFC3339Nano)},
		}, nil)
		if err != nil && ctx.Err() == nil {
			c.e.logf("create once task: %v", err)
		}
	}
}

// pauseLoad pauses a random pausable task every 4–12 s and resumes it
// 3–15 s later.
func pauseLoad(ctx context.Context, c *cluster, g *rng, ids []string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := map[string]bool{}
	var mu sync.Mutex
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.between(4*time.Second, 12*time.Second)):
		}
		id := ids[g.intN(len(ids))]
		mu.Lock()
		if busy[id] {
			mu.Unlock()
			continue
		}
		busy[id] = true
		mu.Unlock()
		wg.Go(func() {
			defer func() { mu.Lock(); delete(busy, id); mu.Unlock() }()
			// Whether or not they were applied, the audit log says.
			_ = c.call(context.WithoutCancel(ctx), g, http.MethodPost, "/v1/tasks/"+id+"/pause", nil, nil)
			time.Sleep(g.between(3*time.Second, 15*time.Second))
			if err := c.call(context.WithoutCancel(ctx), g, http.MethodPost, "/v1/tasks/"+id+"/resume", nil, nil); err != nil {
				c.e.logf("resume %s: %v", id, err)
			}
		})
	}
}

// nemesis injects a random fault every so often until ctx ends.
func nemesis(ctx context.Context, c *cluster, g *rng) {
	e := c.e
	var recvWG sync.WaitGroup
	defer recvWG.Wait()
	recvBusy := make(chan struct{}, 1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(g.between(e.o.nemesisEvery/2, e.o.nemesisEvery*3/2)):
		}
		if ctx.Err() != nil {
			return // both were ready (e.g. after this process was paused): no fault past the end
		}
		switch k := g.intN(8); k {
		case 0, 1: // kill -9
			r := c.take(g)
			if r == nil {
				continue
			}
			p := r.proc()
			p.kill()
			e.logf("nemesis: SIGKILL %s (replica %s)", r.name, p.replicaID)
			c.trackers = append(c.trackers, trackKill(ctx, e, r.name, p.replicaID))
			c.restartLater(ctx, r, g.between(time.Second, 10*time.Second))
		case 2: // SIGTERM
			r := c.take(g)
			if r == nil {
				continue
			}
			p := r.proc()
			e.logf("nemesis: SIGTERM %s", r.name)
			down := g.between(time.Second, 5*time.Second)
			c.wg.Go(func() {
				p.terminate()
				e.logf("%s exited after SIGTERM", r.name)
				c.restartLater(ctx, r, down)
			})
		case 3: // SIGSTOP, then SIGCONT
			r := c.take(g)
			if r == nil {
				continue
			}
			p := r.proc()
			p.signal(syscall.SIGSTOP)
			d := g.between(2*time.Second, 25*time.Second)
			e.logf("nemesis: SIGSTOP %s for %s", r.name, d)
			c.wg.Go(func() {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
				p.signal(syscall.SIGCONT)
				e.logf("nemesis: SIGCONT %s", r.name)
				c.release(r)
			})
		case 4, 5: // PostgreSQL fast or immediate shutdown, then a start
			immediate := k == 5
			down := g.between(0, 3*time.Second)
			e.logf("nemesis: PostgreSQL %s shutdown, down %s", map[bool]string{false: "fast", true: "immediate"}[immediate], down)
			if err := e.restartPostgres(ctx, immediate, down); err != nil {
				e.logf("nemesis: %v", err)
			}
		default: // the receiver
			select {
			case recvBusy <- struct{}{}:
			default:
				continue
			}
			m := receiverMode(1 + g.intN(4))
			d := g.between(3*time.Second, 15*time.Second)
			e.logf("nemesis: receiver %s for %s", m, d)
			e.recv.setMode(m)
			recvWG.Go(func() {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
				e.recv.setMode(modeNormal)
				<-recvBusy
			})
		}
	}
}

// freeze pauses every task that is not completed, so that the check sees
// a finished history.
func freeze(ctx context.Context, c *cluster, g *rng) error {
	rows, err := c.e.pool.Query(ctx, `SELECT id::text FROM tasks WHERE tenant_id = 'soak' AND state = 'active'`)
	if err != nil {
		return err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		err := c.call(ctx, g, http.MethodPost, "/v1/tasks/"+id+"/pause", nil, nil)
		var ae *apiError
		if err != nil && (!errors.As(err, &ae) || ae.Status != http.StatusConflict) {
			return fmt.Errorf("pause %s: %w", id, err)
		}
	}
	c.e.logf("paused %d tasks", len(ids))
	return nil
}

// waitSettled waits until no execution is unfinished.
func waitSettled(ctx context.Context, e *env, within time.Duration) error {
	deadline := time.Now().Add(within)
	var n int
	for {
		err := e.pool.QueryRow(ctx, `SELECT count(*) FROM executions WHERE state IN ('pending', 'running', 'retrying')`).Scan(&n)
		if err == nil && n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d executions still unfinished %s after the end", n, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
