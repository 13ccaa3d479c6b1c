package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/service"
)

// WorkflowSweepDefault is how often WorkflowSweepLoop looks for runs that
// nothing in flight will advance.
const WorkflowSweepDefault = time.Second

// LoopWorkflowSweep is the workflow sweep's loop name.
const LoopWorkflowSweep = "workflow_sweep"

// WorkflowSweepLoop is the backstop of the workflows' event-driven advance
// (service.Workflows.Sweep), every interval (WorkflowSweepDefault when
// zero): a run whose upstream ended without advancing it (a crash between
// the two, a path that does not advance) moves on within a few seconds.
// Every replica runs it; the run's row lock keeps two sweeps from firing a
// node twice.
func WorkflowSweepLoop(w *service.Workflows, interval time.Duration) Loop {
	if interval <= 0 {
		interval = WorkflowSweepDefault
	}
	return Loop{Name: LoopWorkflowSweep, Every: interval, Pass: func(ctx context.Context) (time.Duration, error) {
		if _, err := w.Sweep(ctx); err != nil {
			return 0, fmt.Errorf("workflow sweep: %w", err)
		}
		return 0, nil
	}}
}

// WorkflowAlertBody is the JSON a workflow's alert endpoint receives when
// a run is blocked or misses its SLA (docs/workflows.md). Every key is
// always there; a value that is absent is null, as in AlertBody.
type WorkflowAlertBody struct {
	Type         string `json:"type"`
	WorkflowID   string `json:"workflow_id"`
	WorkflowName string `json:"workflow_name"`
	RunID        string `json:"workflow_run_id"`
	// Nodes are the blocked nodes (workflow_run.blocked).
	Nodes []string `json:"nodes"`
	// State and ScheduledFor are the run's when the alert was queued, and
	// SLA the missed SLA (workflow_run.sla_missed).
	State        *string    `json:"state"`
	ScheduledFor *time.Time `json:"scheduled_for"`
	SLA          *AlertSLA  `json:"sla"`
}

// WorkflowAlertWorker sends a workflow run's alert, signed, through the
// Sender; its idempotency key is "alert-<run id>-<job id>".
type WorkflowAlertWorker struct {
	river.WorkerDefaults[service.WorkflowAlertArgs]

	workflows *service.Workflows
	sender    *Sender
	logger    *slog.Logger
	timeout   time.Duration
	publicURL string
}

// Timeout bounds a job; the sender enforces the endpoint's timeout.
func (w *WorkflowAlertWorker) Timeout(*river.Job[service.WorkflowAlertArgs]) time.Duration {
	return w.timeout
}

// Work sends one alert attempt.
func (w *WorkflowAlertWorker) Work(ctx context.Context, job *river.Job[service.WorkflowAlertArgs]) error {
	a := job.Args
	log := w.logger.With("job_id", job.ID, "workflow_run_id", a.RunID, "tenant", a.TenantID, "attempt", job.Attempt)
	target, err := w.workflows.AlertTarget(ctx, a)
	switch {
	case errors.Is(err, service.ErrNotFound):
		log.InfoContext(ctx, "workflow alert not sent: its workflow or endpoint is gone or disabled")
		return nil
	case err != nil:
		return fmt.Errorf("load workflow alert: %w", err)
	}
	body, err := w.body(a, target)
	if err != nil {
		return river.JobCancel(fmt.Errorf("encode workflow alert: %w", err))
	}
	res := w.sender.Send(ctx, Request{
		Method: target.Method, URL: target.URL, Headers: target.Headers, Body: body, Timeout: target.Timeout,
		ExecutionID: AlertID(a.RunID, job.ID), AlertType: a.Type, AlertAbout: a.RunID, Attempt: job.Attempt, Keys: target.Keys,
	})
	if res.Err != nil && stopping(ctx) {
		return ctx.Err()
	}
	c := Classify(res, time.Now())
	if c.Outcome == service.OutcomeSucceeded {
		log.InfoContext(ctx, "workflow alert sent")
		return nil
	}
	failure := failureText(res, c, target.Timeout, w.timeout)
	if c.Outcome == service.OutcomeRetry && job.Attempt < job.MaxAttempts {
		return fmt.Errorf("workflow alert attempt %d: %s", job.Attempt, failure)
	}
	log.WarnContext(ctx, "workflow alert failed", "error", failure)
	return river.JobCancel(fmt.Errorf("workflow alert given up after attempt %d: %s", job.Attempt, failure))
}

// body is the alert's body in its endpoint's format.
func (w *WorkflowAlertWorker) body(a service.WorkflowAlertArgs, target service.WorkflowAlert) ([]byte, error) {
	if target.Format == service.AlertFormatSlack {
		return json.Marshal(SlackBody{Text: WorkflowSlackText(a, target.WorkflowName, w.publicURL)})
	}
	b := WorkflowAlertBody{
		Type: a.Type, WorkflowID: a.WorkflowID, WorkflowName: target.WorkflowName, RunID: a.RunID,
		Nodes: a.Nodes, State: nullIfEmpty(a.State), ScheduledFor: a.ScheduledFor,
	}
	if len(b.Nodes) == 0 {
		b.Nodes = nil // null, not []
	}
	if a.Type == service.AlertWorkflowRunSLAMissed {
		b.SLA = &AlertSLA{FinishWithinMS: a.SLAFinishWithinMS, DueAt: a.SLADueAt}
	}
	return json.Marshal(b)
}

// WorkflowSlackText is the one readable line of a slack-format workflow
// alert, with a link to the run under publicURL.
func WorkflowSlackText(a service.WorkflowAlertArgs, workflowName, publicURL string) string {
	name := slackEscape(cmp.Or(workflowName, a.WorkflowID))
	var what string
	switch a.Type {
	case service.AlertWorkflowRunSLAMissed:
		what = fmt.Sprintf(":hourglass: workflow *%s* missed its SLA: a run not succeeded within %s of its slot", name,
			time.Duration(a.SLAFinishWithinMS)*time.Millisecond)
		if a.ScheduledFor != nil {
			what += " " + a.ScheduledFor.UTC().Format(time.RFC3339)
		}
		if a.State != "" {
			what += " (it is " + a.State + ")"
		}
	default:
		what = fmt.Sprintf(":warning: workflow *%s* is blocked at %s: an upstream node failed; retry it, run or skip the node",
			name, slackEscape(strings.Join(a.Nodes, ", ")))
	}
	link := strings.TrimRight(publicURL, "/") + "/v1/workflow-runs/" + a.RunID
	return what + " <" + link + "|run " + a.RunID + ">"
}

// WaitLookupWorker looks again for the events of waits started while an
// event of their name was in flight (service.WaitLookupArgs).
type WaitLookupWorker struct {
	river.WorkerDefaults[service.WaitLookupArgs]

	workflows *service.Workflows
}

// Work runs one lookup; an error is retried.
func (w *WaitLookupWorker) Work(ctx context.Context, job *river.Job[service.WaitLookupArgs]) error {
	return w.workflows.LookUpArrived(ctx, job.Args)
}
