package api

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// requireClientError checks that err is one the error handler turns into a
// 4xx problem: bad input must never surface as a 500.
func requireClientError(t *testing.T, err error) {
	t.Helper()
	var (
		p  *problem
		ve *service.ValidationError
		he *echo.HTTPError
	)
	switch {
	case errors.As(err, &p):
		require.True(t, p.Status >= 400 && p.Status < 500, "problem status %d: %v", p.Status, err)
		require.NotEmpty(t, p.Detail)
	case errors.As(err, &ve):
		require.NotEmpty(t, ve.Fields, "empty validation error")
		for _, f := range ve.Fields {
			// An unknown key may itself be "" ({"":1}); every other error names its field.
			if f.Message != "unknown field" {
				require.NotEmpty(t, f.Field, "%v", err)
			}
			require.NotEmpty(t, f.Message, "%v", err)
		}
	case errors.As(err, &he):
		require.True(t, he.Code >= 400 && he.Code < 500, "HTTP error %d: %v", he.Code, err)
	default:
		t.Fatalf("error would be a 500: %T %v", err, err)
	}
}

// populatedTask is a task's current state as patchTask sees it.
func populatedTask() taskRequest {
	timeout, priority := 30000, 2
	runAt := "2030-01-02T03:04:05Z"
	return taskRequest{
		Name: "order.reconcile.daily", EndpointID: "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e",
		Schedule: scheduleDTO{Type: "cron", Cron: "0 2 * * *", Timezone: "Asia/Shanghai", EndAt: &runAt},
		Payload:  json.RawMessage(`{"any":"json"}`), Priority: &priority, TimeoutMS: &timeout,
		Retry:         retryDTO{MaxAttempts: 5, InitialBackoffMS: 1000, MaxBackoffMS: 600000},
		OverlapPolicy: "allow", MisfirePolicy: "fire_once", Labels: map[string]string{"team": "billing"},
		PauseAfterFailures: 3,
	}
}

// FuzzDecodeStrict feeds arbitrary bodies to the task create path
// (decodeStrict then input) and the patch path (mergePatch onto a populated
// task then input). Neither may panic, and every failure must be a 4xx.
func FuzzDecodeStrict(f *testing.F) {
	valid := `{"name":"order.reconcile.daily","endpoint_id":"0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e",` +
		`"schedule":{"type":"cron","cron":"0 2 * * *","timezone":"Asia/Shanghai"},"payload":{"any":"json"},` +
		`"priority":2,"timeout_ms":30000,"retry":{"max_attempts":5,"initial_backoff_ms":1000,"max_backoff_ms":600000},` +
		`"overlap_policy":"allow","misfire_policy":"fire_once","labels":{"team":"billing"}}`
	for _, seed := range []string{
		valid,
		`{"name":"n","endpoint_id":"e","schedule":{"type":"interval","interval_seconds":60}}`,
		`{"name":"n","endpoint_id":"e","schedule":{"type":"once","run_at":"2030-01-01T00:00:00Z","start_at":"x","end_at":"2029-01-01T00:00:00+14:00"}}`,
		`{}`, `[]`, `null`, `true`, `"str"`, `0`, ``, ` `, "\xef\xbb\xbf{}", `{"name":"\xff\xfe"}`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001),
		strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat("}", 10000),
		`{"payload":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}`,
		`{"labels":` + strings.Repeat(`{"a":`, 5000) + `"x"` + strings.Repeat("}", 5001),
		`{"priority":1e400}`, `{"priority":99999999999999999999}`, `{"priority":-9223372036854775808}`, `{"priority":1.5}`,
		`{"timeout_ms":-1}`, `{"timeout_ms":null}`, `{"timeout_ms":9223372036854775807}`, `{"timeout_ms":2147483648}`,
		`{"retry":{"max_attempts":9223372036854775807,"initial_backoff_ms":9223372036854775807,"max_backoff_ms":-9223372036854775808}}`,
		`{"schedule":{"interval_seconds":9223372036854775807}}`, `{"schedule":{"interval_seconds":-1e18}}`,
		`{"name":"\u0000\ud800\udfff\uffff"}`, `{"na\u006de":"x"}`, `{"st\u0061te":"paused"}`, `{"NAME":"x","Schedule":{"TYPE":"cron"}}`,
		`{"name":"a","name":"b"}`, `{"labels":{"a":"1","a":"2"}}`, `{"schedule":{"cron":"* * * * *"},"schedule":null}`,
		`{"name":"a"} x`, `{} {}`, `{}]`, `{"name":"a"`, `{"name":}`, `{"name" "a"}`, `{,}`, `{"a":1,}`,
		`{"id":"x","state":"paused","tenant_id":"other"}`, `{"tenant":"other"}`, `{"version":1}`,
		`{"unknown":1}`, `{"schedule":{"unknown":1}}`, `{"labels":{"a":1}}`, `{"labels":[]}`, `{"schedule":[]}`,
		`{"schedule":null,"labels":null,"retry":null,"payload":null}`, `{"payload":"not an object"}`,
		`{"schedule":{"run_at":123}}`, `{"schedule":{"run_at":"2026-13-45T99:99:99Z"}}`, `{"retry":"x"}`,
		`{"name":` + `"` + strings.Repeat("x", 100000) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Create: strict decode, then the DTO's own checks.
		var created taskRequest
		if err := decodeStrict(body, &created, taskReadOnly...); err != nil {
			requireClientError(t, err)
		} else {
			if _, err := created.input(); err != nil {
				requireClientError(t, err)
			}
			// What decoded must encode and decode again.
			again, err := json.Marshal(created)
			require.NoError(t, err)
			var back taskRequest
			require.NoError(t, decodeStrict(again, &back, taskReadOnly...), "%s", again)
		}

		// Patch: merge onto the current state, as patchTask does.
		if err := checkReadOnly(body, taskReadOnly); err != nil {
			requireClientError(t, err)
			return
		}
		patched := populatedTask()
		if err := mergePatch(body, &patched, "schedule", "labels"); err != nil {
			requireClientError(t, err)
			return
		}
		if _, err := patched.input(); err != nil {
			requireClientError(t, err)
		}
	})
}

// FuzzScheduleValidate parses fuzzed cron expressions and zones as the API
// does (the service converts schedule's errors, scheduleError); a valid
// schedule must preview strictly increasing fire times.
func FuzzScheduleValidate(f *testing.F) {
	for _, seed := range [][2]string{
		{"0 2 * * *", "Asia/Shanghai"},
		{"*/15 * * * * *", "UTC"},
		{"30 2 * * *", "America/New_York"},
		{"30 1 * * *", "Europe/London"},
		{"0 0 L * *", ""},
		{"0 0 L-3 2 *", "Australia/Lord_Howe"},
		{"0 0 30 2 *", "UTC"},
		{"0 0 31 4 *", "UTC"},
		{"0 0 29 2 1", "UTC"},
		{"@yearly", "Pacific/Apia"},
		{"@hourly", "Asia/Kathmandu"},
		{"@every 1s", "UTC"},
		{"59 59 23 31 12 *", "Pacific/Kiritimati"},
		{"TZ=TZ=TZ=", "UTC"},
		{"TZ=0", ""},
		{"CRON_TZ=UTC * * * * *", ""},
		{"15/0 * * * *", "UTC"},
		{"5-2 * * * *", "UTC"},
		{", * * * *", "UTC"},
		{"* * * * * * *", "UTC"},
		{"", "UTC"},
		{"   ", ""},
		{"* * * * *", "Local"},
		{"* * * * *", "local"},
		{"* * * * *", "../../etc/passwd"},
		{"* * * * *", "/etc/localtime"},
		{"* * * * *", "America/New_York/"},
		{"* * * * *", "Etc/GMT+14"},
		{"* * * * *", "EST5EDT"},
		{"* * * * *", "Europe/Nowhere"},
		{"* * * * *", strings.Repeat("A/", 200)},
		{strings.Repeat("1,", 2000) + "1 * * * *", "UTC"},
		{"0-59/1 0-23 1-31 1-12 0-7", "Antarctica/Troll"},
		{"0 0 ? * 0-7", "America/Santiago"},
		{"0 30 2 * * *", "Africa/Casablanca"},
		{"\x00 * * * *", "UTC"},
		{"* * * * *\n* * * * *", "UTC"},
		{"9999999999999999999 * * * *", "UTC"},
		{"-1 * * * *", "UTC"},
		{"1-/ * * * *", "UTC"},
		{"L-99 * * * *", "UTC"},
	} {
		f.Add(seed[0], seed[1])
	}
	// Fixed instants keep failures reproducible; now covers the API's use.
	instants := []time.Time{
		time.Date(2026, 3, 8, 6, 59, 59, 0, time.UTC),     // just before US spring forward
		time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC),     // inside US fall back
		time.Date(2028, 2, 28, 23, 59, 59, 999, time.UTC), // leap day ahead
		time.Now(),
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		s, err := schedule.Parse(schedule.Spec{Type: schedule.Cron, Cron: expr, Timezone: tz}, time.Now())
		if err != nil {
			// The service turns it into its *ValidationError field for
			// field (a 422): every field and message must be there.
			var ve *schedule.ValidationError
			require.ErrorAs(t, err, &ve, "%q %q", expr, tz)
			require.NotEmpty(t, ve.Fields, "%q %q", expr, tz)
			for _, f := range ve.Fields {
				require.NotEmpty(t, f.Field, "%v", err)
				require.NotEmpty(t, f.Message, "%v", err)
			}
			require.Nil(t, s)
			return
		}
		require.NotNil(t, s)
		for _, now := range instants {
			fires := s.Preview(now, 5)
			require.LessOrEqual(t, len(fires), 5)
			prev := now
			for i, at := range fires {
				require.False(t, at.IsZero(), "%q %q: fire %d is zero", expr, tz, i)
				require.True(t, at.After(prev), "%q %q: fire %d %s not after %s", expr, tz, i, at, prev)
				require.Zero(t, at.Nanosecond(), "%q %q: cron fires on whole seconds", expr, tz)
				prev = at
			}
			if next, ok := s.Next(now); ok {
				require.NotEmpty(t, fires)
				require.True(t, next.Equal(fires[0]), "%q %q: Next %s, Preview[0] %s", expr, tz, next, fires[0])
			} else {
				require.Empty(t, fires)
			}
		}
	})
}

// TestFuzzFindingPatchKeyCase: encoding/json matches keys case-insensitively,
// but mergePatch clears the fields it replaces wholesale by exact name. So
// {"Labels":{...}} merged into the current labels while {"labels":{...}}
// replaced them, and {"SCHEDULE":{...}} kept the old cron and end_at. A
// case-variant key must either be refused (4xx) or behave exactly like the
// canonical one.
func TestFuzzFindingPatchKeyCase(t *testing.T) {
	for _, tc := range []struct{ canonical, variant string }{
		{`{"labels":{"env":"prod"}}`, `{"Labels":{"env":"prod"}}`},
		{`{"labels":{"env":"prod"}}`, `{"LABELS":{"env":"prod"}}`},
		{`{"schedule":{"type":"interval","interval_seconds":60}}`, `{"SCHEDULE":{"type":"interval","interval_seconds":60}}`},
		{`{"schedule":{"type":"interval","interval_seconds":60}}`, `{"Schedule":{"type":"interval","interval_seconds":60}}`},
	} {
		want := populatedTask()
		require.NoError(t, mergePatch([]byte(tc.canonical), &want, "schedule", "labels"))
		got := populatedTask()
		err := checkReadOnly([]byte(tc.variant), taskReadOnly)
		if err == nil {
			err = mergePatch([]byte(tc.variant), &got, "schedule", "labels")
		}
		if err != nil {
			requireClientError(t, err)
			continue
		}
		require.Equal(t, want, got, "%s must patch like %s, or be refused", tc.variant, tc.canonical)
	}
}
