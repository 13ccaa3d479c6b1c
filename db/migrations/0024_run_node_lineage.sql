-- Lineage of a workflow run's templated nodes: when a node's payload
-- template or run_if renders, what it was rendered from — the run inputs
-- its templates name and a snapshot of the upstream outputs they read, as
-- they were then (bounded by the service, 128 KiB). Kept on the node
-- rather than on its executions: one per node whatever its shards, a node
-- its run_if skipped has one too (and no execution), and executions keep
-- narrow rows. NULL for every untemplated node: they pay nothing.
ALTER TABLE workflow_run_nodes ADD COLUMN rendered_from jsonb;
