-- The workflow sweep's search for workflows with a queued run
-- (db.WorkflowsWithQueuedRuns) starts from the pending runs alone: through
-- workflow_runs_unfinished_idx it read every running run, every second on
-- every replica, even with none pending (10,000 runs waiting on events
-- made each pass read 10,000 index entries).
CREATE INDEX workflow_runs_pending_idx ON workflow_runs (tenant_id, workflow_id) WHERE state = 'pending';
