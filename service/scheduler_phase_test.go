package service

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// claimSim follows the claims of one task firing every second at offset
// off within its second: each claim at now materialises the slots up to
// horizonEnd; the task is claimable again once its next slot is within the
// look-ahead, and the loop claims it up to late after that. It returns the
// claim instants.
func claimSim(s *Scheduler, id string, first time.Time, claims int, late func() time.Duration) []time.Time {
	la := s.cfg.LookAhead
	next := first
	now := first.Add(-la)
	var at []time.Time
	for range claims {
		at = append(at, now)
		end := s.horizonEnd(id, next, now)
		for !next.After(end) {
			next = next.Add(time.Second)
		}
		now = next.Add(-la + late())
	}
	return at
}

// TestHorizonEndBounds: a claim's end is at most half the claim cycle
// short of the horizon and a quarter beyond it, beyond the claimed slot, and within NearTermWindow
// (for a horizon of 20 s, the window itself, it is never later).
func TestHorizonEndBounds(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, in := range []SchedulerConfig{{}, {LookAhead: 2 * time.Second}, {LookAhead: 7 * time.Second}} {
		s := NewScheduler(nil, nil, in, nil)
		cfg := s.Config()
		cycle := cfg.Horizon - cfg.LookAhead
		var sooner, later int // ends before, after the fixed horizon's
		for i := range 50_000 {
			now := base.Add(time.Duration(rnd.Int64N(int64(time.Hour))))
			slot := now.Add(time.Duration(rnd.Int64N(int64(cfg.LookAhead))))
			if i%3 == 0 {
				slot = slot.Truncate(time.Second) // whole seconds take the id's phase
			}
			end := s.horizonEnd(fmt.Sprint("task-", i), slot, now)
			require.True(t, end.After(now.Add(cfg.LookAhead)), "end %v, now %v: the claimed slot is always materialised", end, now)
			require.False(t, end.Before(now.Add(cfg.LookAhead+cycle/2)), "end %v, now %v: at most half a cycle short", end, now)
			require.False(t, end.After(now.Add(cfg.Horizon+cycle/4)), "end %v, now %v: at most a quarter cycle beyond", end, now)
			require.False(t, end.After(now.Add(NearTermWindow)), "end %v, now %v: every job written available", end, now)
			switch {
			case end.Before(now.Add(cfg.Horizon)):
				sooner++
			case end.After(now.Add(cfg.Horizon)):
				later++
			}
		}
		// A claim out of phase moves sooner or later, about as often each
		// way; with a horizon at NearTermWindow only sooner.
		require.Greater(t, sooner, 50_000/5, "%+v", in)
		if cfg.Horizon < NearTermWindow {
			require.Greater(t, later, 50_000/5, "%+v", in)
		} else {
			require.Zero(t, later, "%+v", in)
		}
	}
	// A cycle shorter than a second is not phased.
	short := NewScheduler(nil, nil, SchedulerConfig{LookAhead: 4 * time.Second, Horizon: 4*time.Second + 500*time.Millisecond}, nil)
	require.Equal(t, base.Add(short.Config().Horizon), short.horizonEnd("x", base.Add(time.Second), base))
}

// TestClaimsKeepTheirPhase: a task is claimed ½ to 1¼ cycles (and a slot)
// after its previous claim, as often as with a fixed horizon, and from its
// third claim on once per cycle at the same phase, however late the loop
// gets to it.
func TestClaimsKeepTheirPhase(t *testing.T) {
	s := NewScheduler(nil, nil, SchedulerConfig{}, nil)
	cycle := s.cfg.Horizon - s.cfg.LookAhead
	rnd := rand.New(rand.NewPCG(5, 6))
	late := func() time.Duration { return time.Duration(rnd.Int64N(int64(700 * time.Millisecond))) }
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, off := range []time.Duration{0, time.Millisecond, 83 * time.Millisecond, 500 * time.Millisecond, 999 * time.Millisecond} {
		for _, id := range []string{"a", "b", "c", "d"} {
			at := claimSim(s, id, base.Add(off), 40, late)
			for i := 1; i < len(at); i++ {
				gap := at[i].Sub(at[i-1])
				require.GreaterOrEqual(t, gap, cycle/2, "offset %v, task %s, claim %d", off, id, i)
				require.LessOrEqual(t, gap, cycle+cycle/4+2*time.Second, "offset %v, task %s, claim %d", off, id, i)
				if i > 2 {
					require.InDelta(t, cycle, gap, float64(time.Second), "offset %v, task %s, claim %d", off, id, i)
				}
			}
			require.InDelta(t, float64(cycle), float64(at[len(at)-1].Sub(at[0]))/float64(len(at)-1), float64(300*time.Millisecond),
				"offset %v, task %s: as many claims as a fixed horizon, transition included", off, id)
			span := at[len(at)-1].Sub(at[5])
			require.InDelta(t, float64(cycle), float64(span)/float64(len(at)-6), float64(50*time.Millisecond),
				"offset %v, task %s: claims once per cycle on average", off, id)
		}
	}
}

// TestClaimsSpreadOverTheCycle: tasks first due together — 6,000 firing
// every second at offsets spread over the second, and 6,000 firing on
// whole seconds — are claimed spread over the whole cycle after a few
// cycles, and tasks whose slots are within a few milliseconds of each
// other together (so their executions still share batch jobs).
func TestClaimsSpreadOverTheCycle(t *testing.T) {
	s := NewScheduler(nil, nil, SchedulerConfig{}, nil)
	cycle := s.cfg.Horizon - s.cfg.LookAhead
	seconds := int(cycle / time.Second)
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const n = 6000
	onTime := func() time.Duration { return 0 }
	for _, staggered := range []bool{true, false} {
		perSecond := make([]int, seconds)
		phases := make([]int64, 0, n)
		var prev time.Time
		for i := range n {
			first := base
			if staggered {
				first = base.Add(time.Duration(i) * time.Second / n)
			}
			at := claimSim(s, fmt.Sprint("task-", i), first, 8, onTime)
			c := at[len(at)-1]
			perSecond[floorMod(c.UnixNano(), int64(cycle))/int64(time.Second)]++
			phases = append(phases, floorMod(c.UnixNano(), int64(cycle)))
			if groups := seconds - 1; staggered && i > 1 && groups*i/n == groups*(i-1)/n {
				// A neighbour (1/6 ms apart) in the same group (an eleventh of
				// the second) is claimed within a millisecond of it.
				require.InDelta(t, 0, c.Sub(prev), float64(time.Millisecond), "task %d", i)
			}
			prev = c
		}
		busiest := 0
		for _, c := range perSecond {
			busiest = max(busiest, c)
		}
		require.LessOrEqual(t, busiest, 2*n/seconds, "staggered %v: claims per second of the cycle %v", staggered, perSecond)
		// No two groups are claimed within half a second of each other,
		// the cycle's wrap included: in any 500 ms of the cycle, at most one
		// group's claims (n / (seconds − 1), a quarter more for ids' hashes).
		slices.Sort(phases)
		crowd, j := 0, 0
		for i := range phases {
			for j < i+len(phases) && phases[j%len(phases)]+int64(j/len(phases))*int64(cycle)-phases[i] < int64(500*time.Millisecond) {
				j++
			}
			crowd = max(crowd, j-i)
		}
		require.LessOrEqual(t, crowd, n/(seconds-1)*5/4, "staggered %v: claims within 500 ms of the cycle", staggered)
	}
}

// TestTasksReachTheirPhaseByTheThirdClaim: tasks created at arbitrary
// instants through the API (their slots anchored on their creation, so
// anywhere in the second, and first claimed at once) are claimed at their
// own phase from their third claim on — so tasks whose slots are close
// are claimed together, and their fires share batch jobs, within a cycle
// or two of their creation.
func TestTasksReachTheirPhaseByTheThirdClaim(t *testing.T) {
	s := NewScheduler(nil, nil, SchedulerConfig{}, nil)
	cycle := s.cfg.Horizon - s.cfg.LookAhead
	rnd := rand.New(rand.NewPCG(7, 8))
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	onTime := func() time.Duration { return 0 }
	for i := range 2000 {
		created := base.Add(time.Duration(rnd.Int64N(int64(time.Minute))))
		at := claimSim(s, fmt.Sprint("task-", i), created.Add(s.cfg.LookAhead), 6, onTime)
		for j := 3; j < len(at); j++ {
			require.InDelta(t, cycle, at[j].Sub(at[j-1]), float64(time.Second), "task %d, claim %d: %v", i, j, at)
		}
	}
}

// TestFirstClaimsDoNotClump: 12,000 tasks firing every second, first due
// together and claimed at one instant, are claimed the second time spread
// over the next cycle — at most about twice the even share in any second —
// rather than the quarter whose phase is out of reach all at one instant
// (3,000 executions' worth of tasks in one claim, which at 10,000 fires a
// second held the deliveries behind a second of materialising); and each
// reaches its phase by its third claim.
func TestFirstClaimsDoNotClump(t *testing.T) {
	s := NewScheduler(nil, nil, SchedulerConfig{}, nil)
	cycle := s.cfg.Horizon - s.cfg.LookAhead
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const n = 12_000
	onTime := func() time.Duration { return 0 }
	perSecond := map[int64]int{}
	for i := range n {
		first := base.Add(time.Duration(i) * time.Second / n)
		at := claimSim(s, fmt.Sprint("task-", i), first, 5, onTime)
		perSecond[at[1].Unix()]++
		for j := 3; j < len(at); j++ {
			require.InDelta(t, cycle, at[j].Sub(at[j-1]), float64(time.Second), "task %d, claim %d: %v", i, j, at)
		}
	}
	even := n / (int(cycle/time.Second) - 1) // tasks in each group of slot positions
	for sec, c := range perSecond {
		require.LessOrEqual(t, c, 2*even+even/20, "second claims at %v: %d (even share %d): %v",
			time.Unix(sec, 0).UTC().Format("15:04:05"), c, even, perSecond)
	}
}
