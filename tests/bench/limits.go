package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Endpoint limits across replicas: two ax processes on one database send
// to an endpoint with a limit, and the receiver measures what arrives.
//
//   - maxconc: max_concurrency 5 on an endpoint that answers in 200 ms, n
//     one-shot tasks (default 2,000) due at one instant. Measured: the
//     most requests ever in the receiver's handler at once (target: never
//     more than 5) and the throughput (target: at least 90 % of 5 / 200 ms
//     = 25/s).
//   - ratelimit: rate_limit_per_second 50 on an endpoint that answers at
//     once, n one-shot tasks (default 4,000) due over 10 s, so the limit
//     binds for over a minute. Measured: requests per wall-clock second in
//     steady state (whole seconds from the one after the first request to
//     the one before the last) and their overall rate (target: 50/s ± 5 %
//     over the minute; the per-second spread is reported beside it).
const (
	limitsReplicas       = 2
	maxconcLimit         = 5
	maxconcLatency       = 200 * time.Millisecond
	ratelimitRate        = 50.0
	ratelimitSpread      = 10 * time.Second
	ratelimitTolerance   = 0.05
	limitsThroughputGoal = 0.9
)

// limitStats are an endpoint-limit scenario's figures.
type limitStats struct {
	Replicas   int     `json:"replicas"`
	Limit      float64 `json:"limit"` // max_concurrency or rate_limit_per_second
	ResponseMS float64 `json:"response_ms"`
	Requests   int     `json:"requests"`

	// maxconc: requests in the receiver's handler, the most ever and at
	// each arrival; throughput between the instant and the last response.
	MaxInflight   int     `json:"max_inflight,omitempty"`
	InflightP50   float64 `json:"inflight_p50,omitempty"`
	InflightP99   float64 `json:"inflight_p99,omitempty"`
	BurstSeconds  float64 `json:"burst_seconds,omitempty"`
	Throughput    float64 `json:"throughput_per_second,omitempty"`
	IdealPerSec   float64 `json:"ideal_per_second,omitempty"`
	OverLimitReqs int     `json:"requests_over_limit,omitempty"` // arrivals that found more than the limit in flight
	// HandoffMS is the mean time a place under the limit stays empty
	// between a response and the next request: limit / throughput −
	// response time.
	HandoffMS float64 `json:"handoff_ms,omitempty"`
	// FinishToStartMS: p50 and mean, over the attempts that started after
	// another finished, of started_at − the latest finished_at before it
	// (from the database): the part of the hand-off between one outcome
	// being recorded and the next attempt's start (release, dispatch,
	// wake, River's fetch). The rest is recording the outcome and sending.
	FinishToStartP50MS  float64 `json:"finish_to_start_p50_ms,omitempty"`
	FinishToStartMeanMS float64 `json:"finish_to_start_mean_ms,omitempty"`

	// ratelimit: requests per wall-clock second over every whole second
	// of steady state (All) and over those after the last fire came due
	// (Drain: only the held backlog left).
	All   *secondStats `json:"all,omitempty"`
	Drain *secondStats `json:"drain,omitempty"`
	// DrainFrom is the index in PerSecond where Drain starts.
	DrainFrom    int       `json:"drain_from,omitempty"`
	FirstRequest time.Time `json:"first_request,omitzero"`
	PerSecond    []int     `json:"per_second,omitempty"`
	// StartedPerSecond counts the same seconds by the executions'
	// started_at (the transaction that admitted the attempt, after River
	// fetched its job): where it is even and PerSecond is not, requests
	// bunch between the start and the receiver; where both bunch, before.
	StartedPerSecond []int `json:"started_per_second,omitempty"`
}

// pauseWatch notices when this process stops running for a while (the
// machine paused it, or starved it): the receiver's clock then stamps a
// pile of requests at once, and the seconds around a pause say nothing of
// the limit.
type pauseWatch struct {
	stop   chan struct{}
	done   chan struct{}
	pauses [][2]time.Time // [last tick before, first tick after]
}

func watchPauses() *pauseWatch {
	w := &pauseWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-w.stop:
				return
			case now := <-t.C:
				if now.Sub(last) > 500*time.Millisecond {
					w.pauses = append(w.pauses, [2]time.Time{last, now})
				}
				last = now
			}
		}
	}()
	return w
}

// end stops the watch and returns the pauses it saw.
func (w *pauseWatch) end() [][2]time.Time {
	close(w.stop)
	<-w.done
	return w.pauses
}

// pauseNote describes pauses for a result's notes ("" when none).
func pauseNote(pauses [][2]time.Time) string {
	if len(pauses) == 0 {
		return ""
	}
	var total time.Duration
	for _, p := range pauses {
		total += p[1].Sub(p[0])
	}
	return fmt.Sprintf("this process was paused %d times for %s in all during the measurement (the first at %s): "+
		"the figures around them are not ax's", len(pauses), total.Round(time.Millisecond), pauses[0][0].UTC().Format("15:04:05"))
}

// limitedSession opens a session with limitsReplicas ax processes, a slow
// receiver answering after delay and an endpoint on it with limits.
func limitedSession(ctx context.Context, st *stack, name string, delay time.Duration, limits map[string]any) (
	*session, *slowReceiver, string, error,
) {
	s, err := open(ctx, st, name, false, false)
	if err != nil {
		return nil, nil, "", err
	}
	if err := s.addReplicas(ctx, limitsReplicas-1); err != nil {
		s.close()
		return nil, nil, "", err
	}
	rcv, err := startSlowReceiver(ctx, delay)
	if err != nil {
		s.close()
		return nil, nil, "", err
	}
	ep := map[string]any{"name": "limited-receiver", "url": rcv.url, "timeout_ms": 30000}
	for k, v := range limits {
		ep[k] = v
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := s.ax.call(ctx, http.MethodPost, "/v1/endpoints", ep, &out); err != nil {
		rcv.close()
		s.close()
		return nil, nil, "", fmt.Errorf("limited endpoint: %w", err)
	}
	return s, rcv, out.ID, nil
}

// createOnce creates n one-shot tasks to endpoint, task i due at at(i),
// at least 5 s after creation ends (else an error).
func createOnce(ctx context.Context, s *session, o options, res *result, n int, endpoint string, first time.Time,
	at func(i int) time.Time,
) error {
	s.st.logf("%s: creating %d one-shot tasks from %s", s.name, n, first.Format(time.RFC3339))
	cr := s.ax.createTasks(ctx, n, o.concurrency, func(i int) map[string]any {
		return map[string]any{
			"name": fmt.Sprintf("%s-%07d", s.name, i), "endpoint_id": endpoint,
			// Held deliveries start long after their slot: send each
			// anyway (a one-shot task has one slot).
			"misfire_policy": "fire_all",
			"schedule":       map[string]any{"type": "once", "run_at": at(i).UTC().Format(time.RFC3339Nano)},
		}
	})
	res.setCreation(cr)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if cr.errors > 0 {
		return fmt.Errorf("%d tasks failed to be created: %v", cr.errors, cr.samples)
	}
	if margin := time.Until(first); margin < 5*time.Second {
		return fmt.Errorf("the tasks were created only %s before the first is due; raise -lead", margin.Round(time.Millisecond))
	}
	s.analyze(ctx, res, s.st.o.analyze)
	return nil
}

// waitDelivered waits until want executions reached rcv, or until deadline.
func waitDelivered(ctx context.Context, s *session, rcv *slowReceiver, want int, deadline time.Time) error {
	next := time.Now()
	for rcv.count() < want && time.Now().Before(deadline) {
		next = next.Add(time.Second)
		if err := s.waitUntil(ctx, next, "next check"); err != nil {
			return err
		}
		if int(time.Until(deadline).Seconds())%10 == 0 {
			s.st.logf("%s: %d of %d delivered", s.name, rcv.count(), want)
		}
	}
	return nil
}

func limitsLead(o options, n int) time.Duration {
	if o.lead > 0 {
		return o.lead
	}
	return 10*time.Second + time.Duration(n)*4*time.Millisecond
}

func maxconc(ctx context.Context, st *stack, o options, n int) (*result, error) {
	s, rcv, ep, err := limitedSession(ctx, st, "maxconc", maxconcLatency, map[string]any{"max_concurrency": maxconcLimit})
	if err != nil {
		return nil, err
	}
	defer s.close()
	defer rcv.close()
	ideal := maxconcLimit / maxconcLatency.Seconds()
	res := &result{Scenario: "maxconc", Tasks: n, Target: fmt.Sprintf("never more than %d in flight across %d replicas, "+
		"throughput ≥ %.0f%% of %d / %s = %.0f/s", maxconcLimit, limitsReplicas, limitsThroughputGoal*100, maxconcLimit,
		maxconcLatency, ideal)}
	runAt := time.Now().Add(limitsLead(o, n)).Truncate(time.Second)
	if err := createOnce(ctx, s, o, res, n, ep, runAt, func(int) time.Time { return runAt }); err != nil {
		return res, err
	}
	pw := watchPauses()
	// The burst takes n / ideal seconds; allow three times that.
	deadline := runAt.Add(3*time.Duration(float64(n)/ideal*float64(time.Second)) + time.Minute)
	if err := waitDelivered(ctx, s, rcv, n, deadline); err != nil {
		return res, err
	}
	// The last request's response.
	if err := s.waitUntil(ctx, time.Now().Add(maxconcLatency+o.grace), "late duplicates"); err != nil {
		return res, err
	}
	arrivals, inflight, most, dups := rcv.requests()
	if note := pauseNote(pw.end()); note != "" {
		res.Notes = append(res.Notes, note)
	}
	s.finish(ctx, res)

	ls := &limitStats{
		Replicas: limitsReplicas, Limit: maxconcLimit, ResponseMS: float64(maxconcLatency.Milliseconds()),
		Requests: len(arrivals), MaxInflight: most, IdealPerSec: ideal,
	}
	first, last, delivered := rcv.span()
	if len(inflight) > 0 {
		sorted := slices.Sorted(slices.Values(inflight))
		ls.InflightP50 = float64(sorted[len(sorted)/2])
		ls.InflightP99 = float64(sorted[min(len(sorted)-1, len(sorted)*99/100)])
		for _, v := range inflight {
			if v > maxconcLimit {
				ls.OverLimitReqs++
			}
		}
	}
	if delivered > 0 {
		end := last.Add(maxconcLatency)
		ls.BurstSeconds = round2(end.Sub(runAt).Seconds())
		ls.Throughput = round1(float64(len(arrivals)) / end.Sub(first).Seconds())
		ls.HandoffMS = round1(1000 * (maxconcLimit/ls.Throughput - maxconcLatency.Seconds()))
	}
	if ls.FinishToStartP50MS, ls.FinishToStartMeanMS, err = finishToStart(ctx, s.dbURL); err != nil {
		res.Notes = append(res.Notes, "finish to start: "+err.Error())
	}
	res.Limit = ls
	res.Expected, res.Delivered, res.Missing, res.Duplicates = n, delivered, n-delivered, dups
	res.DeliveriesPerSecond = ls.Throughput
	pass := most <= maxconcLimit && res.Missing == 0 && ls.Throughput >= limitsThroughputGoal*ideal
	res.Pass = &pass
	return res, nil
}

func ratelimit(ctx context.Context, st *stack, o options, n int) (*result, error) {
	s, rcv, ep, err := limitedSession(ctx, st, "ratelimit", 0, map[string]any{"rate_limit_per_second": ratelimitRate})
	if err != nil {
		return nil, err
	}
	defer s.close()
	defer rcv.close()
	res := &result{Scenario: "ratelimit", Tasks: n, Target: fmt.Sprintf("%.0f/s ± %.0f%% across %d replicas, "+
		"over the minute (per-second spread reported)", ratelimitRate, ratelimitTolerance*100, limitsReplicas)}
	runAt := time.Now().Add(limitsLead(o, n)).Truncate(time.Second)
	at := func(i int) time.Time { return runAt.Add(ratelimitSpread * time.Duration(i) / time.Duration(n)) }
	if err := createOnce(ctx, s, o, res, n, ep, runAt, at); err != nil {
		return res, err
	}
	pw := watchPauses()
	deadline := runAt.Add(3*time.Duration(float64(n)/ratelimitRate*float64(time.Second)) + time.Minute)
	if err := waitDelivered(ctx, s, rcv, n, deadline); err != nil {
		return res, err
	}
	if err := s.waitUntil(ctx, time.Now().Add(o.grace), "late duplicates"); err != nil {
		return res, err
	}
	arrivals, _, _, dups := rcv.requests()
	pauses := pw.end()
	if note := pauseNote(pauses); note != "" {
		res.Notes = append(res.Notes, note)
	}
	s.finish(ctx, res)
	_, _, delivered := rcv.span()
	res.Expected, res.Delivered, res.Missing, res.Duplicates = n, delivered, n-delivered, dups
	ls := &limitStats{Replicas: limitsReplicas, Limit: ratelimitRate, Requests: len(arrivals)}
	res.Limit = ls
	if len(arrivals) == 0 {
		return res, nil
	}
	slices.SortFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) })
	ls.FirstRequest = arrivals[0].UTC()
	from := arrivals[0].Truncate(time.Second).Add(time.Second)
	to := arrivals[len(arrivals)-1].Truncate(time.Second) // exclusive
	secs := int(to.Sub(from) / time.Second)
	if secs <= 0 {
		return res, errors.New("the requests spanned under two seconds: no whole second to measure")
	}
	counts := make([]int, secs)
	for _, a := range arrivals {
		if i := int(a.Sub(from) / time.Second); !a.Before(from) && i < secs {
			counts[i]++
		}
	}
	ls.PerSecond = counts
	if ls.StartedPerSecond, err = startedPerSecond(ctx, s.dbURL, from, secs); err != nil {
		res.Notes = append(res.Notes, "attempt starts per second: "+err.Error())
	}
	// Seconds that overlap a pause of this process, or follow one (its
	// pile of requests), are left out (-1 in PerSecond).
	for _, p := range pauses {
		for i := max(int(p[0].Sub(from)/time.Second), 0); i < secs && i <= int(p[1].Sub(from)/time.Second)+1; i++ {
			counts[i] = -1
		}
	}
	ls.All = perSecondStats(counts, ratelimitRate)
	// The first whole second after the last fire came due.
	ls.DrainFrom = max(int(math.Ceil(runAt.Add(ratelimitSpread).Sub(from).Seconds())), 0)
	if ls.DrainFrom < secs {
		ls.Drain = perSecondStats(counts[ls.DrainFrom:], ratelimitRate)
	}
	if ls.All == nil {
		return res, errors.New("every second overlapped a pause of this process")
	}
	res.DeliveriesPerSecond = ls.All.Mean
	res.WindowSeconds = float64(secs)
	// The target is the rate over the minute; how single seconds spread
	// around it is reported beside it.
	pass := res.Missing == 0 && math.Abs(ls.All.ErrorPercent) <= ratelimitTolerance*100
	res.Pass = &pass
	return res, nil
}

// secondStats summarise requests per wall-clock second against a rate.
type secondStats struct {
	Seconds int     `json:"seconds"`
	Mean    float64 `json:"mean"` // also the overall rate: requests / seconds
	Min     int     `json:"min"`
	Max     int     `json:"max"`
	// Within: seconds within ±5 % of the rate; Within10 within ±10 %.
	Within       int     `json:"within_5_percent"`
	Within10     int     `json:"within_10_percent"`
	ErrorPercent float64 `json:"error_percent"` // of the mean against the rate
}

func perSecondStats(counts []int, rate float64) *secondStats {
	st := &secondStats{Min: math.MaxInt}
	total := 0
	for _, c := range counts {
		if c < 0 {
			continue // left out
		}
		st.Seconds++
		total += c
		st.Min, st.Max = min(st.Min, c), max(st.Max, c)
		if d := math.Abs(float64(c)-rate) / rate; d <= ratelimitTolerance {
			st.Within++
			st.Within10++
		} else if d <= 2*ratelimitTolerance {
			st.Within10++
		}
	}
	if st.Seconds == 0 {
		return nil
	}
	st.Mean = round2(float64(total) / float64(st.Seconds))
	st.ErrorPercent = round2(100 * (st.Mean - rate) / rate)
	return st
}

// finishToStart returns the p50 and mean, in ms, of each attempt's start
// after the latest finish before it, over the attempts that had one.
func finishToStart(ctx context.Context, dbURL string) (p50, mean float64, err error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY ms), 0)::float8, coalesce(avg(ms), 0)::float8
		FROM (SELECT extract(epoch FROM e.started_at - (SELECT max(f.finished_at) FROM executions f
				WHERE f.finished_at <= e.started_at)) * 1000 AS ms
			FROM executions e WHERE e.started_at IS NOT NULL) x
		WHERE ms IS NOT NULL`).Scan(&p50, &mean)
	return round1(p50), round1(mean), err
}

// startedPerSecond counts the executions whose attempt started in each of
// the secs seconds from from.
func startedPerSecond(ctx context.Context, dbURL string, from time.Time, secs int) ([]int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT floor(extract(epoch FROM started_at - $1::timestamptz))::int, count(*)::int
		FROM executions WHERE started_at >= $1 AND started_at < $1::timestamptz + make_interval(secs => $2) GROUP BY 1`,
		from, secs)
	if err != nil {
		return nil, err
	}
	out := make([]int, secs)
	var i, n int
	_, err = pgx.ForEachRow(rows, []any{&i, &n}, func() error {
		if i >= 0 && i < secs {
			out[i] = n
		}
		return nil
	})
	return out, err
}

// printLimit prints an endpoint-limit scenario's figures.
func printLimit(w io.Writer, r result) {
	l := r.Limit
	if l == nil {
		fmt.Fprintln(w)
		return
	}
	switch r.Scenario {
	case "maxconc":
		fmt.Fprintf(w, " max_concurrency %.0f, %d replicas, receiver answers in %.0f ms, %d tasks due at one instant: "+
			"max in flight %d (p50 %.0f, p99 %.0f at arrival; %d requests found more than %.0f), "+
			"%d/%d delivered in %.1f s, %.1f/s = %.0f%% of %.0f/s (a place stays empty %.1f ms between a response "+
			"and the next request; from the database, an attempt starts %.1f ms (p50; mean %.1f) after the latest "+
			"outcome was recorded), %d duplicates — %s\n",
			l.Limit, l.Replicas, l.ResponseMS, r.Tasks, l.MaxInflight, l.InflightP50, l.InflightP99, l.OverLimitReqs, l.Limit,
			r.Delivered, r.Expected, l.BurstSeconds, l.Throughput, 100*l.Throughput/l.IdealPerSec, l.IdealPerSec,
			l.HandoffMS, l.FinishToStartP50MS, l.FinishToStartMeanMS, r.Duplicates, verdict(r))
	case "ratelimit":
		fmt.Fprintf(w, " rate_limit_per_second %.0f, %d replicas, %d tasks due over %s; %d/%d delivered, %d duplicates — %s\n",
			l.Limit, l.Replicas, r.Tasks, ratelimitSpread, r.Delivered, r.Expected, r.Duplicates, verdict(r))
		for _, w2 := range []struct {
			name string
			st   *secondStats
		}{{"every whole second", l.All}, {"after the last fire came due", l.Drain}} {
			if st := w2.st; st != nil {
				fmt.Fprintf(w, "  ratelimit: %s (%d s): %.2f/s (error %+.2f%%), per second min %d max %d, "+
					"%d within ±5%%, %d within ±10%%\n", w2.name, st.Seconds, st.Mean, st.ErrorPercent, st.Min, st.Max,
					st.Within, st.Within10)
			}
		}
		fmt.Fprintf(w, "  ratelimit: requests per second at the receiver (the drain from the %dth): %v\n", l.DrainFrom+1, l.PerSecond)
		if len(l.StartedPerSecond) > 0 {
			fmt.Fprintf(w, "  ratelimit: attempts started per second (executions.started_at): %v\n", l.StartedPerSecond)
		}
	}
}
