package api_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBodiesMustBeValidUTF8: RFC 8259 requires UTF-8; a payload with
// invalid bytes would make the tenant's task list unparseable.
func TestBodiesMustBeValidUTF8(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	body := []byte(`{"name":"bad.utf8","endpoint_id":"` + ep + `","schedule":{"type":"interval","interval_seconds":60},"payload":"` + "\xff\xfe" + `"}`)
	r := a.must(http.StatusBadRequest, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Body: body})
	require.Contains(t, r.JSON["detail"], "UTF-8")
	list := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks", Token: tok})
	require.Empty(t, list.JSON["items"])
	a.must(http.StatusBadRequest, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: []byte(`{"name":"` + "\xc3" + `","url":"https://hooks.example.com/x"}`),
	})
}

// TestEmptyQueryValuesAreRefused: ?limit= and ?count= are not "absent".
func TestEmptyQueryValuesAreRefused(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	id := a.createTask(tok, ep, "t", nil).JSON["id"].(string)
	for _, p := range []string{
		"/v1/tasks?limit=", "/v1/endpoints?limit=", "/v1/executions?limit=", "/v1/audit?limit=",
		"/v1/tasks/" + id + "/preview?count=",
	} {
		r := a.must(http.StatusBadRequest, req{Method: http.MethodGet, Path: p, Token: tok})
		require.Contains(t, r.JSON["detail"], "empty", p)
	}
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks?limit=1", Token: tok})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks?cursor=", Token: tok}) // an empty cursor: the first page
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id + "/preview?count=2", Token: tok})
}

// TestNullBodiesAreRefused: a literal null is not an empty body.
func TestNullBodiesAreRefused(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	id := a.createTask(tok, ep, "t", nil).JSON["id"].(string)
	for _, p := range []string{"/v1/endpoints/" + ep + "/rotate-secret", "/v1/tasks/" + id + "/trigger", "/v1/tasks", "/v1/endpoints"} {
		r := a.must(http.StatusBadRequest, req{Method: http.MethodPost, Path: p, Token: tok, Body: " null "})
		require.Contains(t, r.JSON["detail"], "null", p)
	}
	a.must(http.StatusBadRequest, req{Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok, Body: "null"})
	// An absent body still means "no options".
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/endpoints/" + ep + "/rotate-secret", Token: tok})
	a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/trigger", Token: tok})
}

// TestNULCharactersAreRefused: Postgres text cannot hold U+0000; a NUL in a
// query parameter is a 400, in a body string a 422 naming the field; never a
// 500.
func TestNULCharactersAreRefused(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	for _, p := range []string{
		"/v1/tasks?label=a%00:b", "/v1/tasks?state=act%00ive", "/v1/executions?task_id=%00",
		"/v1/audit?resource_type=task%00", "/v1/tasks/%00",
	} {
		r := a.must(http.StatusBadRequest, req{Method: http.MethodGet, Path: p, Token: tok})
		require.Contains(t, r.JSON["detail"], "NUL", p)
	}
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: `{"name":"x\u0000y","url":"https://hooks.example.com/x"}`,
	})
	require.Equal(t, []string{"name"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: `{"name":"n","endpoint_id":"` + ep + `","schedule":{"type":"cron","cron":"0 2 * * *","timezone":"UTC\u0000"}}`,
	})
	require.Equal(t, []string{"schedule.timezone"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: `{"name":"n","endpoint_id":"` + ep + `","schedule":{"type":"interval","interval_seconds":60},"labels":{"k":"v\u0000"}}`,
	})
	require.Equal(t, []string{"labels.k"}, fieldErrors(r))
	// The payload is raw JSON stored as bytes: a \u0000 escape in it is fine.
	a.createTask(tok, ep, "nul.payload", map[string]any{"payload": map[string]any{"s": "a\x00b"}})
}

func TestEndpointURLPortRange(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	for _, u := range []string{"http://example.com:99999/", "http://example.com:0/", "https://example.com:65536/x"} {
		r := a.must(http.StatusUnprocessableEntity, req{
			Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
			Body: map[string]any{"name": "p", "url": u},
		})
		require.Equal(t, []string{"url"}, fieldErrors(r), u)
	}
	a.must(http.StatusCreated, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: map[string]any{"name": "p", "url": "https://example.com:65535/x"},
	})
}

// TestPriorityZeroIsOutOfRange: 0 is refused like 5; absent or null takes 2.
func TestPriorityZeroIsOutOfRange(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	for _, p := range []int{0, -1, 5} {
		r := a.must(http.StatusUnprocessableEntity, req{
			Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
			Body: map[string]any{"name": "p", "endpoint_id": ep, "priority": p, "schedule": map[string]any{"type": "interval", "interval_seconds": 60}},
		})
		require.Equal(t, []string{"priority"}, fieldErrors(r), "priority %d", p)
	}
	id := a.createTask(tok, ep, "p", map[string]any{"priority": nil}).JSON["id"].(string)
	r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id, Token: tok})
	require.EqualValues(t, 2, r.JSON["priority"])
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok, Body: `{"priority":0}`})
	r = a.must(http.StatusOK, req{Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok, Body: `{"priority":4}`})
	require.EqualValues(t, 4, r.JSON["priority"])
}

// TestOnceRunAtInThePast: a run_at older than the misfire threshold is
// refused; one just past (a client's clock a little behind) is accepted.
func TestOnceRunAtInThePast(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{"name": "late", "endpoint_id": ep, "schedule": map[string]any{"type": "once", "run_at": past}},
	})
	require.Equal(t, []string{"schedule.run_at"}, fieldErrors(r))
	id := a.createTask(tok, ep, "soon", map[string]any{"schedule": map[string]any{
		"type":   "once",
		"run_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano),
	}}).JSON["id"].(string)
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: map[string]any{"schedule": map[string]any{"type": "once", "run_at": past}},
	})
	require.Equal(t, []string{"schedule.run_at"}, fieldErrors(r))
}

// TestUnknownQueryParameters: a misspelt or unsupported filter is a 400
// that names it, not a silent "everything"; name is a real prefix filter.
func TestUnknownQueryParameters(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	a.createTask(tok, ep, "order.reconcile.daily", nil)
	a.createTask(tok, ep, "order.export", nil)
	a.createTask(tok, ep, "billing.run", nil)
	a.createTask(tok, ep, "订单.对账.每日", nil)
	r := a.must(http.StatusBadRequest, req{Method: http.MethodGet, Path: "/v1/tasks?nme=x&stat=active", Token: tok})
	require.Contains(t, r.JSON["detail"], `"nme"`)
	require.Contains(t, r.JSON["detail"], `"stat"`)
	r = a.must(http.StatusBadRequest, req{Method: http.MethodGet, Path: "/v1/endpoints/" + ep + "?verbose=1", Token: tok})
	require.Contains(t, r.JSON["detail"], `"verbose"`)
	a.must(http.StatusBadRequest, req{Method: http.MethodPost, Path: "/v1/endpoints/" + ep + "/rotate-secret?force=1", Token: tok})
	names := func(path string) []string {
		var out []string
		for _, it := range a.must(http.StatusOK, req{Method: http.MethodGet, Path: path, Token: tok}).JSON["items"].([]any) {
			out = append(out, it.(map[string]any)["name"].(string))
		}
		return out
	}
	require.ElementsMatch(t, []string{"order.reconcile.daily", "order.export"}, names("/v1/tasks?name=order."))
	require.Equal(t, []string{"order.export"}, names("/v1/tasks?name=order.e&limit=5"))
	require.Equal(t, []string{"订单.对账.每日"}, names("/v1/tasks?name="+url.QueryEscape("订单.")))
	require.Empty(t, names("/v1/tasks?name=x"))
	require.Len(t, names("/v1/tasks?name="), 4, "an empty prefix matches every name")
	require.Empty(t, names("/v1/tasks?name=%25"), "% is not a wildcard")
}

// TestNestedUnknownFieldHasItsPath.
func TestNestedUnknownFieldHasItsPath(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	r := a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{"name": "n", "endpoint_id": ep, "schedule": map[string]any{"type": "interval", "delay_seconds": 5}},
	})
	require.Equal(t, []string{"schedule.delay_seconds"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{
			"name": "n", "endpoint_id": ep, "schedule": map[string]any{"type": "interval", "interval_seconds": 5},
			"retry": map[string]any{"attempts": 3},
		},
	})
	require.Equal(t, []string{"retry.attempts"}, fieldErrors(r))
	id := a.createTask(tok, ep, "t", nil).JSON["id"].(string)
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + id, Token: tok,
		Body: `{"schedule":{"type":"interval","interval_seconds":5,"jitter":1}}`,
	})
	require.Equal(t, []string{"schedule.jitter"}, fieldErrors(r))
	r = a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{"name": "n", "endpoint_id": ep, "schedule": map[string]any{"type": "interval", "interval_seconds": 5}, "colour": "red"},
	})
	require.Equal(t, []string{"colour"}, fieldErrors(r))
}

// TestDeleteEndpointInUseNamesTasks: the 409 names up to 10 tasks and the count.
func TestDeleteEndpointInUseNamesTasks(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	other := a.createEndpoint(tok, "o")
	first := a.createTask(tok, ep, "a.first", nil).JSON["id"].(string)
	r := a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + ep, Token: tok})
	require.Contains(t, r.JSON["detail"], "used by 1 task ")
	require.Contains(t, r.JSON["detail"], "a.first ("+first+")")
	for i := range 11 {
		a.createTask(tok, ep, "b.task"+string(rune('a'+i)), nil)
	}
	a.createTask(tok, other, "c.alerting", map[string]any{"alert_endpoint_id": ep})
	r = a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + ep, Token: tok})
	detail := r.JSON["detail"].(string)
	require.Contains(t, detail, "used by 13 tasks")
	require.Contains(t, detail, "and 3 more")
	require.Len(t, regexp.MustCompile(`\([0-9a-f-]{36}\)`).FindAllString(detail, -1), 10, detail)
}

// TestPausedTaskShowsWhatWillHappen: no next_run_at while paused, and the
// fires queued ahead are not left pending.
func TestPausedTaskShowsWhatWillHappen(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	id := a.createTask(tok, ep, "every.second", map[string]any{"schedule": map[string]any{"type": "interval", "interval_seconds": 1}}).JSON["id"].(string)
	// A fire queued for a slot ahead, as the scheduler materialises them.
	a.execution(execOpts{Tenant: "acme", TaskID: id, ScheduledFor: time.Now().Add(10 * time.Second)})
	p := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/pause", Token: tok})
	require.Nil(t, p.JSON["next_run_at"])
	g := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + id, Token: tok})
	require.Nil(t, g.JSON["next_run_at"])
	x := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?task_id=" + id + "&state=pending", Token: tok})
	require.Empty(t, x.JSON["items"], "nothing pending that will not fire")
	x = a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/executions?task_id=" + id + "&state=cancelled", Token: tok})
	require.Len(t, x.JSON["items"], 1)
	rsm := a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + id + "/resume", Token: tok})
	require.NotNil(t, rsm.JSON["next_run_at"])
}

// TestUnicodeTaskNames: letters and digits of any script, same shape.
func TestUnicodeTaskNames(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "e")
	for _, n := range []string{"订单.对账.每日", "заказ.сверка", "commande.réconciliation", "٣.x"} {
		r := a.createTask(tok, ep, n, nil)
		require.Equal(t, n, r.JSON["name"])
	}
	for _, n := range []string{"Order.daily", ".x", "a b", "a/b", "😀.x", strings.Repeat("订", 129)} {
		r := a.must(http.StatusUnprocessableEntity, req{
			Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
			Body: map[string]any{"name": n, "endpoint_id": ep, "schedule": map[string]any{"type": "interval", "interval_seconds": 60}},
		})
		require.Equal(t, []string{"name"}, fieldErrors(r), n)
	}
}
