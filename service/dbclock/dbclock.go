// Package dbclock estimates the database's clock from this process's
// (Clock), so that due-ness can be the database's now() without a query
// per question.
package dbclock

import (
	"sync/atomic"
	"time"
)

// Clock estimates the database's clock from this process's. Due-ness is
// the database's now(), never a replica's wall clock: a worker that waits
// for a slot (its job is fetched ahead of it) waits until the database's
// clock reads the slot. The estimate is the offset between the two clocks
// seen by the scheduler loop's queries, each reading the database's clock
// in the middle of a round trip; its error is at most half the round trip.
// A nil *Clock is this process's clock.
type Clock struct {
	sample atomic.Pointer[reading]
}

// reading is one reading of the database's clock.
type reading struct {
	db       time.Time     // the database's clock
	mid      time.Time     // this process's clock in the middle of the round trip
	received time.Time     // and at its end (with the monotonic reading, from time.Now)
	rtt      time.Duration // the round trip
}

// sampleMaxAge: an observation older than this gives way to any new
// one, however slow its round trip (the clocks may have stepped), and Now
// no longer answers from it.
const sampleMaxAge = 10 * time.Second

// nowMaxRTT bounds the round trip of an observation Now answers
// from, and so how far behind the database's clock Now may be.
const nowMaxRTT = 10 * time.Millisecond

// Observe records a reading db of the database's clock taken between
// sent and received (this process's clock). A slower round trip than the
// current estimate's is ignored unless that estimate is getting old.
func (c *Clock) Observe(sent, db, received time.Time) {
	if c == nil || received.Before(sent) {
		return
	}
	rtt := received.Sub(sent)
	if old := c.sample.Load(); old != nil && rtt > 2*old.rtt && received.Sub(old.received) < sampleMaxAge {
		return
	}
	c.sample.Store(&reading{db: db, mid: sent.Add(rtt / 2), received: received, rtt: rtt})
}

// OffsetWarn is the drift from the database's clock above which a replica
// warns: its log every minute, GET /readyz's body.
const OffsetWarn = 200 * time.Millisecond

// Drift returns this process's clock minus the database's (the opposite of
// Offset), and whether its size is above OffsetWarn.
func (c *Clock) Drift() (drift time.Duration, warn bool) {
	drift = -c.Offset()
	return drift, drift > OffsetWarn || drift < -OffsetWarn
}

// Offset returns the database's clock minus this process's, as estimated.
func (c *Clock) Offset() time.Duration {
	if c == nil {
		return 0
	}
	s := c.sample.Load()
	if s == nil {
		return 0
	}
	return s.db.Sub(s.mid)
}

// Now returns what the database's clock reads when this process's reads
// local (from time.Now), to the microsecond (the database's precision),
// from an observation younger than sampleMaxAge whose round trip was
// under nowMaxRTT; ok is false otherwise (no such observation: none
// yet, the loop stalled, the database answered slowly), and the caller
// should ask the database. The reading is never ahead of the database's
// clock (it counts from the end of the round trip, on the monotonic clock
// when local and the observation carry it, so a step of the wall clock
// does not move it) and at most the round trip behind.
func (c *Clock) Now(local time.Time) (now time.Time, ok bool) {
	if c == nil {
		return time.Time{}, false
	}
	s := c.sample.Load()
	if s == nil || s.rtt >= nowMaxRTT {
		return time.Time{}, false
	}
	age := local.Sub(s.received)
	if age < 0 || age >= sampleMaxAge {
		return time.Time{}, false
	}
	return s.db.Add(age).Truncate(time.Microsecond), true
}

// Local returns the earliest time on this process's clock at which the
// database's clock surely reads t: the estimate's offset plus half its
// round trip (the database may have read its clock at the very end of the
// round trip), so a worker waiting for a slot until Local(slot) never
// sends before the database's clock reaches it — it is at most the round
// trip late, a fraction of a millisecond on a near database. (With the
// middle of the round trip, sends came up to 0.3 ms early.)
func (c *Clock) Local(t time.Time) time.Time {
	if t.IsZero() || c == nil {
		return t
	}
	s := c.sample.Load()
	if s == nil {
		return t
	}
	return t.Add(-s.db.Sub(s.received))
}
