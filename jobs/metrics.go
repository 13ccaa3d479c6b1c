package jobs

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/limits"
)

// Metrics are the scheduler's and workers' Prometheus metrics. No metric
// carries a tenant label: tenants are unbounded, and a label per tenant
// would let one tenant grow every scrape. Per-tenant figures come from
// GET /v1/stats.
type Metrics struct {
	// Fires counts executions created, by trigger (schedule, manual, …).
	Fires *prometheus.CounterVec
	// FiringLateness is first-attempt start − scheduled_for.
	FiringLateness prometheus.Histogram
	// Attempts counts delivery attempts by outcome and error class.
	Attempts *prometheus.CounterVec
	// AttemptDuration is the HTTP round trip of one attempt.
	AttemptDuration prometheus.Histogram
	// RetriesScheduled counts attempts that scheduled another one.
	RetriesScheduled prometheus.Counter
	// Finished counts executions reaching a final state, by state.
	Finished *prometheus.CounterVec
	// MissedSlots counts slots not fired by a misfire policy.
	MissedSlots prometheus.Counter
	// Throttled counts deliveries held back by a limit, by the limit's
	// name (once per attempt held).
	Throttled *prometheus.CounterVec
	// Reconciled counts executions resumed because no live job carried
	// them (service.Scheduler.Reconcile).
	Reconciled prometheus.Counter
	// SchedulerPass is the duration of one scheduler pass (one batch).
	SchedulerPass prometheus.Histogram
	// SchedulerClaimed is the number of tasks one pass claimed.
	SchedulerClaimed prometheus.Histogram
	// RetentionDeleted counts rows removed by retention, by kind
	// (executions, execution_events, audit, workflow_runs).
	RetentionDeleted *prometheus.CounterVec
	// ReplicasLive is the number of live replicas, as this replica's last
	// heartbeat saw it.
	ReplicasLive prometheus.Gauge
	// ReplicasDeclaredDead counts replicas this replica declared dead.
	ReplicasDeclaredDead prometheus.Counter
	// ReplicaJobsResumed counts River jobs of dead (or stopped) replicas
	// this replica made available again.
	ReplicaJobsResumed prometheus.Counter

	// inFlight is the number of webhook requests under way in this
	// process (ax_deliveries_in_flight, and the replica's heartbeat).
	inFlight atomic.Int64
	// WorkflowRuns counts workflow runs reaching a final state, by state.
	WorkflowRuns *prometheus.CounterVec
	// NodeWait is a workflow node's first attempt start minus when its
	// rule was met (its execution was created), or its slot for a root.
	NodeWait prometheus.Histogram
	// CallbacksAccepted counts callback-mode attempts accepted by a 2xx.
	CallbacksAccepted prometheus.Counter
	// CallbackTimeouts counts callback attempts failed by a timeout, by
	// error class (heartbeat_timeout, callback_timeout).
	CallbackTimeouts *prometheus.CounterVec
	// SLAMissed counts executions that missed their task's SLA and
	// workflow runs that missed their workflow's, by kind (execution,
	// workflow_run).
	SLAMissed *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: a
// private registry, for tests and tools).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	latencyBuckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	m := &Metrics{
		WorkflowRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_workflow_runs_total", Help: "Workflow runs reaching a final state, by state.",
		}, []string{"state"}),
		NodeWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ax_workflow_node_wait_seconds", Help: "A workflow node's first attempt start minus when its rule was met.",
			Buckets: latencyBuckets,
		}),
		Fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_fires_total", Help: "Executions created, by trigger.",
		}, []string{"trigger"}),
		FiringLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ax_firing_lateness_seconds", Help: "First delivery attempt start minus the slot's scheduled time.",
			Buckets: latencyBuckets,
		}),
		Attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_delivery_attempts_total", Help: "Delivery attempts by outcome (success, retry, permanent) and error class.",
		}, []string{"outcome", "error_class"}),
		AttemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ax_delivery_attempt_duration_seconds", Help: "HTTP round trip of one delivery attempt.",
			Buckets: latencyBuckets,
		}),
		RetriesScheduled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_delivery_retries_scheduled_total", Help: "Failed attempts that scheduled another attempt.",
		}),
		Finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_executions_finished_total", Help: "Executions reaching a final state, by state.",
		}, []string{"state"}),
		Throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_deliveries_throttled_total", Help: "Deliveries held back by a limit, by limit (" + strings.Join(limits.DeliveryNames(), ", ") + ").",
		}, []string{"limit"}),
		MissedSlots: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_missed_slots_total", Help: "Slots not fired because of a misfire policy (claimed late by the scheduler, or picked up late by a worker).",
		}),
		Reconciled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_reconciled_executions_total",
			Help: "Unfinished executions resumed because no live River job carried them (a fault: a job finished without its outcome).",
		}),
		SchedulerPass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ax_scheduler_pass_duration_seconds", Help: "Duration of one scheduler pass (one claimed batch).",
			Buckets: latencyBuckets,
		}),
		SchedulerClaimed: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ax_scheduler_claimed_tasks", Help: "Tasks claimed by one scheduler pass.",
			Buckets: []float64{0, 1, 10, 50, 100, 250, 500, 1000},
		}),
		RetentionDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_retention_deleted_total",
			Help: "Rows removed because they outlived their retention, by kind (executions, execution_events, audit).",
		}, []string{"kind"}),
	}
	m.CallbacksAccepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_callbacks_accepted_total", Help: "Attempts in callback completion mode accepted by a 2xx (ax then waits for their completion).",
	})
	m.CallbackTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_callback_timeouts_total", Help: "Callback attempts failed by a timeout, by error class (heartbeat_timeout, callback_timeout).",
	}, []string{"error_class"})
	m.SLAMissed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_sla_missed_total",
		Help: "Executions (kind execution) and workflow runs (kind workflow_run) not succeeded by their SLA deadline (sla.finish_within_ms).",
	}, []string{"kind"})
	for _, kind := range []string{SLAKindExecution, SLAKindWorkflowRun} {
		m.SLAMissed.WithLabelValues(kind) // reported from the start, at 0
	}
	for _, class := range []string{service.ErrorClassHeartbeatTimeout, service.ErrorClassCallbackTimeout} {
		m.CallbackTimeouts.WithLabelValues(class)
	}
	for _, kind := range []string{"executions", "execution_events", "audit", "workflow_runs"} {
		m.RetentionDeleted.WithLabelValues(kind) // reported from the start, at 0
	}
	m.ReplicasLive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ax_replicas_live", Help: "Live ax replicas, as this replica's last heartbeat saw them.",
	})
	m.ReplicasDeclaredDead = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_replicas_declared_dead_total",
		Help: "Replicas this replica declared dead (no heartbeat for AX_REPLICA_DEAD_AFTER); their deliveries were resumed.",
	})
	m.ReplicaJobsResumed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_replica_jobs_resumed_total",
		Help: "River jobs a dead or stopped replica was running that this replica made available again.",
	})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ax_deliveries_in_flight", Help: "Webhook requests under way in this process.",
	}, func() float64 { return float64(m.inFlight.Load()) })
	reg.MustRegister(m.Fires, m.FiringLateness, m.Attempts, m.AttemptDuration, m.RetriesScheduled, m.Finished,
		m.MissedSlots, m.Reconciled, m.SchedulerPass, m.SchedulerClaimed, m.RetentionDeleted, m.ReplicasLive,
		m.ReplicasDeclaredDead, m.ReplicaJobsResumed, inFlight, m.WorkflowRuns, m.NodeWait, m.CallbacksAccepted,
		m.CallbackTimeouts, m.SLAMissed, m.Throttled)
	return m
}

// ObserveWorkflowRun counts a run that reached final state; it fits
// service.WorkflowObserver.RunFinished.
func (m *Metrics) ObserveWorkflowRun(state string) { m.WorkflowRuns.WithLabelValues(state).Inc() }

// ObserveRetention records what a retention sweep removed; it fits
// RetentionLoopConfig.OnSweep.
func (m *Metrics) ObserveRetention(r service.RetentionResult) {
	m.RetentionDeleted.WithLabelValues("executions").Add(float64(r.Executions))
	m.RetentionDeleted.WithLabelValues("execution_events").Add(float64(r.Events))
	m.RetentionDeleted.WithLabelValues("audit").Add(float64(r.Audit))
	m.RetentionDeleted.WithLabelValues("workflow_runs").Add(float64(r.Runs))
}

// DeliveriesInFlight returns the number of webhook requests under way in
// this process.
func (m *Metrics) DeliveriesInFlight() int { return int(m.inFlight.Load()) }

// ObserveCallbacks records what a callback sweep did; it fits
// CallbackLoopConfig.OnCallbacks.
func (m *Metrics) ObserveCallbacks(r service.CallbackSweep) {
	for class, n := range r.TimedOut {
		m.CallbackTimeouts.WithLabelValues(class).Add(float64(n))
	}
	for state, n := range r.Finished {
		m.Finished.WithLabelValues(state).Add(float64(n))
	}
	m.RetriesScheduled.Add(float64(r.Retrying))
}

// ObserveSLA records what an SLA sweep did; it fits
// CallbackLoopConfig.OnSLA.
func (m *Metrics) ObserveSLA(r service.SLASweep) {
	m.SLAMissed.WithLabelValues(SLAKindExecution).Add(float64(r.Missed))
	m.SLAMissed.WithLabelValues(SLAKindWorkflowRun).Add(float64(r.RunsMissed))
}

// The kind label of ax_sla_missed_total.
const (
	SLAKindExecution   = "execution"
	SLAKindWorkflowRun = "workflow_run"
)

// ObserveTick records one scheduler pass; it fits SchedulerLoopConfig.OnTick.
func (m *Metrics) ObserveTick(r service.TickResult, d time.Duration) {
	m.SchedulerPass.Observe(d.Seconds())
	m.SchedulerClaimed.Observe(float64(r.Tasks))
	m.Fires.WithLabelValues(service.TriggerSchedule).Add(float64(r.Fired))
	m.MissedSlots.Add(float64(r.Missed))
}

// ObserveReconcile records a reconciliation; it fits
// SchedulerLoopConfig.OnReconcile.
func (m *Metrics) ObserveReconcile(n int) { m.Reconciled.Add(float64(n)) }

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
