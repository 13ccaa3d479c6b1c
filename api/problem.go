package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/idempotency"
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

// retryAfterUnavailable is the Retry-After (seconds) of a 503 for an
// unreachable database: long enough for a restart or a failover to make
// progress, short enough that clients resume promptly.
const retryAfterUnavailable = "5"

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
	if p.Status == http.StatusServiceUnavailable && service.IsUnavailable(err) {
		c.Response().Header().Set(echo.HeaderRetryAfter, retryAfterUnavailable)
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

// domainProblems maps the service's errors to problems: the one place
// where a domain error gets its status. The first entry that matches wins;
// detail, when set, builds the problem's detail from the error.
var domainProblems = []struct {
	match  func(error) bool
	status int
	title  string
	detail func(error) string
}{
	{
		match: service.IsUnavailable, status: http.StatusServiceUnavailable, title: "Database unavailable",
		detail: func(error) string { return "the database is unreachable; try again in a few seconds" },
	},
	{
		match: errorAs[*service.ValidationError], status: http.StatusUnprocessableEntity, title: "Validation failed",
		detail: func(error) string { return "the request has invalid fields; see errors" },
	},
	{
		match: is(idempotency.ErrMismatch), status: http.StatusUnprocessableEntity, title: "Idempotency-Key reused",
		detail: errorText,
	},
	{match: is(idempotency.ErrInFlight), status: http.StatusConflict, detail: errorText},
	{
		match: is(service.ErrNotFound), status: http.StatusNotFound,
		detail: func(error) string { return "no such resource" },
	},
	{match: is(service.ErrConflict), status: http.StatusConflict, detail: conflictDetail},
}

func toProblem(err error, c echo.Context) *problem {
	var (
		p  *problem
		ae *authError
		he *echo.HTTPError
	)
	if ve, ok := service.InputError(err); ok {
		err = ve // data the database refused, by a path that skipped the service's translation
	}
	var qe *service.QuotaError
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &qe):
		return &problem{
			Type: problemTypeBase + "quota-exceeded", Status: http.StatusConflict, Title: "Quota exceeded",
			Detail: qe.Error(),
		}
	case errors.As(err, &ae):
		return &problem{Status: http.StatusUnauthorized, Title: "Unauthorized", Detail: ae.detail}
	}
	for _, d := range domainProblems {
		if !d.match(err) {
			continue
		}
		out := &problem{Status: d.status, Title: d.title}
		if d.detail != nil {
			out.Detail = d.detail(err)
		}
		var ve *service.ValidationError
		if errors.As(err, &ve) {
			for _, f := range ve.Fields {
				out.Errors = append(out.Errors, fieldError{Field: f.Field, Message: f.Message})
			}
		}
		return out
	}
	if errors.As(err, &he) {
		return fromHTTPError(he, c)
	}
	return &problem{
		Status: http.StatusInternalServerError,
		Detail: "an internal error occurred; quote the request id when reporting it",
	}
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func errorAs[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

func errorText(err error) string { return err.Error() }

// conflictDetail is the detail a service wrote for the client
// (service.ConflictError), or a generic one.
func conflictDetail(err error) string {
	var ce *service.ConflictError
	if errors.As(err, &ce) && ce.Detail != "" {
		return ce.Detail
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
