package workflow

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/endpoint"
	"github.com/axhq/ax/service/errs"
)

// Workflow alert types.
const (
	// AlertRunBlocked is the alert of a run that waits for a person.
	AlertRunBlocked = "workflow_run.blocked"
	// AlertRunSLAMissed is the alert of a run not succeeded by its
	// workflow's SLA deadline (sla.finish_within_ms after its slot).
	AlertRunSLAMissed = "workflow_run.sla_missed"
)

// AlertArgs is the River job that sends a workflow run's alert
// (workflow_run.blocked) to the workflow's alert endpoint.
type AlertArgs struct {
	TenantID   string   `json:"tenant_id"`
	WorkflowID string   `json:"workflow_id"`
	RunID      string   `json:"run_id"`
	EndpointID string   `json:"endpoint_id"`
	Type       string   `json:"type"`
	Nodes      []string `json:"nodes"`
	// State and ScheduledFor are the run's when the alert was queued
	// (workflow_run.sla_missed).
	State        string     `json:"state,omitempty"`
	ScheduledFor *time.Time `json:"scheduled_for,omitempty"`
	// SLAFinishWithinMS and SLADueAt are the SLA a workflow_run.sla_missed
	// alert is about.
	SLAFinishWithinMS int64      `json:"sla_finish_within_ms,omitempty"`
	SLADueAt          *time.Time `json:"sla_due_at,omitempty"`
}

// Kind implements river.JobArgs.
func (AlertArgs) Kind() string { return "workflow_alert" }

// Alert is what the alert worker sends: where, and signed how.
type Alert struct {
	URL     string
	Method  string
	Headers map[string]string
	Timeout time.Duration
	Keys    [][]byte
	// WorkflowName names the workflow ("" when it is gone: nothing to send).
	WorkflowName string
	// Format is the endpoint's alert format: ax or slack.
	Format string
}

// AlertTarget loads the endpoint alert a goes to, of the workflow named
// name, and its signing keys now (by the database's clock);
// errs.ErrNotFound: the endpoint is gone or disabled.
func AlertTarget(ctx context.Context, q db.Querier, a AlertArgs, name string) (Alert, error) {
	ep, err := db.GetEndpoint(ctx, q, a.TenantID, a.EndpointID, false)
	if err != nil {
		return Alert{}, errs.Store(err, "load alert endpoint")
	}
	if !ep.Enabled {
		return Alert{}, errs.ErrNotFound
	}
	now, err := db.Now(ctx, q)
	if err != nil {
		return Alert{}, errs.Store(err, "read the database clock")
	}
	e := endpoint.Endpoint{ID: ep.ID, Secret: ep.Secret, PreviousSecretExpiresAt: ep.PreviousSecretExpiresAt}
	if ep.PreviousSecret != nil {
		e.PreviousSecret = *ep.PreviousSecret
	}
	keys, err := e.SigningKeys(now)
	if err != nil {
		return Alert{}, err
	}
	return Alert{
		URL: ep.URL, Method: ep.Method, Headers: ep.Headers, Keys: keys,
		Timeout: time.Duration(ep.TimeoutMS) * time.Millisecond, WorkflowName: name, Format: ep.Format,
	}, nil
}
