package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/service"
)

// WorkflowSweepDefault is how often RunWorkflowSweep looks for runs that
// nothing in flight will advance.
const WorkflowSweepDefault = time.Second

// RunWorkflowSweep runs the backstop of the workflows' event-driven
// advance (service.Workflows.Sweep) every interval until ctx ends: a run
// whose upstream ended without advancing it (a crash between the two, a
// path that does not advance) moves on within a few seconds. Every
// replica runs it; the run's row lock keeps two sweeps from firing a node
// twice.
func RunWorkflowSweep(ctx context.Context, w *service.Workflows, interval time.Duration, logger *slog.Logger) {
	if interval <= 0 {
		interval = WorkflowSweepDefault
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("workflow sweep failed", "error", err.Error())
		}
	}
}

// WorkflowAlertBody is the JSON a workflow's alert endpoint receives when
// a run is blocked (README "Workflows").
type WorkflowAlertBody struct {
	Type         string   `json:"type"`
	WorkflowID   string   `json:"workflow_id"`
	WorkflowName string   `json:"workflow_name"`
	RunID        string   `json:"workflow_run_id"`
	Nodes        []string `json:"nodes"`
}

// WorkflowAlertWorker sends a workflow run's alert, signed, through the
// Sender; its idempotency key is "alert-<run id>-<job id>".
type WorkflowAlertWorker struct {
	river.WorkerDefaults[service.WorkflowAlertArgs]

	workflows *service.Workflows
	sender    *Sender
	logger    *slog.Logger
	timeout   time.Duration
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
	body, err := json.Marshal(WorkflowAlertBody{Type: a.Type, WorkflowID: a.WorkflowID, WorkflowName: target.WorkflowName,
		RunID: a.RunID, Nodes: a.Nodes})
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
	if c.Outcome == OutcomeSuccess {
		log.InfoContext(ctx, "workflow alert sent")
		return nil
	}
	failure := failureText(res, c, target.Timeout, w.timeout)
	if c.Outcome == OutcomeRetry && job.Attempt < job.MaxAttempts {
		return fmt.Errorf("workflow alert attempt %d: %s", job.Attempt, failure)
	}
	log.WarnContext(ctx, "workflow alert failed", "error", failure)
	return river.JobCancel(fmt.Errorf("workflow alert given up after attempt %d: %s", job.Attempt, failure))
}
