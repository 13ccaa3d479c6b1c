-- Workflows (DAGs of webhook steps) and sharded fan-out.
--
-- A workflow's document is versioned: workflow_versions holds each
-- version's nodes (JSON), and a run keeps the version it started with. Each
-- node of each version is delivered through a hidden task (tasks.workflow_id
-- set, next_run_at always NULL so the scheduler never claims it): a node's
-- execution is an ordinary execution of that task, delivered by the same
-- path, with workflow_id, workflow_run_id and node set. The API never lists
-- or serves those tasks.
ALTER TABLE tasks ADD COLUMN workflow_id uuid;
-- Fan-out: each slot fires `shards` executions (shard 0 .. shards-1).
ALTER TABLE tasks ADD COLUMN shards integer NOT NULL DEFAULT 1 CHECK (shards BETWEEN 1 AND 1000);
CREATE INDEX tasks_workflow_idx ON tasks (tenant_id, workflow_id) WHERE workflow_id IS NOT NULL;

-- None of these is ever updated: the delivery's updates stay heap-only.
ALTER TABLE executions ADD COLUMN workflow_id uuid;
ALTER TABLE executions ADD COLUMN workflow_run_id uuid;
ALTER TABLE executions ADD COLUMN node text;
ALTER TABLE executions ADD COLUMN shard integer NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN shard_count integer NOT NULL DEFAULT 1;

-- The slot key includes the shard: a slot fires each shard at most once.
DROP INDEX executions_slot_idx;
CREATE UNIQUE INDEX executions_slot_idx ON executions (task_id, scheduled_for, round, shard)
    WHERE trigger IN ('schedule', 'backfill') AND NOT rescheduled;
-- A run fires each shard of each node at most once; it also finds a run's
-- executions. Partial: plain executions have no entry.
CREATE UNIQUE INDEX executions_node_idx ON executions (workflow_run_id, node, shard) WHERE workflow_run_id IS NOT NULL;

CREATE TABLE workflows (
    tenant_id            text NOT NULL REFERENCES tenants (id),
    id                   uuid NOT NULL,
    name                 text NOT NULL,
    state                text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused')),
    -- The current version: the one new runs start with.
    version              integer NOT NULL DEFAULT 1,
    -- The schedule object of tasks (JSON); NULL: runs start by trigger only.
    schedule             jsonb,
    misfire_policy       text NOT NULL DEFAULT 'fire_once' CHECK (misfire_policy IN ('fire_once', 'fire_all', 'skip')),
    max_active_runs      integer NOT NULL DEFAULT 1 CHECK (max_active_runs BETWEEN 1 AND 1000),
    alert_endpoint_id    uuid,
    sla_finish_within_ms bigint,
    next_run_at          timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, name),
    FOREIGN KEY (tenant_id, alert_endpoint_id) REFERENCES endpoints (tenant_id, id)
);
CREATE INDEX workflows_due_idx ON workflows (next_run_at) WHERE state = 'active' AND next_run_at IS NOT NULL;

CREATE TABLE workflow_versions (
    tenant_id   text NOT NULL,
    workflow_id uuid NOT NULL,
    version     integer NOT NULL,
    -- [{key, task_id, depends_on, trigger_rule, shards, endpoint_id, ...}]
    nodes       jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, workflow_id, version),
    FOREIGN KEY (tenant_id, workflow_id) REFERENCES workflows (tenant_id, id) ON DELETE CASCADE
);

-- pending: waiting for max_active_runs; running; blocked (a node waits
-- for a person); succeeded, failed, cancelled (final).
CREATE TABLE workflow_runs (
    tenant_id     text NOT NULL,
    id            uuid NOT NULL,
    workflow_id   uuid NOT NULL,
    version       integer NOT NULL,
    scheduled_for timestamptz NOT NULL,
    round         integer NOT NULL DEFAULT 1,
    trigger       text NOT NULL CHECK (trigger IN ('schedule', 'manual', 'backfill')),
    dedup_key     text,
    state         text NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'running', 'blocked', 'succeeded', 'failed', 'cancelled')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    finished_at   timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, workflow_id) REFERENCES workflows (tenant_id, id) ON DELETE CASCADE
);
-- A slot starts at most one run.
CREATE UNIQUE INDEX workflow_runs_slot_idx ON workflow_runs (workflow_id, scheduled_for, round) WHERE trigger = 'schedule';
CREATE UNIQUE INDEX workflow_runs_dedup_idx ON workflow_runs (tenant_id, workflow_id, dedup_key) WHERE dedup_key IS NOT NULL;
CREATE INDEX workflow_runs_workflow_idx ON workflow_runs (tenant_id, workflow_id, id DESC);
-- Unfinished runs: max_active_runs, the queue of pending runs, the sweep.
CREATE INDEX workflow_runs_unfinished_idx ON workflow_runs (workflow_id, scheduled_for, id)
    WHERE state IN ('pending', 'running', 'blocked');

-- What a run decided about each node; a fired node's state is its
-- executions' (one per shard).
CREATE TABLE workflow_run_nodes (
    tenant_id   text NOT NULL,
    run_id      uuid NOT NULL,
    key         text NOT NULL,
    state       text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'fired', 'blocked', 'skipped', 'cancelled')),
    -- When the node's rule was met (or it was forced), its executions created.
    rule_met_at timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, run_id, key),
    FOREIGN KEY (tenant_id, run_id) REFERENCES workflow_runs (tenant_id, id) ON DELETE CASCADE
);

-- A manual trigger of a sharded task fires every shard; the dedup key is
-- per shard.
DROP INDEX executions_dedup_idx;
CREATE UNIQUE INDEX executions_dedup_idx ON executions (tenant_id, task_id, dedup_key, shard) WHERE dedup_key IS NOT NULL;
