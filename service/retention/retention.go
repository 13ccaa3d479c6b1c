// Package retention removes history older than its retention: final
// executions with their events, finished workflow runs with their node
// executions, and audit records (Sweeper).
package retention

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Defaults and bounds.
const (
	// ExecutionsDefault is how long finished executions and their events
	// are kept.
	ExecutionsDefault = 30 * 24 * time.Hour
	// AuditDefault is how long audit records are kept.
	AuditDefault = 90 * 24 * time.Hour
	// Min is the shortest retention the server accepts.
	Min = time.Hour
	// BatchDefault bounds the rows one statement looks at.
	BatchDefault = 5000
	// BudgetDefault bounds one Sweep's time in statements.
	BudgetDefault = time.Second
	// tenantPage is how many tenant ids a pass reads at once.
	tenantPage = 1000
)

// Config configures a Sweeper. Zero values take the defaults.
type Config struct {
	// Executions: final executions that finished longer ago than this are
	// removed with their events. Defaults to ExecutionsDefault.
	Executions time.Duration
	// Audit: audit records older than this are removed. Defaults to
	// AuditDefault.
	Audit time.Duration
	// Batch bounds the rows one statement looks at (executions) or
	// removes (audit records). Defaults to BatchDefault.
	Batch int
	// Budget: a Sweep starts no statement after this much time; it says
	// More when work is left. Defaults to BudgetDefault.
	Budget time.Duration
}

// WithDefaults returns c with its zero values set to the defaults.
func (c Config) WithDefaults() Config {
	c.Executions = cmp.Or(c.Executions, ExecutionsDefault)
	c.Audit = cmp.Or(c.Audit, AuditDefault)
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	c.Budget = cmp.Or(c.Budget, BudgetDefault)
	return c
}

func (c Config) validate() error {
	if c.Executions < 0 || c.Audit < 0 || c.Batch < 1 || c.Budget < 0 {
		return errors.New("retention: durations must be positive and the batch at least 1")
	}
	return nil
}

// Result is what one Sweep removed.
type Result struct {
	// Executions and Events include the node executions of the removed
	// workflow runs (Runs).
	Executions, Events, Audit, Runs int64
	// PostedEvents are the tenants' posted events (POST /v1/events),
	// kept as long as executions.
	PostedEvents int64
	// More: the sweep stopped at its budget with work left.
	More bool
}

// Sweeper removes history older than its retention: final executions
// with their events, finished workflow runs with their node executions,
// and audit records. It never removes an unfinished
// execution, nor the latest scheduled execution of a task that exists
// (db.DeleteExpiredExecutions): a slot never fires twice because its
// history expired (docs/architecture.md, "Retention").
type Sweeper struct {
	pool *db.Pool
	cfg  Config

	mu   sync.Mutex
	pass *pass // the executions pass in progress, if any
}

// pass is a walk over every tenant's expired executions, resumed
// by the next Sweep when one stops at its budget.
type pass struct {
	tenants []string // the page of tenant ids being walked
	last    bool     // tenants is the last page
	i       int      // the tenant being walked
	after   string   // the last execution (run) id looked at in it
	runs    bool     // walking the tenant's workflow runs (after its executions)
}

// New returns a Sweeper on pool; it panics on an invalid configuration (a
// programmer's error: the server validates its variables).
func New(pool *db.Pool, cfg Config) *Sweeper {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		panic(err)
	}
	return &Sweeper{pool: pool, cfg: cfg}
}

// Sweep removes expired audit records and posted events, then walks on through the
// tenants' expired executions, in batches (one short transaction each)
// until nothing is left or its budget is spent (More). Replicas take
// turns: when another one holds the turn, Sweep stops and leaves the work
// to it.
func (r *Sweeper) Sweep(ctx context.Context) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res Result
	deadline := time.Now().Add(r.cfg.Budget)
	for {
		n, turn, err := db.DeleteExpiredAudit(ctx, r.pool, r.cfg.Audit, r.cfg.Batch)
		res.Audit += n
		if err != nil || !turn {
			return res, errs.Store(err, "remove expired audit records")
		}
		if n < int64(r.cfg.Batch) {
			break
		}
		if time.Now().After(deadline) {
			res.More = true
			return res, nil
		}
	}
	for {
		n, turn, err := db.DeleteExpiredEvents(ctx, r.pool, r.cfg.Executions, r.cfg.Batch)
		res.PostedEvents += n
		if err != nil || !turn {
			return res, errs.Store(err, "remove expired events")
		}
		if n < int64(r.cfg.Batch) {
			break
		}
		if time.Now().After(deadline) {
			res.More = true
			return res, nil
		}
	}
	for {
		if time.Now().After(deadline) {
			res.More = true
			return res, nil
		}
		tenant, ok, err := r.nextTenant(ctx)
		if err != nil || !ok {
			return res, err
		}
		if r.pass.runs {
			// A tenant's finished workflow runs, with their node executions.
			b, err := db.DeleteExpiredRuns(ctx, r.pool, tenant, r.pass.after, r.cfg.Executions, r.cfg.Batch)
			if err != nil || !b.Turn {
				return res, errs.Store(err, "remove expired workflow runs")
			}
			res.Runs += b.Runs
			res.Executions += b.Executions
			res.Events += b.Events
			if b.Examined < r.cfg.Batch {
				r.pass.i++
				r.pass.after, r.pass.runs = "", false
			} else {
				r.pass.after = b.Last
			}
			continue
		}
		b, err := db.DeleteExpiredExecutions(ctx, r.pool, tenant, r.pass.after, r.cfg.Executions, r.cfg.Batch)
		if err != nil || !b.Turn {
			return res, errs.Store(err, "remove expired executions")
		}
		res.Executions += b.Executions
		res.Events += b.Events
		if b.Examined < r.cfg.Batch {
			r.pass.after, r.pass.runs = "", true
		} else {
			r.pass.after = b.Last
		}
	}
}

// nextTenant returns the tenant the executions pass is at, starting a
// pass when none is in progress; ok is false (and the pass over) when
// every tenant has been walked.
func (r *Sweeper) nextTenant(ctx context.Context) (string, bool, error) {
	if r.pass == nil {
		r.pass = &pass{}
	}
	p := r.pass
	if p.i >= len(p.tenants) {
		if p.last && p.tenants != nil {
			r.pass = nil
			return "", false, nil
		}
		after := ""
		if len(p.tenants) > 0 {
			after = p.tenants[len(p.tenants)-1]
		}
		ids, err := db.ListTenantIDs(ctx, r.pool, after, tenantPage)
		if err != nil {
			return "", false, errs.Store(err, "list tenants")
		}
		p.tenants, p.i, p.after, p.last = ids, 0, "", len(ids) < tenantPage
		if len(ids) == 0 {
			r.pass = nil
			return "", false, nil
		}
	}
	return p.tenants[p.i], true, nil
}
