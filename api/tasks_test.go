package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTaskLifecycle(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")

	body := `{"name":"order.reconcile.daily","endpoint_id":"` + ep + `",
		"schedule":{"type":"cron","cron":"0 2 * * *","timezone":"Asia/Shanghai"},
		"payload":{"b": 1,   "a": [2, 3]},"priority":1,"timeout_ms":30000,
		"retry":{"max_attempts":3,"initial_backoff_ms":500,"max_backoff_ms":60000},
		"overlap_policy":"skip","misfire_policy":"fire_all","labels":{"team":"billing"}}`
	created := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: body})
	id := created.JSON["id"].(string)
	require.Equal(t, "active", created.JSON["state"])
	require.EqualValues(t, 1, created.JSON["priority"])
	require.EqualValues(t, 30000, created.JSON["timeout_ms"])
	require.Equal(t, "skip", created.JSON["overlap_policy"])
	require.Equal(t, "fire_all", created.JSON["misfire_policy"])
	require.Equal(t, map[string]any{"max_attempts": 3.0, "initial_backoff_ms": 500.0, "max_backoff_ms": 60000.0}, created.JSON["retry"])
	next, err := time.Parse(time.RFC3339, created.JSON["next_run_at"].(string))
	require.NoError(t, err)
	require.Equal(t, 18, next.UTC().Hour(), "02:00 in Shanghai is 18:00 UTC")
	require.True(t, next.After(time.Now()))

	// The payload is stored byte for byte, as the webhook will carry it.
	var payload []byte
	require.NoError(t, a.pool.QueryRow(context.Background(), "SELECT payload FROM tasks WHERE id = $1", id).Scan(&payload))
	require.Equal(t, []byte(`{"b": 1,   "a": [2, 3]}`), payload) //nolint:testifylint // bytes, not JSON equivalence

	// Defaults.
	plain := a.createTask(tok, ep, "plain", nil)
	require.EqualValues(t, 2, plain.JSON["priority"])
	require.Nil(t, plain.JSON["timeout_ms"], "absent: the endpoint's timeout")
	require.Equal(t, "allow", plain.JSON["overlap_policy"])
	require.Equal(t, "fire_once", plain.JSON["misfire_policy"])
	require.Equal(t, map[string]any{}, plain.JSON["payload"])
	require.Equal(t, map[string]any{"max_attempts": 5.0, "initial_backoff_ms": 1000.0, "max_backoff_ms": 600000.0}, plain.JSON["retry"])

	// Duplicate names conflict.
	r := a.must(http.StatusConflict, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: body})
	require.Contains(t, r.JSON["detail"], "order.reconcile.daily")

	// PATCH a schedule: next_run_at is recomputed, other fields kept.
	p := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "interval", "interval_seconds": 3600}, "retry": map[string]any{"max_attempts": 1}},
	})
	require.Equal(t, map[string]any{"type": "interval", "interval_seconds": 3600.0, "timezone": "UTC"}, p.JSON["schedule"])
	pnext, err := time.Parse(time.RFC3339, p.JSON["next_run_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), pnext, 5*time.Second)
	require.EqualValues(t, 1, p.JSON["retry"].(map[string]any)["max_attempts"])
	require.EqualValues(t, 500, p.JSON["retry"].(map[string]any)["initial_backoff_ms"], "retry is merged")
	require.Equal(t, "skip", p.JSON["overlap_policy"])
	// timeout_ms: null falls back to the endpoint's timeout.
	p = a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok, Body: `{"timeout_ms": null}`})
	require.Nil(t, p.JSON["timeout_ms"])
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok, Body: `{"state":"paused"}`})
	a.must(http.StatusConflict, req{Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok, Body: `{"name":"plain"}`})

	// Pause and resume, both idempotent.
	paused := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/pause", Token: tok})
	require.Equal(t, "paused", paused.JSON["state"])
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/pause", Token: tok})
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks?state=paused", Token: tok})
	require.Len(t, list.JSON["items"], 1)
	resumed := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/resume", Token: tok})
	require.Equal(t, "active", resumed.JSON["state"])
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/resume", Token: tok})

	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/tasks/" + id, Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/tasks/" + id, Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/pause", Token: tok})
}

func TestTaskValidation(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	otherEP := a.createEndpoint(token(t, "other"), "theirs")
	sched := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name  string
		set   map[string]any
		field string
	}{
		{"name uppercase", map[string]any{"name": "Bad"}, "name"},
		{"name empty", map[string]any{"name": ""}, "name"},
		{"name too long", map[string]any{"name": strings.Repeat("a", 129)}, "name"},
		{"name leading dot", map[string]any{"name": ".x"}, "name"},
		{"endpoint missing", map[string]any{"endpoint_id": ""}, "endpoint_id"},
		{"endpoint not a uuid", map[string]any{"endpoint_id": "nope"}, "endpoint_id"},
		{"endpoint of another tenant", map[string]any{"endpoint_id": otherEP}, "endpoint_id"},
		{"endpoint unknown", map[string]any{"endpoint_id": "01a228b6-0000-7000-8000-000000000000"}, "endpoint_id"},
		{"schedule type", map[string]any{"schedule": sched("type", "weekly")}, "schedule.type"},
		{"cron fields", map[string]any{"schedule": sched("type", "cron", "cron", "* * *")}, "schedule.cron"},
		{"cron 8 fields", map[string]any{"schedule": sched("type", "cron", "cron", "0 0 0 * * * * *")}, "schedule.cron"},
		{"dialect enum", map[string]any{"schedule": sched("type", "cron", "cron", "0 * * * *", "dialect", "spring")}, "schedule.dialect"},
		{"dst_policy enum", map[string]any{"schedule": sched("type", "cron", "cron", "0 * * * *", "dst_policy", "skip")}, "schedule.dst_policy"},
		{"quartz without ?", map[string]any{"schedule": sched("type", "cron", "cron", "0 0 12 * * MON", "dialect", "quartz")}, "schedule.cron"},
		{"quartz 5 fields", map[string]any{"schedule": sched("type", "cron", "cron", "0 12 * * ?", "dialect", "quartz")}, "schedule.cron"},
		{"quartz on interval", map[string]any{"schedule": sched("type", "interval", "interval_seconds", 60, "dialect", "quartz")}, "schedule.dialect"},
		{"dst_policy on once", map[string]any{"schedule": sched("type", "once", "run_at", "2030-01-01T00:00:00Z", "dst_policy", "once_per_local_time")}, "schedule.dst_policy"},
		{"cron out of range", map[string]any{"schedule": sched("type", "cron", "cron", "60 * * * *")}, "schedule.cron"},
		{"cron never fires", map[string]any{"schedule": sched("type", "cron", "cron", "0 0 30 2 *")}, "schedule.cron"},
		{"cron TZ prefix", map[string]any{"schedule": sched("type", "cron", "cron", "TZ=UTC 0 * * * *")}, "schedule.cron"},
		{"timezone Local", map[string]any{"schedule": sched("type", "cron", "cron", "0 * * * *", "timezone", "Local")}, "schedule.timezone"},
		{"timezone path", map[string]any{"schedule": sched("type", "cron", "cron", "0 * * * *", "timezone", "../../etc/passwd")}, "schedule.timezone"},
		{"timezone unknown", map[string]any{"schedule": sched("type", "cron", "cron", "0 * * * *", "timezone", "Mars/Olympus")}, "schedule.timezone"},
		{"interval zero", map[string]any{"schedule": sched("type", "interval", "interval_seconds", 0)}, "schedule.interval_seconds"},
		{"interval negative", map[string]any{"schedule": sched("type", "interval", "interval_seconds", -5)}, "schedule.interval_seconds"},
		{"once without run_at", map[string]any{"schedule": sched("type", "once")}, "schedule.run_at"},
		{"run_at not RFC 3339", map[string]any{"schedule": sched("type", "once", "run_at", "tomorrow")}, "schedule.run_at"},
		{"start after end", map[string]any{"schedule": sched("type", "interval", "interval_seconds", 60,
			"start_at", "2030-01-02T00:00:00Z", "end_at", "2030-01-01T00:00:00Z")}, "schedule.end_at"},
		{"end in the past", map[string]any{"schedule": sched("type", "interval", "interval_seconds", 60,
			"end_at", "2020-01-01T00:00:00Z")}, "schedule.end_at"},
		{"cron on interval", map[string]any{"schedule": sched("type", "interval", "interval_seconds", 60, "cron", "* * * * *")}, "schedule.cron"},
		{"priority", map[string]any{"priority": 5}, "priority"},
		{"timeout low", map[string]any{"timeout_ms": 50}, "timeout_ms"},
		{"timeout high", map[string]any{"timeout_ms": 300001}, "timeout_ms"},
		{"max attempts 0", map[string]any{"retry": map[string]any{"max_attempts": -1}}, "retry.max_attempts"},
		{"max attempts 101", map[string]any{"retry": map[string]any{"max_attempts": 101}}, "retry.max_attempts"},
		{"backoff negative", map[string]any{"retry": map[string]any{"initial_backoff_ms": -1}}, "retry.initial_backoff_ms"},
		{"max below initial", map[string]any{"retry": map[string]any{"initial_backoff_ms": 5000, "max_backoff_ms": 1000}}, "retry.max_backoff_ms"},
		{"overlap enum", map[string]any{"overlap_policy": "never"}, "overlap_policy"},
		{"misfire enum", map[string]any{"misfire_policy": "sometimes"}, "misfire_policy"},
		{"label key", map[string]any{"labels": map[string]string{"bad key": "v"}}, "labels.bad key"},
		{"label value", map[string]any{"labels": map[string]string{"k": strings.Repeat("v", 257)}}, "labels.k"},
		{"too many labels", map[string]any{"labels": manyLabels(33)}, "labels"},
		{"payload too large", map[string]any{"payload": map[string]string{"x": strings.Repeat("x", 300<<10)}}, "payload"},
		{"read-only state", map[string]any{"state": "active"}, "state"},
		{"read-only next_run_at", map[string]any{"next_run_at": "2030-01-01T00:00:00Z"}, "next_run_at"},
		{"read-only tenant", map[string]any{"tenant": "other"}, "tenant"},
		{"unknown field", map[string]any{"cron": "* * * * *"}, "cron"},
		{"wrong type", map[string]any{"priority": "high"}, "priority"},
		{"pause_after_failures", map[string]any{"pause_after_failures": -1}, "pause_after_failures"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := map[string]any{
				"name": "valid-name", "endpoint_id": ep,
				"schedule": map[string]any{"type": "cron", "cron": "0 * * * *"},
			}
			for k, v := range tc.set {
				body[k] = v
			}
			r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: body})
			require.Contains(t, fieldErrors(r), tc.field, string(r.Raw))
		})
	}
	var n int
	require.NoError(t, a.pool.QueryRow(context.Background(), "SELECT count(*) FROM tasks").Scan(&n))
	require.Zero(t, n)
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

func TestTaskScheduleKinds(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")

	// Seconds field and descriptors.
	r := a.createTask(tok, ep, "every-ten-seconds", map[string]any{"schedule": map[string]any{"type": "cron", "cron": "*/10 * * * * *"}})
	next, _ := time.Parse(time.RFC3339, r.JSON["next_run_at"].(string))
	require.WithinDuration(t, time.Now(), next, 11*time.Second)
	a.createTask(tok, ep, "hourly", map[string]any{"schedule": map[string]any{"type": "cron", "cron": "@hourly"}})
	a.createTask(tok, ep, "month-end", map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 0 L * *"}})

	// A once task whose run_at has just passed (within the misfire
	// threshold) fires as soon as possible: next_run_at = run_at. Further in
	// the past it is refused (TestOnceRunAtInThePast).
	past := time.Now().Add(-time.Second).UTC().Truncate(time.Second).Format(time.RFC3339)
	r = a.createTask(tok, ep, "once-late", map[string]any{"schedule": map[string]any{"type": "once", "run_at": past}})
	require.Equal(t, past, r.JSON["next_run_at"])

	// An interval starting later fires first at start_at.
	start := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	r = a.createTask(tok, ep, "later", map[string]any{"schedule": map[string]any{"type": "interval", "interval_seconds": 60, "start_at": start}})
	require.Equal(t, start, r.JSON["next_run_at"])

	// Preview uses the scheduler's DST rules.
	r = a.createTask(tok, ep, "ny", map[string]any{"schedule": map[string]any{"type": "cron", "cron": "30 2 * * *", "timezone": "America/New_York"}})
	id := r.JSON["id"].(string)
	pv := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=3", Token: tok})
	require.Equal(t, "America/New_York", pv.JSON["timezone"])
	items := pv.JSON["items"].([]any)
	require.Len(t, items, 3)
	var prev time.Time
	for _, it := range items {
		at, err := time.Parse(time.RFC3339, it.(map[string]any)["at"].(string))
		require.NoError(t, err)
		require.True(t, at.After(prev))
		prev = at
		require.Contains(t, it.(map[string]any)["local"], "T02:30:00-0")
	}
	pv = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview", Token: tok})
	require.Len(t, pv.JSON["items"], 10)
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=0", Token: tok})
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=1001", Token: tok})
}

// TestPreviewListsTheSlotsThatFire: the preview's items are the slots that
// fire. A slot skipped on request is not among them (the next count that
// fire are) but listed apart in skipped; a paused task's preview says so
// and lists nothing; resumed, it lists its fires again.
func TestPreviewListsTheSlotsThatFire(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "ep")
	id := a.createTask(tok, ep, "daily", map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 3 * * *"}}).JSON["id"].(string)
	preview := func() (items, skipped []string, paused bool) {
		t.Helper()
		pv := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=3", Token: tok}).JSON
		for _, it := range pv["items"].([]any) {
			items = append(items, it.(map[string]any)["at"].(string))
		}
		sk, _ := pv["skipped"].([]any)
		for _, it := range sk {
			skipped = append(skipped, it.(map[string]any)["at"].(string))
		}
		return items, skipped, pv["paused"] == true
	}
	before, skipped, paused := preview()
	require.Len(t, before, 3)
	require.Empty(t, skipped)
	require.False(t, paused)

	a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + id + "/skip", Token: tok,
		Body: map[string]any{"scheduled_for": before[1]},
	})
	items, skipped, _ := preview()
	require.Len(t, items, 3, "still the next 3 that fire")
	require.NotContains(t, items, before[1], "a skipped slot does not fire")
	require.Equal(t, []string{before[0], before[2]}, items[:2])
	require.Equal(t, []string{before[1]}, skipped)

	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/pause", Token: tok})
	items, skipped, paused = preview()
	require.True(t, paused)
	require.Empty(t, items, "a paused task fires nothing")
	require.Empty(t, skipped)

	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/resume", Token: tok})
	items, _, paused = preview()
	require.False(t, paused)
	require.Len(t, items, 3)
}

// TestTaskScheduleDialectAndDST: schedule.dialect and schedule.dst_policy
// round-trip, default, are replaced with the schedule by a PATCH, and the
// preview follows the policy.
func TestTaskScheduleDialectAndDST(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)

	// Quartz: the last Friday of the month at 10:15 New York time.
	r := a.createTask(tok, ep, "last-friday", map[string]any{"schedule": map[string]any{
		"type": "cron",
		"cron": "0 15 10 ? * 6L", "timezone": "America/New_York", "dialect": "quartz", "dst_policy": "once_per_local_time",
	}})
	require.Equal(t, map[string]any{
		"type": "cron", "cron": "0 15 10 ? * 6L", "timezone": "America/New_York",
		"dialect": "quartz", "dst_policy": "once_per_local_time",
	}, r.JSON["schedule"])
	next, err := time.Parse(time.RFC3339, r.JSON["next_run_at"].(string))
	require.NoError(t, err)
	local := next.In(ny)
	require.Equal(t, time.Friday, local.Weekday())
	require.Equal(t, 10, local.Hour())
	require.Equal(t, 15, local.Minute())
	require.NotEqual(t, local.Month(), local.AddDate(0, 0, 7).Month(), "the month's last Friday")
	id := r.JSON["id"].(string)
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id, Token: tok})
	require.Equal(t, r.JSON["schedule"], got.JSON["schedule"])

	// Defaults for cron; interval and once have neither.
	r = a.createTask(tok, ep, "plain-cron", map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 * * * *"}})
	require.Equal(t, map[string]any{"type": "cron", "cron": "0 * * * *", "timezone": "UTC", "dialect": "standard", "dst_policy": "vixie"}, r.JSON["schedule"])
	r = a.createTask(tok, ep, "plain-interval", map[string]any{"schedule": map[string]any{"type": "interval", "interval_seconds": 60, "dialect": "standard"}})
	require.Equal(t, map[string]any{"type": "interval", "interval_seconds": 60.0, "timezone": "UTC"}, r.JSON["schedule"])

	// A PATCH replaces the schedule object whole, like its other fields:
	// what it leaves out takes the default.
	p := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 15 10 ? * 6L", "timezone": "America/New_York", "dialect": "quartz"}},
	})
	require.Equal(t, "vixie", p.JSON["schedule"].(map[string]any)["dst_policy"])
	p = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 15 10 ? * 6L", "dst_policy": "sometimes"}},
	})
	require.Contains(t, fieldErrors(p), "schedule.dst_policy")
	// Without the dialect, the standard one applies: 6L is the last Saturday.
	p = a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 15 10 ? * 6L", "timezone": "America/New_York"}},
	})
	require.Equal(t, "standard", p.JSON["schedule"].(map[string]any)["dialect"])
	next, err = time.Parse(time.RFC3339, p.JSON["next_run_at"].(string))
	require.NoError(t, err)
	require.Equal(t, time.Saturday, next.In(ny).Weekday())

	// The preview follows the policy: every 30 minutes on the next day
	// New York falls back, the repeated hour fires twice under vixie
	// (50 fires that local day) and once under once_per_local_time (48).
	fallBack := time.Now()
	for {
		_, end := fallBack.In(ny).ZoneBounds()
		fallBack = end
		if _, off := end.In(ny).Zone(); off == -5*3600 {
			break
		}
	}
	day := fallBack.In(ny)
	expr := fmt.Sprintf("0 */30 * %d %d * %d", day.Day(), day.Month(), day.Year())
	for policy, want := range map[string]int{"vixie": 50, "once_per_local_time": 48} {
		r := a.createTask(tok, ep, "fall-back-"+strings.ReplaceAll(policy, "_", "-"), map[string]any{"schedule": map[string]any{
			"type": "cron", "cron": expr, "timezone": "America/New_York", "dst_policy": policy,
		}})
		pv := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + r.JSON["id"].(string) + "/preview?count=100", Token: tok})
		require.Equal(t, policy, pv.JSON["dst_policy"])
		items := pv.JSON["items"].([]any)
		require.Len(t, items, want, "%s: the year field ends the schedule after that day", policy)
		var prev time.Time
		repeated := 0
		for _, it := range items {
			at, err := time.Parse(time.RFC3339, it.(map[string]any)["at"].(string))
			require.NoError(t, err)
			require.True(t, at.After(prev))
			require.Equal(t, day.Day(), at.In(ny).Day())
			prev = at
			if it.(map[string]any)["dst"] == "repeated" {
				repeated++
				require.Equal(t, 1, at.In(ny).Hour())
			}
		}
		require.Equal(t, want-48, repeated, "the second pass of 01:00 and 01:30 is marked")
	}
	// An interval's preview has no dst_policy.
	pv := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + r.JSON["id"].(string) + "/preview?count=1", Token: tok})
	require.NotContains(t, pv.JSON, "dst_policy")
}

func TestTaskListFilters(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	a.createTask(tok, ep, "a", map[string]any{"labels": map[string]string{"team": "pay", "env": "prod"}})
	b := a.createTask(tok, ep, "b", map[string]any{"labels": map[string]string{"team": "pay", "env": "dev"}})
	a.createTask(tok, ep, "c", map[string]any{"labels": map[string]string{"team": "ops"}})
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + b.JSON["id"].(string) + "/pause", Token: tok})

	names := func(path string) []string {
		r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: tok})
		var out []string
		for _, it := range r.JSON["items"].([]any) {
			out = append(out, it.(map[string]any)["name"].(string))
		}
		return out
	}
	require.Equal(t, []string{"c", "b", "a"}, names("/v1/tasks"))
	require.Equal(t, []string{"b", "a"}, names("/v1/tasks?label=team:pay"))
	require.Equal(t, []string{"a"}, names("/v1/tasks?label=team:pay&label=env:prod"))
	require.Equal(t, []string{"b"}, names("/v1/tasks?state=paused"))
	require.Equal(t, []string{"c", "a"}, names("/v1/tasks?state=active"))
	require.Equal(t, []string{"c"}, names("/v1/tasks?limit=1"))
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/tasks?state=sleeping", Token: tok})
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/tasks?label=nocolon", Token: tok})
	// key=value, as the console writes it, is the same filter; a value may
	// hold either separator (a key holds neither).
	require.Equal(t, []string{"b", "a"}, names("/v1/tasks?label=team%3Dpay"))
	require.Equal(t, []string{"a"}, names("/v1/tasks?label=team%3Dpay&label=env:prod"))
	a.createTask(tok, ep, "d", map[string]any{"labels": map[string]string{"url": "a=b:c"}})
	require.Equal(t, []string{"d"}, names("/v1/tasks?label=url:a%3Db:c"))
	require.Equal(t, []string{"d"}, names("/v1/tasks?label=url%3Da%3Db:c"))
	r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/tasks?label=%3Dpay", Token: tok})
	require.Equal(t, []string{"label"}, fieldErrors(r))
}

// TestTaskScheduleThroughLeapYearEnd is the request that used to pin a core
// forever: a DST zone, an hour of *, a first fire reached through
// 2040-12-31. It answers at once, with the right first fire, for create,
// preview and PATCH.
func TestTaskScheduleThroughLeapYearEnd(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	r := a.createTask(tok, ep, "year-2041", map[string]any{"schedule": map[string]any{
		"type": "cron",
		"cron": "0 0 * * * * 2041", "timezone": "America/New_York",
	}})
	require.Equal(t, "2041-01-01T05:00:00Z", r.JSON["next_run_at"])
	id := r.JSON["id"].(string)
	pv := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=3", Token: tok})
	items := pv.JSON["items"].([]any)
	require.Len(t, items, 3)
	require.Equal(t, "2041-01-01T06:00:00Z", items[1].(map[string]any)["at"])
	p := a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "cron", "cron": "*/5 * * * * * 2045", "timezone": "Australia/Sydney"}},
	})
	require.Equal(t, "2044-12-31T13:00:00Z", p.JSON["next_run_at"], "2045-01-01 00:00 in Sydney (UTC+11), through 2044-12-31")
}

// TestSkipPastSlotNamesTheNextOne: skipping a slot that has passed is a 422
// that names the next slot, the one a skip could take (docs/schedules.md).
func TestSkipPastSlotNamesTheNextOne(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	id := a.createTask(tok, ep, "daily", nil).JSON["id"].(string) // 02:00 Asia/Shanghai: 18:00Z
	past := time.Now().UTC().Truncate(24 * time.Hour).Add(-24*time.Hour + 18*time.Hour)
	next := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=1", Token: tok}).
		JSON["items"].([]any)[0].(map[string]any)["at"].(string)
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + id + "/skip", Token: tok,
		Body: map[string]any{"scheduled_for": past.Format(time.RFC3339)},
	})
	require.Equal(t, []string{"scheduled_for"}, fieldErrors(r))
	msg := r.JSON["errors"].([]any)[0].(map[string]any)["message"].(string)
	require.Contains(t, msg, "has passed")
	require.Contains(t, msg, "the next slot is "+next, "the message names the next slot")
}
