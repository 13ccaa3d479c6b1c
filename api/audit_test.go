package api_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// auditCase exercises one write route successfully. run makes what the
// route needs (through the API) and sends the request; the case then
// requires an audit record with the request's X-Request-Id.
type auditCase struct {
	// run sends the request and returns its response with the resource the
	// record must name.
	run func(a *testAPI, tok string) (r resp, resourceID string)
	// status is the success status of the route.
	status       int
	action       string
	resourceType string
	// operator: the route is an operator's; its record names the operator
	// token's subject, marked operator, in the tenant's log.
	operator bool
}

// auditCases covers every write route by its echo path. A route added
// without a case fails TestEveryWriteRouteIsAudited: add its case here,
// and its audit call to the service method.
var auditCases = map[string]auditCase{
	"POST /v1/workflows": {
		status: http.StatusCreated, action: "create", resourceType: "workflow",
		run: func(a *testAPI, tok string) (resp, string) {
			ep := a.createEndpoint(tok, "for-wf-created")
			r := a.must(http.StatusCreated, req{
				Method: http.MethodPost, Path: "/v1/workflows", Token: tok,
				Body: map[string]any{"name": "wf-created", "nodes": []any{map[string]any{"key": "a", "endpoint_id": ep}}},
			})
			return r, r.JSON["id"].(string)
		},
	},
	"PATCH /v1/workflows/:id": {
		status: http.StatusOK, action: "update", resourceType: "workflow",
		run: func(a *testAPI, tok string) (resp, string) {
			id := a.createWorkflow(tok, "wf-patched")
			return a.must(http.StatusOK, req{
				Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
				Body: map[string]any{"max_active_runs": 2},
			}), id
		},
	},
	"DELETE /v1/workflows/:id": {
		status: http.StatusNoContent, action: "delete", resourceType: "workflow",
		run: func(a *testAPI, tok string) (resp, string) {
			id := a.createWorkflow(tok, "wf-deleted")
			return a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/workflows/" + id, Token: tok}), id
		},
	},
	"POST /v1/workflows/:id/pause": {
		status: http.StatusOK, action: "pause", resourceType: "workflow",
		run: func(a *testAPI, tok string) (resp, string) {
			id := a.createWorkflow(tok, "wf-paused")
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/pause", Token: tok}), id
		},
	},
	"POST /v1/workflows/:id/resume": {
		status: http.StatusOK, action: "resume", resourceType: "workflow",
		run: func(a *testAPI, tok string) (resp, string) {
			id := a.createWorkflow(tok, "wf-resumed")
			a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/pause", Token: tok})
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/resume", Token: tok}), id
		},
	},
	"POST /v1/workflows/:id/trigger": {
		status: http.StatusAccepted, action: "trigger", resourceType: "workflow",
		run: func(a *testAPI, tok string) (resp, string) {
			id := a.createWorkflow(tok, "wf-triggered")
			return a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/workflows/" + id + "/trigger", Token: tok}), id
		},
	},
	"POST /v1/workflows/:id/backfill": {
		status: http.StatusAccepted, action: "backfill", resourceType: "workflow",
		run: func(a *testAPI, tok string) (resp, string) {
			id := a.createWorkflow(tok, "wf-backfilled")
			a.must(http.StatusOK, req{
				Method: http.MethodPatch, Path: "/v1/workflows/" + id, Token: tok,
				Body: map[string]any{"schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"}},
			})
			return a.must(http.StatusAccepted, req{
				Method: http.MethodPost, Path: "/v1/workflows/" + id + "/backfill", Token: tok,
				Body: map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z"},
			}), id
		},
	},
	"POST /v1/workflow-runs/:id/cancel": {
		status: http.StatusOK, action: "cancel", resourceType: "workflow_run",
		run: func(a *testAPI, tok string) (resp, string) {
			run := a.triggerWorkflow(tok, a.createWorkflow(tok, "wf-run-cancelled"))
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/workflow-runs/" + run + "/cancel", Token: tok}), run
		},
	},
	"POST /v1/workflow-runs/:id/nodes/:key/run": {
		status: http.StatusOK, action: "trigger", resourceType: "workflow_run",
		run: func(a *testAPI, tok string) (resp, string) {
			run := a.triggerWorkflow(tok, a.createWorkflow(tok, "wf-node-run"))
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/workflow-runs/" + run + "/nodes/b/run", Token: tok}), run
		},
	},
	"POST /v1/workflow-runs/:id/nodes/:key/skip": {
		status: http.StatusOK, action: "skip", resourceType: "workflow_run",
		run: func(a *testAPI, tok string) (resp, string) {
			run := a.triggerWorkflow(tok, a.createWorkflow(tok, "wf-node-skip"))
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/workflow-runs/" + run + "/nodes/b/skip", Token: tok}), run
		},
	},
	"PUT /v1/admin/tenants/:tenant/limits": {
		status: http.StatusOK, action: "set_limits", resourceType: "limits", operator: true,
		run: func(a *testAPI, tok string) (resp, string) {
			tenant := "audit-put--v1-admin-tenants-tenant-limits"
			a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/me", Token: tok}) // the tenant's first request creates it
			return a.must(http.StatusOK, req{
				Method: http.MethodPut, Path: "/v1/admin/tenants/" + tenant + "/limits",
				Token: operatorToken(a.t), Body: map[string]any{"max_tasks": 10},
			}), tenant
		},
	},
	"POST /v1/endpoints": {
		status: http.StatusCreated, action: "create", resourceType: "endpoint",
		run: func(a *testAPI, tok string) (resp, string) {
			r := a.must(http.StatusCreated, req{
				Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
				Body: map[string]any{"name": "created", "url": "https://hooks.example.com/x"},
			})
			return r, r.JSON["id"].(string)
		},
	},
	"PATCH /v1/endpoints/:id": {
		status: http.StatusOK, action: "update", resourceType: "endpoint",
		run: func(a *testAPI, tok string) (resp, string) {
			ep := a.createEndpoint(tok, "patched")
			return a.must(http.StatusOK, req{
				Method: http.MethodPatch, Path: "/v1/endpoints/" + ep, Token: tok,
				Body: map[string]any{"timeout_ms": 5000},
			}), ep
		},
	},
	"DELETE /v1/endpoints/:id": {
		status: http.StatusNoContent, action: "delete", resourceType: "endpoint",
		run: func(a *testAPI, tok string) (resp, string) {
			ep := a.createEndpoint(tok, "deleted")
			return a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + ep, Token: tok}), ep
		},
	},
	"POST /v1/endpoints/:id/rotate-secret": {
		status: http.StatusOK, action: "rotate_secret", resourceType: "endpoint",
		run: func(a *testAPI, tok string) (resp, string) {
			ep := a.createEndpoint(tok, "rotated")
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/endpoints/" + ep + "/rotate-secret", Token: tok}), ep
		},
	},
	"POST /v1/endpoints/:id/test": {
		status: http.StatusOK, action: "test", resourceType: "endpoint",
		run: func(a *testAPI, tok string) (resp, string) {
			ep := a.createEndpoint(tok, "tested")
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/endpoints/" + ep + "/test", Token: tok}), ep
		},
	},
	"POST /v1/executions/retry": {
		status: http.StatusAccepted, action: "retry", resourceType: "execution",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-bulk-retry"), "bulk-retried", nil).JSON["id"].(string)
			slot := time.Now().Add(-time.Hour)
			x := a.execution(execOpts{Tenant: "audit-post--v1-executions-retry", TaskID: task, State: "failed", ScheduledFor: slot})
			return a.must(http.StatusAccepted, req{
				Method: http.MethodPost, Path: "/v1/executions/retry", Token: tok,
				Body: map[string]any{
					"state": "failed", "task_id": task, "from": slot.Add(-time.Minute).Format(time.RFC3339),
					"to": slot.Add(time.Minute).Format(time.RFC3339),
				},
			}), x
		},
	},
	"POST /v1/tasks": {
		status: http.StatusCreated, action: "create", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			r := a.createTask(tok, a.createEndpoint(tok, "for-create"), "created", nil)
			return r, r.JSON["id"].(string)
		},
	},
	"PATCH /v1/tasks/:id": {
		status: http.StatusOK, action: "update", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-patch"), "patched", nil).JSON["id"].(string)
			return a.must(http.StatusOK, req{
				Method: http.MethodPatch, Path: "/v1/tasks/" + task, Token: tok,
				Body: map[string]any{"priority": 1},
			}), task
		},
	},
	"DELETE /v1/tasks/:id": {
		status: http.StatusNoContent, action: "delete", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-delete"), "deleted", nil).JSON["id"].(string)
			return a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/tasks/" + task, Token: tok}), task
		},
	},
	"POST /v1/tasks/:id/pause": {
		status: http.StatusOK, action: "pause", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-pause"), "paused", nil).JSON["id"].(string)
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: tok}), task
		},
	},
	"POST /v1/tasks/:id/resume": {
		status: http.StatusOK, action: "resume", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-resume"), "resumed", nil).JSON["id"].(string)
			a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: tok})
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/resume", Token: tok}), task
		},
	},
	"POST /v1/tasks/:id/trigger": {
		status: http.StatusAccepted, action: "trigger", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-trigger"), "triggered", nil).JSON["id"].(string)
			return a.trigger(tok, task, nil), task
		},
	},
	"POST /v1/executions/:id/cancel": {
		status: http.StatusOK, action: "cancel", resourceType: "execution",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-cancel"), "cancelled", nil).JSON["id"].(string)
			x := a.trigger(tok, task, nil).JSON["id"].(string)
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/cancel", Token: tok}), x
		},
	},
	"POST /v1/executions/:id/complete": {
		status: http.StatusOK, action: "update", resourceType: "execution",
		run: func(a *testAPI, tok string) (resp, string) {
			x, _ := a.waitingExecution(tok)
			return a.must(http.StatusOK, req{
				Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: tok,
				Body: map[string]any{"status": "succeeded"},
			}), x
		},
	},
	"POST /v1/executions/:id/retry": {
		status: http.StatusAccepted, action: "retry", resourceType: "execution",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-retry"), "retried", nil).JSON["id"].(string)
			x := a.trigger(tok, task, nil).JSON["id"].(string)
			a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/cancel", Token: tok})
			return a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/retry", Token: tok}), x
		},
	},
	"POST /v1/executions/:id/hold": {
		status: http.StatusOK, action: "hold", resourceType: "execution",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-hold"), "held", nil).JSON["id"].(string)
			x := a.trigger(tok, task, nil).JSON["id"].(string)
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/hold", Token: tok}), x
		},
	},
	"POST /v1/executions/:id/release": {
		status: http.StatusAccepted, action: "release", resourceType: "execution",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-release"), "released", nil).JSON["id"].(string)
			x := a.trigger(tok, task, nil).JSON["id"].(string)
			a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/hold", Token: tok})
			return a.must(http.StatusAccepted, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/release", Token: tok}), x
		},
	},
	"POST /v1/tasks/:id/skip": {
		status: http.StatusOK, action: "skip", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-skip"), "skipped", map[string]any{
				"schedule": map[string]any{"type": "cron", "cron": "0 2 * * *"},
			}).JSON["id"].(string)
			slot := time.Now().UTC().Truncate(24 * time.Hour).Add(50 * time.Hour).Format(time.RFC3339)
			return a.must(http.StatusOK, req{
				Method: http.MethodPost, Path: "/v1/tasks/" + task + "/skip", Token: tok,
				Body: map[string]any{"scheduled_for": slot},
			}), task
		},
	},
	"POST /v1/tasks/:id/backfill": {
		status: http.StatusAccepted, action: "backfill", resourceType: "task",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-backfill"), "backfilled", nil).JSON["id"].(string)
			return a.must(http.StatusAccepted, req{
				Method: http.MethodPost, Path: "/v1/tasks/" + task + "/backfill", Token: tok,
				Body: map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z"},
			}), task
		},
	},
	"POST /v1/backfills/:id/cancel": {
		status: http.StatusOK, action: "cancel", resourceType: "backfill",
		run: func(a *testAPI, tok string) (resp, string) {
			task := a.createTask(tok, a.createEndpoint(tok, "for-bf-cancel"), "bf-cancelled", nil).JSON["id"].(string)
			b := a.must(http.StatusAccepted, req{
				Method: http.MethodPost, Path: "/v1/tasks/" + task + "/backfill", Token: tok,
				Body: map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-03T00:00:00Z"},
			}).JSON["id"].(string)
			return a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/backfills/" + b + "/cancel", Token: tok}), b
		},
	},
	"POST /v1/calendars": {
		status: http.StatusCreated, action: "create", resourceType: "calendar",
		run: func(a *testAPI, tok string) (resp, string) {
			r := a.must(http.StatusCreated, req{
				Method: http.MethodPost, Path: "/v1/calendars", Token: tok,
				Body: map[string]any{"name": "created", "dates": []string{"2027-01-01"}},
			})
			return r, r.JSON["id"].(string)
		},
	},
	"PATCH /v1/calendars/:id": {
		status: http.StatusOK, action: "update", resourceType: "calendar",
		run: func(a *testAPI, tok string) (resp, string) {
			c := a.must(http.StatusCreated, req{
				Method: http.MethodPost, Path: "/v1/calendars", Token: tok,
				Body: map[string]any{"name": "patched", "dates": []string{"2027-01-01"}},
			}).JSON["id"].(string)
			return a.must(http.StatusOK, req{
				Method: http.MethodPatch, Path: "/v1/calendars/" + c, Token: tok,
				Body: map[string]any{"dates": []string{"2027-01-02"}},
			}), c
		},
	},
	"DELETE /v1/calendars/:id": {
		status: http.StatusNoContent, action: "delete", resourceType: "calendar",
		run: func(a *testAPI, tok string) (resp, string) {
			c := a.must(http.StatusCreated, req{
				Method: http.MethodPost, Path: "/v1/calendars", Token: tok,
				Body: map[string]any{"name": "deleted", "dates": []string{}},
			}).JSON["id"].(string)
			return a.must(http.StatusNoContent, req{Method: http.MethodDelete, Path: "/v1/calendars/" + c, Token: tok}), c
		},
	},
}

// auditActions is the contract's list of audit actions: a record's action
// is one of these, whatever the route.
var auditActions = []string{
	"create", "update", "delete", "pause", "resume", "trigger", "skip", "backfill", "cancel",
	"retry", "rotate_secret", "set_limits", "test", "hold", "release",
}

// notChanges are write routes that change no resource, each with the
// reason.
var notChanges = map[string]string{
	"POST /v1/events": "an event is a record of its own (GET /v1/events/{id}, with what it fired), kept by retention " +
		"as executions are; the executions and runs it fires are on their own timelines, not changes of configuration",
	"POST /v1/tasks/:id/render": "a read: it renders what a slot would send and sends, stores and changes nothing",
	"POST /v1/executions/:id/heartbeat": "a receiver's liveness report: it moves its attempt's heartbeat deadline and " +
		"keeps its progress, not a change of any resource's configuration or state (one record per heartbeat of every " +
		"waiting execution would drown the log); the completion that ends the wait is audited",
}

// auditEntries returns the audit records the API lists for tok's tenant
// with query (url-encoded filters), all pages.
func (a *testAPI) auditEntries(tok string, query url.Values) []map[string]any {
	a.t.Helper()
	var out []map[string]any
	for {
		r := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit?" + query.Encode(), Token: tok})
		for _, it := range r.JSON["items"].([]any) {
			out = append(out, it.(map[string]any))
		}
		next, _ := r.JSON["next_cursor"].(string)
		if next == "" {
			return out
		}
		query.Set("cursor", next)
	}
}

// TestEveryWriteRouteIsAudited enumerates the router's write routes under
// /v1/ (POST, PUT, PATCH, DELETE) and requires each, exercised
// successfully, to leave one audit record naming the tenant, the token's
// subject (and whether it is an operator's), the action, the resource and
// the response's X-Request-Id.
func TestEveryWriteRouteIsAudited(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	var routes []string
	for _, r := range a.e.Routes() {
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue
		}
		if !strings.HasPrefix(r.Path, "/v1/") {
			continue
		}
		key := r.Method + " " + r.Path
		if _, ok := notChanges[key]; ok || slices.Contains(routes, key) {
			continue
		}
		routes = append(routes, key)
	}
	require.GreaterOrEqual(t, len(routes), len(auditCases), "the router lists the write routes")
	for _, route := range routes {
		c, ok := auditCases[route]
		if !assertAuditCase(t, ok, route) {
			continue
		}
		t.Run(route, func(t *testing.T) {
			a := &testAPI{t: t, pool: a.pool, srv: a.srv, e: a.e}
			tenant := "audit-" + strings.NewReplacer(" ", "-", "/", "-", ":", "").Replace(strings.ToLower(route))
			tok := token(t, tenant)
			r, resourceID := c.run(a, tok)
			require.Equal(t, c.status, r.Status)
			requestID := r.Header.Get("X-Request-Id")
			require.NotEmpty(t, requestID)
			var matched []map[string]any
			for _, e := range a.auditEntries(tok, url.Values{"resource_type": {c.resourceType}, "resource_id": {resourceID}}) {
				if e["request_id"] == requestID {
					matched = append(matched, e)
				}
			}
			require.Len(t, matched, 1, "%s: one audit record with the request's id", route)
			e := matched[0]
			require.Equal(t, tenant, e["tenant"])
			if c.operator {
				require.Equal(t, operatorSubject, e["subject"], "the operator token's sub")
				require.Equal(t, true, e["operator"], "marked as an operator's change")
			} else {
				require.Equal(t, "test", e["subject"], "the token's sub")
				require.Equal(t, false, e["operator"], "the tenant's own change")
			}
			require.Equal(t, c.action, e["action"])
			require.Contains(t, auditActions, c.action, "the contract's action list is binding")
			require.Equal(t, c.resourceType, e["resource_type"])
			require.Equal(t, resourceID, e["resource_id"])
			require.NotEmpty(t, e["id"])
			require.NotEmpty(t, e["at"])
		})
	}
	for route := range auditCases {
		require.Contains(t, routes, route, "a case for a route the router does not have")
	}
}

func assertAuditCase(t *testing.T, ok bool, route string) bool {
	t.Helper()
	if !ok {
		t.Errorf("write route %s has no case in auditCases: record its changes (recordAudit in the service "+
			"method's transaction) and add a case, or list it in notChanges with the reason", route)
	}
	return ok
}

// TestAuditRecordsTheChanges: what a record's changes say for a create, an
// update (old → new) and a state change; and the list's filters.
func TestAuditRecordsTheChanges(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	task := a.createTask(tok, ep, "daily", map[string]any{"labels": map[string]any{"team": "x"}}).JSON["id"].(string)
	a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + task, Token: tok,
		Body: map[string]any{"priority": 1, "labels": map[string]any{"team": "y"}},
	})
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: tok})

	entries := a.auditEntries(tok, url.Values{"resource_type": {"task"}, "resource_id": {task}})
	require.Len(t, entries, 3)
	pause, update, create := entries[0], entries[1], entries[2] // newest first
	require.Equal(t, "create", create["action"])
	created := create["changes"].(map[string]any)
	require.Equal(t, "daily", created["name"])
	require.Equal(t, ep, created["endpoint_id"])
	require.Equal(t, map[string]any{"team": "x"}, created["labels"])
	schedule := created["schedule"].(map[string]any)
	require.Equal(t, "cron", schedule["type"])
	require.Equal(t, "0 2 * * *", schedule["cron"])
	require.Equal(t, "Asia/Shanghai", schedule["timezone"])
	require.EqualValues(t, 2, created["payload"].(map[string]any)["bytes"], "the payload by its size and digest")

	require.Equal(t, "update", update["action"])
	require.Equal(t, map[string]any{
		"priority": map[string]any{"old": 2.0, "new": 1.0},
		"labels":   map[string]any{"old": map[string]any{"team": "x"}, "new": map[string]any{"team": "y"}},
	}, update["changes"], "only the changed fields, old and new")
	require.Equal(t, "pause", pause["action"])
	require.Equal(t, map[string]any{"state": map[string]any{"old": "active", "new": "paused"}}, pause["changes"])

	// Filters: by type, by time; another tenant sees none of it.
	require.Len(t, a.auditEntries(tok, url.Values{"resource_type": {"endpoint"}}), 1)
	require.Len(t, a.auditEntries(tok, nil), 4)
	require.Len(t, a.auditEntries(tok, url.Values{"limit": {"1"}}), 4, "pages of one, through the cursor")
	require.Len(t, a.auditEntries(tok, url.Values{"since": {pause["at"].(string)}}), 1)
	require.Len(t, a.auditEntries(tok, url.Values{"until": {pause["at"].(string)}}), 3)
	require.Empty(t, a.auditEntries(token(t, "other"), nil))
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/audit?since=yesterday", Token: tok})
	a.must(http.StatusUnprocessableEntity, req{Method: http.MethodGet, Path: "/v1/audit?cursor=nope", Token: tok})

	// Scope audit:read or admin.
	a.must(http.StatusForbidden, req{Method: http.MethodGet, Path: "/v1/audit", Token: token(t, "acme", "tasks:read")})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit", Token: token(t, "acme", "audit:read")})
	a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit", Token: token(t, "acme", "admin")})
}

// TestAuditHoldsNoSecret: the signing secret given or generated on
// create, the one given to rotate-secret, credentials in header values and
// in the URL's query appear in no audit record, while the record says
// what changed.
func TestAuditHoldsNoSecret(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "acme")
	const (
		given   = "whsec_YXVkaXQtdGVzdC1naXZlbi1zZWNyZXQtMzItYnl0ZXM="
		rotated = "whsec_YXVkaXQtdGVzdC1yb3RhdGVkLXNlY3JldC0zMmJ5dGU="
		bearer  = "Bearer tok-live-1c5a8f"
		bearer2 = "Bearer tok-live-9d0e2b"
		query   = "qs-token-77aa31"
	)
	r := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: map[string]any{
		"name": "billing", "url": "https://hooks.example.com/ax?token=" + query + "&env=prod", "secret": given,
		"headers": map[string]any{"Authorization": bearer},
	}})
	ep := r.JSON["id"].(string)
	r = a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/endpoints", Token: tok, Body: map[string]any{
		"name": "generated", "url": "https://hooks.example.com/gen",
	}})
	generated := r.JSON["secret"].(string)
	require.NotEmpty(t, generated)
	r = a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/endpoints/" + ep + "/rotate-secret", Token: tok})
	rotatedGenerated := r.JSON["secret"].(string)
	a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/endpoints/" + ep + "/rotate-secret", Token: tok,
		Body: map[string]any{"secret": rotated},
	})
	a.must(http.StatusOK, req{
		Method: http.MethodPatch, Path: "/v1/endpoints/" + ep, Token: tok,
		Body: map[string]any{"headers": map[string]any{"Authorization": bearer2}},
	})

	entries := a.auditEntries(tok, url.Values{"resource_id": {ep}})
	require.Len(t, entries, 4)
	raw := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit", Token: tok}).Raw
	var stored string
	require.NoError(t, a.pool.QueryRow(context.Background(),
		`SELECT string_agg(changes::text, ' ') FROM audit_log WHERE tenant_id = 'acme'`).Scan(&stored))
	for _, secret := range []string{given, generated, rotatedGenerated, rotated, bearer, bearer2, "tok-live", query} {
		key := strings.TrimPrefix(secret, "whsec_") // the key itself, as base64
		require.NotContains(t, string(raw), key, "the audit list holds no secret")
		require.NotContains(t, stored, key, "the audit table holds no secret")
	}

	patch, rotation, create := entries[0], entries[1], entries[3]
	created := create["changes"].(map[string]any)
	require.Equal(t, "redacted", created["secret"])
	require.Equal(t, map[string]any{"Authorization": "redacted"}, created["headers"])
	require.Equal(t, "https://hooks.example.com/ax?env=redacted&token=redacted", created["url"])
	require.Equal(t, "rotate_secret", rotation["action"])
	require.Equal(t, map[string]any{"secret": map[string]any{"old": "redacted", "new": "redacted"}}, rotation["changes"])
	require.Equal(t, map[string]any{"headers": map[string]any{
		"old": map[string]any{"Authorization": "redacted"}, "new": map[string]any{"Authorization": "redacted"},
	}}, patch["changes"], "a changed header value is a change, both values redacted")
}

// TestAuditIsInTheChangesTransaction: a refused change leaves no record;
// a change whose record cannot be written is not made; a create with an
// Idempotency-Key is recorded once, and its replay not at all.
func TestAuditIsInTheChangesTransaction(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	ctx := context.Background()
	tok := token(t, "acme")
	ep := a.createEndpoint(tok, "billing")
	task := a.createTask(tok, ep, "daily", nil).JSON["id"].(string)
	records := func() int {
		var n int
		require.NoError(t, a.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n))
		return n
	}
	before := records()

	// Refused: validation, a duplicate name (the insert fails in the
	// transaction), an endpoint in use, an illegal transition, another
	// tenant's resource.
	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{"name": "Bad Name", "endpoint_id": ep},
	})
	a.must(http.StatusConflict, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Body: map[string]any{"name": "daily", "endpoint_id": ep, "schedule": map[string]any{"type": "cron", "cron": "0 3 * * *"}},
	})
	a.must(http.StatusConflict, req{
		Method: http.MethodPatch, Path: "/v1/tasks/" + a.createTask(tok, ep, "second", nil).JSON["id"].(string),
		Token: tok, Body: map[string]any{"name": "daily"},
	})
	before++ // the second task's create
	a.must(http.StatusConflict, req{Method: http.MethodDelete, Path: "/v1/endpoints/" + ep, Token: tok})
	x := a.trigger(tok, task, nil).JSON["id"].(string)
	before++
	a.must(http.StatusOK, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/cancel", Token: tok})
	before++
	a.must(http.StatusConflict, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/cancel", Token: tok})
	a.must(http.StatusNotFound, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: token(t, "other")})
	a.must(http.StatusUnprocessableEntity, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Header: map[string]string{"Idempotency-Key": "k-bad"}, Body: map[string]any{"name": "Bad Name", "endpoint_id": ep},
	})
	require.Equal(t, before, records(), "no record of a refused change")

	// With an Idempotency-Key: one record, in the key's transaction; the
	// replay changes nothing and records nothing.
	key := map[string]string{"Idempotency-Key": "k-1"}
	body := map[string]any{"name": "keyed", "endpoint_id": ep, "schedule": map[string]any{"type": "cron", "cron": "0 3 * * *"}}
	first := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Header: key, Body: body})
	replay := a.must(http.StatusCreated, req{Method: http.MethodPost, Path: "/v1/tasks", Token: tok, Header: key, Body: body})
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, before+1, records())
	keyed := a.auditEntries(tok, url.Values{"resource_id": {first.JSON["id"].(string)}})
	require.Len(t, keyed, 1)
	require.Equal(t, first.Header.Get("X-Request-Id"), keyed[0]["request_id"])

	// A record that cannot be written takes its change with it.
	_, err := a.pool.Exec(ctx, `CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS
			$$ BEGIN RAISE EXCEPTION 'audit refused'; END $$;
		CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit()`)
	require.NoError(t, err)
	a.must(http.StatusInternalServerError, req{Method: http.MethodPost, Path: "/v1/tasks/" + task + "/pause", Token: tok})
	a.must(http.StatusInternalServerError, req{
		Method: http.MethodPost, Path: "/v1/endpoints", Token: tok,
		Body: map[string]any{"name": "unrecorded", "url": "https://hooks.example.com/u"},
	})
	a.must(http.StatusInternalServerError, req{
		Method: http.MethodPost, Path: "/v1/tasks", Token: tok,
		Header: map[string]string{"Idempotency-Key": "k-2"}, Body: map[string]any{
			"name": "unrecorded", "endpoint_id": ep,
			"schedule": map[string]any{"type": "cron", "cron": "0 3 * * *"},
		},
	})
	got := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/tasks/" + task, Token: tok})
	require.Equal(t, "active", got.JSON["state"], "the pause was rolled back with its record")
	var n int
	require.NoError(t, a.pool.QueryRow(ctx, `SELECT count(*) FROM endpoints WHERE name = 'unrecorded'`).Scan(&n))
	require.Zero(t, n, "the create was rolled back with its record")
	require.NoError(t, a.pool.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE name = 'unrecorded'`).Scan(&n))
	require.Zero(t, n)
}

// TestAuditOfCallbacks: a completion is a change of its execution made
// through the API, recorded as an update (state old → new, how it was
// completed) whether a tenant token or the attempt's callback token made
// it (subject "callback:attempt-N"), with neither the token nor the
// output's content; a heartbeat is no change and leaves no record.
func TestAuditOfCallbacks(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	tok := token(t, "audit-callbacks")
	x, cb := a.waitingExecution(tok)
	a.must(http.StatusNoContent, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: cb,
		Body: map[string]any{"progress": map[string]any{"pct": 50}},
	})
	a.must(http.StatusNoContent, req{Method: http.MethodPost, Path: "/v1/executions/" + x + "/heartbeat", Token: tok})
	require.Empty(t, a.auditEntries(tok, url.Values{"resource_type": {"execution"}, "resource_id": {x}}), "heartbeats leave no record")

	r := a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/executions/" + x + "/complete", Token: cb,
		Body: map[string]any{
			"status": "failed", "error": "upstream down", "retryable": false,
			"output": map[string]any{"password": "hunter2"},
		},
	})
	entries := a.auditEntries(tok, url.Values{"resource_type": {"execution"}, "resource_id": {x}})
	require.Len(t, entries, 1)
	e := entries[0]
	require.Equal(t, "update", e["action"])
	require.Equal(t, "callback:attempt-1", e["subject"], "a callback token has no sub: the attempt it was given for")
	require.Equal(t, r.Header.Get("X-Request-Id"), e["request_id"])
	changes := e["changes"].(map[string]any)
	require.Equal(t, map[string]any{"old": "running", "new": "failed"}, changes["state"])
	completion := changes["completion"].(map[string]any)
	require.Equal(t, "failed", completion["status"])
	require.Equal(t, "callback_token", completion["by"])
	require.Equal(t, false, completion["retryable"])
	raw := a.must(http.StatusOK, req{Method: http.MethodGet, Path: "/v1/audit?resource_id=" + x, Token: tok}).Raw
	require.NotContains(t, string(raw), cb, "never the token")
	require.NotContains(t, string(raw), "hunter2", "never the output's content")

	// A tenant token's completion is recorded with its sub.
	y, _ := a.waitingExecution(tok)
	a.must(http.StatusOK, req{
		Method: http.MethodPost, Path: "/v1/executions/" + y + "/complete", Token: tok,
		Body: map[string]any{"status": "succeeded"},
	})
	entries = a.auditEntries(tok, url.Values{"resource_type": {"execution"}, "resource_id": {y}})
	require.Len(t, entries, 1)
	require.Equal(t, "test", entries[0]["subject"])
	require.Equal(t, "api", entries[0]["changes"].(map[string]any)["completion"].(map[string]any)["by"])
}
