package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service/dbclock"
)

// healthResponse reports the process state.
type healthResponse struct {
	Status  string `json:"status" example:"ok"`
	Version string `json:"version,omitempty" example:"v0.1.0"`
	// Warnings are conditions an operator should look at that do not make
	// the replica unready (its clock drifting from the database's by more
	// than 200 ms).
	Warnings []string `json:"warnings,omitempty"`
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
//	@Summary		Readiness: the database is reachable and migrated
//	@Description	Ready (200) when the database is reachable and every migration applied; warnings (a clock drifting from the database's) leave it ready.
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
		return &problem{
			Status: http.StatusServiceUnavailable, Title: "Not ready",
			Detail: "the database is unreachable or not migrated",
		}
	}
	res := healthResponse{Status: "ready", Version: h.cfg.Version}
	if h.cfg.ClockDrift != nil {
		if drift, warn := h.cfg.ClockDrift(); warn {
			side := "ahead of"
			if drift < 0 {
				side, drift = "behind", -drift
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("this replica's clock is %d ms %s the database's (more than %d ms): "+
				"check its time synchronisation", drift.Milliseconds(), side, dbclock.OffsetWarn.Milliseconds()))
		}
	}
	return c.JSON(http.StatusOK, res)
}
