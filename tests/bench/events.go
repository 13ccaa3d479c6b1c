package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// eventsTarget is the events scenario's goal: the p99 from the POST's
// answer to the webhook's arrival.
const eventsTarget = 50 * time.Millisecond

// eventsScenario measures events: one task whose schedule is the event
// "bench.tick", and rate events a second posted for the measurement
// window (POST /v1/events, o.concurrency clients, each post paced on a
// shared ticker). Each event fires one execution of the task in the
// post's transaction; the latency is the webhook's arrival at the
// receiver − the moment the POST answered (the event, and its execution,
// committed), matched through the executions' event_id after the run.
// Every event must arrive exactly once.
func eventsScenario(ctx context.Context, st *stack, o options, rate int) (*result, error) {
	s, err := open(ctx, st, "events", true, false)
	if err != nil {
		return nil, err
	}
	defer s.close()
	res := &result{
		Scenario: "events", Tasks: 1, FiresPerSecond: float64(rate), WindowSeconds: o.duration.Seconds(),
		Target: fmt.Sprintf("p99 POST answer → webhook arrival ≤ %d ms at %d events/s, each event delivered once",
			eventsTarget.Milliseconds(), rate),
	}
	err = s.ax.call(ctx, http.MethodPost, "/v1/tasks", map[string]any{
		"name": "on-tick", "endpoint_id": s.epID,
		"schedule": map[string]any{"type": "event", "event": "bench.tick"},
	}, nil)
	if err != nil {
		return res, fmt.Errorf("create the event task: %w", err)
	}

	// Post at rate per second for the warm-up and the window; the
	// warm-up's events are delivered but not measured.
	var (
		mu       sync.Mutex
		answered = make(map[string]time.Time, rate*int(o.duration.Seconds()+1))
		errs     int
		samples  []string
		wg       sync.WaitGroup
	)
	tick := time.Second / time.Duration(max(rate, 1))
	start := time.Now()
	measureFrom := start.Add(o.warmup)
	end := measureFrom.Add(o.duration)
	slots := make(chan time.Time, o.concurrency)
	for range o.concurrency {
		wg.Go(func() {
			for due := range slots {
				var out struct {
					ID string `json:"id"`
				}
				err := s.ax.call(ctx, http.MethodPost, "/v1/events", map[string]any{"name": "bench.tick"}, &out)
				at := time.Now()
				mu.Lock()
				switch {
				case err != nil:
					errs++
					if len(samples) < 5 {
						samples = append(samples, err.Error())
					}
				case !due.Before(measureFrom):
					answered[out.ID] = at
				}
				mu.Unlock()
			}
		})
	}
	// ax's and PostgreSQL's CPU (and, with -waits, their wait events)
	// over the measured posts: per event, what contention does not change.
	var (
		cpu0    cpuSample
		sampled bool
		waits   *waitSampler
	)
	for due := start; due.Before(end) && ctx.Err() == nil; due = due.Add(tick) {
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if !sampled && !due.Before(measureFrom) {
			cpu0, sampled, waits = sampleCPU(s.ax.Pid(), st), true, s.sampleWaits(ctx, res)
		}
		slots <- due
	}
	close(slots)
	wg.Wait()
	if sampled {
		res.setCPU(cpu0, sampleCPU(s.ax.Pid(), st))
	}
	if waits != nil {
		res.Waits = waits.result(12)
	}
	res.Errors, res.ErrorSamples = errs, samples
	res.Expected = len(answered)
	if err := s.waitUntil(ctx, time.Now().Add(o.grace), "grace for the last deliveries"); err != nil {
		return res, err
	}

	// Match each delivery to its event through the execution.
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// River's part: its job's insert (created_at, this machine's clock,
	// before the POST's commit) to its fetch (attempted_at, at the fetch
	// that handed it to a worker; a job the event's transaction claimed
	// for ax's own first attempt has the claim's, before the answer).
	rows, err := conn.Query(ctx, `SELECT e.id::text, e.event_id::text, e.first_started_at, j.wait, j.fetched_at
		FROM executions e LEFT JOIN (
			SELECT args->>'execution_id' AS execution_id, min(attempted_at - created_at) AS wait,
				min(attempted_at) AS fetched_at
			FROM river_job WHERE kind = 'deliver' GROUP BY 1
		) j ON j.execution_id = e.id::text
		WHERE e.event_id IS NOT NULL`)
	if err != nil {
		return res, err
	}
	eventOf := map[string]string{}
	startOf := map[string]time.Time{}
	fetchedAt := map[string]time.Time{}
	var (
		id, ev    string
		started   *time.Time
		fetched   *time.Duration
		fetchedOn *time.Time
		toFetch   []time.Duration
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &ev, &started, &fetched, &fetchedOn}, func() error {
		eventOf[id] = ev
		if started != nil {
			startOf[id] = *started
		}
		if fetchedOn != nil {
			fetchedAt[id] = *fetchedOn
		}
		if fetched != nil {
			toFetch = append(toFetch, *fetched)
		}
		return nil
	}); err != nil {
		return res, err
	}
	seen := map[string]bool{}
	// The latency's two parts: the answer → the attempt's start (the
	// deliver job's fetch by River and Begin's transaction, which
	// first_started_at dates by the database's clock on this machine) and
	// the start → the arrival (the send).
	// The first part split again where River fetched the job (its
	// attempted_at, the fetch's clock): answer → fetched → started.
	var lat, toStart, toArrival, answerToFetch, fetchToStart []time.Duration
	for _, d := range s.rcv.snapshot() {
		ev, ok := eventOf[d.exec]
		if !ok {
			res.Errors++
			continue
		}
		if seen[ev] {
			res.Duplicates++
			continue
		}
		seen[ev] = true
		if at, ok := answered[ev]; ok {
			lat = append(lat, d.at.Sub(at))
			res.Delivered++
			if st, ok := startOf[d.exec]; ok {
				toStart, toArrival = append(toStart, st.Sub(at)), append(toArrival, d.at.Sub(st))
				if f, ok := fetchedAt[d.exec]; ok {
					answerToFetch, fetchToStart = append(answerToFetch, f.Sub(at)), append(fetchToStart, st.Sub(f))
				}
			}
		}
	}
	res.Missing = res.Expected - res.Delivered
	res.Lateness = summarize(lat)
	res.DeliveriesPerSecond = math.Round(float64(res.Delivered)/o.duration.Seconds()*10) / 10
	res.Notes = append(res.Notes, "lateness_ms here is the webhook's arrival − the POST /v1/events answer")
	if a, b := summarize(toStart), summarize(toArrival); a != nil && b != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("answer → attempt started (first_started_at): p50 %.1f p99 %.1f ms; "+
			"started → arrival: p50 %.1f p99 %.1f ms", a.P50, a.P99, b.P50, b.P99))
	}
	if a, b := summarize(answerToFetch), summarize(fetchToStart); a != nil && b != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("answer → fetched by River or claimed (attempted_at; a claim is before the answer): p50 %.1f p90 %.1f p99 %.1f ms; "+
			"fetched → attempt started: p50 %.1f p90 %.1f p99 %.1f ms", a.P50, a.P90, a.P99, b.P50, b.P90, b.P99))
	}
	if f := summarize(toFetch); f != nil {
		res.Notes = append(res.Notes, fmt.Sprintf("deliver job inserted → fetched by River or claimed (every event, warm-up included): "+
			"p50 %.1f p90 %.1f p99 %.1f ms", f.P50, f.P90, f.P99))
	}
	s.finish(ctx, res)
	return res, nil
}
