-- ax application schema, version 1.
--
-- Every tenant-owned table carries tenant_id and is keyed by (tenant_id, id),
-- and references between tenant tables are composite foreign keys, so a row
-- can never point at another tenant's row. Times are timestamptz (UTC).

CREATE TABLE tenants (
    id                 text PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 128),
    -- Limits; NULL means the server default.
    max_inflight       integer CHECK (max_inflight > 0),
    max_per_second     double precision CHECK (max_per_second > 0),
    created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE endpoints (
    tenant_id                  text NOT NULL REFERENCES tenants (id),
    id                         uuid NOT NULL,
    name                       text NOT NULL,
    url                        text NOT NULL,
    method                     text NOT NULL DEFAULT 'POST',
    headers                    jsonb NOT NULL DEFAULT '{}',
    secret                     text NOT NULL,
    -- During a secret rotation the previous secret keeps signing until
    -- previous_secret_expires_at.
    previous_secret            text,
    previous_secret_expires_at timestamptz,
    timeout_ms                 integer NOT NULL DEFAULT 10000,
    enabled                    boolean NOT NULL DEFAULT true,
    -- Why the endpoint was disabled by ax (e.g. a 410 Gone), if it was.
    disabled_reason            text,
    disabled_at                timestamptz,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);

CREATE TABLE tasks (
    tenant_id            text NOT NULL REFERENCES tenants (id),
    id                   uuid NOT NULL,
    name                 text NOT NULL,
    endpoint_id          uuid NOT NULL,
    schedule_type        text NOT NULL CHECK (schedule_type IN ('cron', 'interval', 'once')),
    cron                 text,
    timezone             text NOT NULL DEFAULT 'UTC',
    interval_seconds     bigint,
    run_at               timestamptz,
    start_at             timestamptz,
    end_at               timestamptz,
    -- The exact bytes of the JSON payload: webhooks carry it byte for byte.
    payload              bytea NOT NULL DEFAULT '\x7b7d', -- {}
    priority             smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    -- NULL: the endpoint's timeout applies.
    timeout_ms           integer,
    max_attempts         integer NOT NULL DEFAULT 5,
    initial_backoff_ms   bigint NOT NULL DEFAULT 1000,
    max_backoff_ms       bigint NOT NULL DEFAULT 600000,
    overlap_policy       text NOT NULL DEFAULT 'allow' CHECK (overlap_policy IN ('allow', 'skip', 'queue')),
    misfire_policy       text NOT NULL DEFAULT 'fire_once' CHECK (misfire_policy IN ('fire_once', 'fire_all', 'skip')),
    state                text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'completed')),
    -- The next slot to fire; NULL when the task will not fire again.
    next_run_at          timestamptz,
    labels               jsonb NOT NULL DEFAULT '{}',
    alert_endpoint_id    uuid,
    pause_after_failures integer,
    consecutive_failures integer NOT NULL DEFAULT 0,
    missed_count         bigint NOT NULL DEFAULT 0,
    version              integer NOT NULL DEFAULT 1,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, name),
    CHECK (start_at IS NULL OR end_at IS NULL OR start_at < end_at),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES endpoints (tenant_id, id),
    FOREIGN KEY (tenant_id, alert_endpoint_id) REFERENCES endpoints (tenant_id, id)
);

-- The scheduler's claim: due active tasks in next_run_at order. Partial, so
-- its size (and the scheduler's work) follows what can fire, and a task far
-- in the future costs one index probe, not a scan.
CREATE INDEX tasks_due_idx ON tasks (next_run_at) WHERE state = 'active' AND next_run_at IS NOT NULL;
CREATE INDEX tasks_endpoint_idx ON tasks (tenant_id, endpoint_id);
CREATE INDEX tasks_alert_endpoint_idx ON tasks (tenant_id, alert_endpoint_id) WHERE alert_endpoint_id IS NOT NULL;
-- The primary keys (tenant_id, id) serve the newest-first list queries.
CREATE INDEX tasks_labels_idx ON tasks USING gin (labels jsonb_path_ops);

-- Idempotency-Key replay for POST creates: the first response to a key is
-- kept for 24 hours and replayed for the same request body.
CREATE TABLE idempotency_keys (
    tenant_id     text NOT NULL REFERENCES tenants (id),
    key           text NOT NULL,
    route         text NOT NULL,
    request_hash  bytea NOT NULL,
    -- NULL while the first request is still being handled.
    status        integer,
    response      bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, route, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- One row per fire. The id is the webhook's idempotency key. executions
-- deliberately do not reference tasks: history outlives a deleted task.
CREATE TABLE executions (
    tenant_id        text NOT NULL REFERENCES tenants (id),
    id               uuid NOT NULL,
    task_id          uuid NOT NULL,
    scheduled_for    timestamptz NOT NULL,
    trigger          text NOT NULL CHECK (trigger IN ('schedule', 'manual', 'backfill', 'retry', 'dependency')),
    dedup_key        text,
    state            text NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'running', 'retrying', 'succeeded', 'failed', 'cancelled', 'skipped')),
    -- A manual trigger's payload override; NULL means the task's payload.
    payload          bytea,
    attempts         integer NOT NULL DEFAULT 0,
    -- The attempt that owns the row: a worker may only finish the attempt
    -- it started (fencing against rescued, re-run jobs).
    lease_attempt    integer NOT NULL DEFAULT 0,
    late             boolean NOT NULL DEFAULT false,
    cancel_requested boolean NOT NULL DEFAULT false,
    last_status_code integer,
    last_error       text,
    last_error_class text,
    river_job_id     bigint,
    -- When the next attempt is due while the execution is retrying.
    next_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    PRIMARY KEY (tenant_id, id)
);

-- A scheduled slot fires at most once, forever (River's unique jobs forget
-- completed jobs after 24 h; this does not).
CREATE UNIQUE INDEX executions_slot_idx ON executions (task_id, scheduled_for) WHERE trigger = 'schedule';
CREATE UNIQUE INDEX executions_dedup_idx ON executions (tenant_id, task_id, dedup_key) WHERE dedup_key IS NOT NULL;
CREATE INDEX executions_task_idx ON executions (tenant_id, task_id, id DESC);
CREATE INDEX executions_state_idx ON executions (tenant_id, state, id DESC);
-- Overlap policies look for a task's unfinished executions.
CREATE INDEX executions_unfinished_idx ON executions (task_id, scheduled_for)
    WHERE state IN ('pending', 'running', 'retrying');

CREATE TABLE execution_events (
    tenant_id     text NOT NULL,
    execution_id  uuid NOT NULL,
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    type          text NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    attempt       integer,
    status_code   integer,
    latency_ms    integer,
    error_class   text,
    message       text,
    data          jsonb,
    PRIMARY KEY (tenant_id, execution_id, seq),
    FOREIGN KEY (tenant_id, execution_id) REFERENCES executions (tenant_id, id) ON DELETE CASCADE
);
