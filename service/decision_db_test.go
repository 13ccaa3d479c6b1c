package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service/lifecycle"
)

// The equivalence tests: every combination of the facts decideStart and
// decideFinish read is written to two databases alike; one takes every
// attempt through the row-by-row path only, the other through Begin and
// Finish as the deliver worker calls them (batched where the named SQL
// predicate admits the row); both must end alike, row for row and event
// for event. Before that, each combination's facts go through the pure
// function and through the batched statement (rolled back): the statement
// must take exactly the rows whose decision says Batch (startDecision,
// finishDecision). A rule added to one side and not the other fails here.

const equivTenant = "acme"

// equivLimited is a tenant with delivery limits (that never bind): its
// sends are admitted through its gate, on the row-by-row path.
const equivLimited = "acme-limited"

// equivConfig is both databases' configuration: a small CatchUpMax, so
// that the combinations reach it, and a misfire threshold far above the
// time the test takes, so that a slot a second ago stays on time.
var equivConfig = DeliveriesConfig{Rand: func() float64 { return 0.5 }, CatchUpMax: 2, MisfireThreshold: time.Hour}.WithDefaults()

// equivDB is one of the two databases.
type equivDB struct {
	pools db.Pools
	enq   *Enqueuer
	d     *Deliveries
	epOn  string // an enabled endpoint
	epOff string // a disabled endpoint
	epAlt string // an enabled endpoint a 410 may disable
	epLim string // an enabled endpoint with limits (that never bind)
	alert string // an alert endpoint
}

func newEquivDB(t *testing.T) *equivDB {
	t.Helper()
	ctx := context.Background()
	pools := dbtest.Pools(t)
	enq, err := NewEnqueuer(pools.Main, nil)
	require.NoError(t, err)
	require.NoError(t, db.EnsureTenant(ctx, pools.Main, equivTenant))
	require.NoError(t, db.EnsureTenant(ctx, pools.Main, equivLimited))
	limits := NewLimits(pools.Main, LimitsConfig{})
	_, err = limits.Set(ctx, equivLimited, TenantLimits{MaxInflightDeliveries: refTo(1_000_000)})
	require.NoError(t, err)
	cfg := equivConfig
	cfg.Limits = limits
	e := &equivDB{pools: pools, enq: enq, d: NewDeliveries(pools.Delivery, enq, cfg)}
	for _, ep := range []struct {
		id      *string
		uid     string
		enabled bool
	}{
		{&e.epOn, "00000000-0000-7000-8000-00000000e001", true},
		{&e.epOff, "00000000-0000-7000-8000-00000000e002", false},
		{&e.epAlt, "00000000-0000-7000-8000-00000000e003", true},
		{&e.alert, "00000000-0000-7000-8000-00000000e004", true},
		{&e.epLim, "00000000-0000-7000-8000-00000000e005", true},
	} {
		secret, err := GenerateSecret()
		require.NoError(t, err)
		for _, tenant := range []string{equivTenant, equivLimited} {
			row := db.Endpoint{
				TenantID: tenant, ID: ep.uid, Name: "e", URL: "https://example.com/hook",
				Method: "POST", Headers: map[string]string{}, Secret: secret, TimeoutMS: 10_000, Enabled: ep.enabled,
			}
			if ep.id == &e.epLim {
				// Limits that never bind: its sends are admitted through its
				// gate, on the row-by-row path.
				big := int32(1_000_000)
				row.MaxConcurrency = &big
			}
			_, err = db.InsertEndpoint(ctx, pools.Main, row)
			require.NoError(t, err)
		}
		*ep.id = ep.uid
	}
	return e
}

// equivTask is a task of a combination; nil: the task was deleted.
type equivTask struct {
	State              string
	Overlap            string
	Misfire            string // "": fire_once
	MaxAttempts        int
	Endpoint           string // equivDB field: "on", "off", "alt"
	Failures           int
	PauseAfterFailures int
	Alert              bool
	// CaughtUp: the task's latest catch-up started half an hour ago
	// (caught_up_at).
	CaughtUp bool
	// OneShot: a once task (one slot only) instead of an interval one.
	OneShot bool
}

// equivExec is an execution of a combination.
type equivExec struct {
	State           string
	Trigger         string
	CancelRequested bool
	Attempts        int
	AttemptsBase    int
	LeaseAttempt    int
	RiverJobID      *int64
	Ago             time.Duration // its slot, before now
	// Retried: a pending execution the API retried (it started before).
	Retried bool
	// Waiting: a running execution whose current attempt was accepted in
	// callback completion mode (a waiting callback_attempts row).
	Waiting bool
	// WorkflowRun: the execution is the one node of a running workflow
	// run (its task is the node's).
	WorkflowRun bool
	// CatchUpShard: another shard of its slot was sent late (shard 1,
	// succeeded); the execution is shard 0.
	CatchUpShard bool
	// Held: an operator holds the (pending) execution.
	Held bool
	// Sharded: the execution is shard 0 of 2 (shard_count).
	Sharded bool
}

// equivCase is one combination: a task (or none), earlier unfinished
// executions of it, later scheduled ones (succeeded, or pending, a quarter
// of the way from the execution's slot to now), and the execution under
// test with the attempt asking.
type equivCase struct {
	// Tenant is equivTenant or equivLimited ("": equivTenant).
	Tenant  string
	ID      string
	TaskID  string
	Task    *equivTask
	Earlier int
	// EarlierHeld: the earlier unfinished executions are held.
	EarlierHeld  bool
	Later        int
	LaterPending int
	Exec         equivExec
	Lease        int
	JobID        int64
	Outcome      Outcome // Finish only
	// Permit: the execution holds a permit through its tenant's gate (a
	// hold the dispatcher granted, or an attempt admitted).
	Permit bool
}

// tenant is the case's tenant.
func (c equivCase) tenant() string { return cmp.Or(c.Tenant, equivTenant) }

// write stores the cases' rows in e (the same ids in both databases).
func (e *equivDB) write(t *testing.T, cases []equivCase) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pools.Main.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	endpoint := map[string]string{"on": e.epOn, "off": e.epOff, "alt": e.epAlt, "lim": e.epLim}
	for i, c := range cases {
		tenant := c.tenant()
		if c.Permit {
			_, err := tx.Exec(ctx, `INSERT INTO flow_permits (tenant_id, execution_id, gates, started, expires_at)
				VALUES ($1, $2, ARRAY['tenant'], true, now() + interval '1 hour')`, tenant, c.ID)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, `INSERT INTO flow_gates (tenant_id, gate, inflight) VALUES ($1, 'tenant', 1)
				ON CONFLICT (tenant_id, gate) DO UPDATE SET inflight = flow_gates.inflight + 1`, tenant)
			require.NoError(t, err)
		}
		if c.Task != nil {
			var alert *string
			if c.Task.Alert {
				alert = &e.alert
			}
			var pause *int
			if c.Task.PauseAfterFailures > 0 {
				pause = &c.Task.PauseAfterFailures
			}
			misfire := cmp.Or(c.Task.Misfire, MisfireFireOnce)
			_, err := tx.Exec(ctx, `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds,
					state, overlap_policy, max_attempts, initial_backoff_ms, max_backoff_ms, consecutive_failures,
					pause_after_failures, alert_endpoint_id, misfire_policy, caught_up_at)
				VALUES ($1, $2, $3, $4, CASE WHEN $13 THEN 'once' ELSE 'interval' END, CASE WHEN NOT $13 THEN 60 END,
					$5, $6, $7, 1000, 60000, $8, $9, $10, $11,
					CASE WHEN $12 THEN now() - interval '30 minutes' END)`,
				tenant, c.TaskID, fmt.Sprintf("t-%d", i), endpoint[c.Task.Endpoint], c.Task.State, c.Task.Overlap,
				c.Task.MaxAttempts, c.Task.Failures, pause, alert, misfire, c.Task.CaughtUp, c.Task.OneShot)
			require.NoError(t, err)
		}
		for k := range c.Earlier {
			_, err := tx.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, held_at)
				VALUES ($1, $2, $3, now() - make_interval(secs => $4) - make_interval(hours => 1) - make_interval(secs => $5),
					'schedule', 'pending', CASE WHEN $6 THEN now() END)`,
				tenant, uuidFor(c.ID, k), c.TaskID, c.Exec.Ago.Seconds(), k, c.EarlierHeld)
			require.NoError(t, err)
		}
		for k := range c.Later {
			_, err := tx.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, attempts,
					started_at, first_started_at, finished_at)
				VALUES ($1, $2, $3, now() - make_interval(secs => $4 * 3 / 4) + make_interval(secs => $5), 'schedule', 'succeeded', 1,
					now(), now(), now())`,
				tenant, uuidFor(c.ID, 100+k), c.TaskID, c.Exec.Ago.Seconds(), k)
			require.NoError(t, err)
		}
		for k := range c.LaterPending {
			_, err := tx.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state)
				VALUES ($1, $2, $3, now() - make_interval(secs => $4 * 3 / 4) + make_interval(secs => 10 + $5), 'schedule', 'pending')`,
				tenant, uuidFor(c.ID, 110+k), c.TaskID, c.Exec.Ago.Seconds(), k)
			require.NoError(t, err)
		}
		if c.Exec.CatchUpShard {
			_, err := tx.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, attempts,
					started_at, first_started_at, finished_at, late, shard, shard_count)
				VALUES ($1, $2, $3, now() - make_interval(secs => $4), 'schedule', 'succeeded', 1, now(), now(), now(), true, 1, 2)`,
				tenant, uuidFor(c.ID, 120), c.TaskID, c.Exec.Ago.Seconds())
			require.NoError(t, err)
		}
		x := c.Exec
		final := x.State != ExecPending && x.State != ExecRunning && x.State != ExecRetrying
		var lastError *string
		if x.State == ExecFailed || x.State == ExecCancelled || x.State == ExecSkipped {
			lastError = refTo("earlier outcome")
		}
		var workflowID, runID *string
		if x.WorkflowRun {
			workflowID, runID = refTo(uuidFor(c.ID, 200)), refTo(uuidFor(c.ID, 201))
			nodes := fmt.Sprintf(`[{"key": "n", "task_id": %q, "endpoint_id": %q, "max_attempts": 3, "shards": 1,
				"depends_on": [], "trigger_rule": "all_success"}]`, c.TaskID, endpoint[c.Task.Endpoint])
			_, err = tx.Exec(ctx, `WITH w AS (
					INSERT INTO workflows (tenant_id, id, name) VALUES ($1, $2, $4)),
				v AS (
					INSERT INTO workflow_versions (tenant_id, workflow_id, version, nodes) VALUES ($1, $2, 1, $5)),
				r AS (
					INSERT INTO workflow_runs (tenant_id, id, workflow_id, version, scheduled_for, trigger, state, started_at)
					VALUES ($1, $3, $2, 1, now(), 'manual', 'running', now()))
				INSERT INTO workflow_run_nodes (tenant_id, run_id, key, state, rule_met_at) VALUES ($1, $3, 'n', 'fired', now())`,
				tenant, *workflowID, *runID, fmt.Sprintf("w-%d", i), nodes)
			require.NoError(t, err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, cancel_requested,
				attempts, attempts_base, lease_attempt, river_job_id, started_at, first_started_at, finished_at, next_attempt_at,
				last_error, workflow_id, workflow_run_id, node, held_at, shard_count)
			VALUES ($1, $2, $3, now() - make_interval(secs => $4), $5, $6, $7, $8, $13, $9, $10,
				CASE WHEN $6 <> 'pending' THEN now() - interval '1 second' END,
				CASE WHEN $6 <> 'pending' OR $14 THEN now() - interval '1 second' END,
				CASE WHEN $11 THEN now() END,
				CASE WHEN $6 = 'retrying' THEN now() END, $12, $15, $16, CASE WHEN $16::uuid IS NOT NULL THEN 'n' END,
				CASE WHEN $17 THEN now() END, CASE WHEN $18 THEN 2 ELSE 1 END)`,
			tenant, c.ID, c.TaskID, x.Ago.Seconds(), x.Trigger, x.State, x.CancelRequested, x.Attempts, x.LeaseAttempt,
			x.RiverJobID, final, lastError, x.AttemptsBase, x.Retried, workflowID, runID, x.Held, x.Sharded)
		require.NoError(t, err)
		if x.Waiting {
			_, err = tx.Exec(ctx, `INSERT INTO callback_attempts (tenant_id, execution_id, attempt, lease, token_hash,
					deadline_at, accepted_at, expires_at)
				VALUES ($1, $2, $3, $4, sha256(convert_to($5, 'UTF8')), now() + interval '1 hour', now(), now() + interval '1 hour')`,
				tenant, c.ID, x.Attempts, x.LeaseAttempt, c.ID)
			require.NoError(t, err)
		}
	}
	dbtest.SyncUnfinished(t, tx)
	require.NoError(t, tx.Commit(ctx))
}

// uuidFor derives the id of the k-th earlier execution of a case.
func uuidFor(id string, k int) string {
	return uuid.NewSHA1(uuid.MustParse(id), []byte{byte(k)}).String()
}

// equivState is what a case left in a database.
type equivState struct {
	Row      string
	Timeline []string
	Task     string
	Run      string
	Jobs     int
	Endpoint string
	// Permit: the execution holds a permit; Gates: what every gate
	// counts.
	Permit bool
	Gates  string
}

// snapshot reads what every case left.
func (e *equivDB) snapshot(t *testing.T, cases []equivCase) []equivState {
	t.Helper()
	ctx := context.Background()
	out := make([]equivState, len(cases))
	for i, c := range cases {
		var s equivState
		tenant := c.tenant()
		require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM flow_permits WHERE tenant_id = $1 AND execution_id = $2)`,
			tenant, c.ID).Scan(&s.Permit))
		require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT format('%s attempts=%s base=%s lease=%s cancel=%s error=%s class=%s status=%s started=%s finished=%s next=%s job=%s late=%s',
				state, attempts, attempts_base, lease_attempt, cancel_requested, last_error, last_error_class, last_status_code,
				started_at IS NOT NULL, finished_at IS NOT NULL, next_attempt_at IS NOT NULL, river_job_id, late)
			FROM executions WHERE tenant_id = $1 AND id = $2`, tenant, c.ID).Scan(&s.Row))
		row, err := db.GetExecution(ctx, e.pools.Main, tenant, c.ID, false)
		require.NoError(t, err)
		events, err := db.ListExecutionEvents(ctx, e.pools.Main, row)
		require.NoError(t, err)
		for _, ev := range events {
			delete(ev.Data, "lateness_ms") // depends on when each database ran
			s.Timeline = append(s.Timeline, fmt.Sprintf("%s attempt=%v status=%v latency=%v class=%v message=%v data=%v",
				ev.Type, deref(ev.Attempt), deref(ev.StatusCode), deref(ev.LatencyMS), deref(ev.ErrorClass), deref(ev.Message), ev.Data))
		}
		if c.Task != nil {
			require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT format('%s failures=%s missed=%s caught_up_now=%s', state,
					consecutive_failures, missed_count, coalesce(caught_up_at > now() - interval '10 minutes', false))
				FROM tasks WHERE tenant_id = $1 AND id = $2`, tenant, c.TaskID).Scan(&s.Task))
		}
		if c.Exec.WorkflowRun {
			require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT format('%s finished=%s', state, finished_at IS NOT NULL)
				FROM workflow_runs WHERE tenant_id = $1 AND id = $2`, tenant, uuidFor(c.ID, 201)).Scan(&s.Run))
		}
		require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT count(*) FROM river_job
			WHERE args->>'execution_id' = $1`, c.ID).Scan(&s.Jobs))
		out[i] = s
	}
	var eps, gates string
	require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT string_agg(tenant_id || '/' || id || '=' || enabled, ',' ORDER BY tenant_id, id)
		FROM endpoints`).Scan(&eps))
	require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT coalesce(string_agg(tenant_id || '/' || gate || '=' || inflight, ','
		ORDER BY tenant_id, gate), '') FROM flow_gates`).Scan(&gates))
	for i := range out {
		out[i].Endpoint, out[i].Gates = eps, gates
	}
	return out
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// startCases returns every combination of the facts of decideStart that
// a database can hold.
func startCases() []equivCase {
	rnd := rand.New(rand.NewPCG(1, 2)) // deterministic ids
	newID := func() string { return uuid.Must(uuid.NewRandomFromReader(rndReader{rnd})).String() }
	job := func(v int64) *int64 { return &v }
	type jobRel struct {
		asking int64
		owner  *int64
	}
	var out []equivCase
	for _, state := range lifecycle.Executions.States().States() {
		unfinished := state == ExecPending || state == ExecRunning || state == ExecRetrying
		cancels := []bool{false}
		if unfinished {
			cancels = []bool{false, true}
		}
		type lease struct{ attempts, leaseAttempt, lease int }
		var leases []lease
		switch state {
		case ExecPending:
			leases = []lease{{0, 0, 1}}
		case ExecRunning: // resumed after an interruption (behind, same) or stale (ahead)
			for _, a := range []int{1, 3} {
				leases = append(leases, lease{a, 1, 2}, lease{a, 2, 2}, lease{a, 3, 2})
			}
		case ExecRetrying:
			for _, a := range []int{1, 3} {
				leases = append(leases, lease{a, 1, 2}, lease{a, 2, 2})
			}
		default:
			leases = []lease{{1, 1, 2}}
		}
		jobs := []jobRel{{0, nil}, {501, job(500)}}
		if state == ExecPending {
			jobs = append(jobs, jobRel{500, job(500)}, jobRel{501, nil})
		}
		taskStates := []string{"", TaskActive, TaskPaused}
		if state == ExecPending {
			taskStates = append(taskStates, TaskCompleted)
		}
		maxes := []int{1, 3}
		if state == ExecPending {
			maxes = []int{0, 1, 3}
		}
		for _, cancel := range cancels {
			for _, trigger := range []string{TriggerSchedule, TriggerManual} {
				for _, ts := range taskStates {
					for _, l := range leases {
						for _, j := range jobs {
							base := equivCase{TaskID: newID(), Lease: l.lease, JobID: j.asking, Exec: equivExec{
								State: state, Trigger: trigger, CancelRequested: cancel, Attempts: l.attempts,
								LeaseAttempt: l.leaseAttempt, RiverJobID: j.owner, Ago: time.Second,
							}}
							if ts == "" { // the task was deleted
								c := base
								c.ID = newID()
								out = append(out, c)
								continue
							}
							eps := []string{"on", "off"}
							if state == ExecPending {
								eps = append(eps, "lim")
							}
							for _, ep := range eps {
								for _, overlap := range []string{OverlapAllow, OverlapSkip, OverlapQueue} {
									for _, maxAttempts := range maxes {
										earliers := []int{0}
										if state == ExecPending {
											earliers = []int{0, 1, 2}
										}
										for _, earlier := range earliers {
											agos := []time.Duration{time.Second}
											if overlap == OverlapQueue && earlier == 1 {
												agos = append(agos, 2*time.Hour) // beyond QueueWaitMax
											}
											for _, ago := range agos {
												c := base
												c.ID, c.TaskID, c.Earlier = newID(), newID(), earlier
												c.Exec.Ago = ago
												c.Task = &equivTask{State: ts, Overlap: overlap, MaxAttempts: maxAttempts, Endpoint: ep}
												out = append(out, c)
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	out = append(out, limitedCases(out, newID)...)
	out = append(out, misfireCases(newID)...)
	out = append(out, heldCases(newID)...)
	return append(out, waitingCases(newID)...)
}

// heldCases returns pending executions an operator holds, with the facts
// that decide before the hold (another job's, a cancel, a paused task, a
// disabled endpoint) and those it overrides (a misfire, an overlap, no
// attempt left), for both tenants (a permit the execution holds goes back);
// and executions that are not held behind earlier ones that are (a held
// execution holds no later one back).
func heldCases(newID func() string) []equivCase {
	job := func(v int64) *int64 { return &v }
	var out []equivCase
	for _, tenant := range []string{equivTenant, equivLimited} {
		for _, jobs := range []struct {
			asking int64
			owner  *int64
		}{{0, nil}, {501, job(500)}, {500, job(500)}} {
			for _, cancel := range []bool{false, true} {
				for _, ts := range []string{TaskActive, TaskPaused} {
					for _, ep := range []string{"on", "off", "lim"} {
						for _, overlap := range []string{OverlapAllow, OverlapSkip} {
							for _, ago := range []time.Duration{time.Second, 2 * time.Hour} {
								for _, maxAttempts := range []int{0, 3} {
									out = append(out, equivCase{
										Tenant: tenant, ID: newID(), TaskID: newID(), Lease: 1, JobID: jobs.asking,
										Earlier: 1, Permit: tenant == equivLimited,
										Task: &equivTask{State: ts, Overlap: overlap, Misfire: MisfireSkip, MaxAttempts: maxAttempts, Endpoint: ep},
										Exec: equivExec{
											State: ExecPending, Trigger: TriggerSchedule, CancelRequested: cancel, RiverJobID: jobs.owner,
											Ago: ago, Held: true,
										},
									})
								}
							}
						}
					}
				}
			}
		}
	}
	for _, overlap := range []string{OverlapAllow, OverlapSkip, OverlapQueue} {
		for _, earlier := range []int{1, 2} {
			for _, held := range []bool{false, true} {
				out = append(out, equivCase{
					ID: newID(), TaskID: newID(), Lease: 1, Earlier: earlier, EarlierHeld: true,
					Task: &equivTask{State: TaskActive, Overlap: overlap, MaxAttempts: 3, Endpoint: "on"},
					Exec: equivExec{State: ExecPending, Trigger: TriggerSchedule, Ago: time.Second, Held: held},
				})
			}
		}
	}
	return out
}

// limitedCases returns a sample of cases (one in five) again, for the
// tenant with delivery limits, every other one with a permit its
// execution holds already (a hold the dispatcher granted): its sends are
// admitted through the tenant's gate, the other verdicts give the permit
// back or leave it to the attempt that owns it.
func limitedCases(cases []equivCase, newID func() string) []equivCase {
	var out []equivCase
	for i := 0; i < len(cases); i += 5 {
		c := cases[i]
		c.Tenant, c.ID, c.TaskID, c.Permit = equivLimited, newID(), newID(), (i/5)%2 == 0
		out = append(out, c)
	}
	return out
}

// waitingCases returns running executions that wait for the callback of
// their accepted attempt, asked by a later run of their job (River
// rescued it after a crash) or by a stale one, with a cancel request or
// not.
func waitingCases(newID func() string) []equivCase {
	var out []equivCase
	for _, lease := range []struct{ leaseAttempt, lease int }{{1, 2}, {2, 2}, {3, 2}} {
		for _, cancel := range []bool{false, true} {
			out = append(out, equivCase{
				ID: newID(), TaskID: newID(), Lease: lease.lease,
				Task: &equivTask{State: TaskActive, Overlap: OverlapAllow, MaxAttempts: 3, Endpoint: "on"},
				Exec: equivExec{
					State: ExecRunning, Trigger: TriggerSchedule, Attempts: 1, LeaseAttempt: lease.leaseAttempt,
					CancelRequested: cancel, Ago: time.Second, Waiting: true,
				},
			})
		}
	}
	return out
}

// misfireCases returns the combinations of a pending execution's facts
// that its misfire decision reads: how late it is picked up, its task's
// policy, how many later slots are misfires too, whether it ever started
// (an API retry) and its retry budget, with the decisions around it
// (cancel, overlap); and for fire_once, every combination of a later
// misfire still pending, the task's catch-up and a shard of its slot sent
// late, with the decisions around them.
func misfireCases(newID func() string) []equivCase {
	type budget struct {
		attempts, base int
		retried        bool
	}
	var out []equivCase
	for _, ts := range []string{TaskActive, TaskPaused} {
		for _, trigger := range []string{TriggerSchedule, TriggerManual} {
			for _, overlap := range []string{OverlapAllow, OverlapSkip} {
				for _, earlier := range []int{0, 1} {
					for _, ago := range []time.Duration{time.Second, 2 * time.Hour} {
						for _, later := range []int{0, 1} {
							for stretch := 1; stretch < 16; stretch++ { // the four facts' other combinations
								pending, caughtUp, shard, oneShot := stretch&1, stretch&2 != 0, stretch&4 != 0, stretch&8 != 0
								out = append(out, equivCase{
									ID: newID(), TaskID: newID(), Lease: 1, Earlier: earlier, Later: later,
									LaterPending: pending,
									Task: &equivTask{
										State: ts, Overlap: overlap, Misfire: MisfireFireOnce, MaxAttempts: 3, Endpoint: "on",
										CaughtUp: caughtUp, OneShot: oneShot,
									},
									Exec: equivExec{State: ExecPending, Trigger: trigger, Ago: ago, CatchUpShard: shard},
								})
							}
						}
					}
				}
			}
		}
	}
	for _, ts := range []string{TaskActive, TaskPaused} {
		for _, trigger := range []string{TriggerSchedule, TriggerManual} {
			for _, overlap := range []string{OverlapAllow, OverlapSkip} {
				for _, earlier := range []int{0, 1} {
					for _, policy := range []string{MisfireSkip, MisfireFireOnce, MisfireFireAll} {
						for _, ago := range []time.Duration{time.Second, 2 * time.Hour, 25 * time.Hour} {
							for _, later := range []int{0, 1, 2} {
								for _, b := range []budget{{0, 0, false}, {2, 2, true}, {3, 2, true}} {
									for _, maxAttempts := range []int{1, 3} {
										out = append(out, equivCase{
											ID: newID(), TaskID: newID(), Lease: 1, Earlier: earlier, Later: later,
											Task: &equivTask{State: ts, Overlap: overlap, Misfire: policy, MaxAttempts: maxAttempts, Endpoint: "on"},
											Exec: equivExec{
												State: ExecPending, Trigger: trigger, Attempts: b.attempts, AttemptsBase: b.base,
												Retried: b.retried, Ago: ago,
											},
										})
									}
								}
							}
						}
					}
				}
			}
		}
	}
	// A shard's misfire (its catch-up's other shards are the row-by-row
	// path's), and one-shot tasks of each policy.
	for _, policy := range []string{MisfireSkip, MisfireFireOnce, MisfireFireAll} {
		for _, sharded := range []bool{false, true} {
			for _, oneShot := range []bool{false, true} {
				out = append(out, equivCase{
					ID: newID(), TaskID: newID(), Lease: 1,
					Task: &equivTask{State: TaskActive, Overlap: OverlapAllow, Misfire: policy, MaxAttempts: 3, Endpoint: "on", OneShot: oneShot},
					Exec: equivExec{State: ExecPending, Trigger: TriggerSchedule, Ago: 2 * time.Hour, Sharded: sharded},
				})
			}
		}
	}
	return out
}

// rndReader reads bytes from a seeded generator.
type rndReader struct{ r *rand.Rand }

func (r rndReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

// requireEveryFactVaries fails when a field of facts keeps one value over
// every case: the generator must cover each fact the decision reads.
func requireEveryFactVaries[F any](t *testing.T, facts []F, constant ...string) {
	t.Helper()
	typ := reflect.TypeFor[F]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if slices.Contains(constant, name) {
			continue
		}
		seen := map[string]bool{}
		for _, f := range facts {
			v := reflect.ValueOf(f).Field(i)
			if v.Kind() == reflect.Pointer && !v.IsNil() {
				v = v.Elem()
			}
			seen[fmt.Sprint(v.Interface())] = true
		}
		require.Greater(t, len(seen), 1, "no combination varies %s.%s: add it to the generator", typ.Name(), name)
	}
}

func TestStartDecisionAgreesWithTheBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := startCases()
	t.Logf("%d combinations", len(cases))
	rowDB, batchDB := newEquivDB(t), newEquivDB(t)
	rowDB.write(t, cases)
	batchDB.write(t, cases)

	// The facts each combination holds, and what the pure function and
	// the batched statement make of them (both rolled back).
	keys := make([]db.DeliveryKey, len(cases))
	facts := make([]startFacts, len(cases))
	err := db.InTx(ctx, rowDB.pools.Delivery, func(tx db.Tx) error {
		for i, c := range cases {
			gates := rowDB.d.cfg.Limits.deliveryGates(db.DeliveryRow{TenantID: c.tenant()})
			keys[i] = db.DeliveryKey{
				ExecutionRef: db.ExecutionRef{TenantID: c.tenant(), ID: c.ID}, Lease: c.Lease, JobID: c.JobID,
				TenantLimited: len(gates) > 0,
			}
			row, err := db.GetDeliveryForUpdate(ctx, tx, c.tenant(), c.ID, equivConfig.misfire())
			if err != nil {
				return err
			}
			facts[i] = startFactsOf(row, c.Lease, c.JobID, rowDB.d.cfg.Limits.deliveryGates(row))
		}
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	requireEveryFactVaries(t, facts)
	var taken map[int]db.DeliveryRow
	misfires := map[int]bool{} // the batched misfire decision's
	err = db.InTx(ctx, rowDB.pools.Delivery, func(tx db.Tx) error {
		var err error
		taken, err = db.StartPendingDeliveries(ctx, tx, keys, equivConfig.misfire())
		if err != nil {
			return err
		}
		var left []db.DeliveryKey
		var idx []int
		for i, k := range keys {
			if _, ok := taken[i]; !ok {
				left, idx = append(left, k), append(idx, i)
			}
		}
		ords, err := db.LockMisfires(ctx, tx, left, equivConfig.misfire())
		if err != nil {
			return err
		}
		for _, o := range ords {
			misfires[idx[o]] = true
		}
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	verdicts := map[startVerdict]int{}
	permits := map[string]int{}
	for i, f := range facts {
		dec := decideStart(f, equivConfig.rules())
		verdicts[dec.Verdict]++
		permits[fmt.Sprintf("admit=%v release=%v", dec.Admit, dec.Release)]++
		_, ok := taken[i]
		require.Equal(t, dec.Batch, ok,
			"combination %d: %+v decided %+v; db.StartsWithoutDecision took it: %v", i, f, dec, ok)
		require.Equal(t, dec.MisfireBatch, misfires[i],
			"combination %d: %+v decided %+v; db.DecidesMisfireInBatch took it: %v", i, f, dec, misfires[i])
	}
	t.Logf("verdicts: %v; the batch takes %d, the misfire batch %d", verdicts, len(taken), len(misfires))
	for _, v := range []startVerdict{startSend, startLeave, startWait, startCancel, startSkip, startFail, startMiss, startPark} {
		require.Positive(t, verdicts[v], "no combination leads to verdict %s", v)
	}
	t.Logf("permits: %v", permits)
	for _, p := range []string{"admit=true release=false", "admit=false release=true", "admit=false release=false"} {
		require.Positive(t, permits[p], "no combination leads to %s", p)
	}

	// Through both paths.
	rowOut := make([]string, len(cases))
	batchOut := make([]string, len(cases))
	run := func(out []string, begin func(c equivCase) (Delivery, error)) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i, c := range cases {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				d, err := begin(c)
				out[i] = beginResult(d, err)
			})
		}
		wg.Wait()
	}
	run(rowOut, func(c equivCase) (Delivery, error) {
		return rowDB.d.beginRow(ctx, c.tenant(), c.ID, c.Lease, c.JobID)
	})
	run(batchOut, func(c equivCase) (Delivery, error) {
		return batchDB.d.BeginJob(ctx, c.tenant(), c.ID, c.Lease, c.JobID)
	})
	require.Equal(t, int64(len(taken)+len(misfires)), batchDB.d.BatchStats().Batched, "the batch took the same rows through Begin")
	rowState, batchState := rowDB.snapshot(t, cases), batchDB.snapshot(t, cases)
	for i := range cases {
		require.Equal(t, rowOut[i], batchOut[i], "combination %d (%+v): Begin's result", i, facts[i])
		require.Equal(t, rowState[i], batchState[i], "combination %d (%+v): what Begin left", i, facts[i])
	}
}

// beginResult is what Begin returned, but for the ids and times.
func beginResult(d Delivery, err error) string {
	return fmt.Sprintf("action=%d state=%s reason=%q ended=%v missed=%v late=%v attempt=%d resumed=%v lease=%d keys=%d url=%s timeout=%s retry=%+v firing_lateness=%v err=%v",
		d.Action, d.State, d.Reason, d.Ended, d.Missed, d.Late, d.Attempt, d.Resumed, d.Lease, len(d.Keys), d.URL, d.Timeout, d.Retry,
		d.FiringLateness != nil, err)
}

// TestLateOneShotMisfireIsBatched: a one-shot fire_once task's slot picked
// up past the misfire threshold (every task of a large burst, late in the
// backlog) is started by the batched statement, and it records what the
// row-by-row path records: Begin's result (late; no firing lateness, so
// the worker observes no ax_firing_lateness_seconds), the execution row
// (marked late) and its timeline (an attempt_started event stored with
// the late fire's data, not implied by the row).
func TestLateOneShotMisfireIsBatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(5, 6))
	newID := func() string { return uuid.Must(uuid.NewRandomFromReader(rndReader{rnd})).String() }
	misfire := func() equivCase {
		return equivCase{
			ID: newID(), TaskID: newID(), Lease: 1, JobID: 500, Exec: equivExec{
				State: ExecPending, Trigger: TriggerSchedule, Ago: 2 * time.Hour, RiverJobID: refTo(int64(500)),
			},
			Task: &equivTask{State: TaskActive, Overlap: OverlapAllow, Misfire: MisfireFireOnce, MaxAttempts: 3, Endpoint: "on", OneShot: true},
		}
	}
	byRow, batched := misfire(), misfire()
	e := newEquivDB(t)
	e.write(t, []equivCase{byRow, batched})

	rowD, rowErr := e.d.beginRow(ctx, byRow.tenant(), byRow.ID, byRow.Lease, byRow.JobID)
	batchD, batchErr := e.d.BeginJob(ctx, batched.tenant(), batched.ID, batched.Lease, batched.JobID)
	require.NoError(t, batchErr)
	require.Equal(t, int64(1), e.d.BatchStats().Batched, "the batched start took the late send")
	require.True(t, batchD.Late)
	require.Nil(t, batchD.FiringLateness, "a late fire has no firing lateness")
	require.Equal(t, beginResult(rowD, rowErr), beginResult(batchD, batchErr))

	got := e.snapshot(t, []equivCase{byRow, batched})
	require.Contains(t, got[1].Row, "running attempts=1 ")
	require.True(t, strings.HasSuffix(got[1].Row, " late=t"), got[1].Row)
	require.Equal(t, []string{
		"attempt_started attempt=1 status=<nil> latency=<nil> class=<nil> message=<nil> data=map[late:true misfire_policy:fire_once]",
	}, got[1].Timeline)
	var lateness int64
	require.NoError(t, e.pools.Main.QueryRow(ctx, `SELECT (data->>'lateness_ms')::bigint FROM execution_events
		WHERE tenant_id = $1 AND execution_id = $2`, batched.tenant(), batched.ID).Scan(&lateness))
	require.InDelta(t, (2 * time.Hour).Milliseconds(), lateness, float64(time.Minute.Milliseconds()), "lateness_ms: how late it started")
	require.Equal(t, got[0], got[1], "the batched start records what the row-by-row path does")
}

// errRollback rolls a test's transaction back.
var errRollback = errors.New("rolled back on purpose")

// finishCases returns every combination of the facts of decideFinish and
// of the outcomes an attempt can report.
func finishCases() []equivCase {
	rnd := rand.New(rand.NewPCG(3, 4)) // deterministic ids
	newID := func() string { return uuid.Must(uuid.NewRandomFromReader(rndReader{rnd})).String() }
	outcomes := []Outcome{
		{Kind: OutcomeSucceeded, StatusCode: 204, Latency: 12 * time.Millisecond},
		{Kind: OutcomeRetry, StatusCode: 503, ErrorClass: "http_5xx", Error: "HTTP 503 Service Unavailable", Excerpt: "busy"},
		{Kind: OutcomeRetry, StatusCode: 429, ErrorClass: "http_4xx", Error: "HTTP 429", RetryAfter: 2 * time.Hour},
		{Kind: OutcomeRetry, ErrorClass: "canceled", Error: "the attempt was cut short by a cancel", CutByCancel: true},
		{Kind: OutcomePermanent, StatusCode: 400, ErrorClass: "http_4xx", Error: "HTTP 400 Bad Request"},
		{Kind: OutcomePermanent, StatusCode: 410, ErrorClass: "gone", Error: "HTTP 410 Gone", DisableEndpoint: true},
	}
	type lease struct {
		state                        string
		attempts, owner, lease, base int
	}
	leases := []lease{
		{ExecRunning, 1, 1, 1, 0}, {ExecRunning, 3, 3, 3, 0}, // owned
		{ExecRunning, 4, 1, 1, 3}, // owned, the first attempt after an API retry
		{ExecRunning, 1, 2, 1, 0}, // a newer run owns it
		{ExecRetrying, 1, 1, 1, 0}, {ExecSucceeded, 1, 1, 1, 0}, {ExecPending, 0, 0, 1, 0},
	}
	var out []equivCase
	for _, l := range leases {
		for _, cancel := range []bool{false, true} {
			for k, task := range []*equivTask{
				nil,
				{State: TaskActive, Overlap: OverlapAllow, MaxAttempts: 3, Endpoint: "alt"},
				{State: TaskActive, Overlap: OverlapAllow, MaxAttempts: 3, Endpoint: "alt", Failures: 2},
				{State: TaskActive, Overlap: OverlapAllow, MaxAttempts: 3, Endpoint: "alt", Failures: 2, PauseAfterFailures: 3, Alert: true},
				{State: TaskPaused, Overlap: OverlapAllow, MaxAttempts: 1, Endpoint: "alt", Alert: true},
			} {
				// A permit the attempt was admitted with (or a newer
				// attempt's, for a stale one), with the deleted task and
				// the first active one.
				permits := []bool{false}
				if k <= 1 {
					permits = append(permits, true)
				}
				for _, permit := range permits {
					for _, o := range outcomes {
						if l.state == ExecPending && cancel {
							continue
						}
						o.EndpointID = "00000000-0000-7000-8000-00000000e003"
						out = append(out, equivCase{
							ID: newID(), TaskID: newID(), Task: task, Lease: l.lease, Outcome: o, Permit: permit,
							Exec: equivExec{
								State: l.state, Trigger: TriggerSchedule, CancelRequested: cancel, Attempts: l.attempts,
								AttemptsBase: l.base, LeaseAttempt: l.owner, Ago: time.Second,
							},
						})
					}
				}
			}
		}
		// A workflow node's execution, the run's only node: its end
		// advances the run. Its outcome says so as the worker's does, or
		// not, so that the batch is offered a node's success too.
		for _, o := range outcomes {
			for _, hint := range []bool{true, false} {
				o.EndpointID, o.WorkflowRun = "00000000-0000-7000-8000-00000000e003", hint
				out = append(out, equivCase{
					ID: newID(), TaskID: newID(), Lease: l.lease, Outcome: o,
					Task: &equivTask{State: TaskActive, Overlap: OverlapAllow, MaxAttempts: 3, Endpoint: "alt"},
					Exec: equivExec{
						State: l.state, Trigger: TriggerDependency, Attempts: l.attempts, AttemptsBase: l.base,
						LeaseAttempt: l.owner, Ago: time.Second, WorkflowRun: true,
					},
				})
			}
		}
	}
	return out
}

func TestFinishDecisionAgreesWithTheBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := finishCases()
	t.Logf("%d combinations", len(cases))
	rowDB, batchDB := newEquivDB(t), newEquivDB(t)
	rowDB.write(t, cases)
	batchDB.write(t, cases)

	facts := make([]finishFacts, len(cases))
	var successes []db.DeliverySuccess
	var successCase []int
	err := db.InTx(ctx, rowDB.pools.Delivery, func(tx db.Tx) error {
		for i, c := range cases {
			row, err := db.GetDeliveryOutcome(ctx, tx, c.tenant(), c.ID)
			if err != nil {
				return err
			}
			facts[i] = rowDB.d.finishFactsOf(row, c.Lease)
			if c.Outcome.Kind == OutcomeSucceeded {
				successes = append(successes, db.DeliverySuccess{
					DeliveryKey: db.DeliveryKey{ExecutionRef: db.ExecutionRef{TenantID: c.tenant(), ID: c.ID}, Lease: c.Lease},
					StatusCode:  c.Outcome.StatusCode,
				})
				successCase = append(successCase, i)
			}
		}
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	requireEveryFactVaries(t, facts, "Jitter")
	var taken map[int]int
	err = db.InTx(ctx, rowDB.pools.Delivery, func(tx db.Tx) error {
		var err error
		taken, _, err = db.SucceedDeliveries(ctx, tx, successes)
		if err != nil {
			return err
		}
		return errRollback
	})
	require.ErrorIs(t, err, errRollback)
	verdicts := map[finishVerdict]int{}
	releases := 0
	for i, f := range facts {
		dec := decideFinish(f, cases[i].Outcome)
		verdicts[dec.Verdict]++
		if dec.Release {
			releases++
		}
	}
	for k, i := range successCase {
		dec := decideFinish(facts[i], cases[i].Outcome)
		_, ok := taken[k]
		require.Equal(t, dec.Batch, ok,
			"combination %d: %+v decided %+v; db.SucceedsWithoutDecision took it: %v", i, facts[i], dec, ok)
	}
	for i, f := range facts {
		if dec := decideFinish(f, cases[i].Outcome); dec.Batch {
			require.True(t, mayBatchFinish(cases[i].Outcome),
				"combination %d: %+v is batched (%+v), but Finish does not offer it to the batch", i, f, dec)
		}
	}
	t.Logf("verdicts: %v; the batch takes %d", verdicts, len(taken))
	for _, v := range []finishVerdict{finishStale, finishSucceed, finishCancel, finishRetry, finishFail} {
		require.Positive(t, verdicts[v], "no combination leads to verdict %s", v)
	}
	require.Positive(t, releases, "no combination releases a permit")

	rowOut := make([]string, len(cases))
	batchOut := make([]string, len(cases))
	// One at a time: a 410 disables the shared endpoint, and the first
	// failure of a task pauses it; the order must be the same in both.
	sequential := func(out []string, finish func(c equivCase) (Finished, error)) {
		for i, c := range cases {
			fin, err := finish(c)
			out[i] = fmt.Sprintf("%+v err=%v", fin, err)
		}
	}
	sequential(rowOut, func(c equivCase) (Finished, error) {
		return rowDB.d.finishRow(ctx, c.tenant(), c.ID, c.Lease, c.Outcome)
	})
	sequential(batchOut, func(c equivCase) (Finished, error) {
		return batchDB.d.Finish(ctx, c.tenant(), c.ID, c.Lease, c.Outcome)
	})
	require.Equal(t, int64(len(taken)), batchDB.d.BatchStats().Batched, "the batch took the same rows through Finish")
	rowState, batchState := rowDB.snapshot(t, cases), batchDB.snapshot(t, cases)
	for i := range cases {
		require.Equal(t, rowOut[i], batchOut[i], "combination %d (%+v, %+v): Finish's result", i, facts[i], cases[i].Outcome)
		require.Equal(t, rowState[i], batchState[i], "combination %d (%+v, %+v): what Finish left", i, facts[i], cases[i].Outcome)
	}
}
