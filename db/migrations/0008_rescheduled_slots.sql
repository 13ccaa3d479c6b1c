-- A slot given up by a schedule change. A scheduled slot fires at most
-- once, forever: the unique (task_id, scheduled_for) index. But when a
-- task's schedule changes, the executions materialised ahead for the old
-- schedule that have not started are cancelled, and such a cancelled row
-- kept its instant: a new schedule with the same instant (an interval of
-- 1 s anchored on a whole second changed to the cron of every second, or a
-- change back to an earlier schedule) could not insert its execution, and
-- the slot was silently never sent. Such rows are now marked rescheduled
-- (never sent: only pending executions are cancelled so) and the index
-- leaves them out, so the instant fires once under the schedule in force.
--
-- No index of executions mentioned the column before, and the delivery's
-- statements never set it: their updates stay heap-only (0005).
ALTER TABLE executions ADD COLUMN rescheduled boolean NOT NULL DEFAULT false;
DROP INDEX executions_slot_idx;
CREATE UNIQUE INDEX executions_slot_idx ON executions (task_id, scheduled_for)
    WHERE trigger = 'schedule' AND NOT rescheduled;
