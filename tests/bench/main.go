// Command bench measures ax end to end on this machine: it builds the ax
// binary, starts a throwaway durable PostgreSQL cluster (fsync on) and a
// webhook receiver on loopback, drives ax through its public API and prints
// how late and how completely the webhooks arrive.
//
//	go run ./tests/bench -scenario precision -tasks 1000 -duration 30s
//	go run ./tests/bench -scenario burst -tasks 10000
//	go run ./tests/bench -scenario all -json tmp/bench.json
//
// Scenarios (each gets a fresh database and a fresh ax process on one shared
// cluster):
//
//   - precision: N interval tasks (interval 1 s, start times staggered over
//     the interval), so N fires/s. After a warm-up, every slot in the
//     measurement window is expected exactly once; lateness = arrival at the
//     receiver − X-Ax-Scheduled-For. Target: p99 ≤ 50 ms at 1,000 fires/s.
//   - sustained: precision with N = 5,000 by default.
//   - sustained-10k: precision with N = 10,000 (10,000 fires/s); in the
//     "all" run its window is at most 10 s. Target: every slot, p99 ≤
//     100 ms (as sustained's and deployed-sustained's).
//   - templated: precision (1,000 fires/s by default) of tasks whose
//     payload is a template (business dates in Asia/Shanghai, the slot, the
//     execution id), rendered by the scheduler for every fire; its lateness
//     compares with precision's (templated.go).
//   - deployed, deployed-sustained: precision and sustained as a user
//     deploys ax: ax reaches PostgreSQL over TCP on 127.0.0.1 (not its
//     Unix socket), the tasks are created through the API without start_at
//     (their slots are anchored on their creation times) and nothing is
//     ANALYZEd by hand.
//   - burst: N one-shot tasks (default 10,000) due at the same instant,
//     created beforehand; time from that instant until the last delivery.
//     Target: all delivered within 3 s.
//   - burst-100k: burst with N = 100,000; not part of "all" (creating the
//     tasks alone takes minutes). Target: the last delivery ≤ 15 s after
//     the instant, and no 5-second window after the instant delivering at
//     less than half the first window's rate (no cliff).
//   - idle: N tasks (default 1,000,000) none due for an hour; ax CPU%, RSS,
//     PostgreSQL statements/s and CPU% while nothing is due.
//   - idle-waits: N workflow runs (default 10,000) waiting on events
//     (wait_for, timeout 24 h), started through the API; the idle
//     window measured on the same ax before the runs (the baseline) and
//     while they wait, and the difference. Target: ax CPU within 0.5% of
//     a core, statements/s and their execution time not growing; then
//     one event per 1,000 keys, whose runs must advance. Not part of "all" (two windows and the
//     triggers take longer than its budget) (idlewaits.go).
//   - api: POST /v1/tasks and GET /v1/executions at fixed concurrency.
//   - ceiling: River alone (no ax) working no-op jobs on the same cluster:
//     the throughput ceiling of the queue on this box.
//   - callbacks: N executions (default 10,000) of a task in callback
//     completion mode, accepted with a 202 and left waiting; ax CPU%, RSS
//     and PostgreSQL transactions/s while they wait, then complete-to-
//     succeeded latency when they are completed at 1,000/s with their
//     callback tokens (-complete-rate, e.g. 2000).
//   - hung: N one-shot fires of one tenant (default 450; 450 a second, so
//     in the main lane) to an endpoint that accepts and never answers
//     (timeout 60 s), beside another tenant's 20 fires/s to the fast
//     receiver; that tenant's lateness during the hang. Target: p99 ≤
//     100 ms, no slot lost, with 450 and with 1,000 (-tasks 1000) hung.
//   - maxconc, ratelimit: an endpoint's max_concurrency (5, answering in
//     200 ms, 2,000 fires due at one instant) and rate_limit_per_second
//     (50, 4,000 fires due over 10 s) with ax as two replicas on one
//     database; the most requests in flight at the receiver and the
//     throughput, the requests per wall-clock second (limits.go).
//   - events: one task whose schedule is an event, and N events a second
//     (default 1,000, -tasks) posted through POST /v1/events for the
//     window; latency = the webhook's arrival − the POST's answer, each
//     event delivered once. Target: p99 ≤ 50 ms (events.go).
//
// Each database of the other scenarios is ANALYZEd just before measuring
// (-analyze), as autovacuum
// does within a minute on a running server. Every scenario records the CPU
// used by ax, PostgreSQL, this command and everything else on the machine,
// and the disk's fdatasync rate, because both move the figures.
//
// Everything listens on and talks to 127.0.0.1 only. Every wait has a
// deadline; the command stops ax and PostgreSQL and removes its temporary
// directory on the way out (SIGINT included). It is a measurement, never a
// test: it exits non-zero only when it could not measure, and reports
// missed targets in its output (docs/benchmarks.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	scenario    string
	tasks       int
	duration    time.Duration
	warmup      time.Duration
	grace       time.Duration
	interval    int
	stagger     bool
	lead        time.Duration
	concurrency int
	jsonPath    string
	axPath      string
	keep        bool
	verbose     bool
	timeout     time.Duration
	poolConns   int
	topQueries  int
	waits       bool
	env         multiFlag
	pgSettings  multiFlag
	label       string
	quietWait   time.Duration
	analyze     bool
	deployed    string
	cpuProfile  string
	axProfile   string
	receiver    string
	history     int
	// completeRate is the callbacks scenario's completions per second.
	completeRate int
	// trend is the width of the precision/sustained trend buckets.
	trend time.Duration
}

// multiFlag is a repeatable KEY=VALUE flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	*m = append(*m, v)
	return nil
}

// scenarios are the scenarios of "all", in their order.
var scenarios = []string{
	"precision", "burst", "sustained", "sustained-10k", "deployed", "deployed-sustained", "idle", "api", "ceiling", "retention",
	"workflow", "diamond", "shards", "callbacks", "noisy", "hung", "maxconc", "ratelimit", "templated", "events",
}

// extraScenarios run only when named: each takes too long for "all".
var extraScenarios = []string{"burst-100k", "idle-waits"}

func main() {
	var o options
	flag.StringVar(&o.scenario, "scenario", "precision",
		strings.Join(slices.Concat(scenarios, extraScenarios), "|")+", a comma-separated list, or all (every one but "+
			strings.Join(extraScenarios, ", ")+")")
	flag.IntVar(&o.tasks, "tasks", 0, "number of tasks (0: the scenario's default: precision 1000, sustained 5000, "+
		"sustained-10k 10000, burst 10000, burst-100k 100000, idle 1000000, idle-waits 10000 runs, ceiling 20000 jobs per configuration, noisy 20000 of the noisy tenant, hung 450 hung deliveries, "+
		"maxconc 2000, ratelimit 4000, templated 1000)")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "measurement window (precision, sustained, idle, each of idle-waits' two, and each api phase)")
	flag.DurationVar(&o.warmup, "warmup", 5*time.Second, "discarded warm-up after the first slot (precision, sustained)")
	flag.DurationVar(&o.grace, "grace", 10*time.Second, "how long after the window a slot may still arrive before it counts as missing")
	flag.IntVar(&o.interval, "interval", 1, "interval_seconds of the precision/sustained tasks (fires/s = tasks/interval)")
	flag.BoolVar(&o.stagger, "stagger", true, "spread the precision/sustained tasks' slots evenly over the interval "+
		"(false: all N fire at the same instant every interval)")
	flag.DurationVar(&o.lead, "lead", 0, "burst: how far ahead of now the shared run_at is (0: from the task count)")
	flag.IntVar(&o.concurrency, "concurrency", 32, "concurrent API clients (task creation, api scenario)")
	flag.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	flag.StringVar(&o.axPath, "ax", "", "use this ax binary instead of building ./cmd/server")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (PostgreSQL data, ax logs)")
	flag.BoolVar(&o.verbose, "v", false, "progress details and ax's log on stderr")
	flag.DurationVar(&o.timeout, "timeout", 45*time.Minute, "give up after this long")
	flag.IntVar(&o.poolConns, "pool-max-conns", 0, "set pool_max_conns on ax's database URL (0: ax's default)")
	flag.IntVar(&o.topQueries, "top-queries", 0, "print the N statements with the most total time per scenario (pg_stat_statements)")
	flag.BoolVar(&o.waits, "waits", false, "sample what PostgreSQL's active sessions wait on during the window (pg_stat_activity, every 100 ms); with -keep, "+
		"each sample is also written, with its time and the cluster's background work (autovacuum, checkpoints, ANALYZE), to <scenario>.waits.log")
	flag.DurationVar(&o.quietWait, "quiet-wait", 0, "before each scenario, wait up to this long for the machine to be idle "+
		"(other processes under 20% of a CPU over 3 s); the figures are meaningless on a busy machine")
	flag.BoolVar(&o.analyze, "analyze", true, "ANALYZE the database just before measuring (precision: after the warm-up; burst: "+
		"after creating the tasks), as autovacuum does within a minute on a running server; false measures a freshly created "+
		"database, whose planner has no statistics yet")
	flag.StringVar(&o.deployed, "deployed", strings.Join(deployedParts, ","), "deployed, deployed-sustained: which of their "+
		"differences from precision and sustained to keep, a comma-separated subset of "+strings.Join(deployedParts, ", ")+
		" (PostgreSQL over TCP; tasks without start_at, their slots anchored on their creation times; no ANALYZE by hand); "+
		"the rest as precision has them (the Unix socket, staggered start_at, -analyze)")
	flag.StringVar(&o.label, "label", "", "a note recorded with the results, e.g. what -ax was built from")
	flag.Var(&o.pgSettings, "pg", "extra PostgreSQL setting name=value for experiments, e.g. synchronous_commit=off (repeatable)")
	flag.Var(&o.env, "env", "extra KEY=VALUE for ax's environment, e.g. a tuning variable (repeatable)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write this command's own CPU profile (the receiver, the load) to this file")
	flag.StringVar(&o.axProfile, "ax-cpuprofile", "", "write ax's CPU profile over each precision/sustained window and each burst "+
		"(from the instant to the last delivery) to this file, the scenario's name before its extension (ax serves Go's profiles "+
		"on a loopback port of its own: AX_DEBUG_ADDR)")
	flag.DurationVar(&o.trend, "trend", 5*time.Second, "precision, sustained: the width of the lateness trend's buckets (e.g. 1s to find a short episode)")
	flag.IntVar(&o.completeRate, "complete-rate", 1000, "callbacks: completions per second through the API")
	flag.IntVar(&o.history, "history", 3_000_000, "retention: finished executions older than the retention to seed before "+
		"measuring (enough that the sweep works at full speed through the window)")
	flag.StringVar(&o.receiver, "receiver", receiverFast, "the webhook receiver's HTTP server: "+receiverFast+" or "+receiverNetHTTP+
		" (it shares the machine with ax; see receiver.go)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "bench: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.trend <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -trend must be positive")
		os.Exit(2)
	}
	for _, part := range strings.Split(o.deployed, ",") {
		if part = strings.TrimSpace(part); part != "" && !slices.Contains(deployedParts, part) {
			fmt.Fprintf(os.Stderr, "bench: -deployed: unknown part %q (want a subset of %s)\n", part, strings.Join(deployedParts, ", "))
			os.Exit(2)
		}
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(2)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	err := run(ctx, o)
	cancel()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		pprof.StopCPUProfile()
		os.Exit(1) //nolint:gocritic // the profile is stopped above
	}
}

func (o options) list() ([]string, error) {
	if o.scenario == "all" {
		return scenarios, nil
	}
	var out []string
	for s := range strings.SplitSeq(o.scenario, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(scenarios, s) && !slices.Contains(extraScenarios, s) {
			return nil, fmt.Errorf("unknown scenario %q (known: %s, all)", s, strings.Join(slices.Concat(scenarios, extraScenarios), ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

func (o options) validate() error {
	switch {
	case o.tasks < 0:
		return errors.New("-tasks must not be negative")
	case o.duration <= 0 || o.warmup < 0 || o.grace <= 0:
		return errors.New("-duration and -grace must be positive, -warmup not negative")
	case o.interval < 1:
		return errors.New("-interval must be at least 1 (second)")
	case o.concurrency < 1:
		return errors.New("-concurrency must be at least 1")
	case o.completeRate < 1:
		return errors.New("-complete-rate must be at least 1")
	}
	return nil
}

func run(ctx context.Context, o options) error {
	list, err := o.list()
	if err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	st, err := newStack(ctx, o)
	if err != nil {
		return err
	}
	defer st.close()

	rep := report{
		StartedAt: time.Now().UTC(),
		Host:      hostInfo(ctx, st),
		AxEnv:     st.publicEnv(),
	}
	var failed []string
	for _, name := range list {
		if ctx.Err() != nil {
			break
		}
		st.logf("=== scenario %s", name)
		quiet := waitQuiet(ctx, o.quietWait)
		fsyncs := fsyncRate(st.dir, time.Second)
		loopback := loopbackRate(ctx, time.Second)
		res, err := runScenario(ctx, st, o, name)
		if err != nil {
			failed = append(failed, name)
			fmt.Fprintf(os.Stderr, "bench: scenario %s: %v\n", name, err)
			if res == nil {
				res = &result{Scenario: name}
			}
			res.Failure = err.Error()
		}
		res.FsyncPerSecond = math.Round(fsyncs)
		res.LoopbackPerSecond = math.Round(loopback)
		if quiet != "" {
			res.Notes = append(res.Notes, quiet)
		}
		rep.Results = append(rep.Results, *res)
	}
	rep.FinishedAt = time.Now().UTC()
	rep.print(os.Stdout)
	if o.jsonPath != "" {
		if err := rep.writeJSON(o.jsonPath); err != nil {
			return err
		}
		fmt.Printf("\nwrote %s\n", o.jsonPath)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("stopped early: %w", context.Cause(ctx))
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not measure: %s", strings.Join(failed, ", "))
	}
	return nil
}

func runScenario(ctx context.Context, st *stack, o options, name string) (*result, error) {
	n := o.tasks
	switch name {
	case "precision":
		return precision(ctx, st, o, name, orInt(n, 1000), benchShape(o))
	case "sustained":
		return precision(ctx, st, o, name, orInt(n, 5000), benchShape(o))
	case "sustained-10k":
		if o.scenario == "all" {
			o.duration = min(o.duration, sustained10kAllWindow)
		}
		return precision(ctx, st, o, name, orInt(n, 10_000), benchShape(o))
	case "deployed":
		return precision(ctx, st, o, name, orInt(n, 1000), deployedShape(o))
	case "deployed-sustained":
		return precision(ctx, st, o, name, orInt(n, 5000), deployedShape(o))
	case "burst":
		return burst(ctx, st, o, name, orInt(n, 10000), 1)
	case "burst-100k":
		return burst(ctx, st, o, name, orInt(n, 100_000), 1)
	case "shards":
		return burst(ctx, st, o, name, orInt(n, 100), 50)
	case "idle":
		return idle(ctx, st, o, orInt(n, 1_000_000))
	case "idle-waits":
		return idleWaits(ctx, st, o, orInt(n, 10_000))
	case "api":
		return apiScenario(ctx, st, o)
	case "ceiling":
		return ceiling(ctx, st, o, orInt(n, 20_000))
	case "retention":
		return retention(ctx, st, o, orInt(n, 1000))
	case "workflow":
		return workflowScenario(ctx, st, o, name, orInt(n, 500), fanDAG, 0)
	case "diamond":
		return workflowScenario(ctx, st, o, name, orInt(n, 1000), diamondDAG, 25)
	case "callbacks":
		return callbacks(ctx, st, o, orInt(n, 10_000), o.completeRate)
	case "noisy":
		return noisy(ctx, st, o, orInt(n, 20_000))
	case "hung":
		return hung(ctx, st, o, orInt(n, 450))
	case "maxconc":
		return maxconc(ctx, st, o, orInt(n, 2000))
	case "ratelimit":
		return ratelimit(ctx, st, o, orInt(n, 4000))
	case "templated":
		return templated(ctx, st, o, orInt(n, 1000))
	case "events":
		return eventsScenario(ctx, st, o, orInt(n, 1000))
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// sustained10kAllWindow is sustained-10k's longest window in the "all"
// run, which keeps make bench's time in bounds; named alone, it measures
// for -duration.
const sustained10kAllWindow = 10 * time.Second

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// waitQuiet waits up to d for the machine to be nearly idle and, when it
// never was, says so.
func waitQuiet(ctx context.Context, d time.Duration) string {
	if d <= 0 {
		return ""
	}
	deadline := time.Now().Add(d)
	var cores float64
	for {
		b0, t0 := machineBusy(), time.Now()
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(3 * time.Second):
		}
		cores = float64(machineBusy()-b0) / clockTicks / time.Since(t0).Seconds()
		if cores < 0.2 {
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("the machine was still busy (%.0f%% of a CPU) after waiting %s for it to be idle", cores*100, d)
		}
	}
}
