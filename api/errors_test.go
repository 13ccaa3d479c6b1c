package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	body := map[string]any{"name": "billing", "url": "https://example.com/hook"}
	key := map[string]string{"Idempotency-Key": "create-billing-1"}

	first := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: body, Header: key})
	again := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: body, Header: key})
	require.Equal(t, first.JSON["id"], again.JSON["id"])
	require.Equal(t, string(first.Raw), string(again.Raw), "the original response, byte for byte")
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

	changed := map[string]any{"name": "billing-2", "url": "https://example.com/hook"}
	r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: changed, Header: key})
	require.Contains(t, r.JSON["detail"], "different request body")

	// Keys are per tenant and per route: another tenant may use the same key.
	other := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: token(t, "other"), Body: body, Header: key})
	require.NotEqual(t, first.JSON["id"], other.JSON["id"])

	// Without a key every POST creates.
	a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: body})
	var n int
	require.NoError(t, a.pool.QueryRow(context.Background(), "SELECT count(*) FROM endpoints WHERE tenant_id = 'acme'").Scan(&n))
	require.Equal(t, 2, n)

	// A validation failure is replayed too (same request, same answer).
	bad := map[string]any{"name": "", "url": "https://example.com/hook"}
	k2 := map[string]string{"Idempotency-Key": "bad-1"}
	r1 := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: bad, Header: k2})
	r2 := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: bad, Header: k2})
	require.Equal(t, fieldErrors(r1), fieldErrors(r2))

	// Tasks honour it too.
	ep := first.JSON["id"].(string)
	tb := map[string]any{"name": "t", "endpoint_id": ep, "schedule": map[string]any{"type": "interval", "interval_seconds": 60}}
	t1 := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: tb, Header: key})
	t2 := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: tb, Header: key})
	require.Equal(t, t1.JSON["id"], t2.JSON["id"])

	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: body,
		Header: map[string]string{"Idempotency-Key": strings.Repeat("k", 256)},
	})
}

func TestErrorResponses(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	cases := []struct {
		name   string
		r      req
		status int
	}{
		{"unknown route", req{Method: http.MethodGet, Path: "/v1/nothing", Token: tok}, http.StatusNotFound},
		{"unknown top-level route", req{Method: http.MethodGet, Path: "/nothing"}, http.StatusNotFound},
		{"method not allowed", req{Method: http.MethodPut, Path: "/v1/tasks", Token: tok}, http.StatusMethodNotAllowed},
		{"malformed JSON", req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: `{"name": `}, http.StatusBadRequest},
		{"broken JSON", req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: `{"name" "x"}`}, http.StatusBadRequest},
		{"trailing garbage", req{
			Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
			Body: `{"name":"a","url":"https://example.com"} extra`,
		}, http.StatusBadRequest},
		{"empty body", req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: ``}, http.StatusBadRequest},
		{"array body", req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: `[]`}, http.StatusBadRequest},
		{"text/plain", req{
			Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: `{}`,
			Header: map[string]string{"Content-Type": "text/plain"},
		}, http.StatusUnsupportedMediaType},
		{"no content type", req{
			Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: `{}`,
			Header: map[string]string{"Content-Type": ""},
		}, http.StatusUnsupportedMediaType},
		{"too large", req{
			Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
			Body: `{"payload":"` + strings.Repeat("x", 1<<20) + `"}`,
		}, http.StatusRequestEntityTooLarge},
		{"missing id", req{Method: http.MethodGet, Path: "/v1/tasks/01a228b6-0000-7000-8000-000000000000", Token: tok}, http.StatusNotFound},
		{"malformed id", req{Method: http.MethodGet, Path: "/v1/tasks/not-an-id", Token: tok}, http.StatusNotFound},
		{"missing scope", req{Method: http.MethodGet, Path: "/v1/tasks", Token: token(t, "acme", "endpoints:read")}, http.StatusForbidden},
		{"write needs write scope", req{
			Method: http.MethodPost, Path: "/v1/endpoints", Token: token(t, "acme", "endpoints:read"),
			Body: `{}`,
		}, http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := a.must(tc.status, tc.r)
			require.NotContains(t, string(r.Raw), "pgx")
			require.NotContains(t, string(r.Raw), "SQLSTATE")
		})
	}
}

// TestBodyLimitChunked sends an oversized body without Content-Length.
func TestBodyLimitChunked(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	big := bytes.Repeat([]byte("x"), 2<<20)
	body := io.MultiReader(strings.NewReader(`{"name":"`), bytes.NewReader(big), strings.NewReader(`"}`))
	hr, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.srv.URL+"/v1/endpoints", io.NopCloser(body))
	require.NoError(t, err)
	hr.ContentLength = -1 // chunked
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+token(t, "acme"))
	res, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
}

// TestTenantIsolation calls every route that takes an id with tenant B's
// token and tenant A's ids: each answers 404 and nothing of A's changes.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tokA, tokB := token(t, "tenant-a"), token(t, "tenant-b")
	epA := a.createEndpoint(tokA, "a-endpoint")
	taskA := a.createTask(tokA, epA, "a-task", nil).JSON["id"].(string)
	execA := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/trigger", Token: tokA}).JSON["id"].(string)
	epB := a.createEndpoint(tokB, "b-endpoint")
	calA := a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/calendars", Token: tokA,
		Body: `{"name":"a-holidays","dates":["2027-01-01"]}`,
	}).JSON["id"].(string)
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	wfA := a.createWorkflow(tokA, "a-workflow")
	runA := a.triggerWorkflow(tokA, wfA)
	evA := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/events", Token: tokA, Body: `{"name":"a.happened"}`}).JSON["id"].(string)
	bfA := a.must(http.StatusAccepted, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/backfill", Token: tokA,
		Body: `{"from":"` + from + `","to":"` + time.Now().UTC().Format(time.RFC3339) + `"}`,
	}).JSON["id"].(string)

	snapshot := func() string {
		var s string
		require.NoError(t, a.pool.QueryRow(context.Background(), `SELECT
			(SELECT json_agg(e ORDER BY id)::text FROM endpoints e WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(t ORDER BY id)::text FROM tasks t WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(x ORDER BY id)::text FROM executions x WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(v ORDER BY seq)::text FROM execution_events v WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(c ORDER BY id)::text FROM calendars c WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(b ORDER BY id)::text FROM backfills b WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(w ORDER BY id)::text FROM workflows w WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(r ORDER BY id)::text FROM workflow_runs r WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(n ORDER BY run_id, key)::text FROM workflow_run_nodes n WHERE tenant_id = 'tenant-a') ||
			(SELECT json_agg(j ORDER BY id)::text FROM river_job j)`).Scan(&s))
		return s
	}
	before := snapshot()

	routes := []req{
		{Method: http.MethodGet, Path: "/v1/endpoints/" + epA},
		{Method: http.MethodPatch, Path: "/v1/endpoints/" + epA, Body: `{"name":"stolen"}`},
		{Method: http.MethodDelete, Path: "/v1/endpoints/" + epA},
		{Method: http.MethodPost, Path: "/v1/endpoints/" + epA + "/rotate-secret"},
		{Method: http.MethodPost, Path: "/v1/endpoints/" + epA + "/test"},
		{Method: http.MethodGet, Path: "/v1/tasks/" + taskA},
		{Method: http.MethodPatch, Path: "/v1/tasks/" + taskA, Body: `{"name":"stolen"}`},
		{Method: http.MethodDelete, Path: "/v1/tasks/" + taskA},
		{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/pause"},
		{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/resume"},
		{Method: http.MethodGet, Path: "/v1/tasks/" + taskA + "/preview"},
		{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/render"},
		{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/trigger"},
		{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/trigger", Body: `{"dedup_key":"k"}`},
		{Method: http.MethodGet, Path: "/v1/executions/" + execA},
		{Method: http.MethodPost, Path: "/v1/executions/" + execA + "/cancel"},
		{Method: http.MethodPost, Path: "/v1/executions/" + execA + "/retry"},
		{Method: http.MethodPost, Path: "/v1/executions/" + execA + "/hold"},
		{Method: http.MethodPost, Path: "/v1/executions/" + execA + "/release"},
		{Method: http.MethodPost, Path: "/v1/executions/" + execA + "/heartbeat"},
		{Method: http.MethodPost, Path: "/v1/executions/" + execA + "/complete", Body: `{"status":"succeeded"}`},
		{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/skip", Body: `{"scheduled_for":"2030-01-01T00:00:00Z"}`},
		{Method: http.MethodPost, Path: "/v1/tasks/" + taskA + "/backfill", Body: `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`},
		{Method: http.MethodGet, Path: "/v1/backfills/" + bfA},
		{Method: http.MethodPost, Path: "/v1/backfills/" + bfA + "/cancel"},
		{Method: http.MethodGet, Path: "/v1/calendars/" + calA},
		{Method: http.MethodPatch, Path: "/v1/calendars/" + calA, Body: `{"name":"stolen"}`},
		{Method: http.MethodDelete, Path: "/v1/calendars/" + calA},
		{Method: http.MethodGet, Path: "/v1/workflows/" + wfA},
		{Method: http.MethodPatch, Path: "/v1/workflows/" + wfA, Body: `{"name":"stolen"}`},
		{Method: http.MethodDelete, Path: "/v1/workflows/" + wfA},
		{Method: http.MethodPost, Path: "/v1/workflows/" + wfA + "/pause"},
		{Method: http.MethodPost, Path: "/v1/workflows/" + wfA + "/resume"},
		{Method: http.MethodPost, Path: "/v1/workflows/" + wfA + "/trigger"},
		{Method: http.MethodPost, Path: "/v1/workflows/" + wfA + "/backfill", Body: `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`},
		{Method: http.MethodGet, Path: "/v1/workflows/" + wfA + "/runs"},
		{Method: http.MethodGet, Path: "/v1/workflow-runs/" + runA},
		{Method: http.MethodPost, Path: "/v1/workflow-runs/" + runA + "/cancel"},
		{Method: http.MethodPost, Path: "/v1/workflow-runs/" + runA + "/nodes/b/run"},
		{Method: http.MethodPost, Path: "/v1/workflow-runs/" + runA + "/nodes/b/skip"},
		{Method: http.MethodGet, Path: "/v1/events/" + evA},
	}
	covered := map[string]bool{}
	for _, r := range routes {
		r.Token = tokB
		a.must(http.StatusNotFound, r)
		path := strings.NewReplacer(epA, ":id", taskA, ":id", execA, ":id", calA, ":id", bfA, ":id", wfA, ":id", runA, ":id",
			evA, ":id", "/nodes/b/", "/nodes/:key/").Replace(r.Path)
		covered[r.Method+" "+path] = true
	}
	// Every route that takes an id is in the table above.
	for _, rt := range a.e.Routes() {
		if strings.Contains(rt.Path, ":id") {
			require.True(t, covered[rt.Method+" "+rt.Path], "route %s %s is missing from the tenant matrix", rt.Method, rt.Path)
		}
	}
	// Creating a task on A's endpoint with B's token is a field error.
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tokB,
		Body: map[string]any{"name": "x", "endpoint_id": epA, "schedule": map[string]any{"type": "interval", "interval_seconds": 5}},
	})
	require.Equal(t, []string{"endpoint_id"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tokB,
		Body: map[string]any{"name": "x", "endpoint_id": epB, "alert_endpoint_id": epA, "schedule": map[string]any{"type": "interval", "interval_seconds": 5}},
	})
	require.Equal(t, []string{"alert_endpoint_id"}, fieldErrors(r))

	// Lists show only B's objects.
	l := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/endpoints", Token: tokB})
	require.Len(t, l.JSON["items"], 1)
	l = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks", Token: tokB})
	require.Empty(t, l.JSON["items"])
	l = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions", Token: tokB})
	require.Empty(t, l.JSON["items"])
	l = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?task_id=" + taskA, Token: tokB})
	require.Empty(t, l.JSON["items"])

	require.Equal(t, before, snapshot(), "tenant A's rows are untouched")
}

// A request that loses a race in the database (a serialization failure,
// SQLSTATE 40001, or a deadlock, 40P01) is a 409 that says to try again,
// not a 500, and keeps nothing: sending it again succeeds. The race is
// real to the server: a deferred trigger on tasks fails the PATCH's
// commit with the code, as Postgres does when a serializable
// transaction or a deadlock loses.
func TestLostRaceIsConflictToTryAgain(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	a.exec(`CREATE FUNCTION lose_race() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.name LIKE 'lose-race-%' THEN
				RAISE EXCEPTION 'the transaction lost a race (test)' USING ERRCODE = upper(substr(NEW.name, 11));
			END IF;
			RETURN NULL;
		END $$`)
	a.exec(`CREATE CONSTRAINT TRIGGER lose_race AFTER UPDATE ON tasks DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION lose_race()`)
	for _, code := range []string{"40001", "40p01"} { // names are lower-case; the trigger raises upper(code)
		id := a.createTask(tok, ep, "task-"+code, nil).JSON["id"].(string)
		path := "/v1/tasks/" + id
		r := a.must(http.StatusConflict, req{
			Method: http.MethodPatch, Path: path, Token: tok,
			Body: map[string]any{"name": "lose-race-" + code},
		})
		require.Equal(t, "https://ax.dev/problems/conflict", r.JSON["type"], code)
		require.Equal(t, "a concurrent change got in the way; try again", r.JSON["detail"], code)
		require.Equal(t, "task-"+code, a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: tok}).JSON["name"],
			"%s: the lost request changed nothing", code)
		again := a.must(http.StatusOK, req{Method: http.MethodPatch, Path: path, Token: tok, Body: map[string]any{"name": "won-" + code}})
		require.Equal(t, "won-"+code, again.JSON["name"], code)
	}
}
