-- The tenants of each deliver queue's available jobs (db.ShareQueues),
-- so that the fair sharing of a queue asks whether a second tenant has
-- jobs there in two index probes instead of reading every due job: a
-- burst of one tenant's fires is all of one tenant, and reading its whole
-- backlog on every pass cost seconds of statement time. The expression is
-- db's jobTenant (without its alias); a job has an entry only while it is
-- available, so River's fetch, which makes it running, adds none. The
-- entries of the jobs River took stay until vacuum; kept apart (no
-- deduplication), each is marked dead at the first probe that meets it,
-- where a posting list of one tenant's thousands of jobs would be read
-- again, heap and all, until its last job was taken. The probe walks
-- from the newest jobs, which River takes last.
CREATE INDEX river_job_available_tenant_idx ON river_job (queue, priority,
	(coalesce(args->>'tenant_id', args->'tenants'->>0, args->'executions'->0->>'tenant_id', '')))
	WITH (deduplicate_items = off)
	WHERE state = 'available';
