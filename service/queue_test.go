package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLanesAssign: a tenant's burst (BurstPerSecond fires in one second of
// slots) and fires to a slow endpoint go to the bulk lane; another
// tenant's fires in the same pass stay in the main lane, and each lane's
// jobs are batched apart.
func TestLanesAssign(t *testing.T) {
	t.Parallel()
	l := &Lanes{BurstPerSecond: 3}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var fired []firedExecution
	for i := range 4 {
		fired = append(fired, firedExecution{
			TenantID: "a", ID: NewID(), EndpointID: "ea", ScheduledFor: at.Add(time.Duration(i) * time.Millisecond),
			Priority: 2, MaxAttempts: 3,
		})
	}
	fired = append(fired,
		firedExecution{TenantID: "b", ID: NewID(), EndpointID: "eb", ScheduledFor: at, Priority: 2, MaxAttempts: 3},
		firedExecution{TenantID: "b", ID: NewID(), EndpointID: "slow", ScheduledFor: at.Add(time.Minute), Priority: 2, MaxAttempts: 3},
	)
	for range 5 {
		l.Observe("slow", 2*time.Second)
		l.Observe("eb", 10*time.Millisecond)
	}
	require.True(t, l.Slow("slow"))
	require.False(t, l.Slow("eb"))
	require.False(t, l.Slow("never-seen"))
	assignLanes(l, fired)
	for _, f := range fired[:4] {
		require.True(t, f.Bulk, "a's burst")
	}
	require.False(t, fired[4].Bulk, "b's on-time fire")
	require.True(t, fired[5].Bulk, "a slow endpoint")

	jobs := fireInserts(fired, at.Add(-time.Hour), 0, 0)
	queues := map[string]int{}
	for _, j := range jobs {
		queues[j.InsertOpts.Queue]++
		if args, ok := j.Args.(DeliverBatchArgs); ok {
			require.Len(t, args.Executions, 4, "a's burst, batched in its lane")
			require.Equal(t, QueueDeliverBulkBatch, j.InsertOpts.Queue)
		}
	}
	require.Equal(t, map[string]int{QueueDeliver: 1, QueueDeliverBulk: 1, QueueDeliverBulkBatch: 1}, queues)

	// A nil Lanes puts everything in the main lane.
	var none *Lanes
	assignLanes(none, fired[:1])
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
	var fired []firedExecution
	for i := range 6 {
		tenant := []string{"a", "b"}[i%2]
		fired = append(fired, firedExecution{
			TenantID: tenant, ID: NewID(), ScheduledFor: at.Add(time.Duration(i) * time.Millisecond),
			Priority: 2, MaxAttempts: 3,
		})
	}
	jobs := fireInserts(fired, at.Add(-time.Hour), 0, 0)
	require.Len(t, jobs, 2)
	for _, j := range jobs {
		args, ok := j.Args.(DeliverBatchArgs)
		require.True(t, ok)
		require.Len(t, args.Executions, 3)
		for i, e := range args.Executions {
			require.Equal(t, args.Executions[0].TenantID, e.TenantID, "one tenant per batch")
			if i > 0 {
				require.True(t, e.ScheduledFor.After(args.Executions[i-1].ScheduledFor), "in slot order")
			}
		}
	}

	one := fireInserts(fired[:1:1], at.Add(-time.Hour), 0, 0)
	require.Len(t, one, 1)
	var single []firedExecution
	for _, f := range fired {
		f.TenantID = "a"
		single = append(single, f)
	}
	jobs = fireInserts(single, at.Add(-time.Hour), 0, 0)
	require.Len(t, jobs, 1, "one tenant: one batch, as before")
	require.Len(t, jobs[0].Args.(DeliverBatchArgs).Executions, 6) //nolint:forcetypeassert // a batch of 6
}

// TestFireInsertsDueAheadByLane: a main-lane fire's job is due ahead of
// its slot by the main lane's fetch-ahead, a bulk-lane fire's (batch or
// single) by the bulk lane's, whose queues are polled less often.
func TestFireInsertsDueAheadByLane(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ahead, bulkAhead := 110*time.Millisecond, 310*time.Millisecond
	fired := []firedExecution{
		{TenantID: "a", ID: NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3},
		{TenantID: "b", ID: NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3, Bulk: true},
		{TenantID: "c", ID: NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3, Bulk: true},
		{TenantID: "c", ID: NewID(), ScheduledFor: at, Priority: 2, MaxAttempts: 3, Bulk: true},
	}
	jobs := fireInserts(fired, at.Add(-time.Hour), ahead, bulkAhead)
	require.Len(t, jobs, 3)
	due := map[string]time.Time{}
	for _, j := range jobs {
		due[j.InsertOpts.Queue] = j.InsertOpts.ScheduledAt
	}
	require.Equal(t, at.Add(-ahead), due[QueueDeliver])
	require.Equal(t, at.Add(-bulkAhead), due[QueueDeliverBulk])
	require.Equal(t, at.Add(-bulkAhead), due[QueueDeliverBulkBatch])
}
