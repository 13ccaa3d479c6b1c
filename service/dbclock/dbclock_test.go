package dbclock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClock(t *testing.T) {
	t.Parallel()
	var nilClock *Clock
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	require.Equal(t, now, nilClock.Local(now), "nil: this process's clock")
	nilClock.Observe(now, now, now) // no panic

	var c Clock
	require.Zero(t, c.Offset())
	// The database reads 09:00:00.250 in the middle of a 10 ms round trip
	// sent at 09:00:00 here: it is 245 ms ahead.
	c.Observe(now, now.Add(250*time.Millisecond), now.Add(10*time.Millisecond))
	require.Equal(t, 245*time.Millisecond, c.Offset())
	// The database's clock surely reads now only 240 ms earlier here (had
	// it read 09:00:00.250 at the very end of the round trip): Local is
	// never early, and at most the round trip late.
	require.Equal(t, now.Add(-240*time.Millisecond), c.Local(now))
	require.True(t, c.Local(time.Time{}).IsZero())

	// A much slower round trip soon after is not trusted; one 10 s later is.
	c.Observe(now.Add(time.Second), now.Add(time.Second), now.Add(time.Second+100*time.Millisecond))
	require.Equal(t, 245*time.Millisecond, c.Offset())
	later := now.Add(11 * time.Second)
	c.Observe(later, later.Add(-time.Second), later.Add(100*time.Millisecond))
	require.Equal(t, -1050*time.Millisecond, c.Offset())
	// A fast one replaces it at once; a reversed one is ignored.
	c.Observe(later, later, later.Add(2*time.Millisecond))
	require.Equal(t, -time.Millisecond, c.Offset())
	c.Observe(later, later.Add(time.Hour), later.Add(-time.Millisecond))
	require.Equal(t, -time.Millisecond, c.Offset())

	// Now reads the database's clock from the estimate while it is fresh.
	_, ok := nilClock.Now(later)
	require.False(t, ok, "nil: no estimate")
	var fresh Clock
	_, ok = fresh.Now(later)
	require.False(t, ok, "no observation yet")
	fresh.Observe(later, later.Add(time.Hour), later.Add(2*time.Millisecond))
	// Counted from the end of the round trip: never ahead of the database.
	got, ok := fresh.Now(later.Add(5*time.Second + 1234567))
	require.True(t, ok)
	require.Equal(t, later.Add(time.Hour+5*time.Second-2*time.Millisecond+1234*time.Microsecond), got, "to the microsecond")
	_, ok = fresh.Now(later.Add(sampleMaxAge + 2*time.Millisecond))
	require.False(t, ok, "stale: ask the database")
	_, ok = fresh.Now(later)
	require.False(t, ok, "the local clock went back before the observation")
	// Ten seconds on, a slow round trip replaces the estimate, but Now does
	// not answer from it.
	slow := later.Add(sampleMaxAge + time.Second)
	fresh.Observe(slow, slow.Add(time.Hour), slow.Add(40*time.Millisecond))
	require.Equal(t, time.Hour-20*time.Millisecond, fresh.Offset())
	_, ok = fresh.Now(slow.Add(time.Second))
	require.False(t, ok, "a slow round trip: ask the database")
}
