package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service"
)

// withStats returns the API on a's database with Stats wired in.
func withStats(a *testAPI) *testAPI {
	a.t.Helper()
	auth, err := api.NewAuthenticator(api.AuthConfig{HMACSecret: []byte(testSecret)})
	require.NoError(a.t, err)
	e := api.New(api.Config{
		Logger:  slog.New(slog.DiscardHandler),
		Auth:    auth,
		Tenants: service.NewTenants(a.pool),
		Stats:   service.NewStats(a.pool),
		Ready:   func(ctx context.Context) error { return db.CheckMigrated(ctx, a.pool) },
	})
	srv := httptest.NewServer(e)
	a.t.Cleanup(srv.Close)
	return &testAPI{t: a.t, pool: a.pool, srv: srv, e: e}
}

// idAt returns a UUIDv7 minted at t, as service.NewID would have then.
func idAt(t time.Time) string {
	id := service.NewID()
	ms := t.UnixMilli()
	return fmt.Sprintf("%08x-%04x", uint64(ms)>>16, uint64(ms)&0xffff) + id[13:]
}

// statExec is an execution fixture with its attempt events.
type statExec struct {
	Tenant    string
	State     string
	Trigger   string        // default schedule
	Late      bool          //
	Age       time.Duration // created_at and scheduled_for are now - Age
	StartedMS *int          // started_at (and first_started_at) - scheduled_for in ms; nil: not started
	Events    []statEvent
}

type statEvent struct {
	Type      string
	LatencyMS *int
}

func ms(v int) *int { return &v }

func (a *testAPI) statExecution(taskID string, now time.Time, x statExec) {
	a.t.Helper()
	if x.Trigger == "" {
		x.Trigger = service.TriggerSchedule
	}
	at := now.Add(-x.Age)
	var started *time.Time
	if x.StartedMS != nil {
		s := at.Add(time.Duration(*x.StartedMS) * time.Millisecond)
		started = &s
	}
	id := idAt(at)
	a.exec(`INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, late, created_at, started_at, first_started_at, last_error)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $4, $8, $8, CASE WHEN $6 IN ('failed', 'cancelled', 'skipped') THEN 'fixture' END)`,
		x.Tenant, id, taskID, at, x.Trigger, x.State, x.Late, started)
	for i, ev := range x.Events {
		a.exec(`INSERT INTO execution_events (tenant_id, execution_id, type, attempt, latency_ms) VALUES ($1, $2, $3, $4, $5)`,
			x.Tenant, id, ev.Type, i+1, ev.LatencyMS)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	s := withStats(a)
	tok := token(t, "acme")

	// Endpoints: two enabled, one disabled. Tasks: one of each state.
	ep := a.createEndpoint(tok, "e1")
	a.createEndpoint(tok, "e2")
	off := a.createEndpoint(tok, "e3")
	a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/endpoints/" + off, Token: tok, Body: map[string]any{"enabled": false}})
	task := a.createTask(tok, ep, "t1", nil).JSON["id"].(string)
	paused := a.createTask(tok, ep, "t2", nil).JSON["id"].(string)
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + paused + "/pause", Token: tok})
	done := a.createTask(tok, ep, "t3", nil).JSON["id"].(string)
	a.exec("UPDATE tasks SET state = 'completed', next_run_at = NULL WHERE id = $1", done)
	// Another tenant's activity counts nowhere.
	otherTok := token(t, "other")
	otherTask := a.createTask(otherTok, a.createEndpoint(otherTok, "o"), "o", nil).JSON["id"].(string)

	ok := func(latency int) statEvent {
		return statEvent{Type: service.EventAttemptSucceeded, LatencyMS: ms(latency)}
	}
	bad := func(latency *int) statEvent { return statEvent{Type: service.EventAttemptFailed, LatencyMS: latency} }
	hour, twoDays := time.Hour, 48*time.Hour
	now := time.Now()
	for i, x := range []statExec{
		// In the last 24 h. Lateness samples: 5, 15, 25, 35, 45; latency
		// samples: 10, 20, 30, 40, 50, 60, 100, 200.
		{State: "succeeded", StartedMS: ms(5), Events: []statEvent{{Type: "fired"}, {Type: "attempt_started"}, ok(10)}},
		{State: "succeeded", StartedMS: ms(15), Events: []statEvent{ok(20)}},
		{State: "succeeded", StartedMS: ms(25), Events: []statEvent{ok(30)}},
		{State: "succeeded", StartedMS: ms(35), Events: []statEvent{bad(ms(100)), ok(40)}},
		// A misfire catch-up and a manual trigger: latency yes, lateness no.
		{State: "succeeded", Late: true, StartedMS: ms(60_000), Events: []statEvent{ok(50)}},
		{
			State: "succeeded", Trigger: service.TriggerManual, StartedMS: ms(7000),
			Events: []statEvent{ok(60), {Type: "alert_sent", LatencyMS: ms(9999)}},
		},
		{State: "failed", StartedMS: ms(45), Events: []statEvent{bad(ms(200)), bad(nil)}},
		{State: "failed"},
		{State: "pending"},
		{State: "running", Trigger: service.TriggerManual, StartedMS: ms(1)},
		{State: "retrying", Trigger: service.TriggerManual, StartedMS: ms(2), Events: []statEvent{{Type: "attempt_failed"}}},
		{State: "cancelled"},
		{State: "skipped"},
		// Two days ago: only in longer windows.
		{State: "succeeded", Age: twoDays, StartedMS: ms(505), Events: []statEvent{ok(5000)}},
		{State: "failed", Age: twoDays},
		{State: "failed", Age: twoDays},
	} {
		x.Tenant = "acme"
		if x.Age == 0 {
			x.Age = hour
		}
		x.Age += time.Duration(i) * time.Second // one slot each
		a.statExecution(task, now, x)
	}
	a.statExecution(otherTask, now, statExec{
		Tenant: "other", State: "failed", Age: hour, StartedMS: ms(1),
		Events: []statEvent{bad(ms(1))},
	})

	r := s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats", Token: tok})
	until, err := time.Parse(time.RFC3339Nano, r.JSON["until"].(string))
	require.NoError(t, err)
	since, err := time.Parse(time.RFC3339Nano, r.JSON["since"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), until, 10*time.Second)
	require.Equal(t, 24*time.Hour, until.Sub(since))
	delete(r.JSON, "since")
	delete(r.JSON, "until")
	require.Equal(t, map[string]any{
		"window_seconds": 86400.0,
		"executions": map[string]any{
			"total": 13.0,
			"by_state": map[string]any{
				"pending": 1.0, "running": 1.0, "retrying": 1.0, "succeeded": 6.0, "failed": 2.0,
				"cancelled": 1.0, "skipped": 1.0,
			},
			"late":         1.0,
			"success_rate": 0.75,
		},
		"delivery_latency_ms": map[string]any{"count": 8.0, "p50": 45.0, "p99": 193.0},
		"firing_lateness_ms":  map[string]any{"count": 5.0, "p50": 25.0, "p99": 44.6},
		"tasks":               map[string]any{"total": 3.0, "active": 1.0, "paused": 1.0, "completed": 1.0},
		"endpoints":           map[string]any{"total": 3.0, "enabled": 2.0, "disabled": 1.0},
		"workflow_runs": map[string]any{
			"total": 0.0, "pending": 0.0, "running": 0.0, "blocked": 0.0, "succeeded": 0.0,
			"failed": 0.0, "cancelled": 0.0,
		},
	}, r.JSON)

	// Three days take in the older executions.
	for _, w := range []string{"72h", "3d"} {
		r = s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats?window=" + w, Token: tok})
		require.EqualValues(t, 3*86400, r.JSON["window_seconds"])
		x := r.JSON["executions"].(map[string]any)
		require.EqualValues(t, 16, x["total"])
		require.EqualValues(t, 7, x["by_state"].(map[string]any)["succeeded"])
		require.EqualValues(t, 4, x["by_state"].(map[string]any)["failed"])
		require.Equal(t, 7.0/11.0, x["success_rate"]) //nolint:testifylint // the same division, exactly
		require.Equal(t, map[string]any{"count": 9.0, "p50": 50.0, "p99": 4616.0}, r.JSON["delivery_latency_ms"])
		require.Equal(t, map[string]any{"count": 6.0, "p50": 30.0, "p99": 482.0}, r.JSON["firing_lateness_ms"])
	}
	// Thirty minutes take in nothing.
	r = s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats?window=30m", Token: tok})
	require.Equal(t, map[string]any{
		"total": 0.0, "late": 0.0, "success_rate": nil,
		"by_state": map[string]any{
			"pending": 0.0, "running": 0.0, "retrying": 0.0, "succeeded": 0.0, "failed": 0.0,
			"cancelled": 0.0, "skipped": 0.0,
		},
	}, r.JSON["executions"])
	require.Equal(t, map[string]any{"count": 0.0, "p50": nil, "p99": nil}, r.JSON["delivery_latency_ms"])
	require.Equal(t, map[string]any{"count": 0.0, "p50": nil, "p99": nil}, r.JSON["firing_lateness_ms"])
	require.EqualValues(t, 3, r.JSON["tasks"].(map[string]any)["total"], "tasks and endpoints are counted now")

	// The other tenant sees its own.
	r = s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats", Token: otherTok})
	x := r.JSON["executions"].(map[string]any)
	require.Equal(t, map[string]any{"total": 1.0, "failed": 1.0, "success_rate": 0.0},
		map[string]any{"total": x["total"], "failed": x["by_state"].(map[string]any)["failed"], "success_rate": x["success_rate"]})
	require.Equal(t, map[string]any{"count": 1.0, "p50": 1.0, "p99": 1.0}, r.JSON["delivery_latency_ms"])
	require.Equal(t, map[string]any{"total": 1.0, "active": 1.0, "paused": 0.0, "completed": 0.0}, r.JSON["tasks"])
	// A new tenant has nothing.
	r = s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats", Token: token(t, "new")})
	require.EqualValues(t, 0, r.JSON["executions"].(map[string]any)["total"])
	require.Equal(t, map[string]any{"total": 0.0, "enabled": 0.0, "disabled": 0.0}, r.JSON["endpoints"])
}

func TestStatsRequest(t *testing.T) {
	t.Parallel()
	s := withStats(newAPI(t, nil))
	tok := token(t, "acme")
	for _, w := range []string{"1m", "90m", "24h", "7d", "30d", "720h"} {
		s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats?window=" + w, Token: tok})
	}
	for _, w := range []string{"0", "0s", "-1h", "59s", "31d", "721h", "1y", "d", "1.5d", "abc", "9999999999d"} {
		r := s.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/stats?window=" + w, Token: tok})
		require.Equal(t, []string{"window"}, fieldErrors(r), w)
	}
	s.must(http.StatusUnauthorized, req{Method: http.MethodGet, Path: "/v1/stats"})
	s.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/stats", Token: token(t, "acme", api.ScopeTasksRead)})
	s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats", Token: token(t, "acme", api.ScopeExecutionsRead)})
	s.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/stats", Token: token(t, "acme", api.ScopeAdmin)})
}
