-- The audit log: one row per change made through the API, written in the
-- transaction of the change (a change that rolls back leaves no row).
-- changes is a JSON summary of what changed; it never holds a secret.
-- resource_id is text: most resources have a uuid, tenant limits are
-- named by their tenant.
CREATE TABLE audit_log (
    tenant_id     text NOT NULL REFERENCES tenants (id),
    id            uuid NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    subject       text NOT NULL DEFAULT '',
    action        text NOT NULL,
    resource_type text NOT NULL,
    resource_id   text NOT NULL,
    request_id    text NOT NULL DEFAULT '',
    changes       jsonb,
    PRIMARY KEY (tenant_id, id)
);
-- The primary key serves the newest-first list (ids are UUIDv7); this one
-- the list of one resource's history.
CREATE INDEX audit_log_resource_idx ON audit_log (tenant_id, resource_type, resource_id, id DESC);
-- Retention removes the oldest rows of every tenant, in batches.
CREATE INDEX audit_log_at_idx ON audit_log (at);

-- Execution retention needs no index of its own: its batches walk each
-- tenant's executions by primary key (tenant_id, id), whose UUIDv7 ids
-- sort by creation time, so an index on a column that a delivery changes
-- (finished_at, state) — which would end its heap-only updates (0005) —
-- is not needed, and neither is one more index entry per fire.
