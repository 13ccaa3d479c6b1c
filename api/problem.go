package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// problem is an RFC 9457 problem detail, the body of every error response.
type problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	Instance  string       `json:"instance,omitempty"`
	RequestID string       `json:"request_id,omitempty"`
	Errors    []fieldError `json:"errors,omitempty"`
} // @name Problem

// fieldError names one invalid field of a request.
type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
} // @name FieldError

func (p *problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

const problemTypeBase = "https://ax.dev/problems/"

// handleError is echo's HTTPErrorHandler: it turns any error into a
// problem+json response. Domain errors map to their status; echo's own
// errors keep theirs; anything else is a 500 whose detail is generic while
// the real error is logged with the request id.
func handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p := toProblem(err, c)
	p.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	if p.Type == "" {
		p.Type = problemTypeBase + slug(p.Status)
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	var ae *authError
	if errors.As(err, &ae) {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, ae.challenge)
	}
	if p.Status >= 500 {
		logFrom(c).Error("request failed", "error", err.Error())
	}
	body, mErr := json.Marshal(p)
	if mErr != nil {
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/problem+json")
	c.Response().WriteHeader(p.Status)
	if c.Request().Method != http.MethodHead {
		_, _ = c.Response().Write(body)
	}
}

func toProblem(err error, c echo.Context) *problem {
	var (
		p  *problem
		ve *service.ValidationError
		ae *authError
		he *echo.HTTPError
	)
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &ae):
		return &problem{Status: http.StatusUnauthorized, Title: "Unauthorized", Detail: ae.detail}
	case errors.As(err, &ve):
		out := &problem{Status: http.StatusUnprocessableEntity, Title: "Validation failed",
			Detail: "the request has invalid fields; see errors"}
		for _, f := range ve.Fields {
			out.Errors = append(out.Errors, fieldError{Field: f.Field, Message: f.Message})
		}
		return out
	case errors.Is(err, service.ErrNotFound):
		return &problem{Status: http.StatusNotFound, Detail: "no such resource"}
	case errors.Is(err, service.ErrConflict):
		return &problem{Status: http.StatusConflict, Detail: conflictDetail(err)}
	case errors.As(err, &he):
		return fromHTTPError(he, c)
	}
	return &problem{Status: http.StatusInternalServerError,
		Detail: "an internal error occurred; quote the request id when reporting it"}
}

// conflictDetail returns the message a service attached to ErrConflict: the
// text before the sentinel, which services write for clients.
func conflictDetail(err error) string {
	msg := err.Error()
	suffix := ": " + service.ErrConflict.Error()
	if len(msg) > len(suffix) && msg[len(msg)-len(suffix):] == suffix {
		return msg[:len(msg)-len(suffix)]
	}
	return "the request conflicts with the current state of the resource"
}

func fromHTTPError(he *echo.HTTPError, c echo.Context) *problem {
	p := &problem{Status: he.Code}
	switch he.Code {
	case http.StatusNotFound:
		p.Detail = fmt.Sprintf("no route for %s %s", c.Request().Method, c.Request().URL.Path)
	case http.StatusMethodNotAllowed:
		p.Detail = fmt.Sprintf("%s is not allowed on %s", c.Request().Method, c.Request().URL.Path)
	case http.StatusRequestEntityTooLarge:
		p.Detail = "the request body is too large"
	case http.StatusUnsupportedMediaType:
		p.Detail = "the request body must be JSON (Content-Type: application/json)"
	default:
		if he.Code < 500 {
			if s, ok := he.Message.(string); ok {
				p.Detail = s
			}
		}
	}
	return p
}

func slug(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad-request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not-found"
	case http.StatusMethodNotAllowed:
		return "method-not-allowed"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "payload-too-large"
	case http.StatusUnsupportedMediaType:
		return "unsupported-media-type"
	case http.StatusUnprocessableEntity:
		return "validation"
	case http.StatusTooManyRequests:
		return "rate-limited"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	if status >= 500 {
		return "internal"
	}
	return fmt.Sprintf("status-%d", status)
}
