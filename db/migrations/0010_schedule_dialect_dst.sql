-- A cron schedule's dialect (schedule.dialect: standard or quartz) and DST
-- policy (schedule.dst_policy: vixie or once_per_local_time).
--
-- New tasks default to vixie, but the tasks that exist keep the rule they
-- were created under: the column is added with once_per_local_time as its
-- default, which fills every existing row (without rewriting the table: a
-- constant default is stored in the catalogue), and the default then
-- becomes vixie. Interval and once tasks carry the defaults and ignore them.
-- Neither column is indexed: the scheduler's updates of tasks stay
-- heap-only.
ALTER TABLE tasks
    ADD COLUMN schedule_dialect text NOT NULL DEFAULT 'standard'
        CONSTRAINT tasks_schedule_dialect_check CHECK (schedule_dialect IN ('standard', 'quartz')),
    ADD COLUMN dst_policy text NOT NULL DEFAULT 'once_per_local_time'
        CONSTRAINT tasks_dst_policy_check CHECK (dst_policy IN ('vixie', 'once_per_local_time'));
ALTER TABLE tasks ALTER COLUMN dst_policy SET DEFAULT 'vixie';
