package limits

import (
	"context"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Request asks to start an attempt of an execution through its gates.
type Request struct {
	TenantID    string
	ExecutionID string
	TaskID      string
	// JobID is the River job that would wait; the dispatcher makes it
	// available when the delivery may start.
	JobID        int64
	ScheduledFor time.Time
	Gates        []Gate
	// PermitTTL bounds the permit (Config.PermitTTL).
	PermitTTL time.Duration
}

// Admission is what Admit decided.
type Admission struct {
	// Admitted: the attempt may start; it holds a permit until Release
	// (or until the permit expires: SweepPermits).
	Admitted bool
	// Limit names the limit that holds the delivery back (when not
	// admitted).
	Limit string
	// NewHold: this call put the delivery on hold (the first time).
	NewHold bool
}

// Admit decides, in the caller's transaction q, whether an attempt may
// start under its gates: it may when the dispatcher granted it a permit,
// or when no earlier delivery waits on any of its gates and every gate
// has room (its in-flight count below its limit, a token in its bucket);
// it then takes a permit. Otherwise the delivery is held (a flow_holds
// row, kept in order with the others) until the dispatcher grants it one.
func Admit(ctx context.Context, q db.Querier, r Request) (Admission, error) {
	if granted, err := db.UsePermit(ctx, q, r.TenantID, r.ExecutionID, r.PermitTTL); err != nil || granted {
		return Admission{Admitted: granted}, errs.Store(err, "use permit")
	}
	names := gateNames(r.Gates)
	// A delivery behind held ones is held too, whatever the gates say:
	// queue it without their locks. While a limit binds, every new
	// delivery takes this way, so admissions do not queue on the gate
	// rows (which the dispatcher needs to grant the held ones: a gate
	// locked by a convoy of admissions loses its passes, and the
	// admissions hold connections that granted deliveries need to start).
	// A hold that ends meanwhile only leaves this one to the dispatcher.
	ahead, found, err := db.FirstHoldOn(ctx, q, r.TenantID, names, r.ExecutionID)
	if err != nil {
		return Admission{}, errs.Store(err, "read holds ahead")
	}
	if found {
		adm, err := hold(ctx, q, r, names, behind(r.Gates, ahead.Gates, ahead.Limit))
		if err != nil {
			return adm, err
		}
		// The dispatcher may have been granting this delivery's own hold
		// (a job woken by its snooze's end at the same moment): the hold's
		// insert waited for that grant's commit, which the permit now
		// shows. Start under it, as the path through the gates' locks does.
		granted, err := db.UsePermit(ctx, q, r.TenantID, r.ExecutionID, r.PermitTTL)
		if err != nil || !granted {
			return adm, errs.Store(err, "use permit")
		}
		return Admission{Admitted: true}, errs.Store(db.DeleteHolds(ctx, q, r.TenantID, r.ExecutionID), "delete hold")
	}
	rows, now, _, err := db.LockGates(ctx, q, r.TenantID, names, 0)
	if err != nil {
		return Admission{}, errs.Store(err, "lock gates")
	}
	gates := statesOf(r.Gates, rows, now)
	// The dispatcher may have granted this delivery a permit after the
	// look above and before the gates' locks, which it held until its
	// commit: look again, or the gates would count this attempt twice.
	if granted, err := db.UsePermit(ctx, q, r.TenantID, r.ExecutionID, r.PermitTTL); err != nil || granted {
		return Admission{Admitted: granted}, errs.Store(err, "use permit")
	}
	_, waiting, err := db.FirstHoldOn(ctx, q, r.TenantID, names, r.ExecutionID)
	if err != nil {
		return Admission{}, errs.Store(err, "read holds ahead")
	}
	if limit := admission(r.Gates, gates, waiting); limit != "" {
		return hold(ctx, q, r, names, limit)
	}
	for _, st := range gates {
		st.take()
	}
	if err := db.SaveGates(ctx, q, r.TenantID, counts(gates)); err != nil {
		return Admission{}, errs.Store(err, "save gates")
	}
	if err := db.TakePermit(ctx, q, r.TenantID, r.ExecutionID, names, r.PermitTTL); err != nil {
		return Admission{}, errs.Store(err, "take permit")
	}
	return Admission{Admitted: true}, errs.Store(db.DeleteHolds(ctx, q, r.TenantID, r.ExecutionID), "delete hold")
}

// hold holds a delivery back by limit (or keeps it held), in order with
// the other held deliveries of its tenant.
func hold(ctx context.Context, q db.Querier, r Request, names []string, limit string) (Admission, error) {
	inserted, err := db.HoldDelivery(ctx, q, r.TenantID, r.TaskID, db.Hold{
		ExecutionID: r.ExecutionID, JobID: r.JobID,
		Gates: names, Limit: limit, ScheduledFor: r.ScheduledFor,
	})
	if err != nil {
		return Admission{}, errs.Store(err, "hold delivery")
	}
	return Admission{Limit: limit, NewHold: inserted}, nil
}

// Release gives back the permit of an execution's attempt (none: nothing
// happens), in the caller's transaction q, and reports whether there was
// one. Its gates' room goes to the deliveries held behind it at the
// dispatcher's next pass (Limits.Wake makes that now).
func Release(ctx context.Context, q db.Querier, tenant, executionID string) (bool, error) {
	released, err := db.ReleasePermit(ctx, q, tenant, executionID)
	return released, errs.Store(err, "release permit")
}
