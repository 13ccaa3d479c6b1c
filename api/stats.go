package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// statsResponse is a tenant's activity over a window ending now.
type statsResponse struct {
	// WindowSeconds is the window's length.
	WindowSeconds int64 `json:"window_seconds" example:"86400"`
	// Since and Until bound the window (database clock).
	Since timestamp `json:"since" swaggertype:"string" format:"date-time"`
	Until timestamp `json:"until" swaggertype:"string" format:"date-time"`
	// Executions are those created in the window.
	Executions executionStats `json:"executions"`
	// DeliveryLatencyMS: how long the window's delivery attempts took, from
	// request to response (attempt_succeeded and attempt_failed events).
	DeliveryLatencyMS percentiles `json:"delivery_latency_ms"`
	// FiringLatenessMS: how late the window's scheduled fires started their first attempt (first attempt
	// start − scheduled_for, never below 0), over on-time scheduled fires only: misfire catch-ups (late),
	// backfills, manual, retry and workflow-step fires are excluded. The same definition as the
	// ax_firing_lateness_seconds metric.
	FiringLatenessMS percentiles `json:"firing_lateness_ms"`
	// Tasks are counted now, whatever the window.
	Tasks taskStats `json:"tasks"`
	// Endpoints are counted now, whatever the window.
	Endpoints endpointStats `json:"endpoints"`
	// WorkflowRuns are counted now, whatever the window.
	WorkflowRuns workflowRunStats `json:"workflow_runs"`
	// Series: the window's executions step by step; present only when the
	// request names a step.
	Series *statsSeries `json:"series,omitempty"`
} // @name Stats

// statsSeries counts the executions of a window step by step. Its window
// has the request's length but ends with the step that holds now (still
// filling), and steps start at multiples of the step since midnight UTC,
// so its bounds may differ from the summary's by less than a step.
type statsSeries struct {
	// StepSeconds is the step's length.
	StepSeconds int64 `json:"step_seconds" example:"900"`
	// Since is the first step's start; Until the last step's end (after
	// now: the last step is still filling).
	Since timestamp `json:"since" swaggertype:"string" format:"date-time"`
	Until timestamp `json:"until" swaggertype:"string" format:"date-time"`
	// Buckets are every step of the window, oldest first.
	Buckets []statsBucket `json:"buckets"`
} // @name StatsSeries

// statsBucket counts the executions created in one step.
type statsBucket struct {
	// Start is the step's start; it ends where the next starts.
	Start timestamp `json:"start" swaggertype:"string" format:"date-time"`
	// Executions counts every execution created in the step.
	Executions int64 `json:"executions" example:"15"`
	// Succeeded counts those of them succeeded now.
	Succeeded int64 `json:"succeeded" example:"14"`
	// Failed counts those of them failed now; the rest are unfinished,
	// cancelled or skipped.
	Failed int64 `json:"failed" example:"1"`
	// Late counts the misfire catch-ups among them.
	Late int64 `json:"late" example:"0"`
	// SuccessRate: succeeded / (succeeded + failed), 0 to 1; null when there are neither.
	SuccessRate *float64 `json:"success_rate" example:"0.933" extensions:"x-nullable"`
	// FiringLatenessMS: as the summary's, over the step's fires.
	FiringLatenessMS percentiles `json:"firing_lateness_ms"`
} // @name StatsBucket

// executionStats counts executions.
type executionStats struct {
	Total   int64                `json:"total" example:"1440"`
	ByState executionStateCounts `json:"by_state"`
	// Late counts misfire catch-ups: slots fired late after downtime.
	Late int64 `json:"late" example:"0"`
	// SuccessRate: succeeded / (succeeded + failed), 0 to 1; null when there are neither.
	SuccessRate *float64 `json:"success_rate" example:"0.998" extensions:"x-nullable"`
} // @name ExecutionStats

// executionStateCounts counts executions per state.
type executionStateCounts struct {
	Pending   int64 `json:"pending"`
	Running   int64 `json:"running"`
	Retrying  int64 `json:"retrying"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
	Skipped   int64 `json:"skipped"`
} // @name ExecutionStateCounts

// percentiles summarises samples in milliseconds, rounded to 0.1 ms.
type percentiles struct {
	// Count is the number of samples.
	Count int64 `json:"count" example:"1440"`
	// P50 is the median (interpolated); null without samples.
	P50 *float64 `json:"p50" example:"12.5" extensions:"x-nullable"`
	// P99 is the 99th percentile (interpolated); null without samples.
	P99 *float64 `json:"p99" example:"85" extensions:"x-nullable"`
} // @name Percentiles

// taskStats counts tasks per state.
type taskStats struct {
	Total     int64 `json:"total"`
	Active    int64 `json:"active"`
	Paused    int64 `json:"paused"`
	Completed int64 `json:"completed"`
} // @name TaskStats

// workflowRunStats counts workflow runs per state.
type workflowRunStats struct {
	Total     int64 `json:"total"`
	Pending   int64 `json:"pending"`
	Running   int64 `json:"running"`
	Blocked   int64 `json:"blocked"`
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Cancelled int64 `json:"cancelled"`
} // @name WorkflowRunStats

// endpointStats counts endpoints.
type endpointStats struct {
	Total   int64 `json:"total"`
	Enabled int64 `json:"enabled"`
	// Disabled counts endpoints disabled by hand or by ax (e.g. after a 410 Gone).
	Disabled int64 `json:"disabled"`
} // @name EndpointStats

// getStats godoc
//
//	@ID				getStats
//	@Summary		Activity of the caller's tenant
//	@Description	Executions created in the window by state, the success rate, delivery latency and firing lateness percentiles, and the current counts of tasks and endpoints. window is a duration such as 90m, 24h or 7d (default 24h, from 1m to 30d). With step (e.g. 15m), series also counts the window's executions step by step: the step is a whole number of minutes that divides a day and the window, at most 1440 steps.
//	@Tags			executions
//	@Produce		json
//	@Security		BearerAuth
//	@Param			window	query		string	false	"how far back to look (default 24h, max 30d)"
//	@Param			step	query		string	false	"also count the window's executions per step of this length, e.g. 1m, 15m or 1h"
//	@Success		200		{object}	statsResponse
//	@Failure		401,403,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/stats [get]
func (h *handlers) getStats(c echo.Context) error {
	window, err := parseWindow(c.QueryParam("window"))
	if err != nil {
		return err
	}
	var step time.Duration
	if v := c.QueryParam("step"); v != "" {
		if step, err = time.ParseDuration(v); err != nil || step <= 0 {
			return &service.ValidationError{Fields: []service.FieldError{{
				Field:   "step",
				Message: "must be a duration such as 1m, 15m or 1h",
			}}}
		}
	}
	ctx, tenant := c.Request().Context(), principalFrom(c).Tenant
	s, err := h.cfg.Stats.Get(ctx, tenant, window)
	if err != nil {
		return err
	}
	out := statsOut(s)
	if step > 0 {
		series, err := h.cfg.Stats.Series(ctx, tenant, s.Window, step)
		if err != nil {
			return err
		}
		out.Series = seriesOut(series)
	}
	return c.JSON(http.StatusOK, out)
}

func seriesOut(s service.StatsSeries) *statsSeries {
	out := &statsSeries{
		StepSeconds: int64(s.Step / time.Second), Since: stamp(s.Since), Until: stamp(s.Until),
		Buckets: make([]statsBucket, len(s.Buckets)),
	}
	for i, b := range s.Buckets {
		out.Buckets[i] = statsBucket{
			Start: stamp(b.Start), Executions: b.Executions, Succeeded: b.Succeeded,
			Failed: b.Failed, Late: b.Late, SuccessRate: b.SuccessRate,
			FiringLatenessMS: percentiles{Count: b.FiringLateness.Count, P50: b.FiringLateness.P50, P99: b.FiringLateness.P99},
		}
	}
	return out
}

// parseWindow reads a Go duration ("90m", "24h") or whole days ("7d");
// empty is 0, the default.
func parseWindow(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	bad := &service.ValidationError{Fields: []service.FieldError{{
		Field:   "window",
		Message: "must be a duration such as 90m, 24h or 7d",
	}}}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 366 {
			return 0, bad
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, bad
	}
	return d, nil
}

func statsOut(s service.TenantStats) statsResponse {
	x := s.Executions
	out := statsResponse{
		WindowSeconds: int64(s.Window / time.Second), Since: stamp(s.Since), Until: stamp(s.Until),
		Executions: executionStats{
			ByState: executionStateCounts{
				Pending: x[service.ExecPending], Running: x[service.ExecRunning], Retrying: x[service.ExecRetrying],
				Succeeded: x[service.ExecSucceeded], Failed: x[service.ExecFailed], Cancelled: x[service.ExecCancelled],
				Skipped: x[service.ExecSkipped],
			},
			Late: s.Late, SuccessRate: s.SuccessRate,
		},
		DeliveryLatencyMS: percentiles{Count: s.DeliveryLatency.Count, P50: s.DeliveryLatency.P50, P99: s.DeliveryLatency.P99},
		FiringLatenessMS:  percentiles{Count: s.FiringLateness.Count, P50: s.FiringLateness.P50, P99: s.FiringLateness.P99},
		Tasks: taskStats{
			Active: s.Tasks[service.TaskActive], Paused: s.Tasks[service.TaskPaused],
			Completed: s.Tasks[service.TaskCompleted],
		},
		Endpoints: endpointStats{
			Total: s.EndpointsEnabled + s.EndpointsDisabled, Enabled: s.EndpointsEnabled,
			Disabled: s.EndpointsDisabled,
		},
	}
	for _, n := range x {
		out.Executions.Total += n
	}
	out.Tasks.Total = out.Tasks.Active + out.Tasks.Paused + out.Tasks.Completed
	r := s.WorkflowRuns
	out.WorkflowRuns = workflowRunStats{
		Pending: r[service.RunPending], Running: r[service.RunRunning],
		Blocked: r[service.RunBlocked], Succeeded: r[service.RunSucceeded], Failed: r[service.RunFailed],
		Cancelled: r[service.RunCancelled],
	}
	for _, n := range r {
		out.WorkflowRuns.Total += n
	}
	return out
}
