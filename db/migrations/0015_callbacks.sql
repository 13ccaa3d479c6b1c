-- Long-running work: callback completion, heartbeats, deadlines, SLAs and
-- alert formats.
--
-- A task in completion mode "callback" treats a 2xx as "accepted": the
-- execution stays running and its receiver reports the outcome later with
-- the attempt's callback token. Nothing of this touches executions: its
-- delivery updates stay heap-only (0005) and a plain task pays nothing.
ALTER TABLE tasks
    ADD COLUMN completion_mode       text NOT NULL DEFAULT 'response'
        CHECK (completion_mode IN ('response', 'callback')),
    -- Callback mode: the whole attempt (from its send) must complete within
    -- completion_timeout_ms, and, when set, heartbeat (or complete) within
    -- heartbeat_timeout_ms of its acceptance and of each heartbeat.
    ADD COLUMN completion_timeout_ms bigint CHECK (completion_timeout_ms > 0),
    ADD COLUMN heartbeat_timeout_ms  bigint CHECK (heartbeat_timeout_ms > 0),
    ADD COLUMN sla_finish_within_ms  bigint CHECK (sla_finish_within_ms > 0),
    ADD CONSTRAINT tasks_completion_check CHECK (
        (completion_mode = 'response' AND completion_timeout_ms IS NULL AND heartbeat_timeout_ms IS NULL)
        OR (completion_mode = 'callback' AND completion_timeout_ms IS NOT NULL));

-- The SLA sweep walks only the tasks that have an SLA.
CREATE INDEX tasks_sla_idx ON tasks (tenant_id, id) WHERE sla_finish_within_ms IS NOT NULL;

-- One row per attempt of a callback-mode execution, written just before
-- the attempt is sent. token_hash is the SHA-256 of the attempt's
-- X-Ax-Callback-Token (the token itself is never stored). The attempt is
-- current while the execution is running with attempts = attempt and
-- lease_attempt = lease; any other row's token is refused (409).
-- expires_at is set while ax waits for the receiver (from its 2xx until
-- the completion or a timeout): the earlier of deadline_at and the
-- heartbeat deadline. The sweeper finds expired waits by its index.
CREATE TABLE callback_attempts (
    tenant_id            text NOT NULL,
    execution_id         uuid NOT NULL,
    attempt              integer NOT NULL,
    lease                integer NOT NULL,
    token_hash           bytea NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now(),
    deadline_at          timestamptz NOT NULL,
    heartbeat_timeout_ms bigint,
    accepted_at          timestamptz,
    heartbeat_at         timestamptz,
    expires_at           timestamptz,
    progress             jsonb,
    output               jsonb,
    ended_at             timestamptz,
    PRIMARY KEY (tenant_id, execution_id, attempt),
    FOREIGN KEY (tenant_id, execution_id) REFERENCES executions (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX callback_attempts_token_idx ON callback_attempts (token_hash);
CREATE INDEX callback_attempts_expires_idx ON callback_attempts (expires_at) WHERE expires_at IS NOT NULL;

-- The executions that missed their task's SLA: one row each, so that the
-- sla_missed event and alert happen once.
CREATE TABLE sla_misses (
    tenant_id    text NOT NULL,
    execution_id uuid NOT NULL,
    due_at       timestamptz NOT NULL,
    missed_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, execution_id),
    FOREIGN KEY (tenant_id, execution_id) REFERENCES executions (tenant_id, id) ON DELETE CASCADE
);

-- How an alert sent to the endpoint is shaped: ax (signed JSON) or slack
-- (an incoming-webhook body).
ALTER TABLE endpoints ADD COLUMN format text NOT NULL DEFAULT 'ax' CHECK (format IN ('ax', 'slack'));
