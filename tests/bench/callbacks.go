package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// callbackReceiver is the callbacks scenario's receiver: it records the
// X-Ax-Callback-Token of every request and answers 202 (accepted) at once,
// as a receiver of long-running work does.
type callbackReceiver struct {
	srv *http.Server
	url string

	mu     sync.Mutex
	tokens map[string]string // execution id → the latest attempt's token
	dups   int
}

func startCallbackReceiver(ctx context.Context) (*callbackReceiver, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &callbackReceiver{url: "http://" + ln.Addr().String() + "/hook", tokens: make(map[string]string, 1<<14)}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		id, tok := req.Header.Get("X-Ax-Execution-Id"), req.Header.Get("X-Ax-Callback-Token")
		r.mu.Lock()
		if _, ok := r.tokens[id]; ok {
			r.dups++
		}
		r.tokens[id] = tok
		r.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *callbackReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.tokens)
}

func (r *callbackReceiver) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// callbacks measures long-running work: n executions of a task in
// callback completion mode are fired (manual triggers) and accepted with
// a 202, then left waiting for the measurement duration — ax's CPU, memory
// and PostgreSQL's transactions while they wait are its idle cost, which
// must not grow with n (nothing holds a worker or a River job while an
// execution waits) — and then completed at rate per second with their
// callback tokens: the completion's latency is complete-to-succeeded (the
// call returns once the execution is succeeded, durably).
func callbacks(ctx context.Context, st *stack, o options, n, rate int) (*result, error) {
	s, err := open(ctx, st, "callbacks", false, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{Scenario: "callbacks", Tasks: 1, Expected: n, WindowSeconds: o.duration.Seconds()}
	rcv, err := startCallbackReceiver(ctx)
	if err != nil {
		return res, err
	}
	defer rcv.close()
	if s.epID, err = s.ax.createEndpoint(ctx, rcv.url); err != nil {
		return res, err
	}
	var task struct {
		ID string `json:"id"`
	}
	err = s.ax.call(ctx, http.MethodPost, "/v1/tasks", map[string]any{
		"name": "callbacks", "endpoint_id": s.epID,
		"schedule":   map[string]any{"type": "once", "run_at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)},
		"completion": map[string]any{"mode": "callback", "timeout_ms": 4 * 3600 * 1000},
		"retry":      map[string]any{"max_attempts": 1},
	}, &task)
	if err != nil {
		return res, fmt.Errorf("create the task: %w", err)
	}

	// Fire n executions; each is sent once and accepted.
	start := time.Now()
	var fired atomic.Int64
	var wg sync.WaitGroup
	var errs atomic.Int64
	for range o.concurrency {
		wg.Go(func() {
			for fired.Add(1) <= int64(n) && ctx.Err() == nil {
				if err := s.ax.call(ctx, http.MethodPost, "/v1/tasks/"+task.ID+"/trigger", map[string]any{}, nil); err != nil {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.Errors += int(errs.Load())
	res.CreateSeconds = math.Round(time.Since(start).Seconds()*100) / 100
	res.CreatePerSecond = math.Round(float64(n) / time.Since(start).Seconds())
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM callback_attempts WHERE expires_at IS NOT NULL`).Scan(&waiting); err != nil {
			return res, err
		}
		st.logf("callbacks: %d/%d waiting, %d received", waiting, n, rcv.count())
		if waiting >= n-res.Errors {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("only %d of %d executions were accepted within 10 minutes", waiting, n)
		}
		if err := s.waitUntil(ctx, time.Now().Add(time.Second), "accepting"); err != nil {
			return res, err
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d executions fired and accepted in %.1f s", n, time.Since(start).Seconds()))
	for _, q := range []string{"VACUUM ANALYZE", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("%s: %w", q, err)
		}
	}

	// Idle while they wait.
	a, err := readDBStats(ctx, conn, st.pgss)
	if err != nil {
		return res, err
	}
	cpu0 := sampleCPU(s.ax.Pid(), st)
	if err := s.waitUntil(ctx, time.Now().Add(o.duration), "waiting window ends"); err != nil {
		return res, err
	}
	cpu1 := sampleCPU(s.ax.Pid(), st)
	time.Sleep(1500 * time.Millisecond) // the window's last statistics
	b, err := readDBStats(ctx, conn, st.pgss)
	if err != nil {
		return res, err
	}
	res.setCPU(cpu0, cpu1)
	secs := cpu1.at.Sub(cpu0.at).Seconds()
	x := math.Round(float64(b.xacts-a.xacts-2)/secs*10) / 10
	res.PGXactsPerSec = &x
	if st.pgss {
		c := math.Round(float64(b.calls-a.calls-2)/secs*10) / 10
		res.PGStmtsPerSec = &c
	}

	// Complete them at rate per second.
	rcv.mu.Lock()
	type pending struct{ id, token string }
	todo := make([]pending, 0, len(rcv.tokens))
	for id, tok := range rcv.tokens {
		todo = append(todo, pending{id, tok})
	}
	res.Duplicates = rcv.dups
	rcv.mu.Unlock()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var (
		mu      sync.Mutex
		lat     []time.Duration
		failed  int
		samples []string
	)
	// The statements and the waits from here on are the completions'
	// (-top-queries, -waits), and so is the CPU per completion noted.
	if o.topQueries > 0 && st.pgss {
		if _, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`); err != nil {
			return res, fmt.Errorf("reset pg_stat_statements: %w", err)
		}
	}
	waits := s.sampleWaits(ctx, res)
	before, err := readDBStats(ctx, conn, st.pgss)
	if err != nil {
		return res, err
	}
	cpuStart := sampleCPU(s.ax.Pid(), st)
	st.logf("callbacks: completing %d at %d/s", len(todo), rate)
	completeStart := time.Now()
	tick := time.Second / time.Duration(max(rate, 1))
	sem := make(chan struct{}, 512)
	for i, p := range todo {
		due := completeStart.Add(time.Duration(i) * tick)
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(d):
			}
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t0 := time.Now()
			err := complete(ctx, client, s.ax.base, p.id, p.token)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if len(samples) < 5 {
					samples = append(samples, err.Error())
				}
				return
			}
			lat = append(lat, d)
		})
	}
	wg.Wait()
	elapsed := time.Since(completeStart)
	cpuEnd := sampleCPU(s.ax.Pid(), st)
	if waits != nil {
		res.Waits = waits.result(12)
	}
	after, err := readDBStats(ctx, conn, st.pgss)
	if err != nil {
		return res, err
	}
	if k := len(todo); k > 0 {
		note := fmt.Sprintf("completions: per 1,000, ax %.2f CPU-s, PostgreSQL %.2f CPU-s, %.0f transactions",
			float64(cpuEnd.ax-cpuStart.ax)/clockTicks*1000/float64(k), float64(cpuEnd.pg-cpuStart.pg)/clockTicks*1000/float64(k),
			float64(after.xacts-before.xacts)*1000/float64(k))
		if st.pgss {
			note += fmt.Sprintf(", %.0f statements", float64(after.calls-before.calls)*1000/float64(k))
		}
		res.Notes = append(res.Notes, note)
	}
	res.API = append(res.API, apiStats{
		Name:        fmt.Sprintf("POST /v1/executions/{id}/complete at %d/s (complete-to-succeeded)", rate),
		Concurrency: cap(sem), Requests: len(todo), PerSecond: math.Round(float64(len(todo))/elapsed.Seconds()*10) / 10,
		Latency: summarize(lat), Errors: failed, ErrorSamples: samples,
	})
	res.Errors += failed
	res.ErrorSamples = append(res.ErrorSamples, samples...)
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM executions WHERE state = 'succeeded'`).Scan(&res.Delivered); err != nil {
		return res, err
	}
	res.Missing = n - res.Delivered
	s.finish(ctx, res)
	return res, nil
}

// complete reports one execution succeeded with its callback token.
func complete(ctx context.Context, client *http.Client, base, id, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/executions/"+id+"/complete",
		bytes.NewReader([]byte(`{"status":"succeeded","output":{"ok":true}}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return errors.New(fmt.Sprint("HTTP ", resp.StatusCode, ": ", string(body)))
	}
	return nil
}
