package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// tenantLimits is a tenant's limits: null is the server's default (set by
// the AX_TENANT_MAX_* and AX_TENANT_API_RPS environment variables).
type tenantLimits struct {
	// MaxTasks: creates past it are refused (409 quota-exceeded).
	MaxTasks *int `json:"max_tasks" example:"1000" minimum:"0" maximum:"2147483647" extensions:"x-nullable"`
	// MaxWorkflows: creates past it are refused (409 quota-exceeded).
	MaxWorkflows *int `json:"max_workflows" example:"100" minimum:"0" maximum:"2147483647" extensions:"x-nullable"`
	// MaxInflightDeliveries: the tenant's webhooks in flight at once, across all replicas.
	MaxInflightDeliveries *int `json:"max_inflight_deliveries" example:"50" minimum:"1" maximum:"2147483647" extensions:"x-nullable"`
	// MaxDeliveriesPerSecond: the tenant's webhooks started per second, across all replicas (above 0, at most 1000000).
	MaxDeliveriesPerSecond *float64 `json:"max_deliveries_per_second" example:"100" minimum:"0" maximum:"1000000" extensions:"x-nullable"`
	// APIRequestsPerSecond: the tenant's API requests per second (429 past it; above 0, at most 1000000).
	APIRequestsPerSecond *float64 `json:"api_requests_per_second" example:"20" minimum:"0" maximum:"1000000" extensions:"x-nullable"`
} // @name TenantLimits

// effectiveLimits are the limits that apply: the tenant's own or the
// server's default; null: no limit.
type effectiveLimits struct {
	MaxTasks               *int     `json:"max_tasks" example:"1000" extensions:"x-nullable"`
	MaxWorkflows           *int     `json:"max_workflows" example:"100" extensions:"x-nullable"`
	MaxInflightDeliveries  *int     `json:"max_inflight_deliveries" example:"50" extensions:"x-nullable"`
	MaxDeliveriesPerSecond *float64 `json:"max_deliveries_per_second" example:"100" extensions:"x-nullable"`
	APIRequestsPerSecond   *float64 `json:"api_requests_per_second" example:"20" extensions:"x-nullable"`
} // @name EffectiveLimits

// tenantLimitsResponse is a tenant's own limits and those that apply.
type tenantLimitsResponse struct {
	Tenant string       `json:"tenant" example:"acme"`
	Limits tenantLimits `json:"limits"`
	// Effective: the limits that apply (own, else the server's default); null: no limit.
	Effective effectiveLimits `json:"effective"`
} // @name TenantLimitsResponse

// limitsUsage is what the caller's limits count now.
type limitsUsage struct {
	Tasks              int `json:"tasks" example:"12"`
	Workflows          int `json:"workflows" example:"2"`
	InflightDeliveries int `json:"inflight_deliveries" example:"3"`
} // @name LimitsUsage

// limitsResponse is the caller's limits and current usage.
type limitsResponse struct {
	Tenant string          `json:"tenant" example:"acme"`
	Limits effectiveLimits `json:"limits"`
	Usage  limitsUsage     `json:"usage"`
} // @name Limits

func nonZeroInt(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

func nonZeroFloat(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return &v
}

func effectiveOut(e service.EffectiveLimits) effectiveLimits {
	return effectiveLimits{
		MaxTasks: nonZeroInt(e.MaxTasks), MaxWorkflows: nonZeroInt(e.MaxWorkflows),
		MaxInflightDeliveries: nonZeroInt(e.MaxInflightDeliveries), MaxDeliveriesPerSecond: nonZeroFloat(e.MaxDeliveriesPerSecond),
		APIRequestsPerSecond: nonZeroFloat(e.APIRequestsPerSecond),
	}
}

func tenantLimitsOut(v service.TenantLimitsView) tenantLimitsResponse {
	l := v.Limits
	return tenantLimitsResponse{Tenant: v.Tenant, Effective: effectiveOut(v.Effective), Limits: tenantLimits{
		MaxTasks: l.MaxTasks, MaxWorkflows: l.MaxWorkflows, MaxInflightDeliveries: l.MaxInflightDeliveries,
		MaxDeliveriesPerSecond: l.MaxDeliveriesPerSecond, APIRequestsPerSecond: l.APIRequestsPerSecond,
	}}
}

// limitsServed answers 404 when the server has no Limits.
func (h *handlers) limitsServed(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h.cfg.Limits == nil {
			return echo.ErrNotFound
		}
		return next(c)
	}
}

// mayReadLimits lets an operator read any tenant's limits and a tenant
// token with admin its own tenant's; anything else is a 403.
func (h *handlers) mayReadLimits(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalFrom(c)
		switch {
		case p.Operator():
		case p.Tenant != c.Param("tenant"):
			return operatorNeeded(p, "reading another tenant's limits")
		case !p.Allows(ScopeAdmin):
			return forbidden(fmt.Sprintf("this token lacks the %q scope", ScopeAdmin))
		}
		return next(c)
	}
}

// maySetLimits lets only an operator set a tenant's limits: they exist to
// bound the tenant, whose own tokens must not lift them. While
// AdminIsOperator (deprecated) restores the old rule, a tenant token with
// admin sets its own tenant's too.
func (h *handlers) maySetLimits(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalFrom(c)
		if !p.Operator() && (p.Tenant != c.Param("tenant") || !h.isOperator(p)) {
			return operatorNeeded(p, "setting a tenant's limits")
		}
		return next(c)
	}
}

// getTenantLimits godoc
//
//	@ID			getTenantLimits
//	@Summary		A tenant's limits
//	@Description	An operator token reads any tenant's; a tenant token with admin reads its own (another tenant's is a 403). null is the server's default. A tenant ax has not seen yet (its first authenticated request creates it) is a 404.
//	@Tags			limits
//	@Produce		json
//	@Security		BearerAuth
//	@Param			tenant	path		string	true	"tenant id"
//	@Success		200		{object}	tenantLimitsResponse
//	@Failure		401,403,404,429,503	{object}	problem
//	@Header		429	{integer}	Retry-After	"seconds to wait: over the API rate"
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/admin/tenants/{tenant}/limits [get]
func (h *handlers) getTenantLimits(c echo.Context) error {
	v, err := h.cfg.Limits.Get(c.Request().Context(), c.Param("tenant"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tenantLimitsOut(v))
}

// putTenantLimits godoc
//
//	@ID			putTenantLimits
//	@Summary		Set a tenant's limits
//	@Description	Operator tokens only: a tenant's own tokens, admin included, get a 403. Replaces every limit: an absent or null field is the server's default. Applies at once on the replica that answers and within a second on the others. Audited as set_limits in the tenant's audit log, with the operator's subject and operator true. A tenant ax has not seen yet (its first authenticated request creates it) is a 404.
//	@Tags			limits
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			tenant	path		string			true	"tenant id"
//	@Param			body	body		tenantLimits	true	"the limits"
//	@Success		200		{object}	tenantLimitsResponse
//	@Failure		400,401,403,404,415,422,429,503	{object}	problem
//	@Header		429	{integer}	Retry-After	"seconds to wait: over the API rate"
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/admin/tenants/{tenant}/limits [put]
func (h *handlers) putTenantLimits(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req tenantLimits
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	v, err := h.cfg.Limits.Set(c.Request().Context(), c.Param("tenant"), service.TenantLimits{
		MaxTasks: req.MaxTasks, MaxWorkflows: req.MaxWorkflows, MaxInflightDeliveries: req.MaxInflightDeliveries,
		MaxDeliveriesPerSecond: req.MaxDeliveriesPerSecond, APIRequestsPerSecond: req.APIRequestsPerSecond,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tenantLimitsOut(v))
}

// getLimits godoc
//
//	@ID			getLimits
//	@Summary		The caller's limits and current usage
//	@Description	Any valid tenant token may call it (an operator token, which acts for no tenant, gets a 403). null: no limit.
//	@Tags			limits
//	@Produce		json
//	@Security		BearerAuth
//	@Success		200	{object}	limitsResponse
//	@Failure		401,403,429,503	{object}	problem
//	@Header		429	{integer}	Retry-After	"seconds to wait: over the API rate"
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/limits [get]
func (h *handlers) getLimits(c echo.Context) error {
	tenant := principalFrom(c).Tenant
	u, err := h.cfg.Limits.Usage(c.Request().Context(), tenant)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, limitsResponse{
		Tenant: tenant, Limits: effectiveOut(u.Limits),
		Usage: limitsUsage{Tasks: u.Tasks, Workflows: u.Workflows, InflightDeliveries: u.InflightDeliveries},
	})
}

// rateLimit counts each authenticated request against its tenant's API
// rate (CountTenantRequest): past it, 429 with Retry-After. An operator's
// requests spend no tenant's budget.
func (h *handlers) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalFrom(c)
		if p.Operator() {
			return next(c)
		}
		refused, err := CountTenantRequest(c.Request().Context(), h.cfg.Limits, p.Tenant, c.Response().Header())
		if err != nil {
			return err
		}
		if refused {
			return &problem{
				Status: http.StatusTooManyRequests, Title: "Too Many Requests",
				Detail: "the tenant's api_requests_per_second limit is reached; retry after Retry-After seconds",
			}
		}
		return next(c)
	}
}

// CountTenantRequest counts one request of tenant against its API rate
// (service.Limits.AllowAPI: one budget per tenant, shared by every replica
// through the database) and reports whether it is refused. A tenant with a
// rate gets the RateLimit-Limit, RateLimit-Remaining (what is left of the
// tenant's whole budget as this replica knows it: APIDecision.Remaining)
// and RateLimit-Reset headers on h; a refused request also gets Retry-After
// (whole seconds, at least 1). Every surface a tenant's token reaches (the REST API, the web
// console) counts through it, so that none is a way around the limit.
// limits nil: no limit.
func CountTenantRequest(ctx context.Context, limits *service.Limits, tenant string, h http.Header) (refused bool, err error) {
	if limits == nil {
		return false, nil
	}
	d, err := limits.AllowAPI(ctx, tenant)
	if err != nil {
		return false, err
	}
	if !d.Limited {
		return false, nil
	}
	h.Set("RateLimit-Limit", strconv.FormatInt(int64(math.Ceil(d.Limit)), 10))
	h.Set("RateLimit-Remaining", strconv.Itoa(d.Remaining))
	if d.Allowed {
		h.Set("RateLimit-Reset", "1")
		return false, nil
	}
	wait := strconv.FormatInt(int64(math.Ceil(max(d.RetryAfter, time.Second).Seconds())), 10)
	h.Set("RateLimit-Reset", wait)
	h.Set(echo.HeaderRetryAfter, wait)
	return true, nil
}
