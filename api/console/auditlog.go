package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
)

// auditPageSize is how many records the audit page lists at once (?limit=
// changes it, up to service.PageLimitMax).
const auditPageSize = 50

// auditTypes are the resource types the audit page's filter suggests
// (any other can be typed).
var auditTypes = []string{
	audit.ResourceTask, audit.ResourceEndpoint, audit.ResourceExecution, audit.ResourceCalendar, audit.ResourceBackfill,
	service.ResourceWorkflow, service.ResourceWorkflowRun, "limits",
}

type auditRow struct {
	audit.Entry
	// Href opens the resource's console page ("" when it has none).
	Href    string
	Changes string
}

type auditView struct {
	Rows                              []auditRow
	ResourceType, ResourceID, Subject string
	Types                             []string
	// Next is the link to the next page ("" on the last).
	Next     string
	Filtered bool
}

func (auditView) title() (string, string) { return "Audit log", "audit" }

// resourceHref is the console page of an audited resource.
func resourceHref(kind, id string) string {
	p := url.PathEscape(id)
	switch kind {
	case audit.ResourceTask:
		return Prefix + "/tasks/" + p
	case audit.ResourceEndpoint:
		return Prefix + "/endpoints#ep-" + p
	case audit.ResourceExecution:
		return Prefix + "/executions/" + p
	case audit.ResourceCalendar:
		return Prefix + "/calendars/" + p
	case audit.ResourceBackfill:
		return Prefix + "/backfills"
	case service.ResourceWorkflow:
		return Prefix + "/workflows/" + p
	case service.ResourceWorkflowRun:
		return Prefix + "/workflow-runs/" + p
	}
	return ""
}

// audit lists the tenant's audit log, newest first, filtered by resource
// type, resource id and subject (audit.Log.List, the REST route's call),
// a page at a time.
func (c *console) audit(ec echo.Context, s *session) error {
	if c.cfg.Audit == nil {
		return service.ErrNotFound
	}
	f := audit.Filter{
		ResourceType: strings.TrimSpace(ec.QueryParam("resource_type")),
		ResourceID:   strings.TrimSpace(ec.QueryParam("resource_id")),
		Subject:      strings.TrimSpace(ec.QueryParam("subject")),
	}
	limit := auditPageSize
	if n, err := strconv.Atoi(ec.QueryParam("limit")); err == nil && n >= 1 && n <= service.PageLimitMax {
		limit = n
	}
	entries, next, err := c.cfg.Audit.List(ec.Request().Context(), s.Tenant, f, pageOf(ec, limit))
	if err != nil {
		return err
	}
	v := auditView{
		ResourceType: f.ResourceType, ResourceID: f.ResourceID, Subject: f.Subject, Types: auditTypes,
		Filtered: f != audit.Filter{},
	}
	for _, e := range entries {
		row := auditRow{Entry: e, Href: resourceHref(e.ResourceType, e.ResourceID)}
		if len(e.Changes) > 0 && string(e.Changes) != "null" {
			var b bytes.Buffer
			if json.Indent(&b, e.Changes, "", "  ") == nil {
				row.Changes = b.String()
			} else {
				row.Changes = string(e.Changes)
			}
		}
		v.Rows = append(v.Rows, row)
	}
	if next != "" {
		q := url.Values{"after": {next}}
		if limit != auditPageSize {
			q.Set("limit", strconv.Itoa(limit))
		}
		for k, val := range map[string]string{"resource_type": f.ResourceType, "resource_id": f.ResourceID, "subject": f.Subject} {
			if val != "" {
				q.Set(k, val)
			}
		}
		v.Next = Prefix + "/audit?" + q.Encode()
	}
	return c.render(ec, http.StatusOK, "audit", s, v)
}
