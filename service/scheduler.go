package service

import (
	"cmp"
	"context"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/metrics"
	"github.com/axhq/ax/service/payload"
	"github.com/axhq/ax/service/queue"
	"github.com/axhq/ax/service/schedule"
)

// Scheduler defaults.
const (
	BatchSizeDefault        = 1000
	LookAheadDefault        = 4 * time.Second
	ClaimRateDefault        = 5000
	ClaimSpreadDefault      = 600 * time.Millisecond
	MisfireThresholdDefault = 5 * time.Second
	CatchUpWindowDefault    = 24 * time.Hour
	CatchUpMaxDefault       = 100
	// slotsPerTaskMax bounds the slots one task materialises per pass.
	slotsPerTaskMax = 1000
	// missedCountMax bounds how many missed slots a pass enumerates to
	// count them; beyond it the count is a lower bound.
	missedCountMax = 100_000
)

// SchedulerConfig tunes firing.
type SchedulerConfig struct {
	// Lanes puts a tenant's bursts and fires to slow endpoints in the
	// bulk lane (QueueDeliverBulk). Nil: every fire in the main lane.
	Lanes *Lanes
	// BatchSize is how many due tasks one transaction claims. Defaults to 1000.
	BatchSize int
	// LookAhead claims a task once its next slot is this close, so that
	// deliveries are queued before they are due (a burst of thousands of
	// fires due at one instant is written before it). Defaults to 4 s.
	LookAhead time.Duration
	// LookAheadMax bounds how much earlier than LookAhead a large instant
	// is claimed. When at least BatchSize tasks are due after LookAhead
	// and within LookAheadMax, they are claimed as early as ClaimRate says
	// writing them takes (n tasks: LookAhead + n / ClaimRate ahead, at
	// most LookAheadMax), so that a burst of 100,000 fires is written
	// before its instant rather than from 4 s before it. Its executions
	// are pending and its jobs not due until their slots, as with any
	// claim. Defaults to LookAhead plus half the claim cycle (Horizon −
	// LookAhead; 10 s): a recurring task's claim materialises its slots
	// to at least LookAhead plus half a cycle ahead (horizonEnd), beyond
	// it, so a task just claimed is never due again at once. Set it to
	// LookAhead to claim by LookAhead alone.
	LookAheadMax time.Duration
	// ClaimRate is how many tasks a second the claims are taken to write
	// (LookAheadMax). Defaults to 5,000.
	ClaimRate int
	// ClaimSpread is how long a claim that is ahead of its fires spreads
	// the writing of its executions over (paceInserts): a claim that is
	// not full, whose fires are all at least half the look-ahead away,
	// inserts them claimChunk at a time, each chunk at its share of
	// ClaimSpread, instead of all at once on a core the deliveries need.
	// It stays under the second between two claim groups (horizonEnd), so
	// that one group's claim ends before the next one's. Defaults to
	// 600 ms; negative: every claim inserts at once.
	ClaimSpread time.Duration
	// Horizon is how far ahead a claimed task's slots are materialised
	// (at least LookAhead): a task firing every second is claimed once per
	// Horizon − LookAhead, not on every pass, and each claim rewrites the
	// task row (next_run_at, a non-HOT update of every index on tasks).
	// Each task's claims converge on their own phase of that cycle, so a
	// claim materialises up to the task's next claim instant, between half
	// a cycle and 1¼ cycles ahead (horizonEnd). Both stay within
	// NearTermWindow so that the deliveries' jobs are written as
	// available. Defaults to four times the look-ahead (16 s: at 5,000
	// fires/s a third of the task row rewrites of twice the look-ahead).
	Horizon time.Duration
	// MisfireThreshold: a slot more than this late when it is claimed
	// (downtime, backlog) is a misfire, handled by the task's misfire
	// policy. Defaults to 5 s.
	MisfireThreshold time.Duration
	// CatchUpWindow: fire_all fires missed slots no older than this.
	// Defaults to 24 h.
	CatchUpWindow time.Duration
	// CatchUpMax: fire_all fires at most this many missed slots of a task
	// (the most recent ones). Defaults to 100.
	CatchUpMax int
	// FetchAhead makes a fire's deliver job due this long before its slot;
	// the worker then waits for the slot itself. River hands a due job out
	// at its next poll of the queue, so a job due at the slot was up to a
	// poll interval late; one due a poll interval (and a margin) ahead is
	// waiting in its worker when the slot comes. cmd/server sets it from
	// the deliver queue's poll (jobs.RiverConfig.FetchAhead). Default 0.
	FetchAhead time.Duration
	// BulkFetchAhead is FetchAhead for the fires of the bulk lane, whose
	// queues are polled less often (jobs.RiverConfig.BulkFetchAhead).
	// Default: FetchAhead.
	BulkFetchAhead time.Duration
	// Clock, when set, learns the database's clock from the loop's
	// queries, for workers that wait for a slot and for the API's task
	// creation (TasksConfig.Clock).
	Clock *DBClock
	// Metrics, when set, counts the workflow runs a claim ends
	// (ax_workflow_runs_total).
	Metrics *metrics.Metrics
	// Now, when set, is the clock a pass over the tasks (Tick) claims and
	// plans by, instead of the database's now(): tests drive the real
	// pass across days, a DST change, with it. nil (production): the
	// database's clock.
	Now func() time.Time
}

// WithDefaults fills unset fields.
func (c SchedulerConfig) WithDefaults() SchedulerConfig {
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.LookAhead = cmp.Or(c.LookAhead, LookAheadDefault)
	c.Horizon = max(cmp.Or(c.Horizon, min(4*c.LookAhead, NearTermWindow)), c.LookAhead)
	c.LookAheadMax = max(cmp.Or(c.LookAheadMax, c.LookAhead+(c.Horizon-c.LookAhead)/2), c.LookAhead)
	c.ClaimRate = cmp.Or(c.ClaimRate, ClaimRateDefault)
	c.ClaimSpread = cmp.Or(c.ClaimSpread, ClaimSpreadDefault)
	c.MisfireThreshold = cmp.Or(c.MisfireThreshold, MisfireThresholdDefault)
	c.CatchUpWindow = cmp.Or(c.CatchUpWindow, CatchUpWindowDefault)
	c.CatchUpMax = cmp.Or(c.CatchUpMax, CatchUpMaxDefault)
	c.BulkFetchAhead = cmp.Or(c.BulkFetchAhead, c.FetchAhead)
	return c
}

// Scheduler fires due tasks: it turns slots into executions and their
// deliver jobs. Every replica runs one; they share the work through
// row locks and the per-slot unique key, so no slot fires twice.
type Scheduler struct {
	pool   *db.Pool
	enq    *Enqueuer
	cfg    SchedulerConfig
	logger *slog.Logger

	mu    sync.Mutex
	cache map[string]cachedSchedule // task id → parsed schedule (and payload template)
	// renderBytes is about how many bytes the cache's payload renderers
	// keep (payload.Renderer.Size), at most renderMax (renderCacheMax).
	renderBytes, renderMax int
	// graphs are the workflow versions its runs' starts read.
	graphs graphCache

	// ahead is the last look-ahead a claim chose (lookAhead), at aheadAt
	// by the claim's clock; guarded by aheadMu.
	aheadMu sync.Mutex
	aheadAt time.Time
	ahead   time.Duration
}

// lookAheadFor is how long a look-ahead (lookAhead) stays chosen: claims
// within it, a backlog's, do not count again.
const lookAheadFor = 500 * time.Millisecond

type cachedSchedule struct {
	version int32
	sched   *schedule.Schedule
	// render is a templated task's payload renderer (nil: not built yet,
	// or the cache's renderers are at their bound).
	render *payload.Renderer
}

// renderCacheMax bounds the bytes of the payload renderers the scheduler
// keeps: about 20,000 templated tasks of a few small templated strings.
// A task past it has its template parsed at each claim.
const renderCacheMax = 64 << 20

// NewScheduler returns a Scheduler.
func NewScheduler(pool *db.Pool, enq *Enqueuer, cfg SchedulerConfig, logger *slog.Logger) *Scheduler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{
		pool: pool, enq: enq, cfg: cfg.WithDefaults(), logger: logger, cache: map[string]cachedSchedule{},
		renderMax: renderCacheMax,
	}
}

// Config returns the effective configuration.
func (s *Scheduler) Config() SchedulerConfig { return s.cfg }

// TickResult says what one pass did.
type TickResult struct {
	Tasks     int   // tasks claimed
	Fired     int   // executions created
	Duplicate int   // slots that already had an execution
	Missed    int64 // slots not fired by misfire policy
	Runs      int   // workflow runs created
	// More is true when the batch was full: call Tick again at once.
	More bool
}

// Tick claims one batch of due tasks and, in one transaction, inserts their
// executions and deliver jobs and advances next_run_at. Due-ness is judged
// by the database clock.
func (s *Scheduler) Tick(ctx context.Context) (TickResult, error) {
	var (
		res  TickResult
		done ended
	)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		res, done = TickResult{}, nil
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		ahead, err := s.lookAhead(ctx, tx, now)
		if err != nil {
			return err
		}
		due, err := db.ClaimDueTasks(ctx, tx, now.Add(ahead), s.cfg.BatchSize)
		if err != nil {
			return err
		}
		res.Tasks, res.More = len(due), len(due) == s.cfg.BatchSize
		if len(due) == 0 {
			return nil
		}
		var (
			execs []db.NewExecution
			advs  []db.TaskAdvance
			meta  = make(map[string]db.DueTask, len(due))
			// unsent are the fires whose payload's template failed, by
			// execution id: created failed, never enqueued.
			unsent map[string]string
		)
		cals, err := s.calendarsFor(ctx, tx, due)
		if err != nil {
			return err
		}
		for _, t := range due {
			meta[t.ID] = t
			plan := s.plan(t, now, cals)
			if t.Shards > 1 {
				plan.execs = shardOut(plan.execs, t.Shards)
			}
			if t.PayloadTemplate {
				unsent = s.renderPayloads(t, cals, plan.execs, unsent)
			}
			execs = append(execs, plan.execs...)
			advs = append(advs, db.TaskAdvance{TenantID: t.TenantID, ID: t.ID, NextRunAt: plan.next, Missed: plan.missed})
			res.Missed += plan.missed
		}
		inserted, err := s.paceInserts(ctx, tx, execs, now, res.More)
		if err != nil {
			return err
		}
		res.Fired, res.Duplicate = len(inserted), len(execs)-len(inserted)
		fired := make([]firedExecution, 0, len(inserted))
		var failed []unsentFire
		for _, e := range inserted {
			if reason, ok := unsent[e.ID]; ok {
				failed = append(failed, unsentFire{TenantID: e.TenantID, ID: e.ID, TaskID: e.TaskID, Reason: reason})
				continue
			}
			t := meta[e.TaskID]
			fired = append(fired, firedExecution{
				TenantID: e.TenantID, ID: e.ID, EndpointID: t.EndpointID, ScheduledFor: e.ScheduledFor,
				Priority: int(t.Priority), MaxAttempts: int(t.MaxAttempts),
			})
		}
		queue.AssignLanes(s.cfg.Lanes, fired)
		if _, err := s.enq.insertMany(ctx, tx, fireInserts(fired, now, s.cfg.FetchAhead, s.cfg.BulkFetchAhead)); err != nil {
			return err
		}
		if err := db.AdvanceTasks(ctx, tx, advs); err != nil {
			return err
		}
		if len(failed) == 0 {
			return nil
		}
		// After the advance: a failure's auto-pause is the task's state.
		return failUnsent(ctx, tx, s.enq, failed, &done)
	})
	if err != nil {
		return TickResult{}, storeError(err, "scheduler tick")
	}
	done.report(s.cfg.Metrics)
	if !res.More { // the workflows' slots, once the tasks' backlog is written
		runs, err := s.tickWorkflows(ctx)
		if err != nil {
			return TickResult{}, err
		}
		res.Runs = runs
	}
	return res, nil
}

// claimChunk is how many executions a paced claim inserts at a time
// (paceInserts): at about 25 µs a row, some 25 ms of a core.
const claimChunk = 1024

// paceInserts inserts a claim's executions (db.InsertScheduledExecutions).
// A claim that is not full and whose fires are all at least half the
// look-ahead after now is ahead of them: it inserts claimChunk at a time,
// the k-th chunk of n not before k/n of ClaimSpread after the first, so
// that its writing takes a share of a core over ClaimSpread rather than a
// whole core at once. At 10,000 fires a second a claim group's claim is
// about 11,000 executions, some 300 ms of a core; written at once, it left
// the deliveries of those 300 ms one core of the two they need, and each
// claim queued them by tens of milliseconds. A chunk that is late (a slow
// machine) waits for nothing: the pacing never makes a claim longer than
// ClaimSpread or its own writing. A full claim (a backlog, a large
// instant) and one with a fire within half the look-ahead write at once.
func (s *Scheduler) paceInserts(ctx context.Context, tx db.Tx, execs []db.NewExecution, now time.Time, full bool) ([]db.InsertedExecution, error) {
	if full || s.cfg.ClaimSpread <= 0 || len(execs) <= claimChunk ||
		slices.ContainsFunc(execs, func(e db.NewExecution) bool { return e.ScheduledFor.Sub(now) < s.cfg.LookAhead/2 }) {
		out, err := db.InsertScheduledExecutions(ctx, tx, execs)
		return out, storeError(err, "insert executions")
	}
	chunks := (len(execs) + claimChunk - 1) / claimChunk
	out := make([]db.InsertedExecution, 0, len(execs))
	start := time.Now()
	for k := range chunks {
		if wait := time.Until(start.Add(s.cfg.ClaimSpread * time.Duration(k) / time.Duration(chunks))); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		part, err := db.InsertScheduledExecutions(ctx, tx, execs[k*claimChunk:min((k+1)*claimChunk, len(execs))])
		if err != nil {
			return nil, storeError(err, "insert executions")
		}
		out = append(out, part...)
	}
	return out, nil
}

// now is the clock of a pass in tx: the database's, or SchedulerConfig.Now.
// lookAhead is how far ahead of now a claim takes due tasks: LookAhead,
// or up to LookAheadMax for a large instant (SchedulerConfig.LookAheadMax).
// The count behind it is a walk of at most (LookAheadMax − LookAhead) ×
// ClaimRate index entries, made at most once per lookAheadFor.
func (s *Scheduler) lookAhead(ctx context.Context, tx db.Tx, now time.Time) (time.Duration, error) {
	extra := s.cfg.LookAheadMax - s.cfg.LookAhead
	if extra <= 0 {
		return s.cfg.LookAhead, nil
	}
	s.aheadMu.Lock()
	if since := now.Sub(s.aheadAt); since >= 0 && since < lookAheadFor {
		defer s.aheadMu.Unlock()
		return s.ahead, nil
	}
	s.aheadMu.Unlock()
	limit := max(int(extra.Seconds()*float64(s.cfg.ClaimRate)), s.cfg.BatchSize)
	n, err := db.CountTasksDueBetween(ctx, tx, now.Add(s.cfg.LookAhead), now.Add(s.cfg.LookAheadMax), limit)
	if err != nil {
		return 0, storeError(err, "count the tasks due soon")
	}
	ahead := s.cfg.LookAhead
	if n >= s.cfg.BatchSize {
		ahead += min(time.Duration(float64(n)/float64(s.cfg.ClaimRate)*float64(time.Second)), extra)
	}
	s.aheadMu.Lock()
	s.aheadAt, s.ahead = now, ahead
	s.aheadMu.Unlock()
	return ahead, nil
}

// CurrentLookAhead is the look-ahead the last claim used: LookAhead, or
// more while many tasks are due within LookAheadMax (lookAhead). The
// scheduler loop sleeps until the next task comes within it, so that it
// wakes when a claim would take that task rather than on its poll: at
// 10,000 fires a second the look-ahead grows by about a second, and a
// loop that woke by LookAhead alone fell back to its 1 s poll, drifted
// against the claim groups (a second and an eleventh apart) and claimed two
// groups at once every few passes.
func (s *Scheduler) CurrentLookAhead() time.Duration {
	s.aheadMu.Lock()
	defer s.aheadMu.Unlock()
	return max(s.ahead, s.cfg.LookAhead)
}

func (s *Scheduler) now(ctx context.Context, tx db.Tx) (time.Time, error) {
	if s.cfg.Now != nil {
		return s.cfg.Now(), nil
	}
	t, err := db.Now(ctx, tx)
	return t, storeError(err, "read the database clock")
}

// NextDueIn returns how long until the earliest active task is due (by the
// database clock); ok is false when nothing is scheduled.
func (s *Scheduler) NextDueIn(ctx context.Context) (time.Duration, bool, error) {
	// Timed on a held connection: a wait for one (the API may keep the
	// pool busy) is no part of the round trip the estimate is judged by.
	due, ok, dbNow, sent, received, err := db.NextDueInTimed(ctx, s.pool)
	if err == nil {
		s.cfg.Clock.Observe(sent, dbNow, received)
	}
	return due, ok, storeError(err, "next due task")
}

// ListenForChanges calls wake whenever a task changes in a way that may
// bring its next slot closer (a create with a near first slot, a patch, a
// resume, an auto-pause), and once when it starts listening, until ctx
// ends or its connection fails; it returns why. Call it again after a
// failure.
func (s *Scheduler) ListenForChanges(ctx context.Context, wake func()) error {
	return storeError(db.ListenTaskChanges(ctx, s.pool, wake), "listen for task changes")
}

// SweepUnfinished removes rows of unfinished_executions whose execution is
// final or gone (db.SweepUnfinished) and returns how many it removed.
func (s *Scheduler) SweepUnfinished(ctx context.Context) (int64, error) {
	n, err := db.SweepUnfinished(ctx, s.pool)
	return n, storeError(err, "sweep unfinished executions")
}

// AnalyzeYoungTables analyzes the hot tables while they are small and
// growing (db.AnalyzeYoungTables) and returns their names.
func (s *Scheduler) AnalyzeYoungTables(ctx context.Context) ([]string, error) {
	names, err := db.AnalyzeYoungTables(ctx, s.pool)
	return names, storeError(err, "analyze young tables")
}

// plan is what a pass does with one claimed task.
type plan struct {
	execs  []db.NewExecution
	next   *time.Time
	missed int64
}

// plan computes a claimed task's slots up to now+Horizon under its
// misfire policy, and its next slot after them.
func (s *Scheduler) plan(t db.DueTask, now time.Time, cals map[string]db.Calendar) plan {
	sched, err := s.schedule(t, cals)
	if err != nil {
		// A stored schedule that no longer parses (e.g. a zone removed from
		// tzdata) cannot fire; complete the task rather than spin on it.
		s.logger.Error("task schedule is invalid; completing the task", "tenant", t.TenantID, "task_id", t.ID, "error", err.Error())
		return plan{}
	}
	horizon := s.horizonEnd(t.ID, t.NextRunAt, now)
	cut := now.Add(-s.cfg.MisfireThreshold) // slots before cut are misfires
	var p plan
	slot, ok := t.NextRunAt, true

	// Misfired slots: [next_run_at, cut).
	var missed []time.Time // the most recent ones, bounded
	keep := 1
	if t.MisfirePolicy == MisfireFireAll {
		keep = s.cfg.CatchUpMax
	}
	var missedTotal int64
	for ok && slot.Before(cut) && missedTotal < missedCountMax {
		missedTotal++
		if t.MisfirePolicy == MisfireFireAll && slot.Before(now.Add(-s.cfg.CatchUpWindow)) {
			// Outside the catch-up window: counted only.
		} else {
			missed = append(missed, slot)
			if len(missed) > keep {
				missed = missed[1:]
			}
		}
		slot, ok = sched.Next(slot)
	}
	if ok && slot.Before(cut) {
		// More misfires than we count one by one: jump past them.
		slot, ok = sched.Next(cut.Add(-time.Nanosecond))
	}
	var fire []time.Time
	switch t.MisfirePolicy {
	case MisfireSkip:
		p.missed = missedTotal
	default: // fire_once keeps the latest missed slot; fire_all the latest CatchUpMax in the window
		fire = missed
		p.missed = missedTotal - int64(len(missed))
	}
	for _, m := range fire {
		p.execs = append(p.execs, s.newExecution(t, m, now, true, missedTotal))
	}
	// On-time slots: [cut, horizon].
	for n := 0; ok && !slot.After(horizon) && n < slotsPerTaskMax; n++ {
		p.execs = append(p.execs, s.newExecution(t, slot, now, false, 0))
		slot, ok = sched.Next(slot)
	}
	if len(p.execs) > 0 && p.missed > 0 {
		// The first fire after the misses carries them on its timeline.
		first := &p.execs[0]
		first.Missed = p.missed
		if first.EventData == nil {
			first.EventData = fireData(first.ScheduledFor)
		}
	}
	if ok {
		next := slot.UTC()
		p.next = &next
	}
	return p
}

// horizonEnd is how far a claim at now materialises the slots of the
// task id whose next slot is slot: up to the task's next claim instant
// plus the look-ahead. A task's claim instants are at a fixed phase of the
// claim cycle (Horizon − LookAhead): the next one is the first instant at
// that phase more than half a cycle after now, but no later than 1¼
// cycles after now (and within NearTermWindow); a phase that is further
// off puts the claim between half a cycle and a cycle after now, spread by
// how far off it is, so that tasks first due together and out of reach are
// not claimed again all at one instant. A task out of phase — created at
// any instant, or first due together with thousands of others — thus
// reaches its phase at its first claim or at its second, at the cost of
// one shorter claim, and from then on is claimed once per cycle. So tasks created one
// after another through the API are soon claimed by phase and their
// fires share batch jobs; and 5,000 tasks firing every second from one
// start are not all claimed in the same few seconds of every cycle,
// writing 60,000 executions while the deliveries wait for the CPU. A
// claim materialises at least LookAhead plus half a cycle ahead, beyond
// the default LookAheadMax, so a task just claimed is not due again at
// once even for a large instant's early claim.
//
// The phase is a whole number of seconds chosen by the slot's position
// within its second (with a 12 s cycle, the first eleventh of a second →
// 0 s, the second → 1 s, and so on: 11 groups 1 1/11 s apart), plus that
// position: the slots of tasks claimed together are then close
// together and share batch jobs (fireInserts), and each claim ends on a
// slot. A slot on a whole second, where cron slots are, takes its whole
// seconds from the task's id instead, so tasks firing at the same instants
// are spread over the cycle too.
func (s *Scheduler) horizonEnd(id string, slot, now time.Time) time.Time {
	cycle := s.cfg.Horizon - s.cfg.LookAhead
	if cycle < time.Second {
		return now.Add(s.cfg.Horizon)
	}
	off := floorMod(slot.UnixNano(), int64(time.Second))
	pick := off // where in the second, in ns
	if off == 0 {
		h := fnv.New64a()
		h.Write([]byte(id))
		pick = int64(h.Sum64() % uint64(time.Second))
	}
	// cycle − 1 groups of slot positions, each a second and its width
	// apart: evenly spread over the cycle, the last group a group's
	// spacing before the first of the next cycle (with as many groups as
	// seconds, the last and the first are adjacent: two groups' claims at
	// once every cycle).
	seconds := int64((cycle.Seconds() - 1) * float64(pick) / float64(time.Second))
	phase := seconds*int64(time.Second) + off
	n := now.UnixNano()
	lo := n + int64(cycle/2)
	hi := n + int64(min(cycle+cycle/4, max(cycle, NearTermWindow-s.cfg.LookAhead)))
	claim := lo - floorMod(lo-phase, int64(cycle)) + int64(cycle) // the first instant at the phase after lo
	if claim > hi {
		// Out of reach. The phases beyond hi, (hi, lo+cycle], are spread
		// over half a cycle from lo, less two seconds (the next claim comes
		// at the task's first slot past the end, up to a second later for
		// a task firing every second, and its phase must then be more
		// than half a cycle ahead), not all clipped to hi: tasks first
		// due together, a quarter of them out of reach, would otherwise be
		// claimed again all at once, one claim of thousands while the
		// deliveries wait for the CPU. From there the phase is at least
		// half a cycle and at most a cycle ahead, so the next claim
		// reaches it.
		spread := max(cycle/2-2*time.Second, 0)
		claim = lo + int64(float64(claim-hi)*float64(spread)/float64(lo+int64(cycle)-hi))
	}
	return time.Unix(0, claim).Add(s.cfg.LookAhead)
}

// newExecution returns a fire of t at slot. Only a late fire (and the
// first after missed slots) stores its fired event, so only those carry
// the event's data.
func (s *Scheduler) newExecution(t db.DueTask, slot, now time.Time, late bool, missedTotal int64) db.NewExecution {
	var data map[string]any
	if late {
		data = fireData(slot)
		data["late"] = true
		data["lateness_ms"] = now.Sub(slot).Milliseconds()
		data["misfire_policy"] = t.MisfirePolicy
		data["missed_slots"] = missedTotal
	}
	return db.NewExecution{TenantID: t.TenantID, ID: NewID(), TaskID: t.ID, ScheduledFor: slot, Late: late, EventData: data}
}

// renderPayloads renders the payload of each of execs, fires of the
// templated task t, into the execution (round 1, trigger schedule: a
// fire-once catch-up renders its own slot); a fire whose template fails
// gets no payload and is added to unsent, which it returns, with the
// reason.
func (s *Scheduler) renderPayloads(t db.DueTask, cals map[string]db.Calendar, execs []db.NewExecution, unsent map[string]string) map[string]string {
	if len(execs) == 0 {
		return unsent
	}
	r := s.renderer(t, cals)
	for i := range execs {
		e := &execs[i]
		b, err := r.Render(payload.Fire{
			ExecutionID: e.ID, ScheduledFor: e.ScheduledFor, Round: 1, Shard: int(e.Shard),
			ShardCount: int(e.ShardCount), Trigger: TriggerSchedule,
		})
		if err != nil {
			if unsent == nil {
				unsent = map[string]string{}
			}
			unsent[e.ID] = err.Error()
			continue
		}
		e.Payload = b
	}
	return unsent
}

// renderer returns the payload's renderer of t, a templated task: parsed
// once per task version, with its schedule (a patch of the payload, the
// name or the schedule moves the version on), because parsing a template
// costs more than rendering all the fires of a claim.
func (s *Scheduler) renderer(t db.DueTask, cals map[string]db.Calendar) payload.Renderer {
	s.mu.Lock()
	c, ok := s.cache[t.ID]
	s.mu.Unlock()
	if ok && c.version == t.Version && c.render != nil {
		return *c.render
	}
	loc := time.UTC
	sched, err := s.schedule(t, cals)
	if err == nil {
		loc = sched.Location()
	}
	r := payload.NewRenderer(true, t.Payload, loc, t.ID, t.Name).WithSchedule(sched) // a union's fires are local to their members
	if err != nil {
		return r
	}
	s.mu.Lock()
	if c, ok := s.cache[t.ID]; ok && c.version == t.Version && c.render == nil && s.renderBytes+r.Size() <= s.renderMax {
		c.render = &r // schedule cached it
		s.cache[t.ID] = c
		s.renderBytes += r.Size()
	}
	s.mu.Unlock()
	return r
}

// shardOut fans each fire out into n executions, one per shard, that
// share its slot (and its fired event's data).
func shardOut(execs []db.NewExecution, n int32) []db.NewExecution {
	out := make([]db.NewExecution, 0, len(execs)*int(n))
	for _, e := range execs {
		for i := range n {
			c := e
			c.Shard, c.ShardCount = i, n
			if i > 0 {
				c.ID, c.Missed = NewID(), 0
			}
			out = append(out, c)
		}
	}
	return out
}

// fireData is the data of a stored fired event.
func fireData(slot time.Time) map[string]any {
	return map[string]any{"scheduled_for": slot.UTC().Format(time.RFC3339Nano)}
}

// calendarsFor returns the calendars the claimed tasks exclude whose
// parsed schedule is not cached yet (a calendar's change moves its
// tasks' versions on), by id; nil, without a query, when there are none.
func (s *Scheduler) calendarsFor(ctx context.Context, tx db.Tx, due []db.DueTask) (map[string]db.Calendar, error) {
	var need map[string][]string // tenant → calendar ids
	for _, t := range due {
		if len(t.ExcludeCalendars) == 0 || s.cached(t) != nil {
			continue
		}
		if need == nil {
			need = map[string][]string{}
		}
		need[t.TenantID] = append(need[t.TenantID], t.ExcludeCalendars...)
	}
	if need == nil {
		return nil, nil
	}
	out := map[string]db.Calendar{}
	for tenant, ids := range need {
		slices.Sort(ids)
		cals, err := db.GetCalendars(ctx, tx, tenant, slices.Compact(ids), false)
		if err != nil {
			return nil, storeError(err, "load calendars")
		}
		for _, c := range cals {
			out[c.ID] = c
		}
	}
	return out, nil
}

// floorMod returns a mod b, in [0, b) for b > 0.
func floorMod(a, b int64) int64 {
	m := a % b
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return m
}

// cached returns the task's parsed schedule if the cache holds its
// current version.
func (s *Scheduler) cached(t db.DueTask) *schedule.Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cache[t.ID]; ok && c.version == t.Version {
		return c.sched
	}
	return nil
}

// schedule returns the task's parsed schedule with its calendars (from
// cals, calendarsFor), cached per task version (parsing loads the time
// zone).
func (s *Scheduler) schedule(t db.DueTask, cals map[string]db.Calendar) (*schedule.Schedule, error) {
	if sched := s.cached(t); sched != nil {
		return sched, nil
	}
	spec := schedule.Spec{Type: t.ScheduleType, Timezone: t.Timezone, RunAt: t.RunAt, StartAt: t.StartAt, EndAt: t.EndAt}
	if t.Cron != nil {
		spec.Cron = *t.Cron
	}
	if t.ScheduleType == schedule.Cron {
		spec.Dialect, spec.DSTPolicy = t.ScheduleDialect, t.DSTPolicy
	}
	if t.IntervalSeconds != nil {
		spec.IntervalSeconds = *t.IntervalSeconds
	}
	if u, ok := unionSpec(t.ScheduleUnion); ok {
		spec = u
	}
	sched, err := parseSchedule(spec, t.CreatedAt)
	if err != nil {
		return nil, err
	}
	if len(t.ExcludeCalendars) > 0 {
		// A calendar deleted since cannot be: a task that names one keeps
		// it from being deleted. (A union's column holds its members'
		// calendars too.)
		list := make([]db.Calendar, 0, len(t.ExcludeCalendars))
		for _, id := range t.ExcludeCalendars {
			if c, ok := cals[id]; ok {
				list = append(list, c)
			}
		}
		sched = sched.Excluding(scheduleCalendars(list))
	}
	s.mu.Lock()
	if len(s.cache) > 200_000 {
		clear(s.cache)
		s.renderBytes = 0
	}
	if old, ok := s.cache[t.ID]; ok && old.render != nil {
		s.renderBytes -= old.render.Size()
	}
	s.cache[t.ID] = cachedSchedule{version: t.Version, sched: sched}
	s.mu.Unlock()
	return sched, nil
}
