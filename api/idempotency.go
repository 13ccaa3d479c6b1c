package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

const headerIdempotencyKey = "Idempotency-Key"

// idempotent makes a POST create replayable: the same Idempotency-Key with
// the same body within 24 h gets the original response (marked with
// Idempotent-Replayed: true); with a different body, 422. Server errors
// release the key so the client can retry.
func (h *handlers) idempotent(route string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			key := c.Request().Header.Get(headerIdempotencyKey)
			if key == "" {
				return next(c)
			}
			if len(key) > 255 || !printable(key) {
				return &service.ValidationError{Fields: []service.FieldError{{Field: headerIdempotencyKey,
					Message: "must be 1 to 255 printable ASCII characters"}}}
			}
			body, err := io.ReadAll(c.Request().Body)
			if err != nil {
				return jsonError(err)
			}
			c.Request().Body = io.NopCloser(bytes.NewReader(body))
			ctx, tenant := c.Request().Context(), principalFrom(c).Tenant
			stored, err := h.cfg.Idempotency.Claim(ctx, tenant, route, key, body)
			switch {
			case err != nil:
				return err // domainProblems maps the mismatch and the request in flight
			case stored != nil:
				c.Response().Header().Set("Idempotent-Replayed", "true")
				ct := echo.MIMEApplicationJSON
				if stored.Status >= 400 {
					ct = "application/problem+json"
				}
				return c.Blob(stored.Status, ct, stored.Body)
			}
			rec := &recorder{ResponseWriter: c.Response().Writer}
			c.Response().Writer = rec
			if err := next(c); err != nil {
				c.Error(err) // render now, so the rendered problem is what gets stored
			}
			status := c.Response().Status
			finishCtx := context.WithoutCancel(ctx)
			if status >= 500 {
				return h.cfg.Idempotency.Release(finishCtx, tenant, route, key)
			}
			return h.cfg.Idempotency.Finish(finishCtx, tenant, route, key, service.StoredResponse{Status: status, Body: rec.body.Bytes()})
		}
	}
}

func printable(s string) bool {
	for _, r := range s {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// recorder keeps a copy of the response body.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}
