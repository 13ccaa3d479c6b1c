// Package metrics holds ax's Prometheus collectors: what the scheduler,
// the workers, the background loops and the workflow engine report. It
// imports nothing of ax, so that service and jobs are both handed the one
// *Metrics through their Config instead of reporting to a global.
//
// No metric carries a tenant label: tenants are unbounded, and a label per
// tenant would let one tenant grow every scrape. Per-tenant figures come
// from GET /v1/stats.
package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The kind label of ax_sla_missed_total.
const (
	SLAKindExecution   = "execution"
	SLAKindWorkflowRun = "workflow_run"
)

// The error_class values of ax_callback_timeouts_total (service's
// ErrorClassHeartbeatTimeout and ErrorClassCallbackTimeout: a jobs test
// keeps them equal).
const (
	ClassHeartbeatTimeout = "heartbeat_timeout"
	ClassCallbackTimeout  = "callback_timeout"
)

// The kind values of ax_retention_deleted_total.
const (
	KindExecutions      = "executions"
	KindExecutionEvents = "execution_events"
	KindAudit           = "audit"
	KindWorkflowRuns    = "workflow_runs"
	KindPostedEvents    = "posted_events"
)

// Metrics are the scheduler's, the workers', the background loops' and the
// workflow engine's Prometheus metrics. A nil *Metrics is valid for the
// methods, which then record nothing; the fields need a value from New.
type Metrics struct {
	// Fires counts executions created, by trigger (schedule, manual, …).
	Fires *prometheus.CounterVec
	// FiringLateness is the firing lateness of an on-time scheduled fire
	// (service's Execution.FiringLateness): first attempt start −
	// scheduled_for.
	FiringLateness prometheus.Histogram
	// Attempts counts delivery attempts by outcome and error class.
	Attempts *prometheus.CounterVec
	// AttemptDuration is the HTTP round trip of one attempt.
	AttemptDuration prometheus.Histogram
	// RetriesScheduled counts attempts that scheduled another one.
	RetriesScheduled prometheus.Counter
	// Finished counts executions reaching a final state, by state
	// (ExecutionsFinished).
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
	// ClockOffset is this replica's clock minus the database's, in
	// seconds, as the scheduler loop's round trips estimate it.
	ClockOffset prometheus.Gauge
	// ReplicasDeclaredDead counts replicas this replica declared dead.
	ReplicasDeclaredDead prometheus.Counter
	// ReplicaJobsResumed counts River jobs of dead (or stopped) replicas
	// this replica made available again.
	ReplicaJobsResumed prometheus.Counter
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
	// Events counts the events posted, by outcome (matched, unmatched,
	// duplicate: its dedup key named an earlier event).
	Events *prometheus.CounterVec
	// WaitingNodes is the number of workflow nodes (every tenant's)
	// awaiting their event, as the workflow sweep last counted them.
	WaitingNodes prometheus.Gauge

	// LoopPasses counts the passes of each background loop (jobs.Runner),
	// by loop name; LoopErrors the passes that failed (a panic included)
	// and LoopPanics those that panicked.
	LoopPasses, LoopErrors, LoopPanics *prometheus.CounterVec
	// LoopLastSuccess is when each loop's last successful pass ended
	// (Unix seconds; 0 before the first).
	LoopLastSuccess *prometheus.GaugeVec

	// inFlight is the number of webhook requests under way in this
	// process (ax_deliveries_in_flight, and the replica's heartbeat).
	inFlight atomic.Int64
}

// New creates the metrics and registers them with reg (nil: a private
// registry, for tests and tools).
func New(reg prometheus.Registerer) *Metrics {
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
			Name: "ax_firing_lateness_seconds", Help: "First delivery attempt start minus the slot's scheduled time, of on-time scheduled fires (not catch-ups, backfills, manual, retry or workflow-step fires).",
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
			Name: "ax_deliveries_throttled_total", Help: "Deliveries held back by a limit, by limit (max_inflight_deliveries, max_deliveries_per_second, max_concurrency, rate_limit_per_second).",
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
	for _, class := range []string{ClassHeartbeatTimeout, ClassCallbackTimeout} {
		m.CallbackTimeouts.WithLabelValues(class)
	}
	for _, kind := range []string{KindExecutions, KindExecutionEvents, KindAudit, KindWorkflowRuns, KindPostedEvents} {
		m.RetentionDeleted.WithLabelValues(kind) // reported from the start, at 0
	}
	m.Events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_events_total",
		Help: "Events posted (POST /v1/events), by outcome: matched (fired something), unmatched, duplicate (its dedup_key named an earlier event).",
	}, []string{"outcome"})
	m.WaitingNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ax_waiting_nodes",
		Help: "Workflow nodes (wait_for) awaiting their event, every tenant's, as the workflow sweep last counted them.",
	})
	m.ReplicasLive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ax_replicas_live", Help: "Live ax replicas, as this replica's last heartbeat saw them.",
	})
	m.ClockOffset = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ax_clock_offset_seconds",
		Help: "This replica's clock minus the database's, as estimated from the scheduler loop's round trips (updated at each heartbeat).",
	})
	m.ReplicasDeclaredDead = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_replicas_declared_dead_total",
		Help: "Replicas this replica declared dead (no heartbeat for AX_REPLICA_DEAD_AFTER); their deliveries were resumed.",
	})
	m.ReplicaJobsResumed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_replica_jobs_resumed_total",
		Help: "River jobs a dead or stopped replica was running that this replica made available again.",
	})
	m.LoopPasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_loop_passes_total", Help: "Passes of each background loop, by loop.",
	}, []string{"loop"})
	m.LoopErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_loop_errors_total", Help: "Passes of each background loop that failed (panics included), by loop.",
	}, []string{"loop"})
	m.LoopPanics = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_loop_panics_total", Help: "Passes of each background loop that panicked (recovered; the loop went on), by loop.",
	}, []string{"loop"})
	m.LoopLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_loop_last_success_timestamp_seconds",
		Help: "When each background loop's last successful pass ended (Unix time; 0 before the first), by loop.",
	}, []string{"loop"})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ax_deliveries_in_flight", Help: "Webhook requests under way in this process.",
	}, func() float64 { return float64(m.inFlight.Load()) })
	reg.MustRegister(m.Fires, m.FiringLateness, m.Attempts, m.AttemptDuration, m.RetriesScheduled, m.Finished,
		m.MissedSlots, m.Reconciled, m.SchedulerPass, m.SchedulerClaimed, m.RetentionDeleted, m.ReplicasLive, m.ClockOffset,
		m.ReplicasDeclaredDead, m.ReplicaJobsResumed, inFlight, m.WorkflowRuns, m.NodeWait, m.CallbacksAccepted,
		m.CallbackTimeouts, m.SLAMissed, m.Events, m.WaitingNodes, m.Throttled, m.LoopPasses, m.LoopErrors, m.LoopPanics, m.LoopLastSuccess)
	return m
}

// EventPosted counts an event posted, by outcome, once its transaction
// committed.
func (m *Metrics) EventPosted(outcome string) {
	if m == nil {
		return
	}
	m.Events.WithLabelValues(outcome).Inc()
}

// SetWaitingNodes sets ax_waiting_nodes.
func (m *Metrics) SetWaitingNodes(n int64) {
	if m == nil {
		return
	}
	m.WaitingNodes.Set(float64(n))
}

// WorkflowRunFinished counts a workflow run that reached final state
// (succeeded, failed, cancelled). The workflow engine calls it in the
// transaction that ends the run: a transaction rolled back afterwards
// still counted.
func (m *Metrics) WorkflowRunFinished(state string) {
	if m == nil {
		return
	}
	m.WorkflowRuns.WithLabelValues(state).Inc()
}

// ExecutionsFinished counts n executions that reached final state
// (succeeded, failed, cancelled, skipped). Service reports every statement
// that ends executions through it — one execution or many, on every path —
// once the transaction that ended them committed.
func (m *Metrics) ExecutionsFinished(state string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.Finished.WithLabelValues(state).Add(float64(n))
}

// AddDeliveriesInFlight adds delta to the webhook requests under way in
// this process.
func (m *Metrics) AddDeliveriesInFlight(delta int) {
	if m == nil {
		return
	}
	m.inFlight.Add(int64(delta))
}

// DeliveriesInFlight returns the number of webhook requests under way in
// this process.
func (m *Metrics) DeliveriesInFlight() int {
	if m == nil {
		return 0
	}
	return int(m.inFlight.Load())
}
