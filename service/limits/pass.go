package limits

import (
	"cmp"
	"slices"
	"time"

	"github.com/axhq/ax/db"
)

// held is a held delivery in a dispatcher's pass, with its execution's
// and job's states once they are read (known).
type held struct {
	db.Hold
	known     bool
	jobState  *string
	execState *string
	permitted bool
}

// The states in which a held delivery is still to start: its execution
// unfinished, its River job not finalized (sleeping, due, or still
// running the attempt that held it).
var (
	liveExecutionStates = []string{"pending", "running", "retrying"}
	liveJobStates       = []string{"available", "pending", "retryable", "running", "scheduled"}
)

// jobSleeping is the state of a held delivery's job while it sleeps
// (snoozed): the state the dispatcher wakes it from.
const jobSleeping = "scheduled"

// final reports whether a held delivery is over: its execution or job is
// final or gone, or its execution already has a permit (a stale hold:
// granting it again would count the attempt twice).
func (h *held) final() bool {
	over := func(s *string, live []string) bool { return s == nil || !slices.Contains(live, *s) }
	return h.permitted || over(h.execState, liveExecutionStates) || over(h.jobState, liveJobStates)
}

// learn records the states read of a hold (s nil: the hold is gone, so
// it reads as final: neither granted nor counted).
func (h *held) learn(s *db.HeldState) {
	h.known = true
	if s == nil {
		h.jobState, h.execState, h.permitted = nil, nil, false
		return
	}
	h.JobID, h.jobState, h.execState, h.permitted = s.JobID, s.JobState, s.ExecState, s.Permitted
}

// passPlan is what one walk of the holds through the gates decides.
type passPlan struct {
	// gates are the gates' states after the grants.
	gates map[string]*gateState
	// grant are the deliveries the gates let through, in order; unknown
	// are those of them whose states are not read yet (the walk needs
	// them before it can trust what follows).
	grant   []*held
	unknown []*held
	// drop are the holds that are over.
	drop []string
	// next is when a rate that blocks a held delivery gets its next
	// token (zero: none blocks).
	next time.Time
}

// plan walks holds in order through the gates, in their states locked at
// now (which it does not change): a delivery is let through while each
// of its gates has room, and takes its place there; one that is not
// blocks its gates for every later one, so each gate starts its
// deliveries in order. A known hold that is over is dropped; a known one
// whose job is not sleeping (its snooze not yet recorded by River) blocks
// its gates until the next pass.
func plan(holds []*held, locked map[string]*gateState, now time.Time) passPlan {
	p := passPlan{gates: make(map[string]*gateState, len(locked))}
	for k, v := range locked {
		c := *v
		p.gates[k] = &c
	}
	blocked := map[string]bool{}
	for _, h := range holds {
		if h.known && h.final() {
			p.drop = append(p.drop, h.ExecutionID)
			continue
		}
		ok := !h.known || *h.jobState == jobSleeping
		for _, g := range h.Gates {
			if blocked[g] || (p.gates[g] != nil && !p.gates[g].fits()) {
				ok = false
			}
		}
		if !ok {
			for _, g := range h.Gates {
				blocked[g] = true
				if st := p.gates[g]; st != nil {
					if at := st.nextToken(now); !at.IsZero() && (p.next.IsZero() || at.Before(p.next)) {
						p.next = at
					}
				}
			}
			continue
		}
		if !h.known {
			p.unknown = append(p.unknown, h)
		}
		for _, g := range h.Gates {
			if st := p.gates[g]; st != nil {
				st.take()
			}
		}
		p.grant = append(p.grant, h)
	}
	return p
}

// settle keeps the grants that became permits (granted, by execution):
// the others (an admission ended their hold since the list was read) give
// their places back, so that the gates count exactly the permits. It
// returns the granted deliveries' jobs, to wake.
func (p *passPlan) settle(granted []string) []int64 {
	given := make(map[string]bool, len(granted))
	for _, id := range granted {
		given[id] = true
	}
	wake := make([]int64, 0, len(granted))
	for _, h := range p.grant {
		if given[h.ExecutionID] {
			wake = append(wake, h.JobID)
			continue
		}
		for _, g := range h.Gates {
			if st := p.gates[g]; st != nil {
				st.giveBack()
			}
		}
	}
	return wake
}

// executionIDs returns the holds' executions.
func executionIDs(holds []*held) []string {
	out := make([]string, len(holds))
	for i, h := range holds {
		out[i] = h.ExecutionID
	}
	return out
}

// heldGates returns the gates holds go through, each once, in the order
// they come.
func heldGates(holds []*held) []string {
	var out []string
	for _, h := range holds {
		for _, g := range h.Gates {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// mergeHolds adds to first (the first holds of a tenant, in order) more
// (the first holds of its other gates), each hold once, all in order.
func mergeHolds(first, more []db.Hold) []*held {
	out := make([]*held, 0, len(first)+len(more))
	listed := make(map[string]bool, len(first)+len(more))
	for _, hs := range [][]db.Hold{first, more} {
		for _, h := range hs {
			if !listed[h.ExecutionID] {
				listed[h.ExecutionID] = true
				out = append(out, &held{Hold: h})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *held) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.ScheduledFor.Compare(b.ScheduledFor), cmp.Compare(a.Seq, b.Seq))
	})
	return out
}
