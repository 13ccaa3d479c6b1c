package api

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/http"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/idempotency"
)

const headerIdempotencyKey = "Idempotency-Key"

// idempotent makes a POST create replayable: the same Idempotency-Key with
// the same body within 24 h gets the original response (marked with
// Idempotent-Replayed: true); with a different body, 422. The request is
// handled in the key's transaction (idempotency.Keys.Handle): its
// response is buffered, stored with the change it describes, and sent
// once both are committed. Server errors release the key so the client
// can retry. Without a key the request goes straight to the handler.
func (h *handlers) idempotent(route string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			keys, present := c.Request().Header[headerIdempotencyKey]
			if !present {
				return next(c)
			}
			// Present but empty is a malformed key, not an absent one. A
			// control byte other than a tab never gets here: net/http
			// refuses the request with its own 400.
			key := keys[0]
			if key == "" || len(key) > 255 || !printable(key) {
				return &service.ValidationError{Fields: []service.FieldError{{
					Field:   headerIdempotencyKey,
					Message: "must be 1 to 255 printable ASCII characters",
				}}}
			}
			body, err := io.ReadAll(c.Request().Body)
			if err != nil {
				return jsonError(err)
			}
			c.Request().Body = io.NopCloser(bytes.NewReader(body))
			req, res, tenant := c.Request(), c.Response(), principalFrom(c).Tenant
			var buf *bufferedWriter
			stored, replayed, err := h.cfg.Idempotency.Handle(req.Context(), tenant, route, key, body,
				func(ctx context.Context) idempotency.Response {
					buf = &bufferedWriter{header: res.Header().Clone()}
					c.SetRequest(req.WithContext(ctx))
					c.SetResponse(echo.NewResponse(buf, c.Echo()))
					defer func() { c.SetRequest(req); c.SetResponse(res) }()
					if err := next(c); err != nil {
						c.Error(err) // render now, so the rendered problem is what gets stored
					}
					return idempotency.Response{Status: buf.statusCode(), Body: buf.body.Bytes()}
				})
			switch {
			case err != nil:
				return err // domainProblems maps the mismatch and the request in flight
			case replayed:
				res.Header().Set("Idempotent-Replayed", "true")
				ct := echo.MIMEApplicationJSON
				if stored.Status >= 400 {
					ct = "application/problem+json"
				}
				return c.Blob(stored.Status, ct, stored.Body)
			}
			// Committed (or, for a server error, rolled back): now send it.
			maps.Copy(res.Header(), buf.header)
			res.WriteHeader(stored.Status)
			_, err = res.Write(stored.Body)
			return err
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

// bufferedWriter holds a response until it may be sent.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferedWriter) Header() http.Header { return w.header }

func (w *bufferedWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *bufferedWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

// statusCode is the response's status: 200 when nothing set one, as
// net/http would send.
func (w *bufferedWriter) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
