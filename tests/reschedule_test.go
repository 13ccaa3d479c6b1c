package tests

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// slotReceiver records which execution delivered which slot.
type slotReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[time.Time]map[string]bool // slot → execution ids
}

func newSlotReceiver(t *testing.T) *slotReceiver {
	t.Helper()
	r := &slotReceiver{got: map[time.Time]map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		slot, err := time.Parse(time.RFC3339Nano, req.Header.Get("X-Ax-Scheduled-For"))
		if err == nil {
			r.mu.Lock()
			if r.got[slot.UTC()] == nil {
				r.got[slot.UTC()] = map[string]bool{}
			}
			r.got[slot.UTC()][req.Header.Get("X-Ax-Execution-Id")] = true
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// TestReschedulesWhileFiring changes a firing task's schedule 24 times
// through the API, about once a second: first from an interval of 1 s
// anchored on a whole second to the cron of every second (the same
// instants), then back and forth between every even second and every
// second. Every second the schedule in force fires is delivered exactly
// once (or counted missed), no other second is, and no slot is delivered
// by two executions. Seconds within a moment of a change, when either
// schedule may be the one in force, are only checked for the last.
func TestReschedulesWhileFiring(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"AX_DATABASE_URL":          dbtest.URL(t),
		"AX_JWT_SECRET":            "reschedule-test-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	recv := newSlotReceiver(t)
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "slots", "url": recv.srv.URL + "/hook"})

	anchor := time.Now().UTC().Truncate(time.Second).Add(-time.Hour).Format(time.RFC3339)
	interval := map[string]any{"type": "interval", "interval_seconds": 1, "start_at": anchor}
	everySecond := map[string]any{"type": "cron", "cron": "* * * * * *"}
	evenSeconds := map[string]any{"type": "cron", "cron": "*/2 * * * * *"}
	task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
		"name": "rescheduled", "endpoint_id": ep["id"], "schedule": interval,
	})
	id := task["id"].(string)

	// change is one PATCH: the new schedule is in force from some moment
	// between sent and answered.
	type change struct {
		sent, answered time.Time
		fires          func(time.Time) bool
	}
	all := func(time.Time) bool { return true }
	even := func(s time.Time) bool { return s.Second()%2 == 0 }
	changes := []change{{fires: all}} // the task's creation
	time.Sleep(2 * time.Second)
	for i := range 24 {
		spec, fires := everySecond, all
		switch {
		case i == 0:
		case i%2 == 1:
			spec, fires = evenSeconds, even
		default:
			spec = interval
		}
		c := change{sent: time.Now(), fires: fires}
		apiDo(t, http.MethodPatch, p.base+"/v1/tasks/"+id, tok, map[string]any{"schedule": spec}, http.StatusOK)
		c.answered = time.Now()
		changes = append(changes, c)
		time.Sleep(800*time.Millisecond + rand.N(500*time.Millisecond)) // test timing jitter
	}
	last := changes[len(changes)-1]
	end := last.answered.Add(4 * time.Second).Truncate(time.Second)
	time.Sleep(time.Until(end))

	// The task's executions by slot, once every live one up to end is
	// final (delivered: the receiver answers 200).
	type execution struct {
		id, state, lastError string
		finished             time.Time
	}
	var bySlot map[time.Time][]execution
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		page, err := getJSON(t.Context(), p.base, tok, "/v1/executions?limit=500&task_id="+id)
		if !assert.NoError(c, err) {
			return
		}
		got := map[time.Time][]execution{}
		for _, it := range page["items"].([]any) {
			e := it.(map[string]any)
			slot, err := time.Parse(time.RFC3339Nano, e["scheduled_for"].(string))
			if !assert.NoError(c, err) {
				return
			}
			if slot.After(end) {
				continue
			}
			x := execution{id: e["id"].(string), state: e["state"].(string)}
			if le, ok := e["last_error"].(string); ok {
				x.lastError = le
			}
			if f, ok := e["finished_at"].(string); ok {
				x.finished, err = time.Parse(time.RFC3339Nano, f)
				if !assert.NoError(c, err) {
					return
				}
			}
			if !assert.NotContains(c, []string{"pending", "running", "retrying"}, x.state, "execution %s", x.id) {
				return
			}
			got[slot.UTC()] = append(got[slot.UTC()], x)
		}
		bySlot = got
	}, 60*time.Second, 200*time.Millisecond, "every execution up to %s ends", end)
	final := apiGet(t, p.base, tok, "/v1/tasks/"+id)

	recv.mu.Lock()
	defer recv.mu.Unlock()
	for slot, execs := range recv.got {
		require.LessOrEqual(t, len(execs), 1, "slot %s delivered by %d executions", slot.Format(time.RFC3339), len(execs))
	}
	// A change is in force from its commit, between sent and answered.
	// Under the schedule in force, a second's slot is delivered, or
	// counted missed, or was cancelled by the next change while due and
	// not yet started (on its timeline, not lost); the bug was a slot
	// with no live execution, its instant held by one a change had
	// cancelled before it.
	var unaccounted, checked, cancelledDue int
	for s := changes[1].sent.Truncate(time.Second).Add(time.Second); !s.After(end); s = s.Add(time.Second) {
		var inForce *change
		ambiguous := false
		for i := range changes {
			c := &changes[i]
			if i > 0 && !s.Before(c.sent) && !s.After(c.answered.Add(50*time.Millisecond)) {
				ambiguous = true
			}
			if i == 0 || c.sent.Before(s) {
				inForce = c
			}
		}
		if ambiguous {
			continue
		}
		checked++
		delivered := len(recv.got[s.UTC()])
		var succeeded, cancelled int
		for _, e := range bySlot[s.UTC()] {
			switch {
			case e.state == "succeeded":
				succeeded++
				require.True(t, recv.got[s.UTC()][e.id], "execution %s of %s was delivered", e.id, s.Format(time.RFC3339))
			case e.state == "cancelled" && e.lastError == "the task's schedule changed":
				if e.finished.After(s.Add(-25 * time.Millisecond)) {
					cancelled++ // by a change after its slot: it was due and not started
				}
			default:
				t.Fatalf("slot %s: execution %s is %s (%s)", s.Format(time.RFC3339), e.id, e.state, e.lastError)
			}
		}
		require.LessOrEqual(t, succeeded, 1, "slot %s", s.Format(time.RFC3339))
		if !inForce.fires(s) {
			require.Zero(t, delivered, "slot %s is not one of the schedule in force", s.Format(time.RFC3339))
			continue
		}
		switch {
		case succeeded == 1:
		case cancelled > 0:
			cancelledDue++
		default:
			unaccounted++
		}
	}
	missed := int(final["missed_count"].(float64))
	t.Logf("%d seconds checked: %d slots unaccounted for, %d cancelled due by a change, %d counted missed",
		checked, unaccounted, cancelledDue, missed)
	require.Greater(t, checked, 10)
	require.LessOrEqual(t, unaccounted, missed, "every slot of the schedule in force was delivered or counted missed")
	p.stop(t, syscall.SIGTERM)
}
