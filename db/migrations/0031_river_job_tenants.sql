-- The tenants of each deliver queue's available jobs (db.ShareQueues),
-- so that the fair sharing of a queue asks whether a second tenant has
-- jobs there in two index probes instead of reading every due job: a
-- burst of one tenant's fires is all of one tenant, and reading its whole
-- backlog on every pass cost seconds of statement time. The expression is
-- db's jobTenant (without its alias); a job has an entry only while it is
-- available, so River's fetch, which makes it running, adds none.
CREATE INDEX river_job_available_tenant_idx ON river_job (queue, priority,
	(coalesce(args->>'tenant_id', args->'tenants'->>0, args->'executions'->0->>'tenant_id', '')))
	WHERE state = 'available';
