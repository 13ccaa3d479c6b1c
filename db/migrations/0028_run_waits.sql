-- The stalled-run backstop (db.StalledRuns) reads no run waiting for an
-- event: workflow_runs.awaiting_nodes counts a run's nodes counted as
-- awaiting (workflow_run_nodes.wait_counted), and the backstop reads the
-- running runs with none through workflow_runs_stalled_idx.
--
-- The statements that start and end waits do not write the run: a second
-- write of a run row in a transaction makes the run's later updates check
-- its workflow's key (FOR KEY SHARE), which the transaction's promote then
-- upgrades to FOR UPDATE, and two event transactions doing so deadlock.
-- Instead a node whose state and wait_counted disagree (a wait started or
-- ended since) is in workflow_run_nodes_uncounted_idx, and the workflow
-- sweep brings its run's count up to date (db.CountRunWaits), a second at
-- most after the change.
ALTER TABLE workflow_runs ADD COLUMN awaiting_nodes integer NOT NULL DEFAULT 0;
ALTER TABLE workflow_run_nodes ADD COLUMN wait_counted boolean NOT NULL DEFAULT false;

-- The waits of upgrade time, counted. Both ALTERs above hold their tables
-- until this commits, so no wait starts or ends meanwhile.
UPDATE workflow_run_nodes SET wait_counted = true WHERE state = 'awaiting';
UPDATE workflow_runs r SET awaiting_nodes = a.n
FROM (SELECT tenant_id, run_id, count(*) AS n FROM workflow_run_nodes WHERE state = 'awaiting'
      GROUP BY tenant_id, run_id) a
WHERE r.tenant_id = a.tenant_id AND r.id = a.run_id;

CREATE INDEX workflow_runs_stalled_idx ON workflow_runs (updated_at) WHERE state = 'running' AND awaiting_nodes = 0;
CREATE INDEX workflow_run_nodes_uncounted_idx ON workflow_run_nodes (tenant_id, run_id)
    WHERE (state = 'awaiting') <> wait_counted;
