package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/api"
	"github.com/axhq/ax/service"
)

// limitRow is one limit: what applies, what it counts now, and the
// tenant's own value ("" for the server's default) when readable.
type limitRow struct {
	// Field is the API's name (and the form's).
	Field, Label, Effective, Usage, Own string
	// Percent of the limit used (nil when it counts nothing or has none).
	Percent *int
}

type limitsView struct {
	Rows []limitRow
	// Own: the tenant's own values are shown (a token with admin);
	// Editable: and may be set (the REST PUT's rule, see mayEditLimits).
	Own, Editable bool
	Errs          map[string]string
	Problem       *errorView
	Flash         string
}

func (limitsView) title() (string, string) { return "Limits", "limits" }

var limitFields = []string{"max_tasks", "max_workflows", "max_inflight_deliveries", "max_deliveries_per_second", "api_requests_per_second"}

// mayEditLimits is the REST rule for PUT /v1/admin/tenants/{tenant}/limits
// as it applies to a tenant's token (the console takes no operator
// token): only while the server runs with the deprecated
// AX_ADMIN_IS_OPERATOR, and with admin.
func (c *console) mayEditLimits(s *session) bool {
	return c.cfg.AdminIsOperator && s.Has(api.ScopeAdmin)
}

// limits shows the tenant's limits and what they count now (GET
// /v1/limits: any tenant token), its own values with admin, and the form
// that sets them where the REST API would let this token.
func (c *console) limits(ec echo.Context, s *session) error {
	v := limitsView{}
	if ec.QueryParam("done") == "saved" {
		v.Flash = "The limits are saved; every replica applies them within a few seconds."
	}
	return c.limitsPage(ec, s, http.StatusOK, v, nil)
}

func (c *console) limitsPage(ec echo.Context, s *session, status int, v limitsView, typed map[string]string) error {
	if c.cfg.Limits == nil {
		return service.ErrNotFound
	}
	ctx := ec.Request().Context()
	u, err := c.cfg.Limits.Usage(ctx, s.Tenant)
	if err != nil {
		return err
	}
	e := u.Limits
	v.Rows = []limitRow{
		countRow("max_tasks", "Tasks", e.MaxTasks, u.Tasks),
		countRow("max_workflows", "Workflows", e.MaxWorkflows, u.Workflows),
		countRow("max_inflight_deliveries", "Webhooks in flight at once", e.MaxInflightDeliveries, u.InflightDeliveries),
		{Field: "max_deliveries_per_second", Label: "Webhooks started per second", Effective: rate(e.MaxDeliveriesPerSecond)},
		{Field: "api_requests_per_second", Label: "API requests per second (the console's pages count too)", Effective: rate(e.APIRequestsPerSecond)},
	}
	v.Own = s.Has(api.ScopeAdmin)
	v.Editable = c.mayEditLimits(s)
	if v.Own {
		tv, err := c.cfg.Limits.Get(ctx, s.Tenant)
		if err != nil {
			return err
		}
		own := tv.Limits
		vals := []string{
			intText(own.MaxTasks), intText(own.MaxWorkflows), intText(own.MaxInflightDeliveries),
			floatText(own.MaxDeliveriesPerSecond), floatText(own.APIRequestsPerSecond),
		}
		for i := range v.Rows {
			v.Rows[i].Own = vals[i]
			if t, ok := typed[v.Rows[i].Field]; ok {
				v.Rows[i].Own = t
			}
		}
	}
	return c.render(ec, status, "limits", s, v)
}

func countRow(field, label string, limit, used int) limitRow {
	r := limitRow{Field: field, Label: label, Effective: "no limit", Usage: strconv.Itoa(used)}
	if limit > 0 {
		r.Effective = strconv.Itoa(limit)
		p := min(100, used*100/limit)
		r.Percent = &p
	}
	return r
}

func rate(v float64) string {
	if v <= 0 {
		return "no limit"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + " /s"
}

func intText(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func floatText(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'f', -1, 64)
}

// setLimits sets the tenant's own limits from the form (the REST PUT's
// service call); empty is the server's default. Refused (403) unless
// mayEditLimits.
func (c *console) setLimits(ec echo.Context, s *session) error {
	if c.cfg.Limits == nil {
		return service.ErrNotFound
	}
	if !c.mayEditLimits(s) {
		return c.render(ec, http.StatusForbidden, "error", s, errorView{
			Title: "Forbidden",
			Detail: "Setting a tenant's limits needs an operator (PUT /v1/admin/tenants/{tenant}/limits with an operator token); " +
				"the limits page shows them read-only.",
		})
	}
	var ve service.ValidationError
	typed := map[string]string{}
	for _, f := range limitFields {
		typed[f] = strings.TrimSpace(ec.FormValue(f))
	}
	ints := func(f string) *int {
		if typed[f] == "" {
			return nil
		}
		n, err := strconv.Atoi(typed[f])
		if err != nil {
			ve.Add(f, "must be a whole number, or empty for the server's default")
			return nil
		}
		return &n
	}
	floats := func(f string) *float64 {
		if typed[f] == "" {
			return nil
		}
		n, err := strconv.ParseFloat(typed[f], 64)
		if err != nil {
			ve.Add(f, "must be a number, or empty for the server's default")
			return nil
		}
		return &n
	}
	in := service.TenantLimits{
		MaxTasks: ints("max_tasks"), MaxWorkflows: ints("max_workflows"), MaxInflightDeliveries: ints("max_inflight_deliveries"),
		MaxDeliveriesPerSecond: floats("max_deliveries_per_second"), APIRequestsPerSecond: floats("api_requests_per_second"),
	}
	err := ve.Err()
	if err == nil {
		_, err = c.cfg.Limits.Set(ec.Request().Context(), s.Tenant, in)
	}
	if p, errs, ok := formRefusal(err, "The limits were not saved", limitFields); ok {
		return c.limitsPage(ec, s, refusalStatus(err), limitsView{Errs: errs, Problem: p}, typed)
	}
	if err != nil {
		return err
	}
	return ec.Redirect(http.StatusSeeOther, Prefix+"/limits?done=saved")
}
