package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReceiverKeepsEveryRequestAcrossBlocks: requests recorded across
// several blocks, some with long headers, read back whole and in order,
// from the first or from any later one.
func TestReceiverKeepsEveryRequestAcrossBlocks(t *testing.T) {
	r := &receiver{}
	base := time.Unix(1_800_000_000, 123)
	n := 2*recordBlockLen + 77
	want := make([]delivery, n)
	for i := range want {
		want[i] = delivery{
			at: base.Add(time.Duration(i) * time.Microsecond), sched: "2027-01-15T09:00:00Z", exec: "e" + strconv.Itoa(i),
			task: "t" + strconv.Itoa(i%97), attempt: strconv.Itoa(1 + i%3),
		}
		if i%1000 == 0 { // a long header now and then: the block's arena grows
			want[i].run = strings.Repeat("r", 5000)
		}
		if i%7 == 0 {
			want[i].node, want[i].shard = "n", strconv.Itoa(i%4)
		}
		r.record(want[i])
	}
	require.Equal(t, n, r.count())
	require.Len(t, r.blocks, 3)
	got := r.snapshot()
	require.Len(t, got, n)
	for i := range want {
		require.True(t, want[i].at.Equal(got[i].at), "arrival of %d", i)
		got[i].at = want[i].at
		require.Equal(t, want[i], got[i], "request %d", i)
	}
	tail := r.since(recordBlockLen - 1)
	require.Len(t, tail, n-recordBlockLen+1)
	require.Equal(t, want[recordBlockLen-1].exec, tail[0].exec)
	require.Equal(t, want[n-1].exec, tail[len(tail)-1].exec)
	require.Nil(t, r.since(n))
}
