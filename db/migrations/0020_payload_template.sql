-- Templated payloads: with payload_template, each JSON string of a task's
-- payload is a template rendered once when an execution is created; the
-- rendered bytes are stored in executions.payload (the column a manual
-- trigger's override already uses), so every attempt sends the same bytes.
-- A constant default: no table rewrite, and every existing task's body
-- stays its payload's bytes.
ALTER TABLE tasks ADD COLUMN payload_template boolean NOT NULL DEFAULT false;
