package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// healthResponse reports the process state.
type healthResponse struct {
	Status  string `json:"status" example:"ok"`
	Version string `json:"version,omitempty" example:"v0.1.0"`
} // @name Health

// healthz godoc
//
//	@ID			healthz
//	@Summary	Liveness: the process is up
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	healthResponse
//	@Router		/healthz [get]
func (h *handlers) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, healthResponse{Status: "ok", Version: h.cfg.Version})
}

// readyz godoc
//
//	@ID			readyz
//	@Summary	Readiness: the database is reachable and migrated
//	@Tags		operations
//	@Produce	json
//	@Success	200	{object}	healthResponse
//	@Failure	503	{object}	problem
//	@Router		/readyz [get]
func (h *handlers) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := h.cfg.Ready(ctx); err != nil {
		logFrom(c).Warn("not ready", "error", err.Error())
		return &problem{Status: http.StatusServiceUnavailable, Title: "Not ready",
			Detail: "the database is unreachable or not migrated"}
	}
	return c.JSON(http.StatusOK, healthResponse{Status: "ready", Version: h.cfg.Version})
}
