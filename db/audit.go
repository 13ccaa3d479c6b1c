package db

import (
	"context"
	"time"
)

// AuditRecord is a row of audit_log.
type AuditRecord struct {
	TenantID     string
	ID           string
	At           time.Time
	Subject      string
	Operator     bool // made with an operator token, not the tenant's own
	Action       string
	ResourceType string
	ResourceID   string
	RequestID    string
	// Changes is the JSON summary of the change; nil for none.
	Changes []byte
}

// fields returns pointers to r's fields in the order of auditColumns.
func (r *AuditRecord) fields() []any {
	return []any{&r.TenantID, &r.ID, &r.At, &r.Subject, &r.Operator, &r.Action, &r.ResourceType, &r.ResourceID, &r.RequestID, &r.Changes}
}

const auditColumns = `a.tenant_id, a.id::text, a.at, a.subject, a.operator, a.action, a.resource_type, a.resource_id, a.request_id, a.changes`

// InsertAudit appends r to the audit log (at is the transaction's now()).
// It belongs in the transaction of the change it records.
func InsertAudit(ctx context.Context, q Querier, r AuditRecord) error {
	_, err := q.Exec(ctx, `INSERT INTO audit_log (tenant_id, id, subject, operator, action, resource_type, resource_id, request_id, changes)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)`,
		r.TenantID, r.ID, r.Subject, r.Operator, r.Action, r.ResourceType, r.ResourceID, r.RequestID, nullJSON(r.Changes))
	return wrap("record audit", err)
}

func nullJSON(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// AuditFilter narrows ListAudit.
type AuditFilter struct {
	ResourceType string // "" for any
	ResourceID   string // "" for any
	Subject      string // "" for any
	// Since and Until bound at: Since <= at < Until.
	Since, Until *time.Time
	Before       string // id cursor: only ids below it; "" for the first page
	Limit        int
}

// ListAudit returns a tenant's audit records newest first (ids are
// UUIDv7).
func ListAudit(ctx context.Context, q Querier, tenant string, f AuditFilter) ([]AuditRecord, error) {
	rows, err := q.Query(ctx, `SELECT `+auditColumns+` FROM audit_log a
		WHERE a.tenant_id = $1 AND ($2 = '' OR a.id < NULLIF($2, '')::uuid)
		  AND ($3 = '' OR a.resource_type = $3) AND ($4 = '' OR a.resource_id = $4)
		  AND ($5::timestamptz IS NULL OR a.at >= $5) AND ($6::timestamptz IS NULL OR a.at < $6)
		  AND ($8 = '' OR a.subject = $8)
		ORDER BY a.id DESC LIMIT $7`,
		tenant, f.Before, f.ResourceType, f.ResourceID, f.Since, f.Until, f.Limit, f.Subject)
	if err != nil {
		return nil, wrap("list audit records", err)
	}
	return collectRows[AuditRecord](rows, f.Limit)
}
