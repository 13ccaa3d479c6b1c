package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/axhq/ax/service/metrics"
)

// startLoops runs loops on a Runner of their own until the returned stop
// is called (or the test ends).
func startLoops(t *testing.T, loops ...Loop) (stop func()) {
	t.Helper()
	r := NewRunner(RunnerConfig{Logger: testLogger()})
	r.Add(loops...)
	r.Start(context.Background())
	var once sync.Once
	stop = func() { once.Do(func() { r.Stop(context.Background()) }) }
	t.Cleanup(stop)
	return stop
}

// journal records what happened, in order, from several goroutines.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// The runner tests are not parallel: goleak sees every goroutine of the
// process, and the package's parallel tests wait until these are done.

// TestRunnerStartsInOrderAndStopsInReverse: steps and loops start in
// registration order — a loop once the steps before it are done — and
// stop in the reverse order, each loop waited for (its pass in progress
// ends with its context) before the step before it is undone. No
// goroutine of the runner outlives Stop.
func TestRunnerStartsInOrderAndStopsInReverse(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var j journal
	step := func(name string) Step {
		return Step{
			Name:  name,
			Start: func(context.Context) error { j.add("start " + name); return nil },
			Stop:  func(context.Context) error { j.add("stop " + name); return nil },
		}
	}
	running := make(chan string, 3)
	// loop's first pass says it runs, then lasts until its loop is stopped.
	loop := func(name string) Loop {
		return Loop{Name: name, Every: time.Hour, Pass: func(ctx context.Context) (time.Duration, error) {
			j.add("start " + name)
			running <- name
			<-ctx.Done()
			j.add("stop " + name)
			return 0, ctx.Err()
		}}
	}
	var logs syncWriter
	r := NewRunner(RunnerConfig{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	r.AddStep(step("schema"))
	r.Add(loop("heartbeat"))
	r.AddStep(step("river"))
	r.Add(loop("scheduler"), loop("retention"))
	r.Start(context.Background())
	for range 3 {
		<-running
	}
	r.Stop(context.Background())
	r.Stop(context.Background()) // a second Stop does nothing
	// A loop's first pass runs in its own goroutine: the start order is
	// the order of the runner's log lines; a step waits for nothing.
	var started []string
	for line := range strings.Lines(logs.String()) {
		var l struct{ Msg, Loop, Step string }
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		switch l.Msg {
		case "background loop started":
			started = append(started, "loop "+l.Loop)
		case "background step done":
			started = append(started, "step "+l.Step)
		}
	}
	require.Equal(t, []string{"step schema", "loop heartbeat", "step river", "loop scheduler", "loop retention"}, started)
	require.ElementsMatch(t, []string{"start schema", "start heartbeat", "start river", "start scheduler", "start retention"},
		j.all()[:5])
	require.Equal(t, []string{"stop retention", "stop scheduler", "stop river", "stop heartbeat", "stop schema"}, j.all()[5:])
}

// TestRunnerLoopGoesOnAfterAPanic: a pass that panics or fails is logged
// with its loop's name and counted, and the loop goes on; a success
// records the time of the last success and logs the recovery.
func TestRunnerLoopGoesOnAfterAPanic(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var logs syncWriter
	m := metrics.New(nil)
	// At debug: the failure after the panic is the second of a run.
	r := NewRunner(RunnerConfig{
		Logger:  slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: m,
	})
	succeeded := make(chan struct{})
	pass := 0
	r.Add(Loop{Name: "flaky", Every: time.Millisecond, Pass: func(context.Context) (time.Duration, error) {
		pass++
		switch pass {
		case 1:
			panic("a bug in a pass")
		case 2:
			return 0, errors.New("the database is away")
		case 3:
			return time.Millisecond, nil
		case 4: // the third pass was counted
			close(succeeded)
		}
		return time.Hour, nil
	}})
	r.Start(context.Background())
	<-succeeded
	r.Stop(context.Background())

	require.GreaterOrEqual(t, testutil.ToFloat64(m.LoopPasses.WithLabelValues("flaky")), 3.0)
	require.InDelta(t, 2, testutil.ToFloat64(m.LoopErrors.WithLabelValues("flaky")), 0, "the panic and the error")
	require.InDelta(t, 1, testutil.ToFloat64(m.LoopPanics.WithLabelValues("flaky")), 0)
	require.Positive(t, testutil.ToFloat64(m.LoopLastSuccess.WithLabelValues("flaky")))
	out := logs.String()
	for _, want := range []string{
		`"msg":"background loop started","loop":"flaky"`,
		`"msg":"background loop pass panicked; the loop goes on after its interval","loop":"flaky","panic":"a bug in a pass"`,
		`"msg":"background loop pass failed","loop":"flaky","error":"the database is away"`,
		`"msg":"background loop recovered","loop":"flaky","failed_passes":2`,
		`"msg":"background loop stopped","loop":"flaky"`,
	} {
		require.Contains(t, out, want)
	}
}

// TestRunnerWakesALoop: a loop whose interval is an hour runs its next
// pass when its Wake channel receives.
func TestRunnerWakesALoop(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	wake := make(chan struct{}, 1)
	passes := make(chan struct{}, 2)
	stop := startLoops(t, Loop{Name: "woken", Every: time.Hour, Wake: wake, Pass: func(context.Context) (time.Duration, error) {
		passes <- struct{}{}
		return 0, nil
	}})
	<-passes // the pass at start
	wake <- struct{}{}
	<-passes
	stop()
}

// TestRunnerStepHoldsBackWhatFollows: a step that keeps failing with a
// Retry holds back the loops after it, not the caller, until Stop; a step
// that fails without a Retry ends the start sequence. Either way Stop
// undoes what was done, and only that.
func TestRunnerStepHoldsBackWhatFollows(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, retry := range []time.Duration{time.Millisecond, 0} {
		var j journal
		tried := make(chan struct{}, 100)
		r := NewRunner(RunnerConfig{Logger: testLogger()})
		r.AddStep(Step{
			Name:  "replica",
			Start: func(context.Context) error { j.add("start replica"); return nil },
			Stop:  func(context.Context) error { j.add("stop replica"); return nil },
		})
		r.AddStep(Step{Name: "schema", Retry: retry, Start: func(context.Context) error {
			notify(tried)
			return errors.New("not migrated")
		}, Stop: func(context.Context) error { j.add("stop schema"); return nil }})
		r.Add(Loop{Name: "scheduler", Every: time.Hour, Pass: func(context.Context) (time.Duration, error) {
			j.add("pass scheduler")
			return 0, nil
		}})
		r.Start(context.Background())
		<-tried
		if retry > 0 {
			<-tried // tried again
		}
		r.Stop(context.Background())
		require.Equal(t, []string{"start replica", "stop replica"}, j.all(), "retry %s", retry)
	}
}

// TestRunnerStopBeforeStart: Stop before Start does nothing, and the
// runner does not start afterwards.
func TestRunnerStopBeforeStart(t *testing.T) {
	r := NewRunner(RunnerConfig{})
	r.Add(Loop{Name: "never", Every: time.Hour, Pass: func(context.Context) (time.Duration, error) {
		panic("never runs")
	}})
	r.Stop(context.Background())
	require.Panics(t, func() { r.Start(context.Background()) })
}

// TestRunnerRefusesBadRegistrations: a loop needs a name, an interval and
// a pass; a name is registered once.
func TestRunnerRefusesBadRegistrations(t *testing.T) {
	t.Parallel()
	pass := func(context.Context) (time.Duration, error) { return 0, nil }
	r := NewRunner(RunnerConfig{})
	require.Panics(t, func() { r.Add(Loop{Every: time.Second, Pass: pass}) })
	require.Panics(t, func() { r.Add(Loop{Name: "x", Pass: pass}) })
	require.Panics(t, func() { r.Add(Loop{Name: "x", Every: time.Second}) })
	require.Panics(t, func() { r.AddStep(Step{Name: "s"}) })
	r.Add(Loop{Name: "x", Every: time.Second, Pass: pass})
	require.Panics(t, func() { r.AddStep(Step{Name: "x", Start: func(context.Context) error { return nil }}) })
}

// syncWriter is an io.Writer safe to read while loops write to it.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
