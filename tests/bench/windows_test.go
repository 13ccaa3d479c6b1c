package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// spread returns n deliveries evenly over [from, to).
func spread(n int, from, to time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = from + (to-from)*time.Duration(i)/time.Duration(n)
	}
	return out
}

// TestWindowRates: a burst's rate per 5 s window after the instant, the
// last window rated over its part up to the last delivery, and a part
// under a second merged into the window before it.
func TestWindowRates(t *testing.T) {
	t.Parallel()
	// 10,000/s for 5 s, then 1,000/s for 2 s: the knee.
	l := append(spread(50_000, 0, 5*time.Second), spread(2000, 5*time.Second, 7*time.Second)...)
	require.Equal(t, []windowRate{{0, 50_000, 10_000}, {5, 2000, 1000}}, windowRates(l, 7*time.Second))

	// 1,000/s for 10.5 s: the last half second belongs to the second window.
	l = spread(10_500, 0, 10500*time.Millisecond)
	require.Equal(t, []windowRate{{0, 5000, 1000}, {5, 5500, 1000}}, windowRates(l, 10500*time.Millisecond))

	// Everything within 200 ms: one window, rated over its part.
	l = spread(2000, 0, 200*time.Millisecond)
	require.Equal(t, []windowRate{{0, 2000, 10_000}}, windowRates(l, 200*time.Millisecond))

	require.Nil(t, windowRates(nil, 0))
}
