package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service/audit"
)

// registerRoutes registers every route in one place.
func registerRoutes(e *echo.Echo, h *handlers) {
	e.GET("/healthz", h.healthz)
	e.GET("/readyz", h.readyz)
	if h.cfg.Metrics != nil {
		e.GET("/metrics", metricsHandler(h.cfg.Metrics))
	}
	e.GET("/openapi.json", serveOpenAPI())

	// Not e.Group("/v1", auth): a group with middleware answers 404 to
	// every unknown method, where a 405 is right.
	v1 := &authedRoutes{e: e, prefix: "/v1", auth: authenticate(h.cfg.Auth, h.ensureTenant), rate: h.rateLimit}
	v1.GET("/me", h.me)

	epR, epW := requireScope(ScopeEndpointsRead), requireScope(ScopeEndpointsWrite)
	v1.POST("/endpoints", h.createEndpoint, epW, h.idempotent("endpoints"))
	v1.GET("/endpoints", h.listEndpoints, epR)
	v1.GET("/endpoints/:id", h.getEndpoint, epR)
	v1.PATCH("/endpoints/:id", h.patchEndpoint, epW)
	v1.DELETE("/endpoints/:id", h.deleteEndpoint, epW)
	v1.POST("/endpoints/:id/rotate-secret", h.rotateEndpointSecret, epW)
	v1.POST("/endpoints/:id/test", h.testEndpoint, epW)

	tR, tW := requireScope(ScopeTasksRead), requireScope(ScopeTasksWrite)
	v1.POST("/tasks", h.createTask, tW, h.idempotent("tasks"))
	v1.GET("/tasks", h.listTasks, tR)
	v1.GET("/tasks/:id", h.getTask, tR)
	v1.PATCH("/tasks/:id", h.patchTask, tW)
	v1.DELETE("/tasks/:id", h.deleteTask, tW)
	v1.POST("/tasks/:id/pause", h.pauseTask, tW)
	v1.POST("/tasks/:id/resume", h.resumeTask, tW)
	v1.GET("/tasks/:id/preview", h.previewTask, tR)
	v1.POST("/tasks/:id/render", h.renderTask, tR)
	v1.POST("/tasks/:id/trigger", h.triggerTask, tW, h.idempotentTrigger)
	v1.POST("/tasks/:id/skip", h.skipSlot, tW)
	v1.POST("/tasks/:id/backfill", h.backfillTask, tW, h.idempotentBackfill)
	v1.GET("/backfills", h.listBackfills, tR)
	v1.GET("/backfills/:id", h.getBackfill, tR)
	v1.POST("/backfills/:id/cancel", h.cancelBackfill, tW)

	v1.POST("/calendars", h.createCalendar, tW, h.idempotent("calendars"))
	v1.GET("/calendars", h.listCalendars, tR)
	v1.GET("/calendars/:id", h.getCalendar, tR)
	v1.PATCH("/calendars/:id", h.patchCalendar, tW)
	v1.DELETE("/calendars/:id", h.deleteCalendar, tW)

	wR, wW := requireScope(ScopeWorkflowsRead), requireScope(ScopeWorkflowsWrite)
	v1.POST("/workflows", h.createWorkflow, wW, h.idempotent("workflows"))
	v1.GET("/workflows", h.listWorkflows, wR)
	v1.GET("/workflows/:id", h.getWorkflow, wR)
	v1.PATCH("/workflows/:id", h.patchWorkflow, wW)
	v1.DELETE("/workflows/:id", h.deleteWorkflow, wW)
	v1.POST("/workflows/:id/pause", h.pauseWorkflow, wW)
	v1.POST("/workflows/:id/resume", h.resumeWorkflow, wW)
	v1.POST("/workflows/:id/trigger", h.triggerWorkflow, wW, h.idempotentWorkflowTrigger)
	v1.POST("/workflows/:id/backfill", h.backfillWorkflow, wW, h.idempotentWorkflowBackfill)
	v1.GET("/workflows/:id/runs", h.listWorkflowRuns, wR)
	v1.GET("/workflow-runs/:id", h.getWorkflowRun, wR)
	v1.POST("/workflow-runs/:id/cancel", h.cancelWorkflowRun, wW)
	v1.POST("/workflow-runs/:id/nodes/:key/run", h.runWorkflowNode, wW)
	v1.POST("/workflow-runs/:id/nodes/:key/skip", h.skipWorkflowNode, wW)

	xR, xW := requireScope(ScopeExecutionsRead), requireScope(ScopeExecutionsWrite)
	v1.GET("/executions", h.listExecutions, xR)
	v1.GET("/executions/:id", h.getExecution, xR)
	v1.POST("/executions/:id/cancel", h.cancelExecution, xW)
	v1.POST("/executions/:id/retry", h.retryExecution, xW)
	v1.POST("/executions/:id/hold", h.holdExecution, xW)
	v1.POST("/executions/:id/release", h.releaseExecution, xW)
	v1.POST("/executions/retry", h.retryExecutions, xW)
	// A receiver reports with its attempt's callback token or a tenant
	// token with executions:write.
	cb := &authedRoutes{e: e, prefix: "/v1", auth: h.callbackAuth(authenticate(h.cfg.Auth, h.ensureTenant)), rate: h.rateLimit}
	cb.POST("/executions/:id/heartbeat", h.heartbeatExecution, requireCallbackOrScope(ScopeExecutionsWrite))
	cb.POST("/executions/:id/complete", h.completeExecution, requireCallbackOrScope(ScopeExecutionsWrite))

	evR, evW := requireScope(ScopeEventsRead), requireScope(ScopeEventsWrite)
	v1.POST("/events", h.postEvent, evW)
	v1.GET("/events", h.listEvents, evR)
	v1.GET("/events/:id", h.getEvent, evR)

	v1.GET("/stats", h.getStats, xR)

	v1.GET("/audit", h.listAudit, requireScope(ScopeAuditRead))
	// Operators' routes (operator tokens; a tenant's admin reads its own
	// limits).
	v1.GET("/admin/replicas", h.listReplicas, h.requireOperator("listing the replicas"))

	v1.GET("/limits", h.getLimits, requireTenant, h.limitsServed)
	v1.GET("/admin/tenants/:tenant/limits", h.getTenantLimits, h.mayReadLimits, h.limitsServed)
	v1.PUT("/admin/tenants/:tenant/limits", h.putTenantLimits, h.maySetLimits, h.limitsServed)

	// River's UI for operators: not part of the REST API, so not in the spec.
	if h.cfg.RiverUI != nil {
		e.Match([]string{http.MethodGet, http.MethodHead}, RiverUIPrefix, riverUIRedirect)
		e.Any(RiverUIPrefix+"/*", h.riverUI)
	}
}

// authedRoutes registers routes under a prefix behind authentication.
type authedRoutes struct {
	e      *echo.Echo
	prefix string
	auth   echo.MiddlewareFunc
	// rate counts the request against its tenant's API rate (after
	// authentication, which names the tenant).
	rate echo.MiddlewareFunc
}

// add registers a route behind authentication. A route that changes
// something (any method but GET) also carries the request's actor to the
// service, which records each change in the audit log (withActor).
func (g *authedRoutes) add(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	chain := []echo.MiddlewareFunc{g.auth, g.rate, checkQuery(method, g.prefix+path)}
	if method != http.MethodGet {
		chain = append(chain, withActor)
	}
	g.e.Add(method, g.prefix+path, h, append(chain, m...)...)
}

// withActor puts the request's actor (the token's subject, whether it is
// an operator's, the request id sent back as X-Request-Id) into the
// request's context: the services record the changes made with it in the
// audit log, in the change's transaction (audit.WithActor).
func withActor(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req, p := c.Request(), principalFrom(c)
		actor := audit.Actor{Subject: p.Subject, Operator: p.Operator(), RequestID: c.Response().Header().Get(echo.HeaderXRequestID)}
		c.SetRequest(req.WithContext(audit.WithActor(req.Context(), actor)))
		return next(c)
	}
}

func (g *authedRoutes) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodGet, path, h, m...)
}

func (g *authedRoutes) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPost, path, h, m...)
}

func (g *authedRoutes) PUT(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPut, path, h, m...)
}

func (g *authedRoutes) PATCH(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPatch, path, h, m...)
}

func (g *authedRoutes) DELETE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodDelete, path, h, m...)
}
