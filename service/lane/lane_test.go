package lane

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLanesSlowInFlight: an endpoint whose attempts are in flight past
// SlowLatency is slow before any of them ends, and its fires go to the
// bulk lane; one whose attempts in flight are younger is not; a finished
// slow attempt keeps it slow through the average.
func TestLanesSlowInFlight(t *testing.T) {
	t.Parallel()
	l := &Picker{SlowLatency: time.Millisecond}
	hang := l.Sending("hang")
	l.Observe("ok", time.Microsecond)
	time.Sleep(5 * time.Millisecond) // past the 1 ms threshold, by the monotonic clock
	require.True(t, l.Slow("hang"), "in flight past the threshold")
	require.False(t, l.Slow("ok"))
	fired := []Fire{{Tenant: "a", Endpoint: "hang"}, {Tenant: "a", Endpoint: "ok"}}
	bulk := make([]bool, len(fired))
	l.Assign(len(fired), func(i int) Fire { return fired[i] }, func(i int, b bool) { bulk[i] = b })
	require.Equal(t, []bool{true, false}, bulk)
	hang.Done(5 * time.Millisecond)
	require.True(t, l.Slow("hang"), "its finished attempt was slow")

	young := &Picker{SlowLatency: time.Hour}
	s := young.Sending("x")
	require.False(t, young.Slow("x"), "in flight, not for long")
	s.Done(time.Millisecond)
	require.False(t, young.Slow("x"))

	var none *Picker
	none.Sending("x").Done(time.Second)
}

// BenchmarkLanesSending: what an attempt costs a Picker (Sending, then Done
// with its latency), one goroutine and all at once, over 1,000 endpoints.
func BenchmarkLanesSending(b *testing.B) {
	l := &Picker{}
	endpoints := make([]string, 1000)
	for i := range endpoints {
		endpoints[i] = strconv.Itoa(i)
	}
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			l.Sending(endpoints[i%len(endpoints)]).Done(time.Millisecond)
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				l.Sending(endpoints[i%len(endpoints)]).Done(time.Millisecond)
				i++
			}
		})
	})
}
