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

// Local returns the time on this process's clock at which the database's
// clock reads t.
func (c *DBClock) Local(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(-c.Offset())
}
