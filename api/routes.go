package api

import "github.com/labstack/echo/v4"

// registerRoutes registers every route in one place.
func registerRoutes(e *echo.Echo, h *handlers) {
	e.GET("/healthz", h.healthz)
	e.GET("/readyz", h.readyz)

	v1 := e.Group("/v1", authenticate(h.cfg.Auth, h.ensureTenant))
	v1.GET("/me", h.me)
}
