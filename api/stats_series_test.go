package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatsSeries: ?step= adds the window's executions step by step
// (every step present, oldest first, at round times), counted for the
// caller's tenant only; without it there is no series; a step that does
// not fit is a 422 on step.
func TestStatsSeries(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	s := withStats(a)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	task := a.createTask(tok, ep, "t", nil).JSON["id"].(string)
	otherTok := token(t, "other")
	otherTask := a.createTask(otherTok, a.createEndpoint(otherTok, "o"), "o", nil).JSON["id"].(string)
	now := time.Now()
	for i, x := range []statExec{
		{State: "succeeded", Age: 2 * time.Hour, StartedMS: ms(10)},
		{State: "failed", Age: 2 * time.Hour, StartedMS: ms(30)},
		{State: "succeeded", Age: 5 * time.Hour, StartedMS: ms(7)},
	} {
		x.Tenant = "acme"
		// One slot each, all in the same minute as their age says.
		x.Age += time.Duration(i) * time.Millisecond
		a.statExecution(task, now, x)
	}
	a.statExecution(otherTask, now, statExec{Tenant: "other", State: "failed", Age: 2 * time.Hour, StartedMS: ms(1)})

	r := s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats", Token: tok})
	require.NotContains(t, r.JSON, "series")

	r = s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats?step=1h", Token: tok})
	series := r.JSON["series"].(map[string]any)
	require.EqualValues(t, 3600, series["step_seconds"])
	since, err := time.Parse(time.RFC3339Nano, series["since"].(string))
	require.NoError(t, err)
	until, err := time.Parse(time.RFC3339Nano, series["until"].(string))
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, until.Sub(since))
	require.Equal(t, since, since.Truncate(time.Hour), "steps start on the hour")
	buckets := series["buckets"].([]any)
	require.Len(t, buckets, 24)
	var total float64
	var busy []map[string]any
	for i, b := range buckets {
		b := b.(map[string]any)
		start, err := time.Parse(time.RFC3339Nano, b["start"].(string))
		require.NoError(t, err)
		require.Equal(t, since.Add(time.Duration(i)*time.Hour), start)
		total += b["executions"].(float64)
		if b["executions"].(float64) > 0 {
			busy = append(busy, b)
		}
	}
	require.InDelta(t, 3, total, 0, "the other tenant's execution is not counted")
	require.Len(t, busy, 2)
	require.Equal(t, map[string]any{
		"start": busy[1]["start"], "executions": 2.0, "succeeded": 1.0, "failed": 1.0, "late": 0.0,
		"success_rate": 0.5, "firing_lateness_ms": map[string]any{"count": 2.0, "p50": 20.0, "p99": 29.8},
	}, busy[1])
	empty := buckets[0].(map[string]any)
	require.Nil(t, empty["success_rate"])
	require.Equal(t, map[string]any{"count": 0.0, "p50": nil, "p99": nil}, empty["firing_lateness_ms"])

	// The summary's window sets the series'.
	r = s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats?window=90m&step=15m", Token: tok})
	require.Len(t, r.JSON["series"].(map[string]any)["buckets"], 6)
	for _, q := range []string{"step=abc", "step=-1m", "step=30s", "step=7m", "step=1h&window=90m", "step=1m&window=2d"} {
		r := s.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/stats?" + q, Token: tok})
		require.Equal(t, []string{"step"}, fieldErrors(r), q)
	}
}
