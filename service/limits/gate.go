package limits

import (
	"slices"
	"strings"
	"time"

	"github.com/axhq/ax/db"
)

// Gate is one limit a delivery passes: TenantGate (the tenant's
// deliveries in flight and per second) or EndpointGate(id). MaxInflight
// and Rate are its limits now (0: none).
type Gate struct {
	Name        string
	MaxInflight int
	Rate        float64
}

// TenantGate is the gate of a tenant's own delivery limits; an endpoint's
// is EndpointGate(id).
const TenantGate = "tenant"

const endpointGatePrefix = "endpoint:"

// EndpointGate names an endpoint's gate.
func EndpointGate(id string) string { return endpointGatePrefix + id }

// gateEndpoint returns the endpoint of an endpoint's gate.
func gateEndpoint(gate string) (string, bool) { return strings.CutPrefix(gate, endpointGatePrefix) }

// gateState is a gate's count and bucket as of one instant, with its
// limits.
type gateState struct {
	name     string
	inflight int
	tokens   float64
	max      int
	rate     float64
}

// bucketSize is how many tokens a rate's bucket holds: a tenth of a
// second's worth, at least one. A small bucket keeps the rate close over
// any window.
func bucketSize(rate float64) float64 { return max(rate/10, 1) }

// refill returns a bucket of size that held tokens elapsed ago, refilled
// at rate per second since.
func refill(tokens, rate, size float64, elapsed time.Duration) float64 {
	return min(size, tokens+elapsed.Seconds()*rate)
}

// stateOf is gate g's state at now from its row: the bucket refilled at
// the gate's rate (a gate without a rate has no tokens).
func stateOf(g Gate, row db.GateRow, now time.Time) gateState {
	st := gateState{name: g.Name, inflight: row.Inflight, max: g.MaxInflight, rate: g.Rate}
	if g.Rate > 0 {
		st.tokens = refill(row.Tokens, g.Rate, bucketSize(g.Rate), now.Sub(row.RefilledAt))
	}
	return st
}

// statesOf returns the states of gates gs at now from their locked rows
// (a gate without a row is left out).
func statesOf(gs []Gate, rows []db.GateRow, now time.Time) map[string]*gateState {
	out := make(map[string]*gateState, len(rows))
	for _, row := range rows {
		for _, g := range gs {
			if g.Name == row.Name {
				st := stateOf(g, row, now)
				out[g.Name] = &st
				break
			}
		}
	}
	return out
}

// counts returns what the gates count, to save.
func counts(gates map[string]*gateState) []db.GateCount {
	out := make([]db.GateCount, 0, len(gates))
	for _, g := range gates {
		out = append(out, db.GateCount{Name: g.name, Inflight: g.inflight, Tokens: g.tokens})
	}
	slices.SortFunc(out, func(a, b db.GateCount) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// fits reports whether one more delivery may start under the gate.
func (g gateState) fits() bool {
	return (g.max == 0 || g.inflight < g.max) && (g.rate == 0 || g.tokens >= 1)
}

// limitName names the limit of the gate that holds a delivery back: its
// in-flight limit when that is full, or when its rate has a token or it
// has none; else its rate.
func (g gateState) limitName() string {
	inflight := g.max > 0 && (g.inflight >= g.max || g.rate == 0 || g.tokens >= 1)
	switch {
	case g.name == TenantGate && inflight:
		return MaxInflightDeliveries
	case g.name == TenantGate:
		return MaxDeliveriesPerSecond
	case inflight:
		return MaxConcurrency
	}
	return RateLimitPerSecond
}

// take counts one more delivery under the gate.
func (g *gateState) take() {
	g.inflight++
	if g.rate > 0 {
		g.tokens--
	}
}

// giveBack undoes take.
func (g *gateState) giveBack() {
	g.inflight--
	if g.rate > 0 {
		g.tokens++
	}
}

// nextToken is when a gate whose rate blocks it gets its next token; zero
// when its rate does not block it.
func (g gateState) nextToken(now time.Time) time.Time {
	if g.rate <= 0 || g.tokens >= 1 {
		return time.Time{}
	}
	return now.Add(time.Duration((1 - g.tokens) / g.rate * float64(time.Second)))
}

// admission names the limit that holds back a delivery through gs, whose
// gates are in the states gates, or is "" when it may start: the first
// of its gates without room, else — when earlier deliveries wait on one
// of its gates (waiting) — its first gate's, as it queues behind them.
func admission(gs []Gate, gates map[string]*gateState, waiting bool) string {
	for _, g := range gs {
		if st := gates[g.Name]; st != nil && !st.fits() {
			return st.limitName()
		}
	}
	if !waiting || len(gs) == 0 {
		return ""
	}
	if st := gates[gs[0].Name]; st != nil {
		return st.limitName()
	}
	return behind(gs, []string{gs[0].Name}, "")
}

// behind names the limit a delivery through gs waits for when it queues
// behind a held delivery through aheadGates, held by aheadLimit: the limit
// of the first gate they share, as the held one names it when that is the
// same gate's kind, else the gate's own (its rate when that is all it
// has, else its in-flight limit).
func behind(gs []Gate, aheadGates []string, aheadLimit string) string {
	for _, g := range gs {
		if !slices.Contains(aheadGates, g.Name) {
			continue
		}
		tenantGate := g.Name == TenantGate
		switch aheadLimit {
		case MaxInflightDeliveries, MaxDeliveriesPerSecond:
			if tenantGate {
				return aheadLimit
			}
		case MaxConcurrency, RateLimitPerSecond:
			if !tenantGate {
				return aheadLimit
			}
		}
		byRate := g.Rate > 0 && g.MaxInflight == 0
		switch {
		case tenantGate && byRate:
			return MaxDeliveriesPerSecond
		case tenantGate:
			return MaxInflightDeliveries
		case byRate:
			return RateLimitPerSecond
		}
		return MaxConcurrency
	}
	return aheadLimit
}

// gateNames returns the names of gs.
func gateNames(gs []Gate) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Name
	}
	return out
}
