package console

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
)

// keepValue, as a header's value in the endpoint form, keeps the value
// the endpoint has: the form never shows header values (they are often
// credentials), as the execution page does not.
const keepValue = "(unchanged)"

// endpointEditForm is the endpoint form's values, as typed.
type endpointEditForm struct {
	Name, URL, Method, Headers, TimeoutMS, MaxConcurrency, RateLimit string
	// Format is the alerts' format (service.AlertFormatAx or AlertFormatSlack).
	Format  string
	Enabled bool
}

type endpointEditView struct {
	Endpoint service.Endpoint
	Form     endpointEditForm
	Errs     map[string]string
	Problem  *errorView
}

func (v endpointEditView) title() (string, string) {
	return "Edit endpoint " + v.Endpoint.Name, "endpoints"
}

// endpointEditFields are the fields the endpoint form has an input for.
var endpointEditFields = []string{"name", "url", "method", "headers", "timeout_ms", "max_concurrency", "rate_limit_per_second", "format", "enabled"}

func endpointFormOf(ep service.Endpoint) endpointEditForm {
	f := endpointEditForm{
		Name: ep.Name, URL: ep.URL, Method: ep.Method, TimeoutMS: ms(ep.Timeout), Format: ep.Format, Enabled: ep.Enabled,
	}
	var h strings.Builder
	for _, k := range slices.Sorted(maps.Keys(ep.Headers)) {
		h.WriteString(k + ": " + keepValue + "\n")
	}
	f.Headers = h.String()
	if ep.MaxConcurrency != nil {
		f.MaxConcurrency = strconv.Itoa(*ep.MaxConcurrency)
	}
	if ep.RateLimitPerSecond != nil {
		f.RateLimit = strconv.FormatFloat(*ep.RateLimitPerSecond, 'f', -1, 64)
	}
	return f
}

// apply writes the form's values over in: a header whose value is
// keepValue keeps the endpoint's; a header left out is removed.
func (f endpointEditForm) apply(in *service.EndpointInput) error {
	var ve service.ValidationError
	in.Name, in.URL, in.Method, in.Enabled = f.Name, f.URL, f.Method, f.Enabled
	if f.Format != "" { // a form without the field keeps the endpoint's
		in.Format = f.Format
	}
	headers := map[string]string{}
	for i, line := range strings.Split(f.Headers, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			ve.Add("headers", "line "+strconv.Itoa(i+1)+": want Name: value")
			continue
		}
		if v == keepValue {
			old, found := lookupHeader(in.Headers, k)
			if !found {
				ve.Add("headers", "line "+strconv.Itoa(i+1)+": "+k+" has no value to keep; type one")
				continue
			}
			v = old
		}
		headers[k] = v
	}
	in.Headers = headers
	in.Timeout = millis(&ve, "timeout_ms", f.TimeoutMS)
	in.MaxConcurrency, in.RateLimitPerSecond = nil, nil
	if f.MaxConcurrency != "" {
		n, err := strconv.Atoi(f.MaxConcurrency)
		if err != nil {
			ve.Add("max_concurrency", "must be a whole number, or empty for no limit")
		}
		in.MaxConcurrency = &n
	}
	if f.RateLimit != "" {
		r, err := strconv.ParseFloat(f.RateLimit, 64)
		if err != nil {
			ve.Add("rate_limit_per_second", "must be a number, or empty for no limit")
		}
		in.RateLimitPerSecond = &r
	}
	return ve.Err()
}

// lookupHeader finds a header by name, in any case.
func lookupHeader(h map[string]string, name string) (string, bool) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

func (c *console) editEndpoint(ec echo.Context, s *session) error {
	ep, err := c.cfg.Endpoints.Get(ec.Request().Context(), s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	return c.render(ec, http.StatusOK, "endpoint_edit", s, endpointEditView{Endpoint: ep, Form: endpointFormOf(ep)})
}

// updateEndpoint saves the endpoint form (the REST PATCH's service call);
// a refusal shows the form again with each reason at its field.
func (c *console) updateEndpoint(ec echo.Context, s *session) error {
	ctx := ec.Request().Context()
	ep, err := c.cfg.Endpoints.Get(ctx, s.Tenant, ec.Param("id"))
	if err != nil {
		return err
	}
	v := func(k string) string { return strings.TrimSpace(ec.FormValue(k)) }
	f := endpointEditForm{
		Name: v("name"), URL: v("url"), Method: v("method"), Headers: ec.FormValue("headers"), TimeoutMS: v("timeout_ms"),
		MaxConcurrency: v("max_concurrency"), RateLimit: v("rate_limit_per_second"), Format: v("format"),
		Enabled: ec.FormValue("enabled") == "true",
	}
	_, err = c.cfg.Endpoints.Update(ctx, s.Tenant, ep.ID, f.apply)
	var ve *service.ValidationError
	if errors.As(err, &ve) {
		errs, rest := fieldMessages(ve.Fields, endpointEditFields)
		return c.render(ec, http.StatusUnprocessableEntity, "endpoint_edit", s, endpointEditView{
			Endpoint: ep, Form: f, Errs: errs,
			Problem: &errorView{Title: "The endpoint was not saved", Detail: "Correct the fields marked below.", Fields: rest},
		})
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/endpoints#ep-"+url.PathEscape(ep.ID))
}
