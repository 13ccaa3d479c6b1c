package service

import (
	"sync/atomic"
	"time"
)

// DBClock estimates the database's clock from this process's. Due-ness is
// the database's now(), never a replica's wall clock: a worker that waits
// for a slot (its job is fetched ahead of it) waits until the database's
// clock reads the slot. The estimate is the offset between the two clocks
// seen by the scheduler loop's queries, each reading the database's clock
// in the middle of a round trip; its error is at most half the round trip.
// A nil *DBClock is this process's clock.
type DBClock struct {
	offset atomic.Int64 // database − local, in nanoseconds
	rtt    atomic.Int64 // of the observation behind offset
	at     atomic.Int64 // local unix nanoseconds of that observation
}

// clockSampleMaxAge: an observation older than this gives way to any new
// one, however slow its round trip (the clocks may have stepped).
const clockSampleMaxAge = 10 * time.Second

// Observe records a reading db of the database's clock taken between
// sent and received (this process's clock). A slower round trip than the
// current estimate's is ignored unless that estimate is getting old.
func (c *DBClock) Observe(sent, db, received time.Time) {
	if c == nil || received.Before(sent) {
		return
	}
	rtt := received.Sub(sent)
	if old := time.Duration(c.rtt.Load()); c.at.Load() != 0 && rtt > 2*old &&
		received.Sub(time.Unix(0, c.at.Load())) < clockSampleMaxAge {
		return
	}
	mid := sent.Add(rtt / 2)
	c.offset.Store(int64(db.Sub(mid)))
	c.rtt.Store(int64(rtt))
	c.at.Store(received.UnixNano())
}

// Offset returns the database's clock minus this process's, as estimated.
func (c *DBClock) Offset() time.Duration {
	if c == nil {
		return 0
	}
	return time.Duration(c.offset.Load())
}

// Now returns what the database's clock reads when this process's reads
// local, to the microsecond (the database's precision), when an
// observation younger than clockSampleMaxAge backs the estimate; ok is
// false otherwise (no observation yet, the loop stalled, or the local
// clock stepped back past it), and the caller should ask the database.
func (c *DBClock) Now(local time.Time) (now time.Time, ok bool) {
	if c == nil {
		return time.Time{}, false
	}
	at := c.at.Load()
	if at == 0 {
		return time.Time{}, false
	}
	if age := local.Sub(time.Unix(0, at)); age < 0 || age >= clockSampleMaxAge {
		return time.Time{}, false
	}
	return local.Add(c.Offset()).Truncate(time.Microsecond), true
}

// Local returns the time on this process's clock at which the database's
// clock reads t.
func (c *DBClock) Local(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-c.Offset())
}
