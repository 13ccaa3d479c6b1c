-- Union schedules: a task's schedule may be the union of 2 to 10 cron or
-- interval schedules (schedule.type union; service/schedule computes
-- them). The union is kept whole in schedule_union (its members with
-- their zones, dialects, DST policies, bounds and calendars, and its own
-- bounds and calendars), NULL for every other type; start_at and end_at
-- hold its own bounds, and exclude_calendars every calendar it or a
-- member names, so that a calendar in use cannot be deleted and its change
-- reschedules the task, as for any schedule. A nullable column: no table
-- rewrite.
ALTER TABLE tasks
    DROP CONSTRAINT tasks_schedule_type_check,
    ADD CONSTRAINT tasks_schedule_type_check CHECK (schedule_type IN ('cron', 'interval', 'once', 'union')),
    ADD COLUMN schedule_union jsonb,
    ADD CONSTRAINT tasks_schedule_union_check CHECK ((schedule_type = 'union') = (schedule_union IS NOT NULL));
