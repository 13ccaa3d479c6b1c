-- Attempt numbers keep counting when an execution is retried through the
-- API: receivers and the timeline see attempt 4 after attempts 1–3, never
-- a second attempt 1 with the same webhook-id. The retry budget
-- (max_attempts) restarts at the API retry: it counts the attempts after
-- attempts_base, the number made before the latest API retry.
ALTER TABLE executions ADD COLUMN attempts_base integer NOT NULL DEFAULT 0
    CHECK (attempts_base >= 0);
