package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
)

// execOpts describes an execution fixture written by SQL.
type execOpts struct {
	Tenant       string
	TaskID       string
	State        string    // default pending
	ScheduledFor time.Time // default now
}

// execution inserts an execution fixture and returns its id.
func (a *testAPI) execution(o execOpts) string {
	a.t.Helper()
	if o.State == "" {
		o.State = service.ExecPending
	}
	if o.ScheduledFor.IsZero() {
		o.ScheduledFor = time.Now()
	}
	id := service.NewID()
	// A failed, cancelled or skipped execution always has a last_error, a
	// retrying one a next attempt.
	a.exec(`INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, last_error, next_attempt_at)
		VALUES ($1, $2, $3, $4, 'schedule', $5, CASE WHEN $5 IN ('failed', 'cancelled', 'skipped') THEN 'fixture' END,
			CASE WHEN $5 = 'retrying' THEN now() + interval '1 minute' END)`,
		o.Tenant, id, o.TaskID, o.ScheduledFor, o.State)
	return id
}

// exec runs SQL that sets up a scenario, then brings unfinished_executions
// in line with what it did to executions.
func (a *testAPI) exec(sql string, args ...any) {
	a.t.Helper()
	_, err := a.pool.Exec(a.t.Context(), sql, args...)
	require.NoError(a.t, err)
	dbtest.SyncUnfinished(a.t, a.pool)
}

// riverJob is a deliver job of an execution as River stores it.
type riverJob struct {
	ID          int64
	State       string
	Priority    int
	MaxAttempts int
	Queue       string
	Scheduled   bool // scheduled_at is in the future
	CancelAsked bool // metadata.cancel_attempted_at is set
}

// jobs returns the River jobs whose args name execution id, oldest first.
func (a *testAPI) jobs(id string) []riverJob {
	a.t.Helper()
	rows, err := a.pool.Query(a.t.Context(), `SELECT id, state::text, priority, max_attempts, queue,
			scheduled_at > now(), metadata ? 'cancel_attempted_at'
		FROM river_job WHERE kind = 'deliver' AND args->>'execution_id' = $1 ORDER BY id`, id)
	require.NoError(a.t, err)
	defer rows.Close()
	var out []riverJob
	for rows.Next() {
		var j riverJob
		require.NoError(a.t, rows.Scan(&j.ID, &j.State, &j.Priority, &j.MaxAttempts, &j.Queue, &j.Scheduled, &j.CancelAsked))
		out = append(out, j)
	}
	require.NoError(a.t, rows.Err())
	return out
}

// trigger fires task by hand with body (nil: none) and returns the execution.
func (a *testAPI) trigger(tok, task string, body any) resp {
	a.t.Helper()
	return a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: tok, Body: body})
}

func eventTypes(r resp) []string {
	var out []string
	evs, _ := r.JSON["events"].([]any)
	for _, e := range evs {
		out = append(out, e.(map[string]any)["type"].(string))
	}
	return out
}

func ids(r resp) []string {
	var out []string
	items, _ := r.JSON["items"].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any)["id"].(string))
	}
	return out
}

func TestTrigger(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	task := a.createTask(tok, ep, "billing", map[string]any{
		"payload": map[string]any{"a": 1}, "priority": 3,
		"retry": map[string]any{"max_attempts": 4},
	}).JSON["id"].(string)

	// No body: the task's payload, delivered at once.
	before := time.Now()
	x := a.trigger(tok, task, nil)
	id := x.JSON["id"].(string)
	require.Equal(t, task, x.JSON["task_id"])
	require.Equal(t, "manual", x.JSON["trigger"])
	require.Equal(t, "pending", x.JSON["state"])
	require.EqualValues(t, 0, x.JSON["attempts"])
	require.Contains(t, x.JSON, "last_error")
	require.Nil(t, x.JSON["last_error"])
	require.Nil(t, x.JSON["last_status_code"])
	require.NotContains(t, x.JSON, "dedup_key")
	at, err := time.Parse(time.RFC3339, x.JSON["scheduled_for"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, before, at, 5*time.Second)
	evs := x.JSON["events"].([]any)
	require.Len(t, evs, 1)
	require.Equal(t, "fired", evs[0].(map[string]any)["type"])
	require.Equal(t, map[string]any{"trigger": "manual"}, evs[0].(map[string]any)["data"])
	jobs := a.jobs(id)
	require.Len(t, jobs, 1)
	require.Equal(t, riverJob{ID: jobs[0].ID, State: "available", Priority: 3, MaxAttempts: jobs[0].MaxAttempts, Queue: "deliver"}, jobs[0])
	require.Greater(t, jobs[0].MaxAttempts, 4, "the task's attempts plus River's margin")
	var payload []byte
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT payload FROM executions WHERE id = $1", id).Scan(&payload))
	require.Nil(t, payload, "no override: the task's payload")

	// A payload override is stored byte for byte; null means none.
	x = a.trigger(tok, task, `{"payload": {"z": 1,  "y":[ 1,2 ]}}`)
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT payload FROM executions WHERE id = $1", x.JSON["id"]).Scan(&payload))
	require.Equal(t, []byte(`{"z": 1,  "y":[ 1,2 ]}`), payload) //nolint:testifylint // bytes, not JSON equivalence
	x = a.trigger(tok, task, `{"payload": null}`)
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT payload FROM executions WHERE id = $1", x.JSON["id"]).Scan(&payload))
	require.Nil(t, payload)
	x = a.trigger(tok, task, `{"payload": "text"}`)
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT payload FROM executions WHERE id = $1", x.JSON["id"]).Scan(&payload))
	require.Equal(t, `"text"`, string(payload))
	// An empty JSON body is no body.
	a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: tok, Body: ""})

	// The same dedup_key returns the same execution and enqueues nothing more.
	d1 := a.trigger(tok, task, map[string]any{"dedup_key": "invoice-42", "payload": map[string]any{"n": 1}})
	d2 := a.trigger(tok, task, map[string]any{"dedup_key": "invoice-42", "payload": map[string]any{"n": 2}})
	require.Equal(t, d1.JSON["id"], d2.JSON["id"])
	require.Equal(t, "invoice-42", d2.JSON["dedup_key"])
	require.Equal(t, []string{"fired"}, eventTypes(d2))
	require.Len(t, a.jobs(d1.JSON["id"].(string)), 1)
	var n int
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT count(*) FROM executions WHERE dedup_key = 'invoice-42'").Scan(&n))
	require.Equal(t, 1, n)
	// Concurrent triggers with one dedup key fire once.
	var wg sync.WaitGroup
	got := make([]resp, 8)
	for i := range got {
		wg.Go(func() {
			got[i] = a.do(req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: tok, Body: map[string]any{"dedup_key": "race"}})
		})
	}
	wg.Wait()
	for _, r := range got {
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Raw))
		require.Equal(t, got[0].JSON["id"], r.JSON["id"])
	}
	require.Len(t, a.jobs(got[0].JSON["id"].(string)), 1)
	// A dedup key used before the task's shards were raised still answers
	// its first trigger: nothing more is inserted or enqueued.
	a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/tasks/" + task, Token: tok, Body: map[string]any{"shards": 3}})
	d4 := a.trigger(tok, task, map[string]any{"dedup_key": "invoice-42"})
	require.Equal(t, d1.JSON["id"], d4.JSON["id"])
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT count(*) FROM executions WHERE dedup_key = 'invoice-42'").Scan(&n))
	require.Equal(t, 1, n, "no shard added to the first trigger")
	// A new key fires every shard.
	d5 := a.trigger(tok, task, map[string]any{"dedup_key": "invoice-43"})
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT count(*) FROM executions WHERE dedup_key = 'invoice-43'").Scan(&n))
	require.Equal(t, 3, n)
	require.Len(t, a.jobs(d5.JSON["id"].(string)), 1)
	a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/tasks/" + task, Token: tok, Body: map[string]any{"shards": 1}})

	// Dedup keys are per task.
	other := a.createTask(tok, ep, "other", nil).JSON["id"].(string)
	d3 := a.trigger(tok, other, map[string]any{"dedup_key": "invoice-42"})
	require.NotEqual(t, d1.JSON["id"], d3.JSON["id"])

	// Idempotency-Key replays per task: the same key on another task fires it.
	key := map[string]string{"Idempotency-Key": "fire-1"}
	i1 := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: tok, Header: key})
	i2 := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: tok, Header: key})
	require.Equal(t, i1.JSON["id"], i2.JSON["id"])
	require.Equal(t, "true", i2.Header.Get("Idempotent-Replayed"))
	i3 := a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + other + "/trigger", Token: tok, Header: key})
	require.NotEqual(t, i1.JSON["id"], i3.JSON["id"])
	require.Equal(t, other, i3.JSON["task_id"])

	// Paused and completed tasks can be fired by hand.
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: tok})
	p := a.trigger(tok, task, nil)
	require.Len(t, a.jobs(p.JSON["id"].(string)), 1)
	a.exec("UPDATE tasks SET state = 'completed', next_run_at = NULL WHERE id = $1", task)
	a.trigger(tok, task, nil)

	// Missing, malformed, deleted and other tenants' tasks are not found.
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/01a228b6-0000-7000-8000-000000000000/trigger", Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/nope/trigger", Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: token(t, "other")})
	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/tasks/" + other, Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/" + other + "/trigger", Token: tok})

	// Triggering needs tasks:write.
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger",
		Token: token(t, "acme", "tasks:read", "executions:write"),
	})
}

func TestTriggerValidation(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	task := a.createTask(tok, a.createEndpoint(tok, "e"), "t", nil).JSON["id"].(string)
	path := "/v1/tasks/" + task + "/trigger"
	cases := []struct {
		name   string
		body   string
		status int
		field  string
	}{
		{"empty dedup key", `{"dedup_key": ""}`, http.StatusUnprocessableEntity, "dedup_key"},
		{"dedup key too long", `{"dedup_key": "` + strings.Repeat("k", 129) + `"}`, http.StatusUnprocessableEntity, "dedup_key"},
		{"dedup key control character", `{"dedup_key": "a\nb"}`, http.StatusUnprocessableEntity, "dedup_key"},
		{"dedup key not a string", `{"dedup_key": 7}`, http.StatusUnprocessableEntity, "dedup_key"},
		{"payload too large", `{"payload": {"x": "` + strings.Repeat("x", 300<<10) + `"}}`, http.StatusUnprocessableEntity, "payload"},
		{"unknown field", `{"payload": {}, "priority": 1}`, http.StatusUnprocessableEntity, "priority"},
		{"malformed", `{"payload": `, http.StatusBadRequest, ""},
		{"not an object", `[]`, http.StatusBadRequest, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := a.must(tc.status, req{Method: http.MethodPost, Path: path, Token: tok, Body: tc.body})
			if tc.field != "" {
				require.Equal(t, []string{tc.field}, fieldErrors(r), string(r.Raw))
			}
		})
	}
	a.must(http.StatusUnsupportedMediaType, req{
		Method: http.MethodPost, Path: path, Token: tok, Body: `{}`,
		Header: map[string]string{"Content-Type": "text/plain"},
	})
	// 128 printable characters, any script, are fine.
	a.trigger(tok, task, map[string]any{"dedup_key": strings.Repeat("é", 128)})

	var n int
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT count(*) FROM executions").Scan(&n))
	require.Equal(t, 1, n, "only the valid trigger created an execution")
}

// twoTasks returns an API with tenant acme's token and two of its tasks on
// one endpoint.
func twoTasks(t *testing.T) (a *testAPI, tok, t1, t2 string) {
	t.Helper()
	a = newAPI(t, nil)
	tok = token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	t1 = a.createTask(tok, ep, "one", nil).JSON["id"].(string)
	t2 = a.createTask(tok, ep, "two", nil).JSON["id"].(string)
	return a, tok, t1, t2
}

// TestExecutionListByState: every state filter returns exactly that
// state's executions of the caller's tenant, newest first and page by page,
// whichever set it reads (unfinished_executions for pending and running;
// the rows with a next attempt for retrying; the rows with a last_error for
// failed, cancelled and skipped; the primary key for succeeded).
func TestExecutionListByState(t *testing.T) {
	t.Parallel()
	a, tok, t1, t2 := twoTasks(t)
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: token(t, "other")}) // creates the tenant
	day := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	want := map[string][]string{}
	n := 0
	for range 3 {
		for _, state := range []string{"pending", "running", "retrying", "succeeded", "failed", "cancelled", "skipped"} {
			n++
			task := t1
			if n%2 == 0 {
				task = t2
			}
			id := a.execution(execOpts{Tenant: "acme", TaskID: task, State: state, ScheduledFor: day.Add(time.Duration(n) * time.Minute)})
			want[state] = append([]string{id}, want[state]...) // newest first
			a.execution(execOpts{Tenant: "other", TaskID: service.NewID(), State: state, ScheduledFor: day})
		}
	}
	for state, ids := range want {
		var got []string
		path := "/v1/executions?limit=2&state=" + state
		for pages := 0; ; pages++ {
			require.Less(t, pages, 3, state)
			r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: tok})
			for _, item := range r.JSON["items"].([]any) {
				require.Equal(t, state, item.(map[string]any)["state"])
				got = append(got, item.(map[string]any)["id"].(string))
			}
			next, ok := r.JSON["next_cursor"].(string)
			if !ok {
				break
			}
			path = "/v1/executions?limit=2&state=" + state + "&cursor=" + next
		}
		require.Equal(t, ids, got, state)
		r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?state=" + state + "&task_id=" + t1, Token: tok})
		for _, item := range r.JSON["items"].([]any) {
			require.Equal(t, t1, item.(map[string]any)["task_id"], state)
		}
		require.NotEmpty(t, r.JSON["items"], state)
	}
}

func TestExecutionList(t *testing.T) {
	t.Parallel()
	a, tok, t1, t2 := twoTasks(t)
	day := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// Created in this order, so newest first is the reverse.
	e1 := a.execution(execOpts{Tenant: "acme", TaskID: t1, State: "succeeded", ScheduledFor: day})
	e2 := a.execution(execOpts{Tenant: "acme", TaskID: t1, State: "failed", ScheduledFor: day.Add(time.Hour)})
	e3 := a.execution(execOpts{Tenant: "acme", TaskID: t2, State: "failed", ScheduledFor: day.Add(2 * time.Hour)})
	e4 := a.execution(execOpts{Tenant: "acme", TaskID: t2, State: "pending", ScheduledFor: day.Add(3 * time.Hour)})
	e5 := a.execution(execOpts{Tenant: "acme", TaskID: t1, State: "skipped", ScheduledFor: day.Add(4 * time.Hour)})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: token(t, "other")}) // creates the tenant
	a.execution(execOpts{Tenant: "other", TaskID: service.NewID(), State: "failed", ScheduledFor: day})

	list := func(query string) []string {
		t.Helper()
		return ids(a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?" + query, Token: tok}))
	}
	ts := func(d time.Duration) string { return url.QueryEscape(day.Add(d).Format(time.RFC3339)) }
	require.Equal(t, []string{e5, e4, e3, e2, e1}, list(""))
	require.Equal(t, []string{e3, e2}, list("state=failed"), "the dead-letter view")
	require.Equal(t, []string{e5, e2, e1}, list("task_id="+t1))
	require.Equal(t, []string{e2}, list("task_id="+t1+"&state=failed"))
	require.Equal(t, []string{e5, e4, e3}, list("since="+ts(2*time.Hour)), "since is inclusive")
	require.Equal(t, []string{e2, e1}, list("until="+ts(2*time.Hour)), "until is exclusive")
	require.Equal(t, []string{e3, e2}, list("since="+ts(time.Hour)+"&until="+ts(3*time.Hour)))
	require.Equal(t, []string{e4}, list("since="+url.QueryEscape("2030-01-01T11:00:00+08:00")+"&state=pending"), "offsets are honoured")
	require.Empty(t, list("state=running"))
	require.Empty(t, list("task_id=01a228b6-0000-7000-8000-000000000000"))

	// Items carry no timeline.
	r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?limit=1", Token: tok})
	require.NotContains(t, r.JSON["items"].([]any)[0], "events")

	// Pagination walks every item once, newest first, with filters kept.
	var got []string
	path := "/v1/executions?limit=2"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: tok})
		got = append(got, ids(r)...)
		next, ok := r.JSON["next_cursor"].(string)
		if !ok {
			break
		}
		path = "/v1/executions?limit=2&cursor=" + next
	}
	require.Equal(t, []string{e5, e4, e3, e2, e1}, got)
	r = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?task_id=" + t1 + "&limit=2", Token: tok})
	require.Equal(t, []string{e5, e2}, ids(r))
	r = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?task_id=" + t1 + "&limit=2&cursor=" + r.JSON["next_cursor"].(string), Token: tok})
	require.Equal(t, []string{e1}, ids(r))
	require.NotContains(t, r.JSON, "next_cursor")

	cases := []struct {
		query string
		field string
	}{
		{"state=dead", "state"},
		{"task_id=nope", "task_id"},
		{"since=yesterday", "since"},
		{"until=2030-01-01", "until"},
		{"since=" + ts(time.Hour) + "&until=" + ts(0), "until"},
		{"since=" + ts(time.Hour) + "&until=" + ts(time.Hour), "until"},
		{"limit=0", "limit"},
		{"cursor=!!", "cursor"},
	}
	for _, tc := range cases {
		r := a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/executions?" + tc.query, Token: tok})
		require.Equal(t, []string{tc.field}, fieldErrors(r), tc.query)
	}
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/executions", Token: token(t, "acme", "tasks:read")})
}

func TestExecutionGet(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	task := a.createTask(tok, a.createEndpoint(tok, "e"), "t", nil).JSON["id"].(string)
	id := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'succeeded', attempts = 2, last_status_code = 200, last_error = 'timeout',
		last_error_class = 'timeout', started_at = now(), finished_at = now() WHERE id = $1`, id)
	a.exec(`INSERT INTO execution_events (tenant_id, execution_id, type, attempt, latency_ms, error_class, message)
		VALUES ('acme', $1, 'attempt_failed', 1, 10000, 'timeout', 'no response within 10s')`, id)
	a.exec(`INSERT INTO execution_events (tenant_id, execution_id, type, attempt, status_code, latency_ms)
		VALUES ('acme', $1, 'attempt_succeeded', 2, 200, 12)`, id)

	r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + id, Token: token(t, "acme", "executions:read")})
	require.Equal(t, id, r.JSON["id"])
	require.Equal(t, "succeeded", r.JSON["state"])
	require.EqualValues(t, 2, r.JSON["attempts"])
	require.EqualValues(t, 200, r.JSON["last_status_code"])
	require.Equal(t, "timeout", r.JSON["last_error"])
	require.Equal(t, "timeout", r.JSON["error_class"])
	require.NotEmpty(t, r.JSON["started_at"])
	require.NotEmpty(t, r.JSON["finished_at"])
	require.Equal(t, false, r.JSON["late"])
	require.NotContains(t, r.JSON, "cancel_requested")
	require.NotContains(t, r.JSON, "next_attempt_at")
	require.Equal(t, []string{"fired", "attempt_failed", "attempt_succeeded"}, eventTypes(r))
	evs := r.JSON["events"].([]any)
	require.Equal(t, map[string]any{
		"type": "attempt_failed", "at": evs[1].(map[string]any)["at"], "attempt": 1.0,
		"latency_ms": 10000.0, "error_class": "timeout", "message": "no response within 10s",
	}, evs[1])
	require.Equal(t, map[string]any{
		"type": "attempt_succeeded", "at": evs[2].(map[string]any)["at"], "attempt": 2.0,
		"status_code": 200.0, "latency_ms": 12.0,
	}, evs[2])

	// A retrying execution shows when its next attempt is due.
	a.exec(`UPDATE executions SET state = 'retrying', next_attempt_at = now() + interval '1 minute' WHERE id = $1`, id)
	r = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions/" + id, Token: tok})
	require.NotEmpty(t, r.JSON["next_attempt_at"])

	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/executions/01a228b6-0000-7000-8000-000000000000", Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/executions/nope", Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodGet, Path: "/v1/executions/" + id, Token: token(t, "other")})
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/executions/" + id, Token: token(t, "acme", "tasks:read")})
}

func TestExecutionCancel(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	task := a.createTask(tok, a.createEndpoint(tok, "e"), "t", nil).JSON["id"].(string)
	cancel := func(status int, id string) resp {
		t.Helper()
		return a.must(status, req{Method: http.MethodPost, Path: "/v1/executions/" + id + "/cancel", Token: tok})
	}

	// pending: cancelled at once, and so is its River job.
	pending := a.trigger(tok, task, nil).JSON["id"].(string)
	r := cancel(http.StatusOK, pending)
	require.Equal(t, "cancelled", r.JSON["state"])
	require.NotEmpty(t, r.JSON["finished_at"])
	require.Equal(t, []string{"fired", "cancelled"}, eventTypes(r))
	require.Equal(t, "cancelled through the API", r.JSON["last_error"], "a cancelled execution says why")
	jobs := a.jobs(pending)
	require.Len(t, jobs, 1)
	require.Equal(t, "cancelled", jobs[0].State)
	cancel(http.StatusConflict, pending)

	// retrying: its job waits for the next attempt; both are cancelled.
	retrying := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'retrying', attempts = 1, lease_attempt = 1, last_status_code = 503,
		last_error = 'HTTP 503', next_attempt_at = now() + interval '1 hour' WHERE id = $1`, retrying)
	a.exec(`UPDATE river_job SET state = 'retryable', attempt = 1, attempted_at = now(),
		scheduled_at = now() + interval '1 hour' WHERE args->>'execution_id' = $1`, retrying)
	r = cancel(http.StatusOK, retrying)
	require.Equal(t, "cancelled", r.JSON["state"])
	require.NotContains(t, r.JSON, "next_attempt_at")
	require.Equal(t, "HTTP 503", r.JSON["last_error"], "the last delivery error is kept")
	require.Equal(t, "cancelled", a.jobs(retrying)[0].State)

	// running: flagged; the worker finishes it as cancelled. River is asked
	// to cancel the running job. Idempotent.
	running := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'running', attempts = 1, lease_attempt = 1, started_at = now() WHERE id = $1`, running)
	a.exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE args->>'execution_id' = $1`, running)
	r = cancel(http.StatusAccepted, running)
	require.Equal(t, "running", r.JSON["state"])
	require.Equal(t, true, r.JSON["cancel_requested"])
	require.Equal(t, []string{"fired"}, eventTypes(r), "the worker records the outcome")
	jobs = a.jobs(running)
	require.Equal(t, "running", jobs[0].State)
	require.True(t, jobs[0].CancelAsked)
	r = cancel(http.StatusAccepted, running)
	require.Equal(t, true, r.JSON["cancel_requested"])

	// running, but its job completed without its outcome (lost in a
	// database crash): no worker will finish it, so it is cancelled now.
	stuck := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'running', attempts = 1, lease_attempt = 1, started_at = now() WHERE id = $1`, stuck)
	a.exec(`UPDATE river_job SET state = 'completed', attempt = 1, attempted_at = now(), finalized_at = now()
		WHERE args->>'execution_id' = $1`, stuck)
	r = cancel(http.StatusOK, stuck)
	require.Equal(t, "cancelled", r.JSON["state"])
	require.Contains(t, r.JSON["last_error"], "no job was delivering the execution")
	cancel(http.StatusConflict, stuck)

	// Finished executions cannot be cancelled.
	for _, state := range []string{"succeeded", "failed", "skipped"} {
		id := a.execution(execOpts{Tenant: "acme", TaskID: task, State: state})
		r := cancel(http.StatusConflict, id)
		require.Contains(t, r.JSON["detail"], state)
	}

	// A pending execution whose job River already cleaned up is cancelled
	// all the same.
	orphan := a.execution(execOpts{Tenant: "acme", TaskID: task})
	require.Equal(t, "cancelled", cancel(http.StatusOK, orphan).JSON["state"])

	cancel(http.StatusNotFound, "01a228b6-0000-7000-8000-000000000000")
	cancel(http.StatusNotFound, "nope")
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/executions/" + running + "/cancel",
		Token: token(t, "acme", "executions:read", "tasks:write"),
	})
}

func TestExecutionRetry(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	task := a.createTask(tok, a.createEndpoint(tok, "e"), "t", map[string]any{"priority": 1}).JSON["id"].(string)
	retry := func(status int, id string) resp {
		t.Helper()
		return a.must(status, req{Method: http.MethodPost, Path: "/v1/executions/" + id + "/retry", Token: tok})
	}

	// failed, its River job completed (which would block a new job with the
	// same args for 24 h): pending again, same id, a new job available now.
	failed := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'failed', attempts = 5, lease_attempt = 5, late = true, last_status_code = 500,
		last_error = 'HTTP 500', last_error_class = 'http_5xx', started_at = now(), finished_at = now() WHERE id = $1`, failed)
	a.exec(`UPDATE river_job SET state = 'completed', attempt = 5, attempted_at = now(), finalized_at = now()
		WHERE args->>'execution_id' = $1`, failed)
	r := retry(http.StatusAccepted, failed)
	require.Equal(t, failed, r.JSON["id"])
	require.Equal(t, "pending", r.JSON["state"])
	require.Equal(t, "manual", r.JSON["trigger"])
	require.EqualValues(t, 5, r.JSON["attempts"], "attempt numbers keep counting: the next is 6")
	require.Nil(t, r.JSON["last_status_code"])
	require.Nil(t, r.JSON["last_error"])
	require.NotContains(t, r.JSON, "error_class")
	require.Nil(t, r.JSON["started_at"])
	require.Nil(t, r.JSON["finished_at"])
	require.Equal(t, true, r.JSON["late"], "lateness describes the original fire")
	require.Equal(t, []string{"fired", "retried"}, eventTypes(r))
	require.Equal(t, map[string]any{"previous_state": "failed"}, r.JSON["events"].([]any)[1].(map[string]any)["data"])
	jobs := a.jobs(failed)
	require.Len(t, jobs, 1, "the completed job was deleted to free River's unique slot")
	require.Equal(t, "available", jobs[0].State)
	require.False(t, jobs[0].Scheduled)
	require.Equal(t, 1, jobs[0].Priority)
	var lease int
	var jobID int64
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT lease_attempt, river_job_id FROM executions WHERE id = $1", failed).Scan(&lease, &jobID))
	require.Zero(t, lease)
	require.Equal(t, jobs[0].ID, jobID)
	retry(http.StatusConflict, failed) // pending now

	// cancelled: its cancelled job stays as history; a new one is added.
	cancelled := a.trigger(tok, task, nil).JSON["id"].(string)
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/executions/" + cancelled + "/cancel", Token: tok})
	r = retry(http.StatusAccepted, cancelled)
	require.Equal(t, "pending", r.JSON["state"])
	require.Equal(t, []string{"fired", "cancelled", "retried"}, eventTypes(r))
	jobs = a.jobs(cancelled)
	require.Len(t, jobs, 2)
	require.Equal(t, []string{"cancelled", "available"}, []string{jobs[0].State, jobs[1].State})

	// A failed execution whose job is still queued (e.g. the worker gave up
	// but River will run it again): the old job is cancelled.
	queued := a.execution(execOpts{Tenant: "acme", TaskID: task, State: "failed"})
	a.exec(`INSERT INTO river_job (kind, args, queue, priority, max_attempts, state, scheduled_at)
		VALUES ('deliver', jsonb_build_object('tenant_id', 'acme', 'execution_id', $1::text), 'deliver', 1, 8,
		'retryable', now() + interval '1 hour')`, queued)
	retry(http.StatusAccepted, queued)
	jobs = a.jobs(queued)
	require.Equal(t, []string{"cancelled", "available"}, []string{jobs[0].State, jobs[1].State})

	// A failed execution whose previous job is still running: try later.
	finishing := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'failed', finished_at = now(), last_error = 'HTTP 500' WHERE id = $1`, finishing)
	a.exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE args->>'execution_id' = $1`, finishing)
	r = retry(http.StatusConflict, finishing)
	require.Contains(t, r.JSON["detail"], "still finishing")
	var state string
	require.NoError(t, a.pool.QueryRow(t.Context(), "SELECT state FROM executions WHERE id = $1", finishing).Scan(&state))
	require.Equal(t, "failed", state, "nothing changed")

	// Succeeded and skipped conflict (the slot was deliberately not fired).
	for _, s := range []string{"succeeded", "skipped"} {
		id := a.execution(execOpts{Tenant: "acme", TaskID: task, State: s})
		r := retry(http.StatusConflict, id)
		require.Contains(t, r.JSON["detail"], s)
	}
	// An unfinished execution no job carries (a fault left it) is resumed
	// by a new job, whatever its state.
	for _, s := range []string{"pending", "running", "retrying"} {
		id := a.execution(execOpts{Tenant: "acme", TaskID: task, State: s})
		r := retry(http.StatusAccepted, id)
		require.Equal(t, s, r.JSON["state"], "the new job's run decides")
		events := r.JSON["events"].([]any)
		last := events[len(events)-1].(map[string]any)
		require.Equal(t, "retried", last["type"])
		require.Contains(t, last["message"], "no job was delivering the execution")
		jobs := a.jobs(id)
		require.Len(t, jobs, 1)
		require.Equal(t, "available", jobs[0].State)
	}
	// Being delivered: a conflict.
	delivering := a.trigger(tok, task, nil).JSON["id"].(string)
	r = retry(http.StatusConflict, delivering)
	require.Contains(t, r.JSON["detail"], "being delivered")
	// Retrying with its next attempt scheduled: the attempt runs now.
	waiting := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'retrying', attempts = 1, lease_attempt = 1, next_attempt_at = now() + interval '1 hour',
		started_at = now(), first_started_at = now(), last_error = 'HTTP 503' WHERE id = $1`, waiting)
	a.exec(`UPDATE river_job SET state = 'retryable', attempt = 1, attempted_at = now(), scheduled_at = now() + interval '1 hour'
		WHERE args->>'execution_id' = $1`, waiting)
	r = retry(http.StatusAccepted, waiting)
	require.Equal(t, "retrying", r.JSON["state"])
	require.Equal(t, "available", a.jobs(waiting)[0].State)

	// A paused task: its scheduled executions wait for a resume (the
	// worker would cancel them); manual ones can be retried.
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: tok})
	scheduled := a.execution(execOpts{Tenant: "acme", TaskID: task, State: "failed"})
	r = retry(http.StatusConflict, scheduled)
	require.Contains(t, r.JSON["detail"], "paused")
	manual := a.trigger(tok, task, nil).JSON["id"].(string)
	a.exec(`UPDATE executions SET state = 'failed', last_error = 'HTTP 500' WHERE id = $1`, manual)
	a.exec(`UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE args->>'execution_id' = $1`, manual)
	retry(http.StatusAccepted, manual)
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/resume", Token: tok})
	retry(http.StatusAccepted, scheduled)

	// The task was deleted: nothing to deliver to.
	gone := a.execution(execOpts{Tenant: "acme", TaskID: task, State: "failed"})
	a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/tasks/" + task, Token: tok})
	r = retry(http.StatusConflict, gone)
	require.Contains(t, r.JSON["detail"], "deleted")
	require.Empty(t, a.jobs(gone))

	retry(http.StatusNotFound, "01a228b6-0000-7000-8000-000000000000")
	retry(http.StatusNotFound, "nope")
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/executions/" + failed + "/retry", Token: token(t, "other")})
	a.must(http.StatusForbidden, req{
		Method: http.MethodPost, Path: "/v1/executions/" + failed + "/retry",
		Token: token(t, "acme", "executions:read"),
	})
}

// TestTriggerOnDisabledEndpoint: a trigger of a task whose endpoint is
// disabled is a 409 naming the endpoint, and creates nothing (it was a 202
// and an execution cancelled at once).
func TestTriggerOnDisabledEndpoint(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	task := a.createTask(tok, ep, "t", nil).JSON["id"].(string)
	a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/endpoints/" + ep, Token: tok, Body: `{"enabled":false}`})
	r := a.must(http.StatusConflict, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/trigger", Token: tok})
	require.Contains(t, r.JSON["detail"], `"billing"`)
	require.Contains(t, r.JSON["detail"], ep)
	require.Contains(t, r.JSON["detail"], "disabled")
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?task_id=" + task, Token: tok})
	require.Empty(t, list.JSON["items"])
	// Enabled again, it fires.
	a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/endpoints/" + ep, Token: tok, Body: `{"enabled":true}`})
	a.trigger(tok, task, nil)
}
