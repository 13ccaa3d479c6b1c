-- Workflow inputs and node outputs.
--
-- A workflow version declares its inputs with their defaults (a JSON
-- object: name → default); a change of them makes a new version, as a
-- change of the nodes does. A run keeps its inputs: its version's
-- defaults overridden by its trigger's or its backfill's. A workflow
-- backfill keeps the overrides its runs get (NULL: none).
ALTER TABLE workflow_versions ADD COLUMN inputs jsonb NOT NULL DEFAULT '{}';
ALTER TABLE workflow_runs ADD COLUMN inputs jsonb NOT NULL DEFAULT '{}';
ALTER TABLE backfills ADD COLUMN inputs jsonb;

-- The output of a workflow node's execution in response mode: its 2xx
-- response body when that is a JSON value of at most 64 KiB. Written only
-- by a node's success (never by a plain task's delivery), in its own
-- table so that executions keep narrow rows and heap-only updates (0005).
-- A callback-mode execution's output stays on its attempt
-- (callback_attempts.output).
CREATE TABLE execution_outputs (
    tenant_id    text NOT NULL,
    execution_id uuid NOT NULL,
    output       jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, execution_id),
    FOREIGN KEY (tenant_id, execution_id) REFERENCES executions (tenant_id, id) ON DELETE CASCADE
);
