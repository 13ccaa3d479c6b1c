-- execution_events no longer references executions. Every delivery appends
-- three or four events, and each insert's foreign-key check locked the
-- execution row again (FOR KEY SHARE) in the same transaction that had
-- just written it: a quarter of the deliver worker's statements. Events
-- are only ever appended by the transaction that writes their execution,
-- and executions are never deleted without their events (a retention job
-- must delete both).
ALTER TABLE execution_events DROP CONSTRAINT execution_events_tenant_id_execution_id_fkey;
