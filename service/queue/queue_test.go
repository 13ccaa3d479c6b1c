package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/job"
	"github.com/axhq/ax/service/lane"
	"github.com/axhq/ax/service/resource"
)

// TestLanesAssign: a tenant's burst (BurstPerSecond fires in one second of
// slots) and fires to a slow endpoint go to the bulk lane; another
// tenant's fires in the same pass stay in the main lane, and each lane's
// jobs are batched apart.
func TestLanesAssign(t *testing.T) {
	t.Parallel()
	l := &lane.Picker{BurstPerSecond: 3}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var fired []Fire
	for i := range 4 {
		fired = append(fired, Fire{
			TenantID: "a", ID: resource.NewID(), EndpointID: "ea", ScheduledFor: at.Add(time.Duration(i) * time.Millisecond),
			Priority: 2, MaxAttempts: 3,
		})
	}
	fired = append(fired,
		Fire{TenantID: "b", ID: resource.NewID(), EndpointID: "eb", ScheduledFor: at, Priority: 2, MaxAttempts: 3},
		Fire{TenantID: "b", ID: resource.NewID(), EndpointID: "slow", ScheduledFor: at.Add(time.Minute), Priority: 2, MaxAttempts: 3},
	)
	for range 5 {
		l.Observe("slow", 2*time.Second)
		l.Observe("eb", 10*time.Millisecond)
	}
	require.True(t, l.Slow("slow"))
	require.False(t, l.Slow("eb"))
	require.False(t, l.Slow("never-seen"))
	AssignLanes(l, fired)
	for _, f := range fired[:4] {
		require.True(t, f.Bulk, "a's burst")
	}
	require.False(t, fired[4].Bulk, "b's on-time fire")
	require.True(t, fired[5].Bulk, "a slow endpoint")

	jobs := FireInserts(fired, at.Add(-time.Hour), 0, 0)
	queues := map[string]int{}
	for _, j := range jobs {
		queues[j.InsertOpts.Queue]++
		if args, ok := j.Args.(job.DeliverBatchArgs); ok {
			require.Len(t, args.Executions, 4, "a's burst, batched in its lane")
			require.Equal(t, DeliverBulkBatch, j.InsertOpts.Queue)
		}
	}
	require.Equal(t, map[string]int{Deliver: 1, DeliverBulk: 1, DeliverBulkBatch: 1}, queues)

	// A nil Lanes puts everything in the main lane.
	var none *lane.Picker
	AssignLanes(none, fired[:1])
	none.Observe("x", time.Second)
	require.False(t, none.Slow("x"))
}

// TestFireInsertsOneTenantPerBatch: fires of two tenants in the same
// window are batched apart (Limits.Share tells a batch's tenant by its
// first execution), each tenant's in slot order; a single tenant's fires
// are batched as before.
func TestFireInsertsOneTenantPerBatch(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var fired []Fire
	for i := range 6 {
		tenant := []string{"a", "b"}[i%2]
		fired = append(fired, Fire{
			TenantID: tenant, ID: resource.NewID(), ScheduledFor: at.Add(time.Duration(i) * time.Millisecond),
			Priority: 2, MaxAttempts: 3,
		})
	}
	jobs := FireInserts(fired, at.Add(-time.Hour), 0, 0)
	require.Len(t, jobs, 2)
	for _, j := range jobs {
		args, ok := j.Args.(job.DeliverBatchArgs)
		require.True(t, ok)
		require.Len(t, args.Executions, 3)
		for i, e := range args.Executions {
			require.Equal(t, args.Executions[0].TenantID, e.TenantID, "one tenant per batch")
			if i > 0 {
				require.True(t, e.ScheduledFor.After(args.Executions[i-1].ScheduledFor), "in slot order")
			}
		}
	}

	one := FireInserts(fired[:1:1], at.Add(-time.Hour), 0, 0)
	require.Len(t, one, 1)
	var single []Fire
	for _, f := range fired {
		f.TenantID = "a"
		single = append(single, f)
	}
	jobs = FireInserts(single, at.Add(-time.Hour), 0, 0)
	require.Len(t, jobs, 1, "one tenant: one batch, as before")
	require.Len(t, jobs[0].Args.(job.DeliverBatchArgs).Executions, 6) //nolint:forcetypeassert // a batch of 6
}

// TestFireInsertsDueAheadByLane: a main-lane fire's job is due ahead of
// its slot by the main lane's fetch-ahead, a bulk-lane fire's (batch or
// single) by the bulk lane's, whose queues are polled less often.
func TestFireInsertsDueAheadByLane(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ahead, bulkAhead := 110*time.Millisecond, 310*time.Millisecond
	fired := []Fire{
		{TenantID: "a", ID: resource.NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3},
		{TenantID: "b", ID: resource.NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3, Bulk: true},
		{TenantID: "c", ID: resource.NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3, Bulk: true},
		{TenantID: "c", ID: resource.NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3, Bulk: true},
	}
	jobs := FireInserts(fired, at.Add(-time.Hour), ahead, bulkAhead)
	require.Len(t, jobs, 3)
	due := map[string]time.Time{}
	for _, j := range jobs {
		due[j.InsertOpts.Queue] = j.InsertOpts.ScheduledAt
	}
	require.Equal(t, at.Add(-ahead), due[Deliver])
	require.Equal(t, at.Add(-bulkAhead), due[DeliverBulk])
	require.Equal(t, at.Add(-bulkAhead), due[DeliverBulkBatch])
}
