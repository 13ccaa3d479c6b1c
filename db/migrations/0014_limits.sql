-- Limits, quotas and fairness.
--
-- Tenant limits: NULL is the server's default (AX_TENANT_MAX_* and
-- AX_TENANT_API_RPS). max_inflight and max_per_second (0001) are the
-- deliveries in flight and started per second.
ALTER TABLE tenants
    ADD COLUMN max_tasks               integer CHECK (max_tasks >= 0),
    ADD COLUMN max_workflows           integer CHECK (max_workflows >= 0),
    ADD COLUMN api_requests_per_second double precision CHECK (api_requests_per_second > 0),
    -- Moves on every change of the row's limits: replicas compare it to
    -- their cache.
    ADD COLUMN limits_updated_at       timestamptz;

-- Endpoint limits: requests in flight to it at once, and started per
-- second, across every replica. NULL: none. Not indexed: a delivery reads
-- them with the endpoint row it reads anyway.
ALTER TABLE endpoints
    ADD COLUMN max_concurrency       integer CHECK (max_concurrency > 0),
    ADD COLUMN rate_limit_per_second double precision CHECK (rate_limit_per_second > 0);

-- A gate is one limit's shared state: 'tenant' (the tenant's max_inflight
-- and max_per_second) or 'endpoint:<id>'. inflight counts the permits
-- granted under it; tokens is a token bucket refilled at the rate since
-- refilled_at. Its row lock serialises admissions to it across replicas.
CREATE TABLE flow_gates (
    tenant_id   text NOT NULL REFERENCES tenants (id),
    gate        text NOT NULL,
    inflight    integer NOT NULL DEFAULT 0 CHECK (inflight >= 0),
    tokens      double precision NOT NULL DEFAULT 0,
    refilled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, gate)
);

-- A permit: one execution's attempt admitted through its gates. Released
-- when the attempt's outcome is recorded; one that outlives expires_at (a
-- crash) is released by the dispatcher's sweep.
CREATE TABLE flow_permits (
    tenant_id    text NOT NULL REFERENCES tenants (id),
    execution_id uuid NOT NULL,
    gates        text[] NOT NULL,
    started      boolean NOT NULL DEFAULT false,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, execution_id)
);
CREATE INDEX flow_permits_expires_idx ON flow_permits (expires_at);

-- A held delivery: an execution waiting for its gates, in the order it is
-- to start (priority, slot, arrival). Its River job sleeps (snoozed) until
-- the dispatcher grants it a permit and makes the job available.
CREATE TABLE flow_holds (
    tenant_id     text NOT NULL REFERENCES tenants (id),
    execution_id  uuid NOT NULL,
    job_id        bigint NOT NULL,
    gates         text[] NOT NULL,
    limit_name    text NOT NULL,
    priority      integer NOT NULL,
    scheduled_for timestamptz NOT NULL,
    seq           bigserial NOT NULL,
    held_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, execution_id)
);
CREATE INDEX flow_holds_order_idx ON flow_holds (tenant_id, priority, scheduled_for, seq);

-- The API's request budget of a tenant, shared by every replica: a token
-- bucket each replica takes chunks from (service.Limits.AllowAPI).
CREATE TABLE api_budgets (
    tenant_id   text PRIMARY KEY REFERENCES tenants (id),
    tokens      double precision NOT NULL,
    refilled_at timestamptz NOT NULL DEFAULT now()
);
