-- Events: something happened (POST /v1/events), and the tasks and
-- workflows whose schedule is that event fire, once per event, in the
-- event's own transaction.
--
-- (posted_events: "events" would read as the executions' timeline events.)
-- An event row is written with what it fired (matched: one entry per
-- execution or run, and the counts) in the transaction that fired it, so
-- an event is never stored without its fires nor fires without its event.
CREATE TABLE posted_events (
    tenant_id          text NOT NULL REFERENCES tenants (id),
    id                 uuid NOT NULL,
    name               text NOT NULL,
    key                text,
    payload            jsonb,
    dedup_key          text,
    -- When it arrived: the database's clock in the posting transaction.
    received_at        timestamptz NOT NULL,
    matched_tasks      integer NOT NULL DEFAULT 0,
    matched_workflows  integer NOT NULL DEFAULT 0,
    matched_waits      integer NOT NULL DEFAULT 0,
    -- [{"type": "task", "task_id", "execution_id"}, {"type": "workflow", "workflow_id", "run_id"}]
    matched            jsonb NOT NULL DEFAULT '[]',
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX posted_events_name_idx ON posted_events (tenant_id, name, id DESC);
-- Retention removes the oldest first.
CREATE INDEX posted_events_received_idx ON posted_events (received_at);

-- An event's dedup_key for 24 h: the first event that claims it owns it
-- until expires_at; a later claim of an expired key takes it over (one
-- INSERT … ON CONFLICT DO UPDATE … WHERE expires_at <= now(), so two
-- concurrent posts of one key get one winner).
CREATE TABLE event_dedup (
    tenant_id  text NOT NULL REFERENCES tenants (id),
    dedup_key  text NOT NULL,
    event_id   uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, dedup_key)
);
CREATE INDEX event_dedup_expires_idx ON event_dedup (expires_at);

-- Event schedules: schedule {"type": "event", "event": NAME}. Such a task
-- has no time slots: next_run_at stays NULL, so the scheduler never claims
-- it.
ALTER TABLE tasks DROP CONSTRAINT tasks_schedule_type_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_schedule_type_check
    CHECK (schedule_type IN ('cron', 'interval', 'once', 'union', 'event'));
ALTER TABLE tasks ADD COLUMN schedule_event text;
ALTER TABLE tasks ADD CONSTRAINT tasks_schedule_event_check
    CHECK ((schedule_type = 'event') = (schedule_event IS NOT NULL));
CREATE INDEX tasks_event_idx ON tasks (tenant_id, schedule_event) WHERE schedule_event IS NOT NULL;
-- A workflow's schedule is its JSON (schedule.Spec's field names).
CREATE INDEX workflows_event_idx ON workflows (tenant_id, (schedule->>'Event')) WHERE schedule->>'Type' = 'event';

-- An event's fires: trigger 'event', scheduled_for the event's arrival,
-- event_id the event. The slot index does not cover them (two events may
-- arrive in the same microsecond); this one does: an event fires a task's
-- shard, or starts a workflow's run, at most once. event_id is never
-- updated, so the delivery's updates stay heap-only (0005).
ALTER TABLE executions DROP CONSTRAINT executions_trigger_check;
ALTER TABLE executions ADD CONSTRAINT executions_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'backfill', 'retry', 'dependency', 'event')) NOT VALID;
ALTER TABLE executions VALIDATE CONSTRAINT executions_trigger_check;
ALTER TABLE executions ADD COLUMN event_id uuid;
CREATE UNIQUE INDEX executions_event_idx ON executions (task_id, event_id, shard) WHERE event_id IS NOT NULL;

ALTER TABLE workflow_runs DROP CONSTRAINT workflow_runs_trigger_check;
ALTER TABLE workflow_runs ADD CONSTRAINT workflow_runs_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'backfill', 'event'));
ALTER TABLE workflow_runs ADD COLUMN event_id uuid;
CREATE UNIQUE INDEX workflow_runs_event_idx ON workflow_runs (workflow_id, event_id) WHERE event_id IS NOT NULL;
