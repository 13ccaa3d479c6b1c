package api

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/idempotency"
)

// BodyLimitDefault caps request bodies.
const BodyLimitDefault = 1 << 20

// Config holds what the API needs.
type Config struct {
	// Logger receives request logs. Required.
	Logger *slog.Logger
	// Auth verifies bearer tokens. Required.
	Auth *Authenticator
	// Tenants creates tenants on first use. Required.
	Tenants *service.Tenants
	// Endpoints and Tasks serve their resources. Required.
	Endpoints   *service.Endpoints
	Tasks       *service.Tasks
	Idempotency *idempotency.Keys
	// Executions serves executions and manual triggers. Required.
	Executions *service.Executions
	// Deliveries serves the receivers' heartbeats and completions
	// (callback completion mode). Required.
	Deliveries *service.Deliveries
	// Calendars and Backfills serve their resources. Required.
	Calendars *service.Calendars
	Backfills *service.Backfills
	// Workflows serves /v1/workflows and /v1/workflow-runs.
	Workflows *service.Workflows
	// Events serves /v1/events. Nil: those routes are not served.
	Events *event.Events
	// Ready reports whether the server can serve: database reachable and
	// migrated. Required.
	Ready func(ctx context.Context) error
	// EndpointProbe sends POST /v1/endpoints/{id}/test's request (the
	// webhook sender's Probe); without it that route answers 503.
	EndpointProbe service.EndpointProbe
	// ClockDrift, if set, is this replica's clock minus the database's and
	// whether it is too large: /readyz says so in its body (it stays
	// ready: ax fires by the database's clock).
	ClockDrift func() (time.Duration, bool)
	// BodyLimit caps request bodies in bytes. Defaults to BodyLimitDefault.
	BodyLimit int64
	// Version is reported by /healthz.
	Version string
	// Metrics receives the API's request metrics and is served at
	// /metrics. Nil: request metrics go to a private registry and
	// /metrics is not served.
	Metrics *prometheus.Registry
	// Stats serves GET /v1/stats. Required.
	Stats *service.Stats
	// Audit serves GET /v1/audit. Required.
	Audit *audit.Log
	// Replicas serves GET /v1/admin/replicas. Required.
	Replicas *service.Replicas
	// Limits serves the tenants' limits (GET /v1/limits, the admin
	// limits routes) and the API's per-tenant request rate. Nil: no rate,
	// and the limits routes answer 404.
	Limits *service.Limits
	// RiverUI is River's web UI, served at RiverUIPrefix/ to operators
	// only (riverui.go). Nil: not mounted.
	RiverUI http.Handler
	// AdminIsOperator restores, for one release, the rule before operator
	// tokens: a tenant token with admin also sets its own tenant's limits,
	// lists the replicas and opens River UI. Deprecated (AX_ADMIN_IS_OPERATOR).
	AdminIsOperator bool
}

// New returns the API as an http.Handler (an *echo.Echo).
func New(cfg Config) *echo.Echo {
	cfg.BodyLimit = cmp.Or(cfg.BodyLimit, BodyLimitDefault)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = handleError
	e.JSONSerializer = jsonSerializer{}
	e.Use(
		middleware.RequestIDWithConfig(middleware.RequestIDConfig{Generator: newRequestID}),
		requestLogger(cfg.Logger, newHTTPMetrics(registerer(cfg.Metrics))),
		recoverPanics(),
		bodyLimit(cfg.BodyLimit),
	)
	h := &handlers{cfg: cfg}
	registerRoutes(e, h)
	return e
}

// handlers carries the dependencies of every handler.
type handlers struct {
	cfg Config
}

func (h *handlers) ensureTenant(c echo.Context, tenant string) error {
	return h.cfg.Tenants.Ensure(c.Request().Context(), tenant)
}

// logState is per-request logging context that middleware down the chain
// (authentication) can add to.
type logState struct {
	logger *slog.Logger
}

const logContextKey = "ax.log"

func logFrom(c echo.Context) *slog.Logger {
	if s, ok := c.Get(logContextKey).(*logState); ok {
		return s.logger
	}
	return slog.New(slog.DiscardHandler)
}

func setLogAttrs(c echo.Context, args ...any) {
	if s, ok := c.Get(logContextKey).(*logState); ok {
		s.logger = s.logger.With(args...)
	}
}

func registerer(r *prometheus.Registry) prometheus.Registerer {
	if r == nil {
		return prometheus.NewRegistry()
	}
	return r
}

func requestLogger(logger *slog.Logger, metrics *httpMetrics) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			st := &logState{logger: logger.With("request_id", c.Response().Header().Get(echo.HeaderXRequestID))}
			c.Set(logContextKey, st)
			err := next(c)
			if err != nil {
				c.Error(err) // writes the problem response now, so the status is known
			}
			status := c.Response().Status
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			path := c.Path()
			if path == "" {
				path = "unmatched"
			}
			elapsed := time.Since(start)
			metrics.observe(c.Request().Method, path, status, elapsed)
			st.logger.Log(c.Request().Context(), level, "request",
				"method", c.Request().Method, "route", path, "status", status,
				"duration_ms", float64(elapsed.Microseconds())/1000, "bytes_out", c.Response().Size)
			return nil
		}
	}
}

// recoverPanics turns a handler panic into a 500 problem; the panic and
// its stack go to the log with the request id.
func recoverPanics() echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		// The stack is captured (the panicking goroutine's only) and
		// logged by LogErrorFunc, not printed by echo.
		DisableStackAll: true,
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			logFrom(c).Error("panic in handler", "error", err.Error(), "stack", string(stack))
			return errors.New("handler panicked")
		},
	})
}

// bodyLimit rejects bodies over limit with 413, whether or not the client
// sent an honest Content-Length.
func bodyLimit(limit int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.ContentLength > limit {
				return echo.NewHTTPError(http.StatusRequestEntityTooLarge)
			}
			req.Body = &limitedBody{rc: req.Body, left: limit}
			return next(c)
		}
	}
}

func newRequestID() string {
	return strings.ReplaceAll(service.NewID(), "-", "")
}
