-- The workflow sweep's backstop (db.StalledRuns) looked for stalled runs
-- among the running runs unchanged for its age (updated_at), which a run
-- keeps from its start to its end: once a run was two seconds old the
-- backstop checked it against its executions every second on every
-- replica, however fast it advanced (500 runs advancing: ~100 ms a pass).
-- advanced_at is when the run's advance last brought it up to date (at
-- most a second behind: a run advanced within the last second is not
-- written again), and the backstop reads only the running runs not
-- advanced for its age.
ALTER TABLE workflow_runs ADD COLUMN advanced_at timestamptz NOT NULL DEFAULT now();
-- A running run of upgrade time was last advanced when it last changed.
UPDATE workflow_runs SET advanced_at = updated_at WHERE state = 'running';
DROP INDEX workflow_runs_stalled_idx;
CREATE INDEX workflow_runs_stalled_idx ON workflow_runs (advanced_at) WHERE state = 'running' AND awaiting_nodes = 0;
