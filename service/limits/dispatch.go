package limits

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Dispatched is what one DispatchTenant pass did.
type Dispatched struct {
	// Granted counts the held deliveries given a permit (their jobs made
	// available); Dropped those whose execution or job is gone or final.
	Granted, Dropped int
	// Busy: another replica dispatches the tenant, or a gate of the
	// tenant was locked by another transaction; try again soon. The
	// transaction is then aborted: roll it back.
	Busy bool
	// NextToken is when a rate-limited gate that blocks a held delivery
	// gets its next token (zero: none is blocked by a rate).
	NextToken time.Time
}

// gateLockWait bounds a pass's wait for its gates: an admission in
// flight holds one for a moment, and the next pass comes soon.
const gateLockWait = 100 * time.Millisecond

// DispatchTenant grants permits to tenant's held deliveries, in the
// caller's transaction q, in order (priority, slot, arrival), while their
// gates have room, and makes their River jobs available; tenantGate is
// the tenant's own delivery limits now (an endpoint's are read from its
// row; a gate without limits any more lets everything through), batch
// bounds the holds it looks at, permitTTL bounds the permits it grants.
// A delivery whose gate is blocked blocks that gate for every later one,
// so each gate starts its deliveries in order (plan). Holds whose
// execution is final or gone, or whose job is final or gone, are dropped.
//
// The list of holds is read from flow_holds alone (its order index); the
// states of executions and jobs are read only for the deliveries the
// gates would let through, a few per pass while a limit binds, not for
// every hold listed.
func DispatchTenant(ctx context.Context, q db.Querier, tenant string, tenantGate Gate, batch int, permitTTL time.Duration) (
	Dispatched, error,
) {
	var d Dispatched
	// One replica at a time dispatches a tenant: another replica's pass
	// would wait for the gates' locks only to find the room taken, and
	// both would pay for it while a limit binds. One that finds the
	// tenant taken leaves it to that pass and looks again at its next.
	mine, err := db.TryDispatchLock(ctx, q, tenant)
	if err != nil {
		return d, errs.Store(err, "take the tenant's dispatch lock")
	}
	if !mine {
		d.Busy = true
		return d, nil
	}
	holds, err := listHolds(ctx, q, tenant, batch)
	if err != nil || len(holds) == 0 {
		return d, err
	}
	gs, err := gatesNow(ctx, q, tenant, heldGates(holds), tenantGate)
	if err != nil {
		return d, err
	}
	rows, now, busy, err := db.LockGates(ctx, q, tenant, gateNames(gs), gateLockWait)
	if busy {
		d.Busy = true
		return d, nil
	}
	if err != nil {
		return d, errs.Store(err, "lock gates")
	}
	locked := statesOf(gs, rows, now)

	// Walk the holds with the gates' room; the deliveries that would be
	// granted need their states: read those not known yet and walk again
	// (a dropped or still running one changes what follows). Each round
	// reads at least one unknown state, and a pass grants at most a gate's
	// room, so this ends after a round or two.
	var p passPlan
	for {
		p = plan(holds, locked, now)
		if len(p.unknown) == 0 {
			break
		}
		if err := readHeldStates(ctx, q, tenant, p.unknown); err != nil {
			return d, err
		}
	}
	d.NextToken = p.next
	if len(p.grant) > 0 {
		// Only holds still there are granted: an admission may have ended
		// one since the list was read.
		granted, err := db.GrantPermits(ctx, q, tenant, executionIDs(p.grant), permitTTL)
		if err != nil {
			return d, errs.Store(err, "grant permits")
		}
		wake := p.settle(granted)
		if err := db.SaveGates(ctx, q, tenant, counts(p.gates)); err != nil {
			return d, errs.Store(err, "save gates")
		}
		if err := db.WakeJobs(ctx, q, wake); err != nil {
			return d, errs.Store(err, "wake granted jobs")
		}
		d.Granted = len(granted)
	}
	if err := db.DeleteHolds(ctx, q, tenant, p.drop...); err != nil {
		return d, errs.Store(err, "drop holds")
	}
	d.Dropped = len(p.drop)
	return d, nil
}

// gatesNow returns the gates names stand for, with their limits now, in
// the order of their names: the tenant's own (tenantGate), the
// endpoints' read from their rows. A deleted endpoint's gate is left out
// (it lets everything through).
func gatesNow(ctx context.Context, q db.Querier, tenant string, names []string, tenantGate Gate) ([]Gate, error) {
	var gs []Gate
	var endpoints []string
	for _, g := range names {
		if g == TenantGate {
			tenantGate.Name = g
			gs = append(gs, tenantGate)
		} else if id, ok := gateEndpoint(g); ok {
			endpoints = append(endpoints, id)
		}
	}
	if len(endpoints) > 0 {
		lims, err := db.GetEndpointLimits(ctx, q, tenant, endpoints)
		if err != nil {
			return nil, errs.Store(err, "read endpoint limits")
		}
		for _, e := range lims {
			gs = append(gs, Gate{Name: EndpointGate(e.ID), MaxInflight: e.MaxConcurrency, Rate: e.RatePerSecond})
		}
	}
	slices.SortFunc(gs, func(a, b Gate) int { return strings.Compare(a.Name, b.Name) })
	return gs, nil
}

// listHolds lists tenant's first batch held deliveries in order. When
// there are more, it adds the first batch of each gate of the tenant
// that none of those goes through: a gate whose backlog fills the batch
// (thousands held by one endpoint's rate) must not hide the deliveries
// held by another endpoint's gate behind it, which its room may let
// through. Every added one comes after the first batch; one may pass an
// unlisted delivery of the first batch's gates on a gate they share (the
// tenant's) only when that gate has room for more than the whole batch
// in one pass, and the next pass lists that one.
func listHolds(ctx context.Context, q db.Querier, tenant string, batch int) ([]*held, error) {
	first, err := db.ListHolds(ctx, q, tenant, batch)
	if err != nil || len(first) < batch {
		return mergeHolds(first, nil), errs.Store(err, "list holds")
	}
	listed := make([]*held, len(first))
	for i := range first {
		listed[i] = &held{Hold: first[i]}
	}
	more, err := db.ListHoldsOnOtherGates(ctx, q, tenant, heldGates(listed), batch)
	if err != nil {
		return nil, errs.Store(err, "list holds")
	}
	return mergeHolds(first, more), nil
}

// readHeldStates reads the states of holds (unknown yet).
func readHeldStates(ctx context.Context, q db.Querier, tenant string, holds []*held) error {
	states, err := db.ReadHeldStates(ctx, q, tenant, executionIDs(holds))
	if err != nil {
		return errs.Store(err, "read held states")
	}
	byID := make(map[string]*db.HeldState, len(states))
	for i := range states {
		byID[states[i].ExecutionID] = &states[i]
	}
	for _, h := range holds {
		h.learn(byID[h.ExecutionID])
	}
	return nil
}
