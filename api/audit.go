package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/audit"
)

// auditEntry is one change made through the API.
type auditEntry struct {
	ID string `json:"id"`
	// At is when the change was committed (its transaction's time).
	At     timestamp `json:"at" swaggertype:"string" format:"date-time"`
	Tenant string    `json:"tenant" example:"acme"`
	// Subject is the sub claim of the token that made the change.
	Subject string `json:"subject" example:"deploy-bot"`
	// Operator is true when an operator token made the change (Subject is the operator's), false for the tenant's own tokens.
	Operator     bool   `json:"operator" example:"false"`
	Action       string `json:"action" enums:"create,update,delete,pause,resume,trigger,skip,backfill,cancel,retry,rotate_secret,set_limits,test,hold,release"`
	ResourceType string `json:"resource_type" example:"task"`
	ResourceID   string `json:"resource_id"`
	// RequestID is the X-Request-Id of the response to the change.
	RequestID string `json:"request_id"`
	// Changes summarises the change: the fields of a created resource, {"field": {"old", "new"}} for an update. Secrets, header values, URL query values are redacted; payloads appear as their size and SHA-256.
	Changes json.RawMessage `json:"changes" swaggertype:"object" extensions:"x-nullable"`
} // @name AuditEntry

// auditList is a page of audit entries.
type auditList struct {
	Items      []auditEntry `json:"items"`
	NextCursor string       `json:"next_cursor,omitempty"`
} // @name AuditList

// listAudit godoc
//
//	@ID				listAudit
//	@Summary		List the changes made through the API, newest first
//	@Description	Every change made through the API (creates, updates, deletes, pauses, resumes, triggers, cancels, retries, secret rotations, …) is recorded in the transaction of the change, with the token's subject (operator true when it was an operator's token, e.g. a limits change) and the request's X-Request-Id. since and until bound at (since inclusive, until exclusive). Records are kept for AX_AUDIT_RETENTION (default 90 days). Scope audit:read (or admin).
//	@Tags			audit
//	@Produce		json
//	@Security		BearerAuth
//	@Param			resource_type	query		string	false	"only this resource type (endpoint, task, execution, …)"
//	@Param			resource_id		query		string	false	"only this resource"
//	@Param			since			query		string	false	"RFC 3339; at or after"	format(date-time)
//	@Param			until			query		string	false	"RFC 3339; before"		format(date-time)
//	@Param			limit			query		int		false	"page size (default 50, max 500)"
//	@Param			cursor			query		string	false	"next_cursor of the previous page"
//	@Success		200				{object}	auditList
//	@Failure		401,403,422,503	{object}	problem
//	@Header		503	{integer}	Retry-After	"seconds to wait: the database is unreachable"
//	@Router			/v1/audit [get]
func (h *handlers) listAudit(c echo.Context) error {
	page, err := pageParams(c)
	if err != nil {
		return err
	}
	var ve service.ValidationError
	f := audit.Filter{ResourceType: c.QueryParam("resource_type"), ResourceID: c.QueryParam("resource_id")}
	if v := c.QueryParam("since"); v != "" {
		f.Since = parseTime(&ve, "since", &v)
	}
	if v := c.QueryParam("until"); v != "" {
		f.Until = parseTime(&ve, "until", &v)
	}
	if err := ve.Err(); err != nil {
		return err
	}
	items, next, err := h.cfg.Audit.List(c.Request().Context(), principalFrom(c).Tenant, f, page)
	if err != nil {
		return err
	}
	out := auditList{Items: make([]auditEntry, 0, len(items)), NextCursor: encodeCursor(next)}
	for _, r := range items {
		changes := r.Changes
		if changes == nil {
			changes = json.RawMessage("null")
		}
		out.Items = append(out.Items, auditEntry{
			ID: r.ID, At: stamp(r.At), Tenant: r.Tenant, Subject: r.Subject, Operator: r.Operator,
			Action: r.Action, ResourceType: r.ResourceType, ResourceID: r.ResourceID, RequestID: r.RequestID, Changes: changes,
		})
	}
	return c.JSON(http.StatusOK, out)
}
