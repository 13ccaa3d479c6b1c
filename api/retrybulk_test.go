package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestRetryExecutionsInBulk: POST /v1/executions/retry delivers again the
// failed executions of a range (the night's), of one task when named,
// with their ids (so their idempotency keys); a dry run counts; what a
// retry refuses is skipped and named; other tenants' and other states'
// executions are untouched; bad input is a 422 by field, and so is a range
// of more than 10,000 matches (nothing retried).
func TestRetryExecutionsInBulk(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "night")
	t1 := a.createTask(tok, ep, "nightly-a", nil).JSON["id"].(string)
	t2 := a.createTask(tok, ep, "nightly-b", nil).JSON["id"].(string)
	paused := a.createTask(tok, ep, "paused", nil).JSON["id"].(string)
	night := time.Date(2026, 12, 3, 22, 0, 0, 0, time.UTC)
	in := func(h int) time.Time { return night.Add(time.Duration(h) * time.Hour) }
	f1 := a.execution(execOpts{Tenant: "acme", TaskID: t1, State: "failed", ScheduledFor: in(1)})
	f2 := a.execution(execOpts{Tenant: "acme", TaskID: t1, State: "failed", ScheduledFor: in(2)})
	f3 := a.execution(execOpts{Tenant: "acme", TaskID: t2, State: "failed", ScheduledFor: in(3)})
	fp := a.execution(execOpts{Tenant: "acme", TaskID: paused, State: "failed", ScheduledFor: in(4)})
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + paused + "/pause", Token: tok})
	before := a.execution(execOpts{Tenant: "acme", TaskID: t1, State: "failed", ScheduledFor: in(-1)})
	cancelled := a.execution(execOpts{Tenant: "acme", TaskID: t1, State: "cancelled", ScheduledFor: in(5)})
	other := a.execution(execOpts{Tenant: "other", TaskID: service.NewID(), State: "failed", ScheduledFor: in(1)})
	body := func(extra map[string]any) map[string]any {
		b := map[string]any{"state": "failed", "from": night.Format(time.RFC3339), "to": in(8).Format(time.RFC3339)}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	state := func(tenant, id string) string {
		var s string
		require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT state FROM executions WHERE tenant_id = $1 AND id = $2`, tenant, id).Scan(&s))
		return s
	}

	dry := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/executions/retry", Token: tok, Body: body(map[string]any{"dry_run": true})})
	assert.EqualValues(t, 4, dry.JSON["matched"])
	assert.EqualValues(t, 0, dry.JSON["retried"])
	assert.Equal(t, "failed", state("acme", f1), "a dry run retries nothing")

	one := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/executions/retry", Token: tok, Body: body(map[string]any{"task_id": t2})})
	assert.EqualValues(t, 1, one.JSON["matched"])
	assert.EqualValues(t, 1, one.JSON["retried"])
	assert.Equal(t, "pending", state("acme", f3))

	all := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/executions/retry", Token: tok, Body: body(nil)})
	assert.EqualValues(t, 3, all.JSON["matched"])
	assert.EqualValues(t, 2, all.JSON["retried"])
	assert.EqualValues(t, 1, all.JSON["skipped"])
	require.Len(t, all.JSON["skip_reasons"], 1)
	assert.Contains(t, all.JSON["skip_reasons"].([]any)[0], fp+": ")
	assert.Contains(t, all.JSON["skip_reasons"].([]any)[0], "paused")
	for _, id := range []string{f1, f2} {
		assert.Equal(t, "pending", state("acme", id), "retried with its own id")
	}
	for id, want := range map[string]string{fp: "failed", before: "failed", cancelled: "cancelled"} {
		assert.Equal(t, want, state("acme", id))
	}
	assert.Equal(t, "failed", state("other", other), "another tenant's is untouched")

	// One audit record per retried execution, and one per bulk retry with
	// its counts (under the task it named, or an execution without id).
	audits := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit?resource_type=execution&resource_id=" + f1, Token: tok})
	require.Len(t, audits.JSON["items"], 1)
	assert.Equal(t, "retry", audits.JSON["items"].([]any)[0].(map[string]any)["action"])
	bulkRecord := func(query string) map[string]any {
		t.Helper()
		page := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit?" + query, Token: tok})
		for _, it := range page.JSON["items"].([]any) {
			rec := it.(map[string]any)
			if ch, ok := rec["changes"].(map[string]any); ok && ch["bulk_retry"] != nil {
				assert.Equal(t, "retry", rec["action"])
				return ch["bulk_retry"].(map[string]any)
			}
		}
		require.Fail(t, "no bulk retry record", "%s", page.Raw)
		return nil
	}
	forTask := bulkRecord("resource_type=task&resource_id=" + t2)
	assert.EqualValues(t, 1, forTask["matched"])
	assert.EqualValues(t, 1, forTask["retried"])
	assert.Equal(t, "failed", forTask["state"])
	forAll := bulkRecord("resource_type=execution&limit=200")
	assert.EqualValues(t, 3, forAll["matched"])
	assert.EqualValues(t, 2, forAll["retried"])
	assert.EqualValues(t, 1, forAll["skipped"])

	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"state": "succeeded", "from": night.Format(time.RFC3339), "to": in(1).Format(time.RFC3339)}, "state"},
		{map[string]any{"state": "failed", "to": in(1).Format(time.RFC3339)}, "from"},
		{map[string]any{"state": "failed", "from": in(1).Format(time.RFC3339), "to": night.Format(time.RFC3339)}, "to"},
		{map[string]any{"state": "failed", "from": "yesterday", "to": in(1).Format(time.RFC3339)}, "from"},
		{body(map[string]any{"task_id": "nightly-a"}), "task_id"},
	} {
		r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/executions/retry", Token: tok, Body: tc.body})
		assert.Contains(t, fieldErrors(r), tc.field, "%s", r.Raw)
	}
	a.must(http.StatusForbidden, req{Method: http.MethodPost, Path: "/v1/executions/retry", Token: token(t, "acme", "executions:read"), Body: body(nil)})

	// One more than the bound: a 422 that says so, and nothing retried
	// (nor counted in a dry run).
	month := night.AddDate(0, -1, 0)
	a.exec(`INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error)
		SELECT 'acme', gen_random_uuid(), $1, $2::timestamptz + make_interval(secs => g), 'schedule', 'failed', 'fixture'
		FROM generate_series(1, $3::int) g`, t2, month, service.RetryBulkMax+1)
	many := map[string]any{"state": "failed", "from": month.Format(time.RFC3339), "to": month.AddDate(0, 0, 1).Format(time.RFC3339)}
	for _, dry := range []bool{true, false} {
		many["dry_run"] = dry
		r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/executions/retry", Token: tok, Body: many})
		assert.Contains(t, fieldErrors(r), "to", "%s", r.Raw)
		assert.Contains(t, string(r.Raw), "more than 10000", "%s", r.Raw)
	}
	var left int
	require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT count(*) FROM executions WHERE tenant_id = 'acme' AND task_id = $1
		AND state = 'failed' AND scheduled_for >= $2`, t2, month).Scan(&left))
	assert.Greater(t, left, service.RetryBulkMax, "nothing retried")
}
