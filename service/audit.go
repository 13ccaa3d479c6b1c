package service

import (
	"context"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/audit"
)

// Audit actions and audited resource types (service/audit), as the
// service's files name them.
const (
	AuditCreate       = audit.Create
	AuditUpdate       = audit.Update
	AuditDelete       = audit.Delete
	AuditPause        = audit.Pause
	AuditResume       = audit.Resume
	AuditTrigger      = audit.Trigger
	AuditSkip         = audit.Skip
	AuditBackfill     = audit.Backfill
	AuditCancel       = audit.Cancel
	AuditRetry        = audit.Retry
	AuditRotateSecret = audit.RotateSecret
	AuditSetLimits    = audit.SetLimits
	AuditHold         = audit.Hold
	AuditRelease      = audit.Release

	ResourceEndpoint  = audit.ResourceEndpoint
	ResourceTask      = audit.ResourceTask
	ResourceExecution = audit.ResourceExecution
	ResourceCalendar  = audit.ResourceCalendar
	ResourceBackfill  = audit.ResourceBackfill
)

// recordAudit records a change made through the API in its transaction q
// (audit.Record).
func recordAudit(ctx context.Context, q db.Querier, tenant, action, resourceType, resourceID string, changes any) error {
	return audit.Record(ctx, q, tenant, action, resourceType, resourceID, changes)
}

func auditRecord(ctx context.Context, tenant, action, resourceType, resourceID string, changes any) (db.AuditRecord, bool, error) {
	return audit.NewRecord(ctx, tenant, action, resourceType, resourceID, changes)
}

func auditCreated(v any) map[string]any          { return audit.Created(v) }
func auditDiff(before, after any) map[string]any { return audit.Diff(before, after) }
func auditBytes(b []byte) any                    { return audit.Bytes(b) }
