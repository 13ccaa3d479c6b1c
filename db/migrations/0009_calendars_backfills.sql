-- Business calendars, backfills and rounds.
--
-- Calendars are tenant-owned lists of local dates that schedules exclude
-- (tasks.exclude_calendars). A calendar in use cannot be deleted: the
-- service checks the tasks that name it under the calendar's row lock.
CREATE TABLE calendars (
    tenant_id  text NOT NULL REFERENCES tenants (id),
    id         uuid NOT NULL,
    name       text NOT NULL,
    timezone   text NOT NULL DEFAULT 'UTC',
    -- Sorted, without duplicates.
    dates      date[] NOT NULL DEFAULT '{}',
    version    integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, name)
);

ALTER TABLE tasks ADD COLUMN exclude_calendars uuid[] NOT NULL DEFAULT '{}';
CREATE INDEX tasks_calendars_idx ON tasks USING gin (exclude_calendars) WHERE exclude_calendars <> '{}';

-- A backfill re-runs a fixed list of a task's slots (decided when it was
-- created), at most max_concurrency unfinished at once. next_index is the
-- first slot not yet dealt with: a restart resumes there.
CREATE TABLE backfills (
    tenant_id       text NOT NULL REFERENCES tenants (id),
    id              uuid NOT NULL,
    task_id         uuid NOT NULL,
    range_from      timestamptz NOT NULL,
    range_to        timestamptz NOT NULL,
    rerun           text NOT NULL CHECK (rerun IN ('missing', 'failed', 'all')),
    max_concurrency integer NOT NULL CHECK (max_concurrency BETWEEN 1 AND 100),
    state           text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    slots           timestamptz[] NOT NULL,
    next_index      integer NOT NULL DEFAULT 0,
    total           integer NOT NULL,
    created         integer NOT NULL DEFAULT 0,
    succeeded       integer NOT NULL DEFAULT 0,
    failed          integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX backfills_running_idx ON backfills (created_at) WHERE state = 'running';
CREATE INDEX backfills_task_idx ON backfills (tenant_id, task_id, id DESC);

-- Rounds: the first fire of a slot is round 1; a backfill that re-runs a
-- slot adds round + 1. The slot key becomes (task_id, scheduled_for,
-- round) over scheduled and backfill executions: a scheduled fire is
-- always round 1, so a slot still fires at most once on its own, and two
-- backfills can never create the same round of a slot. Neither column is
-- ever updated: the delivery's updates stay heap-only (0005).
ALTER TABLE executions ADD COLUMN round integer NOT NULL DEFAULT 1 CHECK (round >= 1);
ALTER TABLE executions ADD COLUMN backfill_id uuid;
DROP INDEX executions_slot_idx;
CREATE UNIQUE INDEX executions_slot_idx ON executions (task_id, scheduled_for, round)
    WHERE trigger IN ('schedule', 'backfill') AND NOT rescheduled;
CREATE INDEX executions_backfill_idx ON executions (tenant_id, backfill_id) WHERE backfill_id IS NOT NULL;
