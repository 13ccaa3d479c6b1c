package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// heartbeatRequest is the optional body of POST /v1/executions/{id}/heartbeat.
type heartbeatRequest struct {
	// Progress is any JSON (at most 16 KiB), kept on the execution and shown as progress; absent: the last one stays.
	Progress json.RawMessage `json:"progress,omitempty" swaggertype:"object"`
} // @name HeartbeatRequest

// completeRequest is the body of POST /v1/executions/{id}/complete.
type completeRequest struct {
	Status string `json:"status" enums:"succeeded,failed" example:"succeeded" validate:"required"`
	// Output is any JSON (at most 64 KiB), kept and returned with the execution.
	Output json.RawMessage `json:"output,omitempty" swaggertype:"object"`
	// Error describes a failure (status failed).
	Error string `json:"error,omitempty" example:"the upstream export failed"`
	// Retryable (status failed; default true): false ends the execution failed instead of retrying it.
	Retryable *bool `json:"retryable,omitempty"`
} // @name CompleteRequest

// callbackGrantKey holds the request's *service.CallbackGrant when it was
// authorised by a callback token.
const callbackGrantKey = "ax.callback_grant"

// callbackAuth authorises a request whose bearer is a callback token
// (service.CallbackTokenPrefix) for the one execution and attempt it was
// given for; any other bearer goes to jwt (a tenant token). The token is
// never logged.
//
// The grant may be one the replica kept (CallbackGrant.Kept), which a
// newer token of its attempt may have made stale: the acts check the
// token themselves, and a request it authorised that fails is checked
// against the database before it is answered, so that an invalid token
// gets its 401 whatever else the request did wrong.
func (h *handlers) callbackAuth(jwt echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		viaJWT := jwt(next)
		return func(c echo.Context) error {
			scheme, raw, _ := strings.Cut(c.Request().Header.Get(echo.HeaderAuthorization), " ")
			raw = strings.TrimSpace(raw)
			if !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(raw, service.CallbackTokenPrefix) {
				return viaJWT(c)
			}
			grant, err := h.cfg.Deliveries.CallbackGrant(c.Request().Context(), raw)
			if err != nil {
				return callbackTokenError(err)
			}
			err = h.actWithGrant(c, next, grant)
			if err == nil || c.Response().Committed || (!grant.Kept && !errors.Is(err, service.ErrInvalidCallbackToken)) {
				return err
			}
			if _, verr := h.cfg.Deliveries.VerifyCallbackGrant(c.Request().Context(), raw); errors.Is(verr, service.ErrInvalidCallbackToken) {
				return callbackTokenError(verr)
			}
			return callbackTokenError(err)
		}
	}
}

// actWithGrant runs next for the holder of grant.
func (h *handlers) actWithGrant(c echo.Context, next echo.HandlerFunc, grant service.CallbackGrant) error {
	if grant.ExecutionID != c.Param("id") {
		return &problem{
			Status: http.StatusForbidden, Title: "Forbidden",
			Detail: "this callback token is for another execution",
		}
	}
	c.Set(principalContextKey, Principal{Tenant: grant.TenantID, Subject: fmt.Sprintf("callback:attempt-%d", grant.Attempt)})
	c.Set(callbackGrantKey, &grant)
	setLogAttrs(c, "tenant", grant.TenantID)
	return next(c)
}

// callbackTokenError is err as a callback token's request answers it:
// an invalid token is a 401.
func callbackTokenError(err error) error {
	if errors.Is(err, service.ErrInvalidCallbackToken) {
		return &authError{challenge: `Bearer realm="ax", error="invalid_token"`, detail: "the callback token is invalid"}
	}
	return err
}

// requireCallbackOrScope lets a callback token through (callbackAuth
// checked it) and otherwise requires scope.
func requireCallbackOrScope(scope string) echo.MiddlewareFunc {
	jwt := requireScope(scope)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		viaJWT := jwt(next)
		return func(c echo.Context) error {
			if callbackGrant(c) != nil {
				return next(c)
			}
			return viaJWT(c)
		}
	}
}

func callbackGrant(c echo.Context) *service.CallbackGrant {
	g, _ := c.Get(callbackGrantKey).(*service.CallbackGrant)
	return g
}

// heartbeatExecution godoc
//
//	@ID				heartbeatExecution
//	@Summary		Report that a callback attempt is alive
//	@Description	For a task in callback completion mode. Authorised by the attempt's X-Ax-Callback-Token as the bearer (no JWT needed) or by a tenant token with executions:write. Extends the attempt's heartbeat timeout (completion.heartbeat_timeout_ms, never past completion.timeout_ms) and keeps progress when given. 409 and nothing changes for a token of an earlier attempt, an attempt that timed out, or an execution that is not running; 403 for a callback token of another execution.
//	@Tags			executions
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path	string				true	"execution id"
//	@Param			body	body	heartbeatRequest	false	"progress"
//	@Success		204
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unavailable"
//	@Router			/v1/executions/{id}/heartbeat [post]
func (h *handlers) heartbeatExecution(c echo.Context) error {
	var req heartbeatRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	progress := req.Progress
	if string(progress) == "null" {
		progress = nil
	}
	err := h.cfg.Deliveries.Heartbeat(c.Request().Context(), principalFrom(c).Tenant, c.Param("id"), callbackGrant(c), progress)
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// completeExecution godoc
//
//	@ID				completeExecution
//	@Summary		Report the outcome of a callback attempt
//	@Description	For a task in callback completion mode. Authorised like heartbeat. succeeded ends the execution succeeded; failed fails the attempt (error_class callback_failed), which is retried by the task's retry policy with the same idempotency key, unless retryable is false or no attempt is left: then the execution ends failed. output is kept and returned by GET /v1/executions/{id}. 409 and nothing changes for a token of an earlier attempt, an attempt that timed out, or a finished execution.
//	@Tags			executions
//	@Accept			json
//	@Produce		json
//	@Security		BearerAuth
//	@Param			id		path		string			true	"execution id"
//	@Param			body	body		completeRequest	true	"the outcome"
//	@Success		200		{object}	executionResponse
//	@Failure		400,401,403,404,409,413,415,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unavailable"
//	@Router			/v1/executions/{id}/complete [post]
func (h *handlers) completeExecution(c echo.Context) error {
	var req completeRequest
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenant := principalFrom(c).Tenant
	done, err := h.cfg.Deliveries.Complete(ctx, tenant, c.Param("id"), callbackGrant(c), service.CompletionInput{
		Status: req.Status, Output: req.Output, Error: req.Error, Retryable: req.Retryable,
	})
	if err != nil {
		return err
	}
	if done.Detail != nil { // read by the completion's own transaction
		return c.JSON(http.StatusOK, executionOut(*done.Detail))
	}
	x, err := h.cfg.Executions.Get(ctx, tenant, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, executionOut(x))
}
