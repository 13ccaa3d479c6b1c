package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/axhq/ax/service"
)

// AlertType is the "type" of the failure alert body.
const AlertType = service.AlertExecutionFailed

// AlertBody is the JSON a task's alert endpoint receives when one of its
// executions fails for good, misses its SLA, or succeeds after alerted
// failures (docs/webhooks.md, "Alerts and auto-pause"). Every key is always there; a value that is absent
// (no response yet, no error, not finished, not an SLA alert) is null.
type AlertBody struct {
	Type           string     `json:"type"`
	ExecutionID    string     `json:"execution_id"`
	TaskID         string     `json:"task_id"`
	TaskName       string     `json:"task_name"`
	TaskState      string     `json:"task_state"`
	ScheduledFor   time.Time  `json:"scheduled_for"`
	Trigger        string     `json:"trigger"`
	State          string     `json:"state"`
	Attempts       int        `json:"attempts"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	ErrorClass     *string    `json:"error_class"`
	FinishedAt     *time.Time `json:"finished_at"`
	// SLA is set on an execution.sla_missed alert, null on others.
	SLA *AlertSLA `json:"sla"`
	// Recovered is set on an execution.recovered alert, null on others.
	Recovered *AlertRecovered `json:"recovered"`
}

// AlertRecovered is the failure streak an execution.recovered alert's
// success ended.
type AlertRecovered struct {
	// Failures is how many failed executions in a row the success ended
	// (counted from the task's last resume, which restarts the count).
	Failures int `json:"failures"`
}

// nullIfEmpty is s, or nil (null in JSON) when it is empty.
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AlertSLA is the missed SLA of an execution.sla_missed alert.
type AlertSLA struct {
	FinishWithinMS int64      `json:"finish_within_ms"`
	DueAt          *time.Time `json:"due_at"`
}

// SlackBody is the body of an alert to an endpoint whose format is slack:
// a Slack incoming webhook's message (text, mrkdwn links).
type SlackBody struct {
	Text string `json:"text"`
}

// AlertWorker sends an execution's alert to its task's alert endpoint through the
// same Sender as deliveries (signed, SSRF-guarded). Its idempotency key
// and webhook-id are "alert-<execution id>-<job id>": the same on every
// retry of one alert. River's default backoff retries it up to the job's
// MaxAttempts (service.DeliveriesConfig.AlertMaxAttempts); a failing
// alert is recorded on the execution's timeline and never alerts again.
type AlertWorker struct {
	river.WorkerDefaults[service.AlertArgs]

	deliveries *service.Deliveries
	sender     *Sender
	logger     *slog.Logger
	timeout    time.Duration
	publicURL  string
}

var _ river.Worker[service.AlertArgs] = (*AlertWorker)(nil)

func newAlertWorker(deps WorkerDeps, cfg RiverConfig) *AlertWorker {
	return &AlertWorker{
		deliveries: deps.Deliveries, sender: deps.Sender, logger: deps.Logger, timeout: cfg.JobTimeout,
		publicURL: strings.TrimRight(deps.PublicURL, "/"),
	}
}

// Timeout bounds a job; the sender enforces the alert endpoint's timeout.
func (w *AlertWorker) Timeout(*river.Job[service.AlertArgs]) time.Duration { return w.timeout }

// Work sends one alert attempt.
func (w *AlertWorker) Work(ctx context.Context, job *river.Job[service.AlertArgs]) error {
	args := job.Args
	log := w.logger.With("job_id", job.ID, "execution_id", args.ExecutionID, "tenant", args.TenantID, "attempt", job.Attempt)
	a, err := w.deliveries.Alert(ctx, args)
	switch {
	case errors.Is(err, service.ErrNotFound):
		log.WarnContext(ctx, "alert for a missing execution; nothing to send")
		return nil
	case err != nil:
		return fmt.Errorf("load alert: %w", err)
	}
	rctx, cancel := recordContext(ctx)
	defer cancel()
	if a.Skip != "" {
		log.InfoContext(ctx, "alert not sent", "reason", a.Skip)
		return w.record(rctx, args, false, Result{}, "", a.Skip)
	}
	body, err := w.body(a)
	if err != nil {
		return river.JobCancel(fmt.Errorf("encode alert: %w", err))
	}
	res := w.sender.Send(ctx, Request{
		Method: a.Method, URL: a.URL, Headers: a.Headers, Body: body, Timeout: a.Timeout,
		ExecutionID: AlertID(a.ExecutionID, job.ID), AlertType: a.Type, AlertAbout: a.ExecutionID,
		Attempt: job.Attempt, Keys: a.Keys,
	})
	if res.Err != nil && stopping(ctx) {
		return ctx.Err()
	}
	c := Classify(res, time.Now())
	log = log.With("status_code", res.StatusCode, "latency_ms", res.Latency.Milliseconds(), "error_class", c.ErrorClass)
	if c.Outcome == service.OutcomeSucceeded {
		log.InfoContext(ctx, "alert sent")
		return w.record(rctx, args, true, res, "", "")
	}
	failure := failureText(res, c, a.Timeout, w.timeout)
	if c.Outcome == service.OutcomeRetry && job.Attempt < job.MaxAttempts {
		log.InfoContext(ctx, "alert attempt failed; retrying", "error", failure)
		return fmt.Errorf("alert attempt %d: %s", job.Attempt, failure)
	}
	msg := fmt.Sprintf("alert given up after attempt %d: %s", job.Attempt, failure)
	log.WarnContext(ctx, "alert failed", "error", failure)
	if err := w.record(rctx, args, false, res, c.ErrorClass, msg); err != nil {
		log.ErrorContext(ctx, "record alert failure", "error", err.Error())
	}
	return river.JobCancel(errors.New(msg))
}

// body is the alert's body in its endpoint's format.
func (w *AlertWorker) body(a service.Alert) ([]byte, error) {
	if a.Format == service.AlertFormatSlack {
		return json.Marshal(SlackBody{Text: SlackText(a, w.publicURL)})
	}
	b := AlertBody{
		Type: a.Type, ExecutionID: a.ExecutionID, TaskID: a.TaskID, TaskName: a.TaskName, TaskState: a.TaskState,
		ScheduledFor: a.ScheduledFor, Trigger: a.Trigger, State: a.State, Attempts: a.Attempts,
		LastStatusCode: a.LastStatusCode, LastError: nullIfEmpty(a.LastError), ErrorClass: nullIfEmpty(a.ErrorClass),
		FinishedAt: a.FinishedAt,
	}
	switch a.Type {
	case service.AlertExecutionSLAMissed:
		b.SLA = &AlertSLA{FinishWithinMS: a.SLAFinishWithin.Milliseconds(), DueAt: a.SLADueAt}
	case service.AlertExecutionRecovered:
		b.Recovered = &AlertRecovered{Failures: a.Failures}
	}
	return json.Marshal(b)
}

// SlackText is the one readable line of a slack-format alert, with a link
// to the execution under publicURL.
func SlackText(a service.Alert, publicURL string) string {
	name := slackEscape(cmp.Or(a.TaskName, a.TaskID))
	var what string
	switch a.Type {
	case service.AlertExecutionSLAMissed:
		what = fmt.Sprintf(":hourglass: *%s* missed its SLA: not succeeded within %s of its %s slot (it is %s after %d attempts)",
			name, a.SLAFinishWithin, a.ScheduledFor.Format(time.RFC3339), a.State, a.Attempts)
	case service.AlertExecutionRecovered:
		after := "its alerted failures" // a resume restarted the count
		switch {
		case a.Failures == 1:
			after = "1 failure"
		case a.Failures > 1:
			after = fmt.Sprintf("%d failures", a.Failures)
		}
		what = fmt.Sprintf(":white_check_mark: *%s* recovered after %s: succeeded (slot %s)", name, after, a.ScheduledFor.Format(time.RFC3339))
	default:
		what = fmt.Sprintf(":x: *%s* failed after %d attempts (slot %s)", name, a.Attempts, a.ScheduledFor.Format(time.RFC3339))
		if a.LastError != "" {
			what += ": " + slackEscape(a.LastError)
		}
	}
	link := publicURL + "/v1/executions/" + a.ExecutionID
	return what + " <" + link + "|execution " + a.ExecutionID + ">"
}

// slackEscape escapes the characters Slack's mrkdwn gives a meaning.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func (w *AlertWorker) record(ctx context.Context, args service.AlertArgs, sent bool, res Result, class, msg string) error {
	err := w.deliveries.AlertResult(ctx, args.TenantID, args.ExecutionID, sent, res.StatusCode, res.Latency, class, msg)
	if err != nil {
		return fmt.Errorf("record alert result: %w", err)
	}
	return nil
}

// AlertID is the idempotency key and webhook-id of an alert: stable across
// the alert job's retries, distinct per alert, without '.' (Standard
// Webhooks signs "id.timestamp.body").
func AlertID(executionID string, jobID int64) string {
	return "alert-" + executionID + "-" + strconv.FormatInt(jobID, 10)
}
