-- Workflow nodes that wait for an event ("wait_for" instead of an
-- endpoint): such a node has no execution. When its rule is met it is
-- 'awaiting', with what it waits for (wait_event, the rendered wait_key),
-- since when (wait_since, the transaction's clock: an event must arrive
-- after it) and until when (wait_deadline); it ends 'succeeded' (an
-- event, with its id and payload as the node's output, or a person) or
-- 'failed' (no event by the deadline: error_class 'event_timeout'; a key
-- that does not render: 'template').
ALTER TABLE workflow_run_nodes DROP CONSTRAINT workflow_run_nodes_state_check;
ALTER TABLE workflow_run_nodes ADD CONSTRAINT workflow_run_nodes_state_check
    CHECK (state IN ('waiting', 'fired', 'blocked', 'skipped', 'cancelled', 'awaiting', 'succeeded', 'failed'));
ALTER TABLE workflow_run_nodes
    ADD COLUMN wait_event    text,
    ADD COLUMN wait_key      text,
    ADD COLUMN wait_since    timestamptz,
    ADD COLUMN wait_deadline timestamptz,
    ADD COLUMN event_id      uuid,
    ADD COLUMN output        jsonb,
    ADD COLUMN error_class   text,
    ADD COLUMN last_error    text,
    ADD COLUMN finished_at   timestamptz;
ALTER TABLE workflow_run_nodes ADD CONSTRAINT workflow_run_nodes_awaiting_check
    CHECK (state <> 'awaiting' OR (wait_event IS NOT NULL AND wait_since IS NOT NULL AND wait_deadline IS NOT NULL));

-- An event finds the nodes waiting for it with one probe on (tenant,
-- name) among the awaiting nodes only; the expiry sweep reads the
-- deadlines of the awaiting nodes only. Idle nodes cost nothing else.
CREATE INDEX workflow_run_nodes_wait_idx ON workflow_run_nodes (tenant_id, wait_event, wait_key)
    WHERE state = 'awaiting';
CREATE INDEX workflow_run_nodes_deadline_idx ON workflow_run_nodes (wait_deadline)
    WHERE state = 'awaiting';
