// Package stats summarises a tenant's activity for dashboards and health
// checks (Reader): its executions by state, success rate, latency and
// firing lateness over a window, as one figure or step by step, and the
// deliver queues' depths for the operator.
package stats

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
	"github.com/axhq/ax/service/lifecycle"
)

// Stats windows.
const (
	WindowDefault = 24 * time.Hour
	WindowMin     = time.Minute
	WindowMax     = 30 * 24 * time.Hour
	// statsTimeout bounds the queries of one summary: a window of a very
	// busy tenant answers "try a shorter window" instead of loading the
	// database for minutes.
	statsTimeout = 10 * time.Second
)

// Reader summarises a tenant's activity for dashboards and health checks.
type Reader struct {
	pool *db.Pool
}

// New returns a Reader backed by pool.
func New(pool *db.Pool) *Reader {
	return &Reader{pool: pool}
}

// Summary is a tenant's activity over a window ending now.
type Summary struct {
	Window       time.Duration
	Since, Until time.Time // the window, by the database clock
	// Executions counts the executions created in the window by state;
	// every state is present.
	Executions map[string]int64
	// Late counts the window's misfire catch-ups.
	Late int64
	// SuccessRate is succeeded / (succeeded + failed); nil when neither.
	SuccessRate *float64
	// DeliveryLatency is the duration of the window's delivery attempts.
	DeliveryLatency Percentiles
	// FiringLateness is the firing lateness (Execution.FiringLateness) of
	// the window's on-time scheduled fires.
	FiringLateness Percentiles
	// Tasks counts the tenant's tasks by state (now, not in the window);
	// every state is present.
	Tasks map[string]int64
	// WorkflowRuns counts the tenant's workflow runs by state (now);
	// every state is present.
	WorkflowRuns map[string]int64
	// EndpointsEnabled and EndpointsDisabled count the tenant's endpoints.
	EndpointsEnabled, EndpointsDisabled int64
}

// Percentiles summarise Count samples in milliseconds, rounded to 0.1 ms;
// P50 and P99 are nil without samples.
type Percentiles struct {
	Count    int64
	P50, P99 *float64
}

// Get summarises tenant's activity over the window ending now (0: the
// default, 24 h). The window is WindowMin to WindowMax.
func (s *Reader) Get(ctx context.Context, tenant string, window time.Duration) (Summary, error) {
	if window == 0 {
		window = WindowDefault
	}
	if window < WindowMin || window > WindowMax {
		return Summary{}, errs.Field("window", "must be a duration from 1m to 30d (720h), e.g. 90m, 24h or 7d")
	}
	out := Summary{Window: window}
	// One snapshot, so the numbers agree with each other.
	err := db.InReadSnapshot(ctx, s.pool, statsTimeout, func(tx db.Tx) error {
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		out.Since, out.Until = now.Add(-window).UTC(), now.UTC()
		x, err := db.GetExecutionStats(ctx, tx, tenant, out.Since)
		if err != nil {
			return err
		}
		out.Executions, out.Late = allStates(lifecycle.Executions.States().States(), x.ByState), x.Late
		out.DeliveryLatency, out.FiringLateness = percentilesOf(x.Latency), percentilesOf(x.Lateness)
		if ok, bad := out.Executions[lifecycle.ExecSucceeded], out.Executions[lifecycle.ExecFailed]; ok+bad > 0 {
			rate := float64(ok) / float64(ok+bad)
			out.SuccessRate = &rate
		}
		tasks, err := db.CountTasksByState(ctx, tx, tenant)
		if err != nil {
			return err
		}
		out.Tasks = allStates(lifecycle.TaskStates.States(), tasks)
		runs, err := db.CountRunsByState(ctx, tx, tenant)
		if err != nil {
			return err
		}
		out.WorkflowRuns = allStates(lifecycle.Runs.States().States(), runs)
		out.EndpointsEnabled, out.EndpointsDisabled, err = db.CountEndpoints(ctx, tx, tenant)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return Summary{}, ctx.Err()
		}
		return Summary{}, errs.Store(err, "stats",
			errs.OnQueryCanceled(errs.Field("window", "too much activity to summarise in time; use a shorter window")))
	}
	return out, nil
}

// Series limits.
const (
	// SeriesStepMin is the finest step of a series.
	SeriesStepMin = time.Minute
	// SeriesPointsMax is the most steps a series has (a day of minutes).
	SeriesPointsMax = 1440
)

// Series is a tenant's executions over a window, step by step.
type Series struct {
	// Since and Until bound the window; Until is the end of the step that
	// holds the database's now (the last step is still filling), and steps
	// start at multiples of Step since midnight UTC.
	Since, Until time.Time
	Step         time.Duration
	// Buckets are every step of the window, oldest first.
	Buckets []Bucket
}

// Bucket counts the executions created in one step.
type Bucket struct {
	Start time.Time
	// Executions counts every execution created in the step; Succeeded
	// and Failed those in that state now (the rest are unfinished,
	// cancelled or skipped); Late the misfire catch-ups.
	Executions, Succeeded, Failed, Late int64
	// SuccessRate is Succeeded / (Succeeded + Failed); nil when neither.
	SuccessRate *float64
	// FiringLateness is as in Summary, over the step's fires.
	FiringLateness Percentiles
}

// Series counts tenant's executions over the window ending with the
// current step (0: the default, 24 h), step by step: window/step steps,
// at most SeriesPointsMax, each a whole number of minutes that divides a
// day (so that steps start at round times), e.g. 24 h by 15 min.
func (s *Reader) Series(ctx context.Context, tenant string, window, step time.Duration) (Series, error) {
	if window == 0 {
		window = WindowDefault
	}
	var ve errs.ValidationError
	if window < WindowMin || window > WindowMax {
		ve.Add("window", "must be a duration from 1m to 30d (720h), e.g. 90m, 24h or 7d")
	}
	switch {
	case step < SeriesStepMin || step%time.Minute != 0 || (24*time.Hour)%step != 0:
		ve.Add("step", "must be a whole number of minutes that divides a day, e.g. 1m, 15m or 1h")
	case window%step != 0:
		ve.Add("step", "must divide the window")
	case window/step > SeriesPointsMax:
		ve.Add("step", fmt.Sprintf("makes more than %d steps of the window; use a longer step", SeriesPointsMax))
	}
	if err := ve.Err(); err != nil {
		return Series{}, err
	}
	n := int(window / step)
	out := Series{Step: step, Buckets: make([]Bucket, n)}
	err := db.InReadSnapshot(ctx, s.pool, statsTimeout, func(tx db.Tx) error {
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		out.Until = now.UTC().Truncate(step).Add(step)
		out.Since = out.Until.Add(-window)
		rows, err := db.ExecutionSeries(ctx, tx, tenant, out.Since, step, n)
		if err != nil {
			return err
		}
		for i := range out.Buckets {
			out.Buckets[i].Start = out.Since.Add(time.Duration(i) * step)
		}
		for _, r := range rows {
			b := &out.Buckets[r.Index]
			b.Executions, b.Succeeded, b.Failed, b.Late = r.Executions, r.Succeeded, r.Failed, r.Late
			b.FiringLateness = percentilesOf(r.Lateness)
			if b.Succeeded+b.Failed > 0 {
				rate := float64(b.Succeeded) / float64(b.Succeeded+b.Failed)
				b.SuccessRate = &rate
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return Series{}, ctx.Err()
		}
		return Series{}, errs.Store(err, "stats series",
			errs.OnQueryCanceled(errs.Field("window", "too much activity to chart in time; use a shorter window")))
	}
	return out, nil
}

func allStates(states []string, counts map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(states))
	for _, s := range states {
		out[s] = counts[s]
	}
	return out
}

func percentilesOf(p db.Percentiles) Percentiles {
	return Percentiles{Count: p.Count, P50: roundTenth(p.P50), P99: roundTenth(p.P99)}
}

func roundTenth(v *float64) *float64 {
	if v == nil {
		return nil
	}
	r := math.Round(*v*10) / 10
	return &r
}

// QueueDepth is the number of River jobs of a queue in a state that is
// not final.
type QueueDepth struct {
	Queue, State string
	Jobs         int64
}

// QueueDepths counts River's unfinished jobs by queue and state, across
// tenants: an operator's figure (Prometheus), not a tenant's.
func (s *Reader) QueueDepths(ctx context.Context) ([]QueueDepth, error) {
	counts, err := db.CountUnfinishedJobs(ctx, s.pool)
	if err != nil {
		return nil, errs.Store(err, "count queued jobs")
	}
	out := make([]QueueDepth, len(counts))
	for i, c := range counts {
		out[i] = QueueDepth{Queue: c.Queue, State: c.State, Jobs: c.Count}
	}
	return out, nil
}
