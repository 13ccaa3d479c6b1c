-- Workflow SLAs: a run not succeeded by its slot plus the workflow's
-- sla_finish_within_ms (0013) is recorded once as missed.
--
-- sla_missed_at is set once, by a conditional update, in the transaction
-- that writes the run's sla_missed event and queues its alert: the miss,
-- the event and the alert happen once, whatever the replicas.
ALTER TABLE workflow_runs ADD COLUMN sla_missed_at timestamptz;

-- The SLA sweep walks only the workflows that have an SLA, and each one's
-- unfinished runs by slot (workflow_runs_unfinished_idx).
CREATE INDEX workflows_sla_idx ON workflows (tenant_id, id) WHERE sla_finish_within_ms IS NOT NULL;

-- A run's own timeline, beside its nodes': what happened to the run as a
-- whole (sla_missed). Returned with the run (GET /v1/workflow-runs/{id}).
CREATE TABLE workflow_run_events (
    tenant_id text NOT NULL,
    run_id    uuid NOT NULL,
    id        bigint GENERATED ALWAYS AS IDENTITY,
    at        timestamptz NOT NULL DEFAULT now(),
    type      text NOT NULL,
    message   text,
    data      jsonb,
    PRIMARY KEY (tenant_id, run_id, id),
    FOREIGN KEY (tenant_id, run_id) REFERENCES workflow_runs (tenant_id, id) ON DELETE CASCADE
);
