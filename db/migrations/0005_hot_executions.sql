-- HOT updates of executions. A delivery updates its execution twice
-- (started, then succeeded). While `state` was in an index (the list by
-- state, and the partial index of unfinished executions), each update was
-- a new version in every index of the table: at 5,000 deliveries a second
-- that was most of the database's work. Now no index of executions
-- mentions a column the common delivery changes, and its pages keep room
-- for the new versions (fillfactor), so both are heap-only (HOT) updates
-- that touch no index.
--
-- What the dropped indexes answered:
--  - the executions that are not final (pending, running, retrying) — a
--    task's earlier ones for its overlap policy, its pending ones when it is
--    paused, deleted or rescheduled, a tenant's for the list by state — are
--    the rows of unfinished_executions, inserted with the execution (or
--    when an API retry reopens it) and deleted by the statement that moves
--    it to a final state, so it holds exactly the unfinished ones;
--  - the failed, cancelled and skipped executions (the dead-letter set)
--    always carry last_error (a CHECK says so), and an index of the rows
--    that have one serves the list of those states. A delivery's success
--    leaves last_error NULL, so it stays HOT;
--  - a retrying execution is the one with a next_attempt_at: an index of
--    those rows serves the list of that state.
--
-- Replicas of an earlier version must not run beside this one (they would
-- neither keep unfinished_executions nor read the new batch jobs): stop
-- them before the upgrade (CHANGELOG). The upgrade holds executions
-- against writes while it copies, mends and reads it once (the constraint's
-- check and the new indexes); the old indexes find the rows to copy and to
-- mend before they go.
LOCK TABLE executions IN EXCLUSIVE MODE;

CREATE TABLE unfinished_executions (
    tenant_id     text NOT NULL,
    task_id       uuid NOT NULL,
    scheduled_for timestamptz NOT NULL,
    id            uuid NOT NULL,
    PRIMARY KEY (tenant_id, task_id, scheduled_for, id)
);
-- Thousands of rows come and go every second on a busy server.
ALTER TABLE unfinished_executions SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
    autovacuum_analyze_scale_factor = 0.02);
INSERT INTO unfinished_executions (tenant_id, task_id, scheduled_for, id)
    SELECT tenant_id, task_id, scheduled_for, id FROM executions WHERE state IN ('pending', 'running', 'retrying');

-- An execution cancelled through the API while pending had no last_error.
UPDATE executions
    SET last_error = CASE state WHEN 'cancelled' THEN 'cancelled through the API' ELSE 'no reason was recorded' END
    WHERE state IN ('failed', 'cancelled', 'skipped') AND last_error IS NULL;
ALTER TABLE executions ADD CONSTRAINT executions_final_reason
    CHECK (state NOT IN ('failed', 'cancelled', 'skipped') OR last_error IS NOT NULL);
CREATE INDEX executions_last_error_idx ON executions (tenant_id, id DESC) WHERE last_error IS NOT NULL;
CREATE INDEX executions_retrying_idx ON executions (tenant_id, id DESC) WHERE next_attempt_at IS NOT NULL;

DROP INDEX executions_state_idx;
DROP INDEX executions_unfinished_idx;
ALTER TABLE executions SET (fillfactor = 60);
