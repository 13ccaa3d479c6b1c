package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// endpointRequest is the body of POST /v1/endpoints, and the shape a PATCH
// merges into.
type endpointRequest struct {
	// Name: 1 to 128 characters, not all spaces, without control characters.
	Name string `json:"name" example:"billing" validate:"required" minLength:"1" maxLength:"128"`
	// URL: an absolute http or https URL with a host, without credentials (user:password@), a fragment or whitespace.
	URL    string `json:"url" example:"https://hooks.example.com/ax" validate:"required" minLength:"1" maxLength:"2048" format:"uri"`
	Method string `json:"method,omitempty" example:"POST" enums:"POST,PUT,PATCH,post,put,patch"`
	// Headers sent with every request: at most 32; a name is an HTTP token of 1 to 64 characters, not one ax sets
	// (Content-Type, Idempotency-Key, User-Agent, webhook-*, X-Ax-*, …); a value at most 1024 characters without line
	// breaks.
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout of one delivery attempt in milliseconds (100..300000; 0 or absent: 10000).
	TimeoutMS int `json:"timeout_ms,omitempty" example:"10000" minimum:"0" maximum:"300000"`
	// Enabled defaults to true. Set it to true to re-enable an endpoint ax disabled.
	Enabled *bool `json:"enabled,omitempty"`
	// Secret is the signing secret: whsec_ + base64 of 24..64 bytes. Generated when omitted.
	Secret string `json:"secret,omitempty" example:"whsec_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0=" maxLength:"94" extensions:"x-patch-read-only"`
	// Format of the alerts sent to this endpoint when a task names it as alert_endpoint_id: ax (signed JSON, the
	// default) or slack (a Slack incoming-webhook body: one readable line with a link to the execution).
	// Webhook deliveries of tasks are not affected.
	Format string `json:"format,omitempty" enums:"ax,slack" example:"ax"`
	// MaxConcurrency bounds the requests in flight to the endpoint at once, across all replicas (1..100000; null: no limit).
	// Deliveries past it wait, in order, without using an attempt.
	MaxConcurrency *int `json:"max_concurrency,omitempty" example:"5" minimum:"1" maximum:"100000" extensions:"x-nullable"`
	// RateLimitPerSecond bounds the requests started per second (0.001..100000; null: no limit).
	RateLimitPerSecond *float64 `json:"rate_limit_per_second,omitempty" example:"50" minimum:"0.001" maximum:"100000" extensions:"x-nullable"`
} // @name EndpointRequest

// endpointResponse is an endpoint as the API returns it.
type endpointResponse struct {
	ID        string            `json:"id" example:"0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e"`
	Name      string            `json:"name" example:"billing"`
	URL       string            `json:"url" example:"https://hooks.example.com/ax"`
	Method    string            `json:"method" example:"POST"`
	Headers   map[string]string `json:"headers"`
	TimeoutMS int               `json:"timeout_ms" example:"10000"`
	Enabled   bool              `json:"enabled" example:"true"`
	// Format of the alerts sent to this endpoint.
	Format string `json:"format" enums:"ax,slack" example:"ax"`
	// DisabledReason says why ax disabled the endpoint (e.g. it answered 410 Gone).
	DisabledReason string     `json:"disabled_reason,omitempty"`
	DisabledAt     *timestamp `json:"disabled_at,omitempty" swaggertype:"string" format:"date-time"`
	// PreviousSecretExpiresAt is when the secret replaced by the last rotation stops signing.
	PreviousSecretExpiresAt *timestamp `json:"previous_secret_expires_at,omitempty" swaggertype:"string" format:"date-time"`
	CreatedAt               timestamp  `json:"created_at" swaggertype:"string" format:"date-time"`
	UpdatedAt               timestamp  `json:"updated_at" swaggertype:"string" format:"date-time"`
	// MaxConcurrency: requests in flight to the endpoint at once (null: no limit).
	MaxConcurrency *int `json:"max_concurrency" example:"5" extensions:"x-nullable"`
	// RateLimitPerSecond: requests started per second (null: no limit).
	RateLimitPerSecond *float64 `json:"rate_limit_per_second" example:"50" extensions:"x-nullable"`
} // @name Endpoint

// endpointWithSecret is what create and rotate-secret return: the endpoint
// and its signing secret, which no other response shows.
type endpointWithSecret struct {
	endpointResponse
	// Secret signs the webhooks: whsec_ + base64. Shown only here; store it now.
	Secret string `json:"secret" example:"whsec_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0="`
} // @name EndpointWithSecret

// endpointList is a page of endpoints.
type endpointList struct {
	Items      []endpointResponse `json:"items"`
	NextCursor string             `json:"next_cursor,omitempty"`
} // @name EndpointList

// rotateSecretRequest optionally supplies the new secret.
type rotateSecretRequest struct {
	// Secret: whsec_ + base64 of 24..64 bytes.
	Secret string `json:"secret,omitempty" example:"whsec_ji6MJU+x46WGli6hmdDecYt95Jrm2Iz9U3aT69r5Ae0=" maxLength:"94"`
} // @name RotateSecretRequest

var endpointReadOnly = []string{"id", "created_at", "updated_at", "disabled_reason", "disabled_at", "previous_secret_expires_at", "tenant", "tenant_id"}

func (r endpointRequest) input() service.EndpointInput {
	in := service.EndpointInput{
		Name: r.Name, URL: r.URL, Method: r.Method, Headers: r.Headers, Secret: r.Secret,
		Timeout: time.Duration(r.TimeoutMS) * time.Millisecond, Enabled: true, Format: r.Format,
		MaxConcurrency: r.MaxConcurrency, RateLimitPerSecond: r.RateLimitPerSecond,
	}
	if r.Enabled != nil {
		in.Enabled = *r.Enabled
	}
	return in
}

func endpointRequestOf(in service.EndpointInput) endpointRequest {
	enabled := in.Enabled
	return endpointRequest{
		Name: in.Name, URL: in.URL, Method: in.Method, Headers: in.Headers,
		TimeoutMS: int(in.Timeout / time.Millisecond), Enabled: &enabled, Format: in.Format,
		MaxConcurrency: in.MaxConcurrency, RateLimitPerSecond: in.RateLimitPerSecond,
	}
}

func endpointWithSecretOut(e service.Endpoint) endpointWithSecret {
	return endpointWithSecret{endpointResponse: endpointOut(e), Secret: e.Secret}
}

func endpointOut(e service.Endpoint) endpointResponse {
	out := endpointResponse{
		ID: e.ID, Name: e.Name, URL: e.URL, Method: e.Method, Headers: e.Headers, TimeoutMS: int(e.Timeout / time.Millisecond),
		Enabled: e.Enabled, DisabledReason: e.DisabledReason, DisabledAt: stampPtr(e.DisabledAt), Format: e.Format,
		CreatedAt: stamp(e.CreatedAt.UTC()), UpdatedAt: stamp(e.UpdatedAt.UTC()),
		MaxConcurrency: e.MaxConcurrency, RateLimitPerSecond: e.RateLimitPerSecond,
	}
	if e.PreviousSecretExpiresAt != nil && e.PreviousSecretExpiresAt.After(time.Now()) {
		t := stamp(e.PreviousSecretExpiresAt.UTC())
		out.PreviousSecretExpiresAt = &t
	}
	return out
}

// createEndpoint godoc
//
//	@ID			createEndpoint
//	@Summary		Create a webhook endpoint
//	@Description	The response includes the signing secret. Supports Idempotency-Key.
//	@Tags			endpoints
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			Idempotency-Key	header		string			false	"replay protection for 24 h"
//	@Param			body			body		endpointRequest	true	"the endpoint"
//	@Success		201				{object}	endpointWithSecret
//	@Failure		400,401,403,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/endpoints [post]
func (h *handlers) createEndpoint(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req endpointRequest
	if err := decodeStrict(body, &req, endpointReadOnly...); err != nil {
		return err
	}
	e, err := h.cfg.Endpoints.Create(c.Request().Context(), principalFrom(c).Tenant, req.input())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, endpointWithSecretOut(e))
}

// listEndpoints godoc
//
//	@ID			listEndpoints
//	@Summary	List endpoints, newest first
//	@Tags		endpoints
//	@Produce	json
//	@Security	BearerAuth
//	@Param		limit	query		int		false	"page size (default 50, max 500)"
//	@Param		cursor	query		string	false	"next_cursor of the previous page"
//	@Success	200		{object}	endpointList
//	@Failure	401,403,422,503	{object}	problem
//	@Header	503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/endpoints [get]
func (h *handlers) listEndpoints(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	items, next, err := h.cfg.Endpoints.List(c.Request().Context(), principalFrom(c).Tenant, page)
	if err != nil {
		return err
	}
	out := endpointList{Items: make([]endpointResponse, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, e := range items {
		out.Items = append(out.Items, endpointOut(e))
	}
	return c.JSON(http.StatusOK, out)
}

// getEndpoint godoc
//
//	@ID			getEndpoint
//	@Summary	Get an endpoint
//	@Tags		endpoints
//	@Produce	json
//	@Security	BearerAuth
//	@Param		id	path		string	true	"endpoint id"
//	@Success	200	{object}	endpointResponse
//	@Failure	401,403,404,503	{object}	problem
//	@Header	503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router		/v1/endpoints/{id} [get]
func (h *handlers) getEndpoint(c echo.Context) error {
	e, err := h.cfg.Endpoints.Get(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointOut(e))
}

// patchEndpoint godoc
//
//	@ID			patchEndpoint
//	@Summary		Update an endpoint
//	@Description	Fields present in the body replace the current ones (headers as a whole); use rotate-secret to change the secret.
//	@Tags			endpoints
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string			true	"endpoint id"
//	@Param			body	body		endpointRequest	true	"fields to change"
//	@Success		200		{object}	endpointResponse
//	@Failure		400,401,403,404,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/endpoints/{id} [patch]
func (h *handlers) patchEndpoint(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := checkReadOnly(body, append(endpointReadOnly, "secret")); err != nil {
		return err
	}
	e, err := h.cfg.Endpoints.Update(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"),
		func(in *service.EndpointInput) error {
			req := endpointRequestOf(*in)
			if err := mergePatch(body, &req, "headers"); err != nil {
				return err
			}
			*in = req.input()
			return nil
		})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointOut(e))
}

// deleteEndpoint godoc
//
//	@ID			deleteEndpoint
//	@Summary		Delete an endpoint
//	@Description	409 while tasks use it.
//	@Tags			endpoints
//	@Security		BearerAuth
//	@Param			id	path	string	true	"endpoint id"
//	@Success		204
//	@Failure		401,403,404,409,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/endpoints/{id} [delete]
func (h *handlers) deleteEndpoint(c echo.Context) error {
	if err := h.cfg.Endpoints.Delete(c.Request().Context(), principalFrom(c).Tenant, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// rotateEndpointSecret godoc
//
//	@ID			rotateEndpointSecret
//	@Summary		Rotate an endpoint's signing secret
//	@Description	The previous secret keeps signing (a second webhook-signature entry) for 24 hours. The body is optional.
//	@Tags			endpoints
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string				true	"endpoint id"
//	@Param			body	body		rotateSecretRequest	false	"the new secret; generated when omitted"
//	@Success		200		{object}	endpointWithSecret
//	@Failure		400,401,403,404,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/endpoints/{id}/rotate-secret [post]
func (h *handlers) rotateEndpointSecret(c echo.Context) error {
	var req rotateSecretRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	e, err := h.cfg.Endpoints.RotateSecret(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), req.Secret)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointWithSecretOut(e))
}

// endpointTestRequest optionally gives the test request's body.
type endpointTestRequest struct {
	// Payload is the body, any JSON (default {}).
	Payload json.RawMessage `json:"payload,omitempty" swaggertype:"object"`
} // @name EndpointTestRequest

// endpointTestResult is what the test request got.
type endpointTestResult struct {
	// StatusCode is the response's status; 0 when none came (see error).
	StatusCode int `json:"status_code" example:"204"`
	// DurationMS runs from sending the request to the end of reading the response.
	DurationMS int64 `json:"duration_ms" example:"38"`
	// ResponseExcerpt is the start of the response body (4 KiB at most).
	ResponseExcerpt string `json:"response_excerpt" example:""`
	// Error says why no response came: a blocked target, DNS, connect, TLS, a timeout.
	Error string `json:"error,omitempty" example:"dial: connection refused"`
} // @name EndpointTestResult

// testEndpoint godoc
//
//	@ID				testEndpoint
//	@Summary		Send an endpoint a test request
//	@Description	One signed request now, as a delivery is sent (the endpoint's method, headers, timeout, SSRF guard), with X-Ax-Test: true and a fresh webhook-id, and none of the headers that name a task or an execution. Recorded nowhere but the audit log; a disabled endpoint is tested too. 200 whatever the endpoint answered: status_code and error say what happened.
//	@Tags			endpoints
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string				true	"endpoint id"
//	@Param			body	body		endpointTestRequest	false	"the body to send; {} when omitted"
//	@Success		200		{object}	endpointTestResult
//	@Failure		400,401,403,404,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/endpoints/{id}/test [post]
func (h *handlers) testEndpoint(c echo.Context) error {
	var req endpointTestRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	if h.cfg.EndpointProbe == nil {
		return &problem{Status: http.StatusServiceUnavailable, Title: "Service Unavailable", Detail: "this server sends no test requests"}
	}
	res, err := h.cfg.Endpoints.Test(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), req.Payload, h.cfg.EndpointProbe)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, endpointTestResult{
		StatusCode: res.StatusCode, DurationMS: res.Duration.Milliseconds(),
		ResponseExcerpt: res.ResponseExcerpt, Error: res.Error,
	})
}

// mergePatch applies a JSON patch body onto dst (the current state as a
// request DTO): present fields replace, absent ones stay. Fields named in
// replace (maps) are replaced wholesale rather than merged key by key.
func mergePatch(body []byte, dst any, replace ...string) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return jsonError(err)
	}
	if top == nil {
		return badRequest("the request body must be a JSON object")
	}
	clearFields(dst, top, replace)
	return decodeStrict(body, dst)
}

// clearFields zeroes the fields of the struct *dst whose json names are in
// names and present in top, so decoding replaces them instead of merging.
func clearFields(dst any, top map[string]json.RawMessage, names []string) {
	v := reflect.ValueOf(dst).Elem()
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if !slices.Contains(names, name) {
			continue
		}
		// encoding/json matches keys case-insensitively; so must this.
		for k := range top {
			if strings.EqualFold(k, name) {
				v.Field(i).SetZero()
			}
		}
	}
}
