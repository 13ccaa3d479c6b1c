package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestUnionSchedules: a union task is created, read back with its members
// and previewed with each slot's member (the lowest index where two
// produce it) and local time; its problems are 422s naming the field,
// a member's under schedule.schedules[i]; a workflow refuses a union.
func TestUnionSchedules(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")

	members := []any{
		map[string]any{"type": "cron", "cron": "0 9 * * *", "timezone": "Europe/Paris"},
		map[string]any{"type": "cron", "cron": "0 8 * * *", "dst_policy": "once_per_local_time"},
		map[string]any{"type": "interval", "interval_seconds": 21600, "start_at": "2026-01-01T00:00:00Z"},
	}
	r := a.createTask(tok, ep, "union", map[string]any{"schedule": map[string]any{"type": "union", "schedules": members}})
	id := r.JSON["id"].(string)
	sched := r.JSON["schedule"].(map[string]any)
	require.Equal(t, "union", sched["type"])
	got := sched["schedules"].([]any)
	require.Len(t, got, 3)
	require.Equal(t, map[string]any{
		"type": "cron", "cron": "0 9 * * *", "timezone": "Europe/Paris", "dialect": "standard", "dst_policy": "vixie",
	}, got[0])
	require.Equal(t, "once_per_local_time", got[1].(map[string]any)["dst_policy"])
	require.Equal(t, map[string]any{"type": "interval", "interval_seconds": 21600.0, "timezone": "UTC", "start_at": "2026-01-01T00:00:00Z"}, got[2])
	read := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id, Token: tok})
	require.Equal(t, r.JSON["schedule"], read.JSON["schedule"])

	// Winter: 09:00 in Paris is 08:00Z, the UTC member's 08:00 too.
	pv := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=20", Token: tok})
	items := pv.JSON["items"].([]any)
	require.Len(t, items, 20)
	seen := map[float64]bool{}
	for _, it := range items {
		item := it.(map[string]any)
		at, err := time.Parse(time.RFC3339, item["at"].(string))
		require.NoError(t, err)
		m, ok := item["member"].(float64)
		require.True(t, ok, "every item names its member: %v", item)
		seen[m] = true
		switch {
		case at.Hour() == 8 && at.Minute() == 0:
			require.Zero(t, m, "08:00Z is the Paris member's (index 0) and the UTC member's: the lower")
			require.Contains(t, item["local"], "T09:00:00+01:00")
		case at.Hour()%6 == 0:
			require.Equal(t, 2, int(m))
			require.Contains(t, item["local"], "Z")
		default:
			t.Fatalf("%s is no member's slot", at)
		}
	}
	require.Equal(t, map[float64]bool{0: true, 2: true}, seen)
	plain := a.createTask(tok, ep, "plain", nil)
	pv = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + plain.JSON["id"].(string) + "/preview?count=2", Token: tok})
	require.NotContains(t, pv.JSON["items"].([]any)[0], "member", "no member outside a union")

	for _, tc := range []struct {
		name     string
		schedule map[string]any
		fields   []string
	}{
		{"one member", map[string]any{"type": "union", "schedules": members[:1]}, []string{"schedule.schedules"}},
		{"eleven members", map[string]any{"type": "union", "schedules": []any{
			members[0], members[1], members[2], members[0], members[1], members[2], members[0], members[1], members[2], members[0], members[1],
		}}, []string{"schedule.schedules"}},
		{"nested union", map[string]any{"type": "union", "schedules": []any{
			members[0], members[1], map[string]any{"type": "union", "schedules": members[:2]},
		}}, []string{"schedule.schedules[2].type"}},
		{"once and event", map[string]any{"type": "union", "schedules": []any{
			map[string]any{"type": "once", "run_at": "2030-01-01T00:00:00Z"}, map[string]any{"type": "event"},
		}}, []string{"schedule.schedules[0].type", "schedule.schedules[1].type"}},
		{"a member's time", map[string]any{"type": "union", "schedules": []any{
			members[0], map[string]any{"type": "interval", "interval_seconds": 60, "start_at": "soon"},
		}}, []string{"schedule.schedules[1].start_at"}},
		{"a member's fields", map[string]any{"type": "union", "schedules": []any{
			map[string]any{"type": "cron", "cron": "0 25 * * *", "timezone": "Mars/Base"},
			map[string]any{"type": "interval", "interval_seconds": 0, "dialect": "quartz"},
		}}, []string{
			"schedule.schedules[0].timezone", "schedule.schedules[0].cron", "schedule.schedules[1].dialect",
			"schedule.schedules[1].interval_seconds",
		}},
		{"a member's calendar", map[string]any{"type": "union", "schedules": []any{
			members[0],
			map[string]any{"type": "interval", "interval_seconds": 60, "exclude_calendars": []any{"0190a8a8-0000-7000-8000-00000000dead"}},
		}}, []string{"schedule.schedules[1].exclude_calendars[0]"}},
		{"the members' fields on the union", map[string]any{"type": "union", "timezone": "Europe/Paris", "schedules": members[:2]}, []string{"schedule.timezone"}},
	} {
		r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: map[string]any{
			"name": "bad", "endpoint_id": ep, "schedule": tc.schedule,
		}})
		requireProblem(t, r, http.StatusUnprocessableEntity)
		require.Equal(t, tc.fields, fieldErrors(r), "%s: %s", tc.name, r.Raw)
	}

	// A workflow's schedule is not a union.
	r = a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/workflows", Token: tok, Body: map[string]any{
		"name": "wf", "schedule": map[string]any{"type": "union", "schedules": members[:2]},
		"nodes": []any{map[string]any{"key": "a", "endpoint_id": ep}},
	}})
	require.Equal(t, []string{"schedule.type"}, fieldErrors(r), "%s", r.Raw)
}
