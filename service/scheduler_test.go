package service_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// fixture is a database with one tenant and one endpoint.
type fixture struct {
	pool     *pgxpool.Pool
	delivery *pgxpool.Pool // the deliver worker's pool (db.OpenPools)
	enq      *service.Enqueuer
	tasks    *service.Tasks
	tenant   string
	endpoint string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	pools := dbtest.Pools(t)
	pool := pools.Main
	enq, err := service.NewEnqueuer(pool, nil)
	require.NoError(t, err)
	require.NoError(t, service.NewTenants(pool).Ensure(ctx, "acme"))
	ep, err := service.NewEndpoints(pool).Create(ctx, "acme", service.EndpointInput{Name: "e", URL: "https://example.com/hook"})
	require.NoError(t, err)
	return &fixture{pool: pool, delivery: pools.Delivery, enq: enq, tasks: service.NewTasks(pool, service.TasksConfig{}), tenant: "acme", endpoint: ep.ID}
}

// insertTasks bulk-inserts n active interval tasks whose first slot is
// first, faster than the API would.
func (f *fixture) insertTasks(t *testing.T, n int, intervalSeconds int, first time.Time, misfire string) {
	t.Helper()
	_, err := f.pool.Exec(context.Background(), `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type,
			interval_seconds, start_at, next_run_at, misfire_policy)
		SELECT $1, gen_random_uuid(), 'bulk-' || g, $2, 'interval', $3, $4, $4, $6
		FROM generate_series(1, $5) g`, f.tenant, f.endpoint, intervalSeconds, first, n, misfire)
	require.NoError(t, err)
}

func (f *fixture) scheduler(cfg service.SchedulerConfig) *service.Scheduler {
	return service.NewScheduler(f.pool, f.enq, cfg, slog.New(slog.DiscardHandler))
}

func (f *fixture) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := f.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func (f *fixture) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	n, err := f.loadCount(sql, args...)
	require.NoError(t, err)
	return n
}

// loadCount is count returning its error, for a condition of Eventually
// (which runs off the test's goroutine).
func (f *fixture) loadCount(sql string, args ...any) (int, error) {
	var n int
	err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n)
	return n, err
}

// requireExactlyOncePerSlot checks that every task fired every slot from
// its first to its last exactly once, each execution in exactly one deliver
// or deliver_batch job, a batch's executions all due within its window.
func (f *fixture) requireExactlyOncePerSlot(t *testing.T, intervalSeconds int) {
	t.Helper()
	gaps := f.count(t, `SELECT count(*) FROM (
		SELECT task_id FROM executions WHERE trigger = 'schedule' GROUP BY task_id
		HAVING count(*) <> extract(epoch FROM max(scheduled_for) - min(scheduled_for))::int / $1 + 1) g`, intervalSeconds)
	require.Zero(t, gaps, "every task fired every slot between its first and last")
	const refs = `WITH refs AS (
			SELECT id AS job_id, (args->>'execution_id')::uuid AS id FROM river_job WHERE kind = 'deliver'
			UNION ALL
			SELECT j.id, split_part(m, '.', 2)::uuid FROM river_job j, regexp_split_to_table(j.args->>'executions', ' ') m
			WHERE j.kind = 'deliver_batch'
		) `
	execs := f.count(t, `SELECT count(*) FROM executions`)
	require.Equal(t, execs, f.count(t, refs+`SELECT count(*) FROM refs`), "one deliver job per execution")
	require.Equal(t, execs, f.count(t, refs+`SELECT count(DISTINCT id) FROM refs`), "no execution has two jobs")
	require.Zero(t, f.count(t, refs+`SELECT count(*) FROM refs r WHERE NOT EXISTS (SELECT 1 FROM executions e WHERE e.id = r.id)`))
	require.Zero(t, f.count(t, refs+`SELECT count(*) FROM (
			SELECT r.job_id FROM refs r JOIN executions e ON e.id = r.id JOIN river_job j ON j.id = r.job_id
			WHERE j.kind = 'deliver_batch' GROUP BY r.job_id
			HAVING max(e.scheduled_for) - min(e.scheduled_for) >= interval '20 ms' OR count(*) > 50 OR count(*) < 2) b`),
		"a batch carries 2 to 50 executions due within 20 ms")
}

// TestConcurrentSchedulersFireEachSlotOnce runs four scheduler loops (as
// four replicas would) over 1,000 tasks all due at the same instants.
func TestConcurrentSchedulersFireEachSlotOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	f.insertTasks(t, 1000, 1, now.Add(time.Second), "fire_once")

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	fired := 0
	var logs bytes.Buffer // slog's handlers serialise their writes
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jobs.RunScheduler(runCtx, f.scheduler(service.SchedulerConfig{BatchSize: 300}), jobs.SchedulerLoopConfig{
				Logger: logger,
				OnTick: func(r service.TickResult, _ time.Duration) {
					mu.Lock()
					fired += r.Fired
					mu.Unlock()
				},
			})
		}()
	}
	// Let every task fire several slots.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := f.loadCount(`SELECT count(*) FROM tasks WHERE next_run_at < $1`, now.Add(4*time.Second))
		assert.NoError(c, err)
		assert.Zero(c, n, "tasks behind")
	}, 30*time.Second, 50*time.Millisecond)
	cancel()
	wg.Wait()

	require.GreaterOrEqual(t, f.count(t, `SELECT count(*) FROM executions`), 3000)
	f.requireExactlyOncePerSlot(t, 1)
	require.Positive(t, f.count(t, `SELECT count(*) FROM river_job WHERE kind = 'deliver_batch'`),
		"executions due at one instant share batch jobs")
	// Every reported fire is an execution. A pass the cancel cut during its
	// COMMIT may have committed without being reported (the client cannot
	// tell), so the executions may exceed the reports by that last pass of
	// each of a loop's claims (jobs.ClaimersDefault at once through a
	// backlog), never the other way. A pass claims up to BatchSize tasks
	// and writes each one's slots up to the horizon (and up to a quarter of
	// the claim cycle beyond): one a second, from a slot at most the
	// look-ahead away.
	cfg := service.SchedulerConfig{BatchSize: 300}.WithDefaults()
	perPass := cfg.BatchSize * (int((cfg.Horizon+(cfg.Horizon-cfg.LookAhead)/4)/time.Second) + 1)
	mu.Lock()
	execs := f.count(t, `SELECT count(*) FROM executions`)
	require.LessOrEqual(t, fired, execs, "the loops logged:\n%s", logs.String())
	require.LessOrEqual(t, execs-fired, 4*jobs.ClaimersDefault*perPass, "the loops logged:\n%s", logs.String())
	mu.Unlock()
	// Every slot at or after the first was fired, none before it.
	require.Equal(t, 1000, f.count(t, `SELECT count(*) FROM executions WHERE scheduled_for = $1`, now.Add(time.Second)))
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE scheduled_for < $1`, now.Add(time.Second)))
}

// TestSchedulerClaimsABacklogAtOnce: once two claims in a row come back full
// (1,000 tasks due at one instant, claimed 100 at a time), the loop runs
// two of them at once (SchedulerLoopConfig.Claimers), and every slot still
// fires once. The two claims after the first two meet in OnTick: each waits
// there for the other, which only a second claim in flight can be.
func TestSchedulerClaimsABacklogAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	f.insertTasks(t, 1000, 1, now.Add(time.Second), "fire_once")

	var (
		calls atomic.Int32
		met   atomic.Bool
		both  = make(chan struct{})
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		jobs.RunScheduler(ctx, f.scheduler(service.SchedulerConfig{BatchSize: 100}), jobs.SchedulerLoopConfig{
			Claimers: 2,
			OnTick: func(service.TickResult, time.Duration) {
				switch calls.Add(1) {
				case 3: // one of the two claims after the first two, full ones
					select {
					case <-both:
						met.Store(true)
					case <-time.After(10 * time.Second): // no second claim in flight
					}
				case 4:
					close(both)
				}
			},
		})
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := f.loadCount(`SELECT count(*) FROM tasks WHERE next_run_at <= $1`, now.Add(time.Second))
		assert.NoError(c, err)
		assert.Zero(c, n, "tasks whose first slot is not claimed")
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	<-done
	require.True(t, met.Load(), "two claims were in flight at once")
	require.Equal(t, 1000, f.count(t, `SELECT count(*) FROM executions WHERE scheduled_for = $1`, now.Add(time.Second)))
	f.requireExactlyOncePerSlot(t, 1)
}

// TestSchedulerSurvivesInterruptions cancels the loop at random moments,
// mid-transaction included, and restarts it: no slot is lost or doubled.
func TestSchedulerSurvivesInterruptions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	f.insertTasks(t, 200, 1, now.Add(time.Second), "fire_all")
	rnd := rand.New(rand.NewPCG(1, 2))
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rnd.IntN(40))*time.Millisecond)
		jobs.RunScheduler(ctx, f.scheduler(service.SchedulerConfig{BatchSize: 50}), jobs.SchedulerLoopConfig{})
		cancel()
	}
	// A final uninterrupted pass catches up.
	_, err := f.scheduler(service.SchedulerConfig{}).Tick(context.Background())
	require.NoError(t, err)
	f.requireExactlyOncePerSlot(t, 1)
	require.Positive(t, f.count(t, `SELECT count(*) FROM executions`))
}

// TestSchedulerFiresWhileHousekeepingIsSlow: the loop's housekeeping
// (reconciliation, sweeps, ANALYZE, key expiry) can take seconds under
// load; it runs beside the firing loop, so slots are materialised on time
// even while a step of it hangs. Here the key expiry, the first sweep's
// last step, blocks until the test ends.
func TestSchedulerFiresWhileHousekeepingIsSlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	f.insertTasks(t, 20, 1, now.Add(2*time.Second), "fire_all")
	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan struct{})
	enter := sync.OnceFunc(func() { close(entered) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		jobs.RunScheduler(ctx, f.scheduler(service.SchedulerConfig{}), jobs.SchedulerLoopConfig{
			ExpireKeys: func(ctx context.Context) (int64, error) {
				enter()
				<-ctx.Done() // housekeeping that does not return while the test runs
				return 0, ctx.Err()
			},
		})
	}()
	defer func() { cancel(); <-done }()
	<-entered
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := f.loadCount(`SELECT count(*) FROM executions WHERE scheduled_for = $1`, now.Add(2*time.Second))
		assert.NoError(c, err)
		assert.Equal(c, 20, n)
	}, 30*time.Second, 50*time.Millisecond, "the slots were not fired while housekeeping hung")
}

func TestMisfirePolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy    string
		wantFired int // catch-up executions for the 60 missed slots
		wantLate  int
	}{
		{"fire_once", 1, 1},
		{"fire_all", 60, 60},
		{"skip", 0, 0},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			// The task was due every 10 s for the last 10 minutes while
			// no scheduler ran: 60 slots lie before the misfire cut
			// (now - 5 s) and the next one is 2.5 s ahead.
			base := time.Now().UTC().Truncate(time.Microsecond)
			f.insertTasks(t, 1, 10, base.Add(-597500*time.Millisecond), tc.policy)
			s := f.scheduler(service.SchedulerConfig{LookAhead: time.Millisecond, MisfireThreshold: 5 * time.Second})
			res, err := s.Tick(ctx)
			require.NoError(t, err)

			require.Equal(t, tc.wantLate, f.count(t, `SELECT count(*) FROM executions WHERE late`))
			require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE NOT late`), "nothing is due on time yet")
			require.Equal(t, tc.wantFired, res.Fired)
			var missed int64
			var next time.Time
			require.NoError(t, f.pool.QueryRow(ctx, `SELECT missed_count, next_run_at FROM tasks`).Scan(&missed, &next))
			require.Equal(t, res.Missed, missed)
			require.EqualValues(t, 60-tc.wantFired, missed)
			require.Equal(t, base.Add(2500*time.Millisecond), next.UTC(), "next_run_at is the first slot after the misses")
			if tc.policy == "fire_once" {
				// The first fire carries the misses on its timeline.
				require.Equal(t, 1, f.count(t, `SELECT count(*) FROM execution_events WHERE type = 'missed'
					AND (data->>'count')::int = $1`, 60-tc.wantFired))
			}
			if tc.policy == "fire_once" {
				require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE scheduled_for = $1`,
					base.Add(-7500*time.Millisecond)), "fire_once fires the latest missed slot")
			}
			if tc.wantFired > 0 {
				var data string
				require.NoError(t, f.pool.QueryRow(ctx, `SELECT data::text FROM execution_events ev JOIN executions e
					ON e.id = ev.execution_id WHERE e.late AND ev.type = 'fired' ORDER BY e.scheduled_for DESC LIMIT 1`).Scan(&data))
				require.Contains(t, data, `"late": true`)
				require.Contains(t, data, `"misfire_policy": "`+tc.policy+`"`)
			}
			// A second pass fires nothing more for the past.
			res, err = s.Tick(ctx)
			require.NoError(t, err)
			require.Zero(t, res.Missed)
		})
	}
}

func TestFireAllIsBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	f.insertTasks(t, 1, 1, now.Add(-2*time.Hour), "fire_all")
	s := f.scheduler(service.SchedulerConfig{LookAhead: time.Millisecond, CatchUpWindow: time.Hour, CatchUpMax: 50})
	res, err := s.Tick(context.Background())
	require.NoError(t, err)
	require.Equal(t, 50, f.count(t, `SELECT count(*) FROM executions WHERE late`))
	// The 50 fired are the most recent missed slots.
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE late AND scheduled_for < $1`, now.Add(-2*time.Minute)))
	require.Greater(t, res.Missed, int64(7000))
}

// TestTaskLifecycleAndMaterialisedSlots checks pause, resume, schedule
// changes, delete and once-task completion against materialised slots.
func TestTaskLifecycleAndMaterialisedSlots(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.scheduler(service.SchedulerConfig{LookAhead: 10 * time.Second})

	task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "every-2s", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 2},
	})
	require.NoError(t, err)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	pending := f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'`, task.ID)
	require.GreaterOrEqual(t, pending, 4, "slots within the look-ahead are materialised")

	// Pause stops new slots and cancels the materialised ones, those
	// already due (here: one made due by hand) and those still ahead, so
	// that nothing shows as pending that will not fire.
	f.exec(t, `UPDATE executions SET scheduled_for = scheduled_for - interval '1 hour'
		WHERE id = (SELECT id FROM executions WHERE task_id = $1 ORDER BY scheduled_for LIMIT 1)`, task.ID)
	dbtest.SyncUnfinished(t, f.pool)
	_, err = f.tasks.Pause(ctx, f.tenant, task.ID)
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'`, task.ID))
	require.Equal(t, pending, f.count(t, `SELECT count(*) FROM execution_events ev JOIN executions e ON e.id = ev.execution_id
		WHERE e.task_id = $1 AND ev.type = 'cancelled'`, task.ID))
	before := f.count(t, `SELECT count(*) FROM executions`)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, before, f.count(t, `SELECT count(*) FROM executions`), "a paused task fires nothing")

	// Resume starts from now: nothing missed while paused is fired, and
	// the slots still ahead are materialised anew.
	resumed, err := f.tasks.Resume(ctx, f.tenant, task.ID)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), *resumed.NextRunAt, 3*time.Second)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE late`))
	require.GreaterOrEqual(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'`, task.ID), pending-1)

	// A schedule change cancels slots materialised for the old schedule.
	_, err = f.tasks.Update(ctx, f.tenant, task.ID, func(in *service.TaskInput) error {
		in.Schedule = schedule.Spec{Type: schedule.Interval, IntervalSeconds: 3600}
		return nil
	})
	require.NoError(t, err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1 AND state = 'pending'`, task.ID))

	// Delete keeps history.
	hist := f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task.ID)
	require.NoError(t, f.tasks.Delete(ctx, f.tenant, task.ID))
	require.Equal(t, hist, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, task.ID))

	// A once task fires once and completes.
	runAt := time.Now().Add(time.Second)
	once, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "once", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Once, RunAt: &runAt},
	})
	require.NoError(t, err)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	got, err := f.tasks.Get(ctx, f.tenant, once.ID)
	require.NoError(t, err)
	require.Equal(t, service.TaskCompleted, got.State)
	require.Nil(t, got.NextRunAt)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, once.ID))

	// A task past end_at completes.
	end := time.Now().Add(3 * time.Second)
	bounded, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
		Name: "bounded", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 1, EndAt: &end},
	})
	require.NoError(t, err)
	_, err = s.Tick(ctx)
	require.NoError(t, err)
	got, err = f.tasks.Get(ctx, f.tenant, bounded.ID)
	require.NoError(t, err)
	require.Equal(t, service.TaskCompleted, got.State)
	n := f.count(t, `SELECT count(*) FROM executions WHERE task_id = $1`, bounded.ID)
	require.True(t, n >= 2 && n <= 4, "fired %d slots up to end_at", n)
}

// TestSchedulerWakesOnTaskChange: a new task due now fires well before the
// poll ceiling, because task writes NOTIFY the loop.
func TestSchedulerWakesOnTaskChange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		jobs.RunScheduler(ctx, f.scheduler(service.SchedulerConfig{}), jobs.SchedulerLoopConfig{PollCeiling: time.Minute})
	}()
	time.Sleep(300 * time.Millisecond) // the loop is idle, sleeping up to a minute
	runAt := time.Now()
	_, err := f.tasks.Create(context.Background(), f.tenant, service.TaskInput{
		Name: "now", EndpointID: f.endpoint,
		Schedule: schedule.Spec{Type: schedule.Once, RunAt: &runAt},
	})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := f.loadCount(`SELECT count(*) FROM executions`)
		assert.NoError(c, err)
		assert.Equal(c, 1, n)
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	<-done
}

// TestHorizonSpacesClaims: a claimed task materialises its slots up to
// its next claim instant plus the look-ahead (within the horizon, four
// times the look-ahead by default), so it is not claimed again until its
// next slot comes within the look-ahead: a task firing every second
// rewrites its row once per horizon − look-ahead, not on every pass.
func TestHorizonSpacesClaims(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.scheduler(service.SchedulerConfig{LookAhead: 2 * time.Second})
	require.Equal(t, 8*time.Second, s.Config().Horizon)
	first := time.Now().UTC().Add(500 * time.Millisecond).Truncate(time.Millisecond)
	f.insertTasks(t, 1, 1, first, "fire_once")

	res, err := s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Tasks)
	// The end is ½ to 1¼ cycles (6 s) beyond the look-ahead: 5 to 10 of
	// the slots, one a second from half a second ahead.
	require.GreaterOrEqual(t, res.Fired, 5, "slots beyond the look-ahead")
	require.LessOrEqual(t, res.Fired, 10, "slots within the horizon and a quarter cycle")
	var next time.Time
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT next_run_at FROM tasks`).Scan(&next))
	require.Equal(t, first.Add(time.Duration(res.Fired)*time.Second), next.UTC())

	res, err = s.Tick(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Tasks, "not claimed again while its next slot is beyond the look-ahead")
}

// TestClaimsAheadArePaced: a claim that is not full and whose fires are
// all at least half the look-ahead away writes its executions a chunk at
// a time over ClaimSpread (its last chunk not before (n−1)/n of it); a
// full claim, or one with a fire within half the look-ahead, writes them
// at once. Either way each slot fires once, with its job.
func TestClaimsAheadArePaced(t *testing.T) {
	t.Parallel()
	const tasks = 300
	claim := func(t *testing.T, cfg service.SchedulerConfig, firstIn time.Duration) (service.TickResult, time.Duration) {
		t.Helper()
		f := newFixture(t)
		base := time.Now().UTC().Truncate(time.Second)
		cfg.Now = func() time.Time { return base }
		f.insertTasks(t, tasks, 1, base.Add(firstIn), "fire_once")
		start := time.Now()
		res, err := f.scheduler(cfg).Tick(context.Background())
		took := time.Since(start)
		require.NoError(t, err)
		require.Equal(t, tasks, res.Tasks)
		require.Equal(t, res.Fired, f.count(t, `SELECT count(*) FROM executions`))
		f.requireExactlyOncePerSlot(t, 1)
		return res, took
	}
	t.Run("ahead", func(t *testing.T) {
		t.Parallel()
		spread := 3 * time.Second
		res, took := claim(t, service.SchedulerConfig{ClaimSpread: spread}, 3*time.Second)
		chunks := (res.Fired + 1023) / 1024
		require.GreaterOrEqual(t, chunks, 2, "the claim writes more than a chunk")
		require.GreaterOrEqual(t, took, spread*time.Duration(chunks-1)/time.Duration(chunks), "the chunks spread over ClaimSpread")
	})
	// With a minute's spread, a paced claim would take most of a minute.
	t.Run("full", func(t *testing.T) {
		t.Parallel()
		res, took := claim(t, service.SchedulerConfig{BatchSize: tasks, ClaimSpread: time.Minute}, 3*time.Second)
		require.True(t, res.More)
		require.Greater(t, res.Fired, 1024)
		require.Less(t, took, 30*time.Second, "a full claim writes at once")
	})
	t.Run("near", func(t *testing.T) {
		t.Parallel()
		res, took := claim(t, service.SchedulerConfig{ClaimSpread: time.Minute}, time.Second)
		require.Greater(t, res.Fired, 1024)
		require.Less(t, took, 30*time.Second, "a claim with a fire within half the look-ahead writes at once")
	})
}

// TestHorizonJobsAreAvailable: with the default configuration, tasks
// claimed together at slots spread over a second materialise their slots
// to ends spread over the cycle (10 to 19 s ahead), each up to its next
// claim at its own phase; every deliver job written is
// available — within NearTermWindow — so none waits for River's leader to
// promote it (service.NearTermWindow).
func TestHorizonJobsAreAvailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s := f.scheduler(service.SchedulerConfig{})
	first := time.Now().UTC().Add(500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	// 24 tasks firing every second, the i-th at i/24 s (+1 ms) past first.
	f.exec(t, `INSERT INTO tasks (tenant_id, id, name, endpoint_id, schedule_type, interval_seconds, start_at, next_run_at, misfire_policy)
		SELECT $1, gen_random_uuid(), 'spread-' || g, $2, 'interval', 1, s, s, 'fire_once'
		FROM generate_series(0, 23) g, LATERAL (SELECT $3::timestamptz + g * interval '1 second' / 24 + interval '1 millisecond' AS s) x`,
		f.tenant, f.endpoint, first)

	res, err := s.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 24, res.Tasks)
	require.Positive(t, f.count(t, `SELECT count(*) FROM river_job WHERE scheduled_at > now() + interval '12 seconds'`),
		"jobs for slots well beyond the old 10 s window")
	require.Zero(t, f.count(t, `SELECT count(*) FROM river_job WHERE state <> 'available'`), "every job written available")
	require.Zero(t, f.count(t, `SELECT count(*) FROM tasks WHERE next_run_at < now() + interval '9 seconds'`),
		"each claim writes at least half the cycle beyond the look-ahead")
	require.GreaterOrEqual(t, f.count(t, `SELECT extract(epoch FROM max(next_run_at) - min(next_run_at))::int FROM tasks`), 2,
		"the next claims are spread")
	require.Positive(t, f.count(t, `SELECT count(*) FROM tasks WHERE next_run_at > now() + interval '17.5 seconds'`),
		"some claims move later than a fixed 16 s horizon would (its next slot at most 17 s ahead)")
}

func TestSchedulerConfigHorizon(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   service.SchedulerConfig
		want time.Duration
	}{
		{service.SchedulerConfig{}, 16 * time.Second},
		{service.SchedulerConfig{LookAhead: time.Second}, 4 * time.Second},
		{service.SchedulerConfig{LookAhead: 7 * time.Second}, service.NearTermWindow},
		{service.SchedulerConfig{LookAhead: 25 * time.Second}, 25 * time.Second},
		{service.SchedulerConfig{LookAhead: 4 * time.Second, Horizon: time.Second}, 4 * time.Second},
		{service.SchedulerConfig{LookAhead: 4 * time.Second, Horizon: 6 * time.Second}, 6 * time.Second},
	} {
		require.Equal(t, tc.want, tc.in.WithDefaults().Horizon, "%+v", tc.in)
	}
}

// TestCreateWakesTheSchedulersOnlyForNearSlots: a task whose first slot is
// within TaskWakeWithin notifies the scheduler loops; one further off does
// not (the loops' regular passes claim it in time: see jobs.RunScheduler's
// PollCeiling bound).
func TestCreateWakesTheSchedulersOnlyForNearSlots(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	conn, err := f.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "LISTEN "+db.TaskChangedChannel)
	require.NoError(t, err)
	notified := func() bool {
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := conn.Conn().WaitForNotification(wctx)
		return err == nil
	}
	create := func(name string, in time.Duration) {
		runAt := time.Now().Add(in)
		_, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
			Name: name, EndpointID: f.endpoint,
			Schedule: schedule.Spec{Type: schedule.Once, RunAt: &runAt},
		})
		require.NoError(t, err)
	}
	create("far", service.TaskWakeWithin+time.Minute)
	require.False(t, notified(), "a far task wakes nobody")
	create("near", 10*time.Second)
	require.True(t, notified(), "a near task wakes the loops")
	require.Less(t, service.LookAheadDefault+jobs.PollCeilingDefault, service.TaskWakeWithin)
}

// TestIntervalTaskAnchorsOnItsCreation: an interval task's slots are
// anchored on created_at, and its first slot (planned when it was created)
// lies on that grid, so the scheduler's later slots follow it.
func TestIntervalTaskAnchorsOnItsCreation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for i := range 20 {
		task, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
			Name: fmt.Sprintf("every-7s-%d", i), EndpointID: f.endpoint,
			Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 7},
		})
		require.NoError(t, err)
		sched, err := schedule.Parse(task.Schedule, task.CreatedAt)
		require.NoError(t, err)
		first, ok := sched.Next(task.CreatedAt)
		require.True(t, ok)
		require.Equal(t, first, task.NextRunAt.UTC(), "the first slot is on the grid of created_at")
		require.Equal(t, task.CreatedAt.Add(7*time.Second).Truncate(time.Millisecond), first,
			"anchored on the creation time to the millisecond")
		second, ok := sched.Next(first)
		require.True(t, ok)
		require.Equal(t, 7*time.Second, second.Sub(first))
	}
}

// TestSchedulerLearnsTheDatabaseClock: the loop's look at the next due
// task also reads the database's clock; on one machine the offset is
// about zero.
func TestSchedulerLearnsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	clock := new(service.DBClock)
	// A stale estimate an hour off, from a fast round trip 20 s ago.
	old := time.Now().Add(-20 * time.Second)
	clock.Observe(old, old.Add(time.Hour), old.Add(time.Millisecond))
	require.InDelta(t, time.Hour.Seconds(), clock.Offset().Seconds(), 1)
	s := service.NewScheduler(f.pool, f.enq, service.SchedulerConfig{Clock: clock}, slog.New(slog.DiscardHandler))
	_, _, err := s.NextDueIn(context.Background())
	require.NoError(t, err)
	require.InDelta(t, 0, clock.Offset().Seconds(), 0.1)
	now := time.Now()
	require.WithinDuration(t, now, clock.Local(now), 100*time.Millisecond)
}

// TestCreateReadsTheClockEstimate: a task's creation instant (its
// created_at, the anchor of an interval schedule, and what its first slot
// and a preview start from) comes from the clock's estimate while it is
// fresh, without a query, and from the database when it is stale or
// missing.
func TestCreateReadsTheClockEstimate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	created := 0
	create := func(clock *service.DBClock) service.Task {
		t.Helper()
		created++
		task, err := service.NewTasks(f.pool, service.TasksConfig{Clock: clock}).Create(ctx, f.tenant, service.TaskInput{
			Name: fmt.Sprintf("clock-%d", created), EndpointID: f.endpoint, Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 60},
		})
		require.NoError(t, err)
		return task
	}
	// An estimate an hour ahead, so that its use shows.
	skewed := func(age time.Duration) *service.DBClock {
		c := new(service.DBClock)
		at := time.Now().Add(-age)
		c.Observe(at, at.Add(time.Hour), at.Add(time.Millisecond))
		return c
	}

	fresh := skewed(time.Second)
	task := create(fresh)
	require.WithinDuration(t, time.Now().Add(time.Hour), task.CreatedAt, time.Second, "from the fresh estimate")
	require.Equal(t, task.CreatedAt, task.CreatedAt.Truncate(time.Microsecond))
	require.NotNil(t, task.NextRunAt)
	require.WithinDuration(t, task.CreatedAt.Add(time.Minute), *task.NextRunAt, time.Second, "planned from the same instant")
	preview, err := service.NewTasks(f.pool, service.TasksConfig{Clock: fresh}).Preview(ctx, f.tenant, task.ID, 1)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour+time.Minute), preview.Fires[0], 2*time.Second)

	slow := new(service.DBClock)
	at := time.Now().Add(-time.Second)
	slow.Observe(at, at.Add(time.Hour), at.Add(50*time.Millisecond))
	for name, c := range map[string]*service.DBClock{
		"stale": skewed(20 * time.Second), "slow round trip": slow, "none": new(service.DBClock), "nil": nil,
	} {
		task := create(c)
		var dbNow time.Time
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow))
		require.WithinDuration(t, dbNow, task.CreatedAt, time.Second, name+": from the database")
	}

	// With the loop's own estimate, a task is never created ahead of the
	// database's clock (updated_at = now() later is never before it).
	clock := new(service.DBClock)
	_, _, err = f.scheduler(service.SchedulerConfig{Clock: clock}).NextDueIn(ctx)
	require.NoError(t, err)
	for range 20 {
		task := create(clock)
		var dbNow time.Time
		require.NoError(t, f.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow))
		require.False(t, task.CreatedAt.After(dbNow), "created %s, database then %s", task.CreatedAt, dbNow)
		require.WithinDuration(t, dbNow, task.CreatedAt, time.Second)
	}
}

// TestCreateTeachesTheClock: a create that finds no usable estimate reads
// the database's clock and keeps the reading, so the creates after it
// (until it is clockSampleMaxAge old) read the estimate, not the database:
// under load, when the scheduler loop's readings wait for the busy pool
// and are too slow to answer from, not every create pays a round trip.
func TestCreateTeachesTheClock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// A stale estimate an hour ahead, from a fast round trip 20 s ago.
	clock := new(service.DBClock)
	old := time.Now().Add(-20 * time.Second)
	clock.Observe(old, old.Add(time.Hour), old.Add(time.Millisecond))
	_, ok := clock.Now(time.Now())
	require.False(t, ok, "stale")
	tasks := service.NewTasks(f.pool, service.TasksConfig{Clock: clock})
	in := func(name string) service.TaskInput {
		return service.TaskInput{
			Name: name, EndpointID: f.endpoint,
			Schedule: schedule.Spec{Type: schedule.Interval, IntervalSeconds: 60},
		}
	}
	first, err := tasks.Create(ctx, f.tenant, in("teach-1"))
	require.NoError(t, err)
	var dbNow time.Time
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow))
	require.WithinDuration(t, dbNow, first.CreatedAt, time.Second, "from the database")
	require.InDelta(t, 0, clock.Offset().Seconds(), 0.1, "the reading replaced the stale estimate")
	// (Whether Now answers from it depends on that round trip's time,
	// which a loaded machine may stretch past clockNowMaxRTT.)

	// The next create reads the estimate: one an hour ahead, put in its
	// place now, shows it.
	at := time.Now()
	clock.Observe(at, at.Add(time.Hour), at.Add(time.Microsecond)) // faster than any real reading: it replaces one
	second, err := tasks.Create(ctx, f.tenant, in("teach-2"))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Hour), second.CreatedAt, time.Second, "from the estimate")

	// In a transaction (a create naming calendars) now() is the
	// transaction's start: no reading is learnt from it.
	stale := new(service.DBClock)
	stale.Observe(old, old.Add(time.Hour), old.Add(time.Millisecond))
	cal, err := service.NewCalendars(f.pool, tasks).Create(ctx, f.tenant, service.CalendarInput{Name: "teach", Dates: []string{"2030-01-01"}})
	require.NoError(t, err)
	withCal := in("teach-3")
	withCal.Schedule.ExcludeCalendars = []string{cal.ID}
	third, err := service.NewTasks(f.pool, service.TasksConfig{Clock: stale}).Create(ctx, f.tenant, withCal)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), third.CreatedAt, time.Second, "from the database")
	require.InDelta(t, time.Hour.Seconds(), stale.Offset().Seconds(), 1, "the estimate is not replaced from a transaction")
}

// TestLargeInstantClaimedEarly: a few tasks due at an instant beyond the
// look-ahead wait for it, but once at least a batch of them is due
// there, they are claimed ahead of it (LookAheadMax), as early as the
// claim rate says writing them takes: each fires once, pending for its
// slot, its job not due before the slot. Tasks due after LookAheadMax
// wait whatever their number.
func TestLargeInstantClaimedEarly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	base := time.Now()
	clock := base
	s := f.scheduler(service.SchedulerConfig{BatchSize: 10, ClaimRate: 5, Now: func() time.Time { return clock }})
	require.Equal(t, 10*time.Second, s.Config().LookAheadMax, "LookAhead plus half the claim cycle")
	instant, far := base.Add(8*time.Second), base.Add(12*time.Second)
	create := func(n int, at time.Time) {
		t.Helper()
		for range n {
			_, err := f.tasks.Create(ctx, f.tenant, service.TaskInput{
				Name: service.NewID(), EndpointID: f.endpoint,
				Schedule: schedule.Spec{Type: schedule.Once, RunAt: &at},
			})
			require.NoError(t, err)
		}
	}
	tick := func() {
		t.Helper()
		for {
			res, err := s.Tick(ctx)
			require.NoError(t, err)
			if !res.More {
				return
			}
		}
	}
	create(5, instant)
	create(20, far)
	tick()
	require.Zero(t, f.count(t, `SELECT count(*) FROM executions`), "fewer than a batch due 8 s ahead: not yet")

	create(25, instant)
	clock = base.Add(time.Second)
	tick()
	require.Equal(t, 30, f.count(t, `SELECT count(*) FROM executions WHERE scheduled_for = $1 AND state = 'pending'`, instant),
		"a batch or more due 7 s ahead: claimed, each once")
	require.Equal(t, 30, f.count(t, `SELECT count(DISTINCT task_id) FROM executions`))
	require.Zero(t, f.count(t, `SELECT count(*) FROM river_job WHERE scheduled_at < $1`, instant), "no job due before the slot")
	require.Equal(t, 20, f.count(t, `SELECT count(*) FROM tasks WHERE state = 'active' AND next_run_at = $1`, far),
		"due after LookAheadMax: not yet")
	tick()
	require.Equal(t, 30, f.count(t, `SELECT count(*) FROM executions`), "claimed once")
}
