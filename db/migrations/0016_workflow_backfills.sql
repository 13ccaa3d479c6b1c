-- Workflow backfills and rounds, calendars on workflow schedules, retired
-- versions.
--
-- A backfill targets a task or a workflow (exactly one); a workflow
-- backfill's slots each start a run (workflow_runs.backfill_id).
ALTER TABLE backfills ALTER COLUMN task_id DROP NOT NULL;
ALTER TABLE backfills ADD COLUMN workflow_id uuid;
ALTER TABLE backfills ADD CONSTRAINT backfills_target_check CHECK ((task_id IS NULL) <> (workflow_id IS NULL));
CREATE INDEX backfills_workflow_idx ON backfills (tenant_id, workflow_id, id DESC) WHERE workflow_id IS NOT NULL;

-- Rounds of runs, as of executions (0009): the slot key covers scheduled
-- and backfill runs; a scheduled run is always round 1, a backfill re-run
-- is latest + 1. A run a calendar change or a schedule patch cancelled
-- before it started gives its slot up (rescheduled), so the schedule can
-- fire the slot again if it comes back.
ALTER TABLE workflow_runs ADD COLUMN backfill_id uuid;
ALTER TABLE workflow_runs ADD COLUMN rescheduled boolean NOT NULL DEFAULT false;
DROP INDEX workflow_runs_slot_idx;
CREATE UNIQUE INDEX workflow_runs_slot_idx ON workflow_runs (workflow_id, scheduled_for, round)
    WHERE trigger IN ('schedule', 'backfill') AND NOT rescheduled;
CREATE INDEX workflow_runs_backfill_idx ON workflow_runs (tenant_id, backfill_id) WHERE backfill_id IS NOT NULL;

-- Calendars on workflow schedules (the ids also sit in schedule's JSON):
-- a calendar change finds the workflows that use it, a calendar delete
-- refuses while one does. schedule_version moves on with every change of
-- the schedule or of its calendars: the scheduler caches the parsed
-- schedule per (workflow, schedule_version).
ALTER TABLE workflows ADD COLUMN exclude_calendars uuid[] NOT NULL DEFAULT '{}';
ALTER TABLE workflows ADD COLUMN schedule_version integer NOT NULL DEFAULT 1;
CREATE INDEX workflows_calendars_idx ON workflows USING gin (exclude_calendars) WHERE exclude_calendars <> '{}';

-- A version older than the current one whose runs have all finished is
-- retired: its hidden node tasks are deleted (they no longer keep an
-- endpoint in use). The document stays for the runs' timelines.
ALTER TABLE workflow_versions ADD COLUMN retired_at timestamptz;
CREATE INDEX workflow_versions_live_idx ON workflow_versions (tenant_id, workflow_id, version) WHERE retired_at IS NULL;
