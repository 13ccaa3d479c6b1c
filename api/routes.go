package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
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
	v1 := &authedRoutes{e: e, prefix: "/v1", auth: authenticate(h.cfg.Auth, h.ensureTenant)}
	v1.GET("/me", h.me)

	epR, epW := requireScope(ScopeEndpointsRead), requireScope(ScopeEndpointsWrite)
	v1.POST("/endpoints", h.createEndpoint, epW, h.idempotent("endpoints"))
	v1.GET("/endpoints", h.listEndpoints, epR)
	v1.GET("/endpoints/:id", h.getEndpoint, epR)
	v1.PATCH("/endpoints/:id", h.patchEndpoint, epW)
	v1.DELETE("/endpoints/:id", h.deleteEndpoint, epW)
	v1.POST("/endpoints/:id/rotate-secret", h.rotateEndpointSecret, epW)

	tR, tW := requireScope(ScopeTasksRead), requireScope(ScopeTasksWrite)
	v1.POST("/tasks", h.createTask, tW, h.idempotent("tasks"))
	v1.GET("/tasks", h.listTasks, tR)
	v1.GET("/tasks/:id", h.getTask, tR)
	v1.PATCH("/tasks/:id", h.patchTask, tW)
	v1.DELETE("/tasks/:id", h.deleteTask, tW)
	v1.POST("/tasks/:id/pause", h.pauseTask, tW)
	v1.POST("/tasks/:id/resume", h.resumeTask, tW)
	v1.GET("/tasks/:id/preview", h.previewTask, tR)
	v1.POST("/tasks/:id/trigger", h.triggerTask, tW, h.idempotentTrigger)

	xR, xW := requireScope(ScopeExecutionsRead), requireScope(ScopeExecutionsWrite)
	v1.GET("/executions", h.listExecutions, xR)
	v1.GET("/executions/:id", h.getExecution, xR)
	v1.POST("/executions/:id/cancel", h.cancelExecution, xW)
	v1.POST("/executions/:id/retry", h.retryExecution, xW)

	v1.GET("/stats", h.getStats, xR)

	admin := requireScope(ScopeAdmin)
	v1.GET("/admin/replicas", h.listReplicas, admin)

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
}

func (g *authedRoutes) add(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.e.Add(method, g.prefix+path, h, append([]echo.MiddlewareFunc{g.auth}, m...)...)
}

func (g *authedRoutes) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodGet, path, h, m...)
}

func (g *authedRoutes) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPost, path, h, m...)
}

func (g *authedRoutes) PATCH(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPatch, path, h, m...)
}

func (g *authedRoutes) DELETE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodDelete, path, h, m...)
}
