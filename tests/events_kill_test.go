package tests

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestEventsKill posts events, each with its own dedup_key, to replica A
// of two and kills A with SIGKILL mid-stream; every post that got no
// answer (a connection error) is sent again, with its dedup_key, to
// replica B. Each event's tasks fire exactly once: none is lost (an event
// is stored with its fires in one transaction, so a post A had not
// committed left nothing and its retry fires), none twice (the retry of a
// post A had committed answers A's event and fires nothing again), and
// the deliveries A had in flight are finished by B.
func TestEventsKill(t *testing.T) {
	t.Parallel()
	const (
		events    = 300
		workers   = 4
		killAfter = 100 // answers from A before it is killed
		name      = "kill.ready"
	)
	env := map[string]string{
		"AX_DATABASE_URL":          dbtest.URL(t),
		"AX_JWT_SECRET":            "events-kill-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
		// B declares A dead 3 s after its last heartbeat and resumes the
		// deliveries A was running; River's rescuer is the fallback.
		"AX_REPLICA_DEAD_AFTER":      "3s",
		"AX_JOB_TIMEOUT":             "5s",
		"AX_RESCUE_STUCK_JOBS_AFTER": "6s",
	}
	// Each delivery is held a little, so that A has some in flight.
	recv := newEventReceiver(t, 250*time.Millisecond)
	a, b := startAx(t, env), startAx(t, env)
	tok := cliToken(t, env, "evkill", eventsScope)
	ep := apiPost(t, b.base, tok, "/v1/endpoints", map[string]any{"name": "recv", "url": recv.srv.URL + "/hook"})
	tasks := createEventTasks(t, b.base, tok, ep["id"].(string), name)

	// The posters post to A; a post without an answer goes to B with its
	// dedup_key. The last third is fed only once A is dead, so that posts
	// certainly fail over; those in flight at the kill are the test.
	type outcome struct {
		first, retry eventAnswer
		retried      bool
	}
	outcomes := make([]outcome, events)
	var answered atomic.Int32
	kill, killed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var killOnce sync.Once
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				key := fmt.Sprintf("kill-%d", i)
				o := outcome{first: postEvent(t.Context(), a.base, tok, name, i, key)}
				if o.first.err != nil {
					o.retried = true
					o.retry = postEvent(t.Context(), b.base, tok, name, i, key)
				} else if answered.Add(1) >= killAfter {
					killOnce.Do(func() { close(kill) })
				}
				outcomes[i] = o
			}
		})
	}
	go func() {
		defer close(done)
		defer wg.Wait()
		defer close(next)
		for i := range events {
			if i == events*2/3 {
				select {
				case <-killed:
				case <-t.Context().Done():
					return
				}
			}
			select {
			case next <- i:
			case <-t.Context().Done():
				return
			}
		}
	}()
	select {
	case <-kill:
	case <-time.After(2 * time.Minute): // the feeder waits for the kill: not to hang
		t.Fatalf("A answered %d posts, fewer than %d", answered.Load(), killAfter)
	}
	a.stop(t, syscall.SIGKILL)
	close(killed)
	<-done

	byID := map[string]int{} // event id → index
	var retried, inFlight, answeredByA int
	for i, o := range outcomes {
		final := o.first
		if o.retried {
			retried++
			final = o.retry
			if !errors.Is(o.first.err, syscall.ECONNREFUSED) {
				// Not refused: the post was under way when A died.
				inFlight++
				t.Logf("event %d: A gave no answer (%v); B answered %d %s", i, o.first.err, o.retry.code, o.retry.id)
			}
		} else {
			answeredByA++
		}
		require.NoError(t, final.err, "event %d", i)
		require.Equal(t, http.StatusAccepted, final.code, "event %d: %s", i, final.body)
		require.Equal(t, len(tasks), final.tasks, "event %d: matched tasks", i)
		if other, ok := byID[final.id]; ok {
			t.Fatalf("events %d and %d (two dedup keys) got one id %s", other, i, final.id)
		}
		byID[final.id] = i
	}
	require.GreaterOrEqual(t, retried, events-events*2/3, "the posts fed after the kill went to B")

	// A retry that B answered with an earlier event's answer is a post A
	// had committed when it died: one under way, never one refused.
	code, _, metrics, err := send(t.Context(), http.MethodGet, b.base+"/metrics", "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	m := regexp.MustCompile(`(?m)^ax_events_total\{outcome="duplicate"\} (\d+)$`).FindSubmatch(metrics)
	committed := 0
	if m != nil {
		committed, err = strconv.Atoi(string(m[1]))
		require.NoError(t, err)
	}
	require.LessOrEqual(t, committed, inFlight, "retries answered with A's event")

	// B answers a post A answered with A's event: A's commits stand.
	for i, o := range outcomes {
		if !o.retried && i%10 == 0 {
			again := postEvent(t.Context(), b.base, tok, name, i, fmt.Sprintf("kill-%d", i))
			require.NoError(t, again.err)
			require.Equal(t, http.StatusAccepted, again.code, again.body)
			require.Equal(t, o.first.id, again.id, "event %d posted again to B", i)
		}
	}

	// B declares A dead and resumes what A was delivering (≈ 5 s), or
	// River's rescuer does; a generous bound for a busy machine.
	execs := waitEventExecutions(t, b.base, tok, tasks, events*fires(tasks), 2*time.Minute)
	checkEventDeliveries(t, recv, tasks, byID, execs, true)
	checkEventList(t, b.base, tok, name, byID, tasks)
	var resent int
	for _, x := range execs {
		if x["attempts"].(float64) > 1 {
			resent++
		}
	}
	t.Logf("%d events: %d answered by A, %d retried on B (%d of them under way when A died, %d of those committed by A); "+
		"%d of %d executions took more than one attempt (in flight on A)",
		events, answeredByA, retried, inFlight, committed, resent, len(execs))
	b.stop(t, syscall.SIGTERM)
}
