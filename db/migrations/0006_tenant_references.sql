-- A foreign key's check runs as a trigger whose query, on ax's main pool
-- (plan_cache_mode force_custom_plan, for River's fetch), is planned afresh
-- for every row: checking the tenant of every inserted execution was a
-- sixth of the database's time at 5,000 fires a second. Two references to
-- tenants buy nothing:
--  - executions: an execution is only created from a task, whose endpoint
--    references the tenant, and tenants are never deleted; like the
--    events' reference to executions (0003);
--  - tasks: a task references its endpoint by (tenant_id, endpoint_id),
--    and that endpoint references the tenant, so the tenant exists.
-- Endpoints (and Idempotency-Keys) keep theirs.
ALTER TABLE executions DROP CONSTRAINT executions_tenant_id_fkey;
ALTER TABLE tasks DROP CONSTRAINT tasks_tenant_id_fkey;
