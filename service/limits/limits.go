package limits

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/errs"
)

// Own are a tenant's own limits; nil is the server's default (a default
// of zero is no limit).
type Own struct {
	MaxTasks               *int
	MaxWorkflows           *int
	MaxInflightDeliveries  *int
	MaxDeliveriesPerSecond *float64
	APIRequestsPerSecond   *float64
}

// Effective are the limits that apply to a tenant: its own, or the
// server's defaults; zero is no limit.
type Effective struct {
	MaxTasks               int
	MaxWorkflows           int
	MaxInflightDeliveries  int
	MaxDeliveriesPerSecond float64
	APIRequestsPerSecond   float64
}

// Deliveries reports whether a delivery limit applies: the tenant's
// deliveries pass its gate (TenantGate).
func (e Effective) Deliveries() bool {
	return e.MaxInflightDeliveries > 0 || e.MaxDeliveriesPerSecond > 0
}

// Apply returns the limits that apply to a tenant whose row is r, over
// the server's defaults d.
func Apply(r db.TenantLimits, d Effective) Effective {
	e := d
	if r.MaxTasks != nil {
		e.MaxTasks = int(*r.MaxTasks)
	}
	if r.MaxWorkflows != nil {
		e.MaxWorkflows = int(*r.MaxWorkflows)
	}
	if r.MaxInflight != nil {
		e.MaxInflightDeliveries = int(*r.MaxInflight)
	}
	if r.MaxPerSecond != nil {
		e.MaxDeliveriesPerSecond = *r.MaxPerSecond
	}
	if r.APIRequestsPerSecond != nil {
		e.APIRequestsPerSecond = *r.APIRequestsPerSecond
	}
	return e
}

// OwnOf returns the tenant's own limits in its row.
func OwnOf(r db.TenantLimits) Own {
	i := func(p *int32) *int {
		if p == nil {
			return nil
		}
		v := int(*p)
		return &v
	}
	return Own{
		MaxTasks: i(r.MaxTasks), MaxWorkflows: i(r.MaxWorkflows), MaxInflightDeliveries: i(r.MaxInflight),
		MaxDeliveriesPerSecond: r.MaxPerSecond, APIRequestsPerSecond: r.APIRequestsPerSecond,
	}
}

// Config configures Limits.
type Config struct {
	// Defaults apply to tenants whose own limit is not set
	// (AX_TENANT_MAX_TASKS, AX_TENANT_MAX_WORKFLOWS,
	// AX_TENANT_MAX_INFLIGHT, AX_TENANT_MAX_PER_SECOND, AX_TENANT_API_RPS).
	// Zero: no limit.
	Defaults Effective
	// PermitTTL is a permit's lifetime: how long a delivery admitted
	// through a limit, or granted a place by the dispatcher, may hold its
	// place without its outcome being recorded before SweepPermits gives
	// the place back (its process died). The server sets it to the job
	// timeout plus a minute (AX_JOB_TIMEOUT); default PermitTTLDefault.
	PermitTTL time.Duration
	// Refresh is how often each replica re-reads the tenants' limits
	// (changes made on this replica apply at once). Default 1 s.
	Refresh time.Duration
	// FairQueues are the queues whose due jobs Share orders across
	// tenants.
	FairQueues []string
	// FairAfter: when the oldest due job of a fair queue has waited
	// this long, a backlog has formed and its due jobs are started
	// round-robin across tenants (Share). Default FairAfterDefault;
	// negative: never.
	FairAfter time.Duration
	// FairEvery is how often each replica looks for such backlogs.
	// Default FairEveryDefault.
	FairEvery time.Duration
}

// Defaults of Config.
const (
	PermitTTLDefault = 2 * time.Minute
	FairAfterDefault = 200 * time.Millisecond
	FairEveryDefault = 100 * time.Millisecond
)

// WithDefaults returns c with its defaults filled in.
func (c Config) WithDefaults() Config {
	if c.PermitTTL <= 0 {
		c.PermitTTL = PermitTTLDefault
	}
	if c.Refresh <= 0 {
		c.Refresh = time.Second
	}
	if c.FairAfter == 0 {
		c.FairAfter = FairAfterDefault
	}
	if c.FairEvery <= 0 {
		c.FairEvery = FairEveryDefault
	}
	return c
}

// Limits holds the tenants' limits: each replica keeps them in memory
// (refreshed every second, and at once on a change it made), so that a
// tenant without limits costs nothing per request or per delivery. It
// counts API requests against their rate (AllowAPI), checks the count
// quotas of creates (CheckTaskQuota, CheckWorkflowQuota), tells the gates
// of a delivery (Gates), and runs the passes of the background work: the
// dispatcher of held deliveries (Dispatch), the sweep of expired permits
// (SweepPermits), the fair sharing of the deliver queues (Share) and the
// cache's refresh (Refresh). A nil *Limits has no limits.
type Limits struct {
	pool *db.Pool
	cfg  Config

	mu    sync.RWMutex
	rows  map[string]db.TenantLimits
	ready bool
	// Refreshes may overlap (the refresh loop, a caller's Refresh) and a
	// change may commit while one reads: reads is the last refresh begun,
	// applied the last one applied (an older read never replaces a newer
	// one), and changed the rows Changed set, by the changes counter, so
	// that a read begun before a change does not undo it.
	reads, applied, changes uint64
	changed                 map[string]uint64

	api  sync.Map // tenant → *apiShare
	wake chan struct{}
}

// New returns Limits on pool.
func New(pool *db.Pool, cfg Config) *Limits {
	return &Limits{
		pool: pool, cfg: cfg.WithDefaults(), rows: map[string]db.TenantLimits{}, changed: map[string]uint64{},
		wake: make(chan struct{}, 1),
	}
}

// Refresh re-reads every tenant's limits (one pass of the cache's
// refresh).
func (l *Limits) Refresh(ctx context.Context) error {
	l.mu.Lock()
	l.reads++
	read, since := l.reads, l.changes
	l.mu.Unlock()
	rows, err := db.ListTenantLimits(ctx, l.pool)
	if err != nil {
		return errs.Store(err, "read tenant limits")
	}
	m := make(map[string]db.TenantLimits, len(rows))
	for _, r := range rows {
		m[r.TenantID] = r
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if read < l.applied {
		return nil // a refresh begun later has applied a newer read
	}
	for tenant, at := range l.changed {
		switch {
		case at > since: // changed while this read ran: keep the change
			if row, ok := l.rows[tenant]; ok {
				m[tenant] = row
			}
		default: // this read saw it
			delete(l.changed, tenant)
		}
	}
	l.rows, l.ready, l.applied = m, true, read
	return nil
}

// Changed makes a change of tenant's limits, committed on this replica,
// apply here at once.
func (l *Limits) Changed(row db.TenantLimits) {
	l.mu.Lock()
	l.rows[row.TenantID] = row
	l.changes++
	l.changed[row.TenantID] = l.changes
	l.mu.Unlock()
	l.api.Delete(row.TenantID)
}

// Defaults are the server's default limits.
func (l *Limits) Defaults() Effective { return l.cfg.Defaults }

// For returns the limits that apply to tenant, from the cache.
func (l *Limits) For(tenant string) Effective {
	if l == nil {
		return Effective{}
	}
	l.mu.RLock()
	row, ok := l.rows[tenant]
	l.mu.RUnlock()
	if !ok {
		return l.cfg.Defaults
	}
	return Apply(row, l.cfg.Defaults)
}

// PermitTTL is a permit's lifetime (Config.PermitTTL).
func (l *Limits) PermitTTL() time.Duration {
	if l == nil {
		return PermitTTLDefault
	}
	return l.cfg.PermitTTL
}

// Endpoint is what Gates needs of a delivery's endpoint: its id and
// limits (nil: none).
type Endpoint struct {
	ID             string
	MaxConcurrency *int32
	RatePerSecond  *float64
}

// Gates returns the gates a delivery of tenant to endpoint (nil: none)
// passes, in the order of their names; none: no limit applies.
func (l *Limits) Gates(tenant string, endpoint *Endpoint) []Gate {
	var gs []Gate
	if e := endpoint; e != nil && (e.MaxConcurrency != nil || e.RatePerSecond != nil) {
		g := Gate{Name: EndpointGate(e.ID)}
		if e.MaxConcurrency != nil {
			g.MaxInflight = int(*e.MaxConcurrency)
		}
		if e.RatePerSecond != nil {
			g.Rate = *e.RatePerSecond
		}
		gs = append(gs, g)
	}
	if e := l.For(tenant); e.Deliveries() {
		gs = append(gs, Gate{Name: TenantGate, MaxInflight: e.MaxInflightDeliveries, Rate: e.MaxDeliveriesPerSecond})
	}
	if len(gs) == 2 && gs[1].Name < gs[0].Name {
		gs[0], gs[1] = gs[1], gs[0]
	}
	return gs
}

// Wake makes the dispatcher look at held deliveries now (a permit was
// released on this replica, or a delivery held): Wakes receives.
func (l *Limits) Wake() {
	if l == nil {
		return
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Wakes receives when Wake was called since the last receive: the loop
// that runs Dispatch then runs it at once.
func (l *Limits) Wakes() <-chan struct{} { return l.wake }

// Config is the configuration l runs with (defaults filled in): the loop
// that runs its passes reads their intervals there (Refresh, FairEvery).
func (l *Limits) Config() Config { return l.cfg }

// DispatchPoll is how often the dispatcher looks at held deliveries when
// nothing wakes it while some are held: the longest a permit released on
// another replica stays unused.
const DispatchPoll = 50 * time.Millisecond

// DispatchIdlePoll is how often it looks when its last look found none
// held: a delivery held from then on wakes the dispatcher of the replica
// that held it (Wake), so that a replica without limits in play costs one
// statement a second, not twenty.
const DispatchIdlePoll = time.Second

// SweepEvery is how often the expired permits are swept (SweepPermits).
const SweepEvery = 10 * time.Second

// dispatchBatch bounds the held deliveries one pass looks at per tenant.
const dispatchBatch = 500

// errBusy rolls back a pass that found its tenant busy.
var errBusy = errors.New("busy")

// Dispatch is one pass of the dispatcher: it grants permits to held
// deliveries whose gates have room, in order, for every tenant
// (DispatchTenant, each in a transaction of its own), and returns when a
// rate-limited gate gets its next token (zero: none waits on one) and
// whether any delivery was held.
func (l *Limits) Dispatch(ctx context.Context) (next time.Time, held bool, err error) {
	tenants, err := db.TenantsWithHolds(ctx, l.pool)
	if err != nil {
		return time.Time{}, false, errs.Store(err, "list tenants with holds")
	}
	var failed []error
	for _, t := range tenants {
		e := l.For(t)
		tg := Gate{MaxInflight: e.MaxInflightDeliveries, Rate: e.MaxDeliveriesPerSecond}
		var d Dispatched
		err := db.InTx(ctx, l.pool, func(tx db.Tx) error {
			var err error
			d, err = DispatchTenant(ctx, tx, t, tg, dispatchBatch, l.cfg.PermitTTL)
			if err == nil && d.Busy {
				return errBusy
			}
			return err
		})
		if err != nil && !errors.Is(err, errBusy) {
			failed = append(failed, errs.Store(err, "dispatch tenant "+t))
			continue
		}
		if !d.NextToken.IsZero() && (next.IsZero() || d.NextToken.Before(next)) {
			next = d.NextToken
		}
	}
	return next, len(tenants) > 0, errors.Join(failed...)
}

// SweepPermits is one pass of the sweep of expired permits: it releases
// the permits that outlived Config.PermitTTL (the attempt's process died
// before its outcome was recorded, or a granted delivery never started)
// and returns how many.
func (l *Limits) SweepPermits(ctx context.Context) (int, error) {
	n, err := db.SweepPermits(ctx, l.pool)
	if n > 0 {
		l.Wake()
	}
	return n, errs.Store(err, "sweep expired permits")
}

// Share is one pass of the fair sharing of the deliver queues: it makes
// them start their due jobs round-robin across tenants where a backlog
// has formed (db.ShareQueues), so that no tenant's backlog delays another
// tenant's on-time fires by more than a turn. It returns how many jobs it
// reordered. When no queue has a backlog it costs one statement of index
// probes, and it changes nothing while one tenant alone has due jobs.
func (l *Limits) Share(ctx context.Context) (int64, error) {
	if l.cfg.FairAfter < 0 || len(l.cfg.FairQueues) == 0 {
		return 0, nil
	}
	n, err := db.ShareQueues(ctx, l.pool, l.cfg.FairQueues, l.cfg.FairAfter)
	return n, errs.Store(err, "share the deliver queues")
}
