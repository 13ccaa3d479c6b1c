-- Every inserted execution checked its tenant row (FOR KEY SHARE) through
-- a trigger, planned afresh each time on the main pool: a sixth of the
-- database's time at 5,000 fires a second. Executions are only created
-- from a task (whose row references its tenant) and tenants are never
-- deleted; like the events' reference to executions (0003), the check
-- bought nothing.
ALTER TABLE executions DROP CONSTRAINT executions_tenant_id_fkey;
