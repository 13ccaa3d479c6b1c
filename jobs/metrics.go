package jobs

// The metrics themselves live in service/metrics, which service and jobs
// are both handed; this file turns service's results into observations,
// and holds the collectors read at scrape time.

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/retention"
)

// observeTick records one scheduler pass (m nil: nothing).
func observeTick(m *metrics.Metrics, r service.TickResult, d time.Duration) {
	if m == nil {
		return
	}
	m.SchedulerPass.Observe(d.Seconds())
	m.SchedulerClaimed.Observe(float64(r.Tasks))
	m.Fires.WithLabelValues(service.TriggerSchedule).Add(float64(r.Fired))
	m.MissedSlots.Add(float64(r.Missed))
}

// observeRetention records what a retention sweep removed (m nil:
// nothing).
func observeRetention(m *metrics.Metrics, r retention.Result) {
	if m == nil {
		return
	}
	m.RetentionDeleted.WithLabelValues(metrics.KindExecutions).Add(float64(r.Executions))
	m.RetentionDeleted.WithLabelValues(metrics.KindExecutionEvents).Add(float64(r.Events))
	m.RetentionDeleted.WithLabelValues(metrics.KindAudit).Add(float64(r.Audit))
	m.RetentionDeleted.WithLabelValues(metrics.KindWorkflowRuns).Add(float64(r.Runs))
	m.RetentionDeleted.WithLabelValues(metrics.KindPostedEvents).Add(float64(r.PostedEvents))
}

// observeCallbacks records what a callback sweep did (m nil: nothing).
func observeCallbacks(m *metrics.Metrics, r service.CallbackSweep) {
	if m == nil {
		return
	}
	for class, n := range r.TimedOut {
		m.CallbackTimeouts.WithLabelValues(class).Add(float64(n))
	}
	m.RetriesScheduled.Add(float64(r.Retrying))
}

// observeSLA records what an SLA sweep did (m nil: nothing).
func observeSLA(m *metrics.Metrics, r service.SLASweep) {
	if m == nil {
		return
	}
	m.SLAMissed.WithLabelValues(metrics.SLAKindExecution).Add(float64(r.Missed))
	m.SLAMissed.WithLabelValues(metrics.SLAKindWorkflowRun).Add(float64(r.RunsMissed))
}

// queueCollector reports River's unfinished jobs per queue and state at
// scrape time (service.Stats.QueueDepths): what an operator watches
// (backlog, retries, running).
type queueCollector struct {
	depths func(context.Context) ([]service.QueueDepth, error)
	desc   *prometheus.Desc
	up     *prometheus.Desc
}

// NewQueueCollector returns a collector of River queue depth by state,
// read from depths (service.Stats.QueueDepths) at each scrape.
func NewQueueCollector(depths func(context.Context) ([]service.QueueDepth, error)) prometheus.Collector {
	return &queueCollector{
		depths: depths,
		desc:   prometheus.NewDesc("ax_river_jobs", "River jobs not yet finished, by queue and state.", []string{"queue", "state"}, nil),
		up:     prometheus.NewDesc("ax_river_jobs_scrape_ok", "1 when the queue depth query succeeded.", nil, nil),
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.up
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	depths, err := c.depths(ctx)
	ok := 0.0
	if err == nil {
		for _, d := range depths {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(d.Jobs), d.Queue, d.State)
		}
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, ok)
}

// NewBatchCollector returns a collector of how the deliver worker's state
// transitions ran (service.Deliveries.BatchStats): batched, or carried by a
// batch that failed and redone row by row. A growing failure count means
// the batched statements keep failing (deadlocks, a lost connection).
func NewBatchCollector(stats func() service.BatchStats) prometheus.Collector {
	return batchCollector{
		stats: stats,
		batched: prometheus.NewDesc("ax_delivery_transitions_batched_total",
			"Delivery starts and successes recorded by a batched statement.", nil, nil),
		failed: prometheus.NewDesc("ax_delivery_batch_failures_total",
			"Delivery starts and successes whose batched statement failed; they took the row-by-row path.", nil, nil),
	}
}

type batchCollector struct {
	stats           func() service.BatchStats
	batched, failed *prometheus.Desc
}

func (c batchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.batched
	ch <- c.failed
}

func (c batchCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(c.batched, prometheus.CounterValue, float64(s.Batched))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(s.Failed))
}
