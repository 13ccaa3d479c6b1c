package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SQL's one reading of a deliver_batch job's args. service.DeliverBatchArgs
// writes them packed, one string for every member
// ({"tenants": [...], "first": ..., "executions": "0.<id>.<µs> 1.<id>.-"}:
// the index of the member's tenant in tenants, its execution id, its slot),
// and reads too the array of member objects that ax wrote before
// ({"executions": [{"tenant_id": ..., "execution_id": ...}]}, jobs queued
// across an upgrade). Every statement of db/ that looks into a batch names
// one of these fragments, over the job row aliased j, and
// service.TestBatchArgsSQLReadsWhatGoWrites holds them to the Go encoder
// through ReadBatchArgs.
var (
	// batchMembers is a FROM item: one row m(tenant_id text, id uuid)
	// for each member of the deliver_batch job j.
	batchMembers = `LATERAL (
		SELECT j.args->'tenants'->>(split_part(x, '.', 1)::int) AS tenant_id, split_part(x, '.', 2)::uuid AS id
		FROM regexp_split_to_table(CASE WHEN jsonb_typeof(j.args->'executions') = 'string'
			THEN nullif(j.args->>'executions', '') END, ' ') x
		UNION ALL
		SELECT o->>'tenant_id', (o->>'execution_id')::uuid
		FROM jsonb_array_elements(CASE WHEN jsonb_typeof(j.args->'executions') = 'array'
			THEN j.args->'executions' END) o) m`
	// jobTenant is the tenant of a deliver job j (its tenant_id) or of a
	// deliver_batch job (its first member's: the scheduler keeps a batch
	// to one tenant); '' for any other job.
	jobTenant = `coalesce(j.args->>'tenant_id', j.args->'tenants'->>0, j.args->'executions'->0->>'tenant_id', '')`
)

// BatchMember is a member of a deliver_batch job as SQL reads it.
type BatchMember struct {
	TenantID string
	ID       string
}

// ReadBatchArgs reads a deliver_batch job's args as db's statements do
// (batchMembers, jobTenant): its tenant and its members. It
// exists for the test that holds SQL's reading to the Go encoder.
func ReadBatchArgs(ctx context.Context, q Querier, args []byte) (tenant string, members []BatchMember, err error) {
	rows, err := q.Query(ctx, `SELECT `+jobTenant+`, m.tenant_id, m.id::text
		FROM (SELECT $1::jsonb AS args) j, `+batchMembers, args)
	if err != nil {
		return "", nil, wrap("read batch args", err)
	}
	var m BatchMember
	_, err = pgx.ForEachRow(rows, []any{&tenant, &m.TenantID, &m.ID}, func() error {
		members = append(members, m)
		return nil
	})
	return tenant, members, wrap("read batch args", err)
}
