// Package job holds the args of ax's River jobs, the domain's messages
// between the service that enqueues them and the workers (package jobs)
// that work them: a delivery of one execution (DeliverArgs), the first
// attempts of a batch of fires (DeliverBatchArgs, stored packed:
// batchargs.go), an execution's alert (AlertArgs). They carry ids only:
// secrets and payloads stay in the database (riverui shows job args).
package job

import "time"

// DeliverArgs is the River job that delivers one execution. It carries ids
// only: secrets and payloads stay in the database (riverui shows job args).
type DeliverArgs struct {
	TenantID    string `json:"tenant_id"`
	ExecutionID string `json:"execution_id" river:"unique"`
	// LeaseBase is added to the job's River attempt to make the lease that
	// fences the execution (service.Deliveries.Begin): a job that takes over an
	// execution from a batch (DeliverBatchArgs) starts above the batch's
	// leases, so that its attempts are newer than the batch's.
	LeaseBase int `json:"lease_base,omitempty"`
	// ScheduledFor is the slot of a scheduled fire: its job is due a
	// little earlier (service.SchedulerConfig.FetchAhead), and the worker waits
	// for the slot before it begins. Zero: begin at once.
	ScheduledFor time.Time `json:"scheduled_for,omitzero"`
	// EndpointID is the endpoint of the execution's task when the job was
	// inserted: the worker's send slots share a lane between endpoints as
	// between tenants before it begins (the endpoint it sends to is read
	// then). Empty in jobs inserted without it: shared by tenant alone.
	EndpointID string `json:"endpoint_id,omitempty"`
}

// Kind implements river.JobArgs.
func (DeliverArgs) Kind() string { return "deliver" }

// Lease returns the lease of River attempt attempt of the job.
func (a DeliverArgs) Lease(attempt int) int { return a.LeaseBase + attempt }

// ExecutionRef names an execution in a job's args.
type ExecutionRef struct {
	TenantID    string `json:"tenant_id"`
	ExecutionID string `json:"execution_id"`
	// ScheduledFor is the execution's slot, in a batch: the batch job is
	// due a little before its earliest member's slot
	// (service.SchedulerConfig.FetchAhead), and each member is sent no earlier
	// than its own.
	ScheduledFor time.Time `json:"scheduled_for,omitzero"`
	// EndpointID: as DeliverArgs.EndpointID.
	EndpointID string `json:"endpoint_id,omitempty"`
}

// DeliverBatchArgs is the River job that makes the first attempt of
// several executions due within a few milliseconds of each other (the
// scheduler's fires): one River job instead of one per execution, which
// takes River's insert, fetch and completion out of the per-delivery cost. Each execution is
// still begun, sent and finished on its own, under the batch job's attempt
// as lease; what it cannot finish in the batch — a retry, an overlap
// "queue" wait, a rescued run of the batch job — continues as a
// DeliverArgs job of its own (service.Deliveries.HandOff), which becomes the
// execution's river_job_id: the batch leaves it alone from then on.
type DeliverBatchArgs struct {
	Executions []ExecutionRef `json:"executions"`
}

// Kind implements river.JobArgs.
func (DeliverBatchArgs) Kind() string { return "deliver_batch" }

// AlertArgs is the River job that sends an alert about an execution (its
// failure, its missed SLA, its success after alerted failures) to its
// task's alert endpoint.
type AlertArgs struct {
	TenantID    string `json:"tenant_id"`
	ExecutionID string `json:"execution_id" river:"unique"`
	// Type is the alert's type: AlertExecutionFailed ("" too, as alerts
	// queued before SLAs existed), AlertExecutionSLAMissed or
	// AlertExecutionRecovered (of a success). An execution gets at most
	// one alert of each type.
	Type string `json:"type,omitempty" river:"unique"`
	// Failures is, in a recovered alert, how many failed executions in a
	// row the success ended.
	Failures int `json:"failures,omitempty"`
}

// Kind implements river.JobArgs.
func (AlertArgs) Kind() string { return "alert" }
