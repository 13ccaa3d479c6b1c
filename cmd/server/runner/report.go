package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// completion is the body of POST /v1/executions/{id}/complete.
type completion struct {
	Status    string `json:"status"`
	Output    Output `json:"output"`
	Error     string `json:"error,omitempty"`
	Retryable *bool  `json:"retryable,omitempty"`
}

// answer is one answer of ax to a report.
type answer struct {
	status int
	detail string // the problem's detail, or the body's start
}

// post sends a report with token as the bearer.
func (r *Runner) post(ctx context.Context, executionID, action, token string, body any) (answer, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	u := strings.TrimRight(r.cfg.AXURL, "/") + "/v1/executions/" + url.PathEscape(executionID) + "/" + action
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	a := answer{status: resp.StatusCode, detail: string(raw)}
	var problem struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(raw, &problem) == nil && problem.Detail != "" {
		a.detail = problem.Detail
	}
	return a, nil
}

// heartbeats tells ax the run is alive, every period, until ctx ends. A
// 409 whose detail says the execution was cancelled ends the command; any
// other 409 (the attempt timed out) waits for ax's retry to bring a new
// token.
func (r *Runner) heartbeats(ctx context.Context, c *run) {
	for {
		token, period, adopted := c.current()
		t := time.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-adopted:
			t.Stop()
			continue
		case <-t.C:
		}
		a, err := r.post(ctx, c.executionID, "heartbeat", token, struct{}{})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.log.Warn("heartbeat not sent", "execution_id", c.executionID, "error", err)
		case a.status == http.StatusConflict && strings.Contains(a.detail, "is cancelled"):
			r.log.Info("the execution was cancelled: ending its command", "execution_id", c.executionID)
			select {
			case c.stop <- stopCancel:
			default:
			}
			return
		case a.status == http.StatusConflict:
			r.log.Info("the attempt is over; waiting for a retry's token", "execution_id", c.executionID, "detail", a.detail)
			select {
			case <-ctx.Done():
				return
			case <-adopted:
			}
		case a.status >= 300:
			r.log.Warn("heartbeat refused", "execution_id", c.executionID, "status", a.status, "detail", a.detail)
		}
	}
}

// CompleteTries bounds the attempts to deliver a completion ax cannot take
// now (network errors, 429, 5xx).
const CompleteTries = 8

// complete reports a finished run with the run's current token. A 409 after
// a token changed is tried again with the newer one.
func (r *Runner) complete(ctx context.Context, c *run, res result) {
	body := completion{Status: "succeeded", Output: res.Output}
	if !res.ok() {
		retryable := res.Retryable
		body.Status, body.Error, body.Retryable = "failed", res.Err, &retryable
	}
	backoff := 500 * time.Millisecond
	for try := 1; ; try++ {
		token, _, _ := c.current()
		a, err := r.post(ctx, c.executionID, "complete", token, body)
		switch {
		case err == nil && a.status < 300:
			return
		case err == nil && a.status == http.StatusConflict:
			if newer, _, _ := c.current(); newer != token {
				continue
			}
			r.log.Warn("completion refused: the attempt is over", "execution_id", c.executionID, "detail", a.detail)
			return
		case err == nil && a.status != http.StatusTooManyRequests && a.status < 500:
			r.log.Error("completion refused", "execution_id", c.executionID, "status", a.status, "detail", a.detail)
			return
		case try == CompleteTries:
			r.log.Error("completion not delivered; ax's timeouts will retry the execution", "execution_id", c.executionID,
				"error", fmt.Sprint(err), "status", a.status)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 15*time.Second)
	}
}
