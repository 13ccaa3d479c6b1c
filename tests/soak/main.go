// Command soak runs ax under faults for a while and then checks, from the
// database and the webhook receiver's log, that nothing was lost or fired
// twice (make soak).
//
//	go run ./tests/soak -duration 10m
//	go run ./tests/soak -scenario burst-kill
//
// Scenario soak (the default): three ax replicas on one durable PostgreSQL
// cluster, with interval, cron and one-shot tasks, tasks whose receiver
// fails their first two attempts (retries), and pauses and resumes through
// the API. For -duration a nemesis picks a fault every -nemesis-every or
// so: SIGKILL, SIGTERM or SIGSTOP (SIGCONT later) of a random replica, which
// is started again; a fast or an immediate shutdown of PostgreSQL, started
// again; a receiver that is slow, answers 5xx to everything, resets
// connections, or loses its answers after processing the request (so ax
// sends it again). At most two replicas are down or stopped at once. Then
// every fault is healed, ax runs quietly for -drain, every task is paused,
// the unfinished executions are waited for, and the checker (in the manner
// of Jepsen's queue checker) reads the database and the receiver's log:
//
//   - every due slot has exactly one round-1 execution (a slot near a pause
//     or resume of its task may have none: the change raced its fire);
//   - every execution is final;
//   - every succeeded execution was received at least once;
//   - no request arrived for an execution cancelled before it started;
//   - every request for a slot carries the same idempotency key
//     (Idempotency-Key = webhook-id = X-Ax-Execution-Id, and the headers
//     name the execution's task and slot); none arrived more than 1 s early.
//
// After each SIGKILL it also measures how long ax took to resume every
// delivery the killed replica held (River jobs it was running: a new
// attempt began, or the execution is final) and to finish them.
//
// Scenario burst-kill: two replicas, -burst one-shot tasks due at one
// instant; -kill-after that instant the replica running the most delivery
// jobs gets SIGKILL. It prints how long after the kill every delivery the
// replica held was resumed and delivered (target: within 30 s), then runs
// the same checker.
//
// The command exits 1 on any loss or violation, 2 when it could not run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type options struct {
	scenario     string
	duration     time.Duration
	drain        time.Duration
	nemesisEvery time.Duration
	seed         uint64
	burst        int
	killAfter    time.Duration
	axPath       string
	keep         bool
	verbose      bool
	env          multiFlag
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

func main() {
	var o options
	flag.StringVar(&o.scenario, "scenario", "soak", "soak or burst-kill")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "soak: how long the nemesis runs")
	flag.DurationVar(&o.drain, "drain", 60*time.Second, "soak: quiet time after the faults, every replica up, before the check")
	flag.DurationVar(&o.nemesisEvery, "nemesis-every", 12*time.Second, "soak: mean time between two faults")
	flag.Uint64Var(&o.seed, "seed", 0, "random seed of the workload and the nemesis (0: from the clock; printed)")
	flag.IntVar(&o.burst, "burst", 2000, "burst-kill: one-shot tasks due at the same instant")
	flag.DurationVar(&o.killAfter, "kill-after", 600*time.Millisecond, "burst-kill: SIGKILL this long after the instant")
	flag.StringVar(&o.axPath, "ax", "", "use this ax binary instead of building ./cmd/server")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (PostgreSQL data, each ax process's log)")
	flag.BoolVar(&o.verbose, "v", false, "log every fault and step on stderr")
	flag.Var(&o.env, "env", "extra KEY=VALUE for ax's environment, e.g. AX_REPLICA_DEAD_AFTER=5s (repeatable)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "soak: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano()) // a seed
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ok, err := run(ctx, o)
	stop()
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	case !ok:
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (bool, error) {
	switch {
	case o.duration <= 0 || o.drain < 0 || o.nemesisEvery <= 0:
		return false, errors.New("-duration and -nemesis-every must be positive, -drain not negative")
	case o.burst < 1:
		return false, errors.New("-burst must be at least 1")
	}
	e, err := newEnv(ctx, o)
	if err != nil {
		return false, err
	}
	defer e.close()
	fmt.Printf("soak: scenario %s, seed %d\n", o.scenario, o.seed)
	switch o.scenario {
	case "soak":
		return soak(ctx, e)
	case "burst-kill":
		return burstKill(ctx, e)
	}
	return false, fmt.Errorf("unknown scenario %q (soak, burst-kill)", o.scenario)
}
