package job

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service/resource"
)

func TestDeliverBatchArgsRoundTrip(t *testing.T) {
	t.Parallel()
	first := time.Date(2026, 12, 1, 9, 6, 5, 123456000, time.UTC)
	in := DeliverBatchArgs{Executions: []ExecutionRef{
		{TenantID: "acme", ExecutionID: resource.NewID(), ScheduledFor: first.Add(15 * time.Millisecond)},
		{TenantID: "tenant with spaces. and dots", ExecutionID: resource.NewID(), ScheduledFor: first},
		{TenantID: "acme", ExecutionID: resource.NewID()}, // no slot: sent at once
		{TenantID: "acme", ExecutionID: resource.NewID(), ScheduledFor: first.Add(19999 * time.Microsecond)},
	}}
	b, err := json.Marshal(in)
	require.NoError(t, err)

	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	require.Equal(t, []any{"acme", "tenant with spaces. and dots"}, raw["tenants"])
	require.Equal(t, "2026-12-01T09:06:05.123456Z", raw["first"])
	members := strings.Split(raw["executions"].(string), " ")
	require.Equal(t, []string{
		"0." + in.Executions[0].ExecutionID + ".15000",
		"1." + in.Executions[1].ExecutionID + ".0",
		"0." + in.Executions[2].ExecutionID + ".-",
		"0." + in.Executions[3].ExecutionID + ".19999",
	}, members)

	require.NotContains(t, raw, "endpoints", "no member names an endpoint")

	var out DeliverBatchArgs
	require.NoError(t, json.Unmarshal(b, &out))
	require.Len(t, out.Executions, len(in.Executions))
	for i := range in.Executions {
		require.Equal(t, in.Executions[i].TenantID, out.Executions[i].TenantID)
		require.Equal(t, in.Executions[i].ExecutionID, out.Executions[i].ExecutionID)
		require.True(t, in.Executions[i].ScheduledFor.Equal(out.Executions[i].ScheduledFor), "member %d", i)
	}
}

// The members' endpoints travel apart from the members: a list, and each
// member's index in it unless all are the first's; a reader of the
// members alone (the previous version) reads them as before.
func TestDeliverBatchArgsEndpoints(t *testing.T) {
	t.Parallel()
	e1, e2 := resource.NewID(), resource.NewID()
	one := DeliverBatchArgs{Executions: []ExecutionRef{
		{TenantID: "acme", ExecutionID: resource.NewID(), EndpointID: e1}, {TenantID: "acme", ExecutionID: resource.NewID(), EndpointID: e1},
	}}
	mixed := DeliverBatchArgs{Executions: []ExecutionRef{
		{TenantID: "acme", ExecutionID: resource.NewID(), EndpointID: e2},
		{TenantID: "acme", ExecutionID: resource.NewID()},
		{TenantID: "acme", ExecutionID: resource.NewID(), EndpointID: e1},
		{TenantID: "acme", ExecutionID: resource.NewID(), EndpointID: e2},
	}}
	for _, c := range []struct {
		in      DeliverBatchArgs
		members string
	}{{one, ""}, {mixed, "0 - 1 0"}} {
		b, err := json.Marshal(c.in)
		require.NoError(t, err)
		var raw map[string]any
		require.NoError(t, json.Unmarshal(b, &raw))
		if c.members == "" {
			require.Equal(t, []any{e1}, raw["endpoints"])
			require.NotContains(t, raw, "member_endpoints")
		} else {
			require.Equal(t, []any{e2, e1}, raw["endpoints"])
			require.Equal(t, c.members, raw["member_endpoints"])
		}
		var out DeliverBatchArgs
		require.NoError(t, json.Unmarshal(b, &out))
		require.Equal(t, c.in, out)

		var previous struct { // what the previous version read
			Tenants    []string `json:"tenants"`
			Executions string   `json:"executions"`
		}
		require.NoError(t, json.Unmarshal(b, &previous))
		for _, m := range strings.Fields(previous.Executions) {
			require.Len(t, strings.Split(m, "."), 3, "a member as before: %s", m)
		}
	}
	id := resource.NewID()
	for _, args := range []string{
		`{"tenants":["a"],"executions":"0.` + id + `.-","endpoints":["e"],"member_endpoints":"1"}`,   // no such endpoint
		`{"tenants":["a"],"executions":"0.` + id + `.-","endpoints":["e"],"member_endpoints":"0 0"}`, // one too many
	} {
		var out DeliverBatchArgs
		require.ErrorIs(t, json.Unmarshal([]byte(args), &out), errBadBatchArgs, args)
	}
}

// A job written before the packed form still decodes.
func TestDeliverBatchArgsReadsTheObjectArray(t *testing.T) {
	t.Parallel()
	id := resource.NewID()
	var out DeliverBatchArgs
	require.NoError(t, json.Unmarshal([]byte(`{"executions":[{"tenant_id":"acme","execution_id":"`+id+
		`","scheduled_for":"2026-12-01T09:00:00Z"},{"tenant_id":"b","execution_id":"`+id+`"}]}`), &out))
	require.Equal(t, []ExecutionRef{
		{TenantID: "acme", ExecutionID: id, ScheduledFor: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)},
		{TenantID: "b", ExecutionID: id},
	}, out.Executions)
}

func TestDeliverBatchArgsRejectsWhatItDidNotWrite(t *testing.T) {
	t.Parallel()
	id := resource.NewID()
	for _, args := range []string{
		`{"tenants":["a"],"executions":"1.` + id + `.-"}`,                                 // no such tenant
		`{"tenants":["a"],"executions":"0.not-a-uuid.-"}`,                                 // bad id
		`{"tenants":["a"],"executions":"0.` + id + `.15"}`,                                // an offset without first
		`{"tenants":["a"],"first":"2026-12-01T09:00:00Z","executions":"0.` + id + `.x"}`,  // bad offset
		`{"tenants":["a"],"first":"2026-12-01T09:00:00Z","executions":"0.` + id + `"}`,    // no slot field
		`{"tenants":["a"],"first":"2026-12-01T09:00:00Z","executions":"-1.` + id + `.0"}`, // negative index
		`{"executions":[{"tenant_id":1}]}`,                                                // a bad object array
	} {
		var out DeliverBatchArgs
		require.ErrorIs(t, json.Unmarshal([]byte(args), &out), errBadBatchArgs, args)
	}
	var out DeliverBatchArgs
	_, err := json.Marshal(DeliverBatchArgs{Executions: []ExecutionRef{{TenantID: "a", ExecutionID: "nope"}}})
	require.Error(t, err)
	require.NoError(t, json.Unmarshal([]byte(`{"tenants":[],"executions":""}`), &out))
	require.Empty(t, out.Executions)
}

// TestBatchArgsSQLReadsWhatGoWrites: db's one reading of a deliver_batch
// job's args in SQL (db.ReadBatchArgs: the members the reconciler and the
// replica sweep find, the tenant the fair queues see) agrees with the Go
// encoder and decoder, packed and in the older object array.
func TestBatchArgsSQLReadsWhatGoWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	first := time.Date(2026, 12, 1, 9, 6, 5, 123456000, time.UTC)
	packed := func(refs ...ExecutionRef) []byte {
		b, err := json.Marshal(DeliverBatchArgs{Executions: refs})
		require.NoError(t, err)
		return b
	}
	legacy := func(refs ...ExecutionRef) []byte {
		b, err := json.Marshal(map[string]any{"executions": refs})
		require.NoError(t, err)
		return b
	}
	refs := []ExecutionRef{
		{TenantID: "acme", ExecutionID: resource.NewID(), ScheduledFor: first.Add(15 * time.Millisecond)},
		{TenantID: "tenant with spaces. dots and 'quotes'", ExecutionID: resource.NewID(), ScheduledFor: first},
		{TenantID: "acme", ExecutionID: resource.NewID()},
		{TenantID: "ünïcode", ExecutionID: resource.NewID(), ScheduledFor: first.Add(19999 * time.Microsecond)},
	}
	for name, args := range map[string][]byte{
		"packed":         packed(refs...),
		"packed, one":    packed(refs[1]),
		"object array":   legacy(refs...),
		"object, one":    legacy(refs[3]),
		"packed, no one": []byte(`{"tenants":[],"executions":""}`),
	} {
		var goRead DeliverBatchArgs
		require.NoError(t, json.Unmarshal(args, &goRead), name)
		tenant, sqlRead, err := db.ReadBatchArgs(ctx, pool, args)
		require.NoError(t, err, name)
		var want []db.BatchMember
		for _, r := range goRead.Executions {
			want = append(want, db.BatchMember{TenantID: r.TenantID, ID: r.ExecutionID})
		}
		order := func(a, b db.BatchMember) int { return cmp.Compare(a.ID, b.ID) }
		slices.SortFunc(want, order)
		slices.SortFunc(sqlRead, order)
		require.Equal(t, want, sqlRead, "%s: %s", name, args)
		if len(goRead.Executions) > 0 {
			require.Equal(t, goRead.Executions[0].TenantID, tenant, "%s: the batch's tenant is its first member's", name)
		}
	}
}
