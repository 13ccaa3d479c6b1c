-- The deliver worker looks executions up by primary key; on tables whose
-- statistics are stale (a fresh database, or one that grew fast) the
-- planner may pick a worse index. Analyze after every 2 % of change instead
-- of the default 10 %, and vacuum the hot tables sooner.
ALTER TABLE executions SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE execution_events SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE tasks SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
