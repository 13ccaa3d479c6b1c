-- Replicas: one row per start of an ax process (an incarnation). A live
-- replica heartbeats (last_heartbeat_at, by the database's clock); one
-- silent for AX_REPLICA_DEAD_AFTER is declared dead by another live replica
-- with one conditional UPDATE (state 'alive' → 'dead'), and the River jobs
-- its River client was running are made available again in the same
-- transaction. river_client_id is the River client ID the process runs
-- under (river_job.attempted_by names it): a replica that finds itself
-- declared dead registers again under a new id with the same River client,
-- so at most one live row names a River client.
CREATE TABLE replicas (
    id                   uuid        PRIMARY KEY,
    river_client_id      text        NOT NULL,
    hostname             text        NOT NULL,
    version              text        NOT NULL,
    started_at           timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at    timestamptz NOT NULL DEFAULT now(),
    deliveries_in_flight integer     NOT NULL DEFAULT 0,
    state                text        NOT NULL DEFAULT 'alive' CHECK (state IN ('alive', 'dead', 'gone')),
    -- ended_at: when it was declared dead or left; declared_dead_by: the
    -- replica that declared it dead.
    ended_at             timestamptz,
    declared_dead_by     uuid
);
CREATE UNIQUE INDEX replicas_river_client_alive_idx ON replicas (river_client_id) WHERE state = 'alive';
CREATE INDEX replicas_ended_idx ON replicas (ended_at) WHERE state <> 'alive';
