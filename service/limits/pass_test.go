package limits

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
)

func ref[T any](v T) *T { return &v }

// TestHeldFinal: a held delivery is over when its execution or job is
// final or gone, or when its execution has a permit already.
func TestHeldFinal(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		exec, job *string
		permitted bool
		want      bool
	}{
		{"pending, sleeping", ref("pending"), ref("scheduled"), false, false},
		{"retrying, available", ref("retrying"), ref("available"), false, false},
		{"running, retryable", ref("running"), ref("retryable"), false, false},
		{"execution final", ref("cancelled"), ref("scheduled"), false, true},
		{"execution gone", nil, ref("scheduled"), false, true},
		{"job still running the attempt that held it", ref("pending"), ref("running"), false, false},
		{"job final", ref("pending"), ref("completed"), false, true},
		{"job gone", ref("pending"), nil, false, true},
		{"a permit already", ref("pending"), ref("scheduled"), true, true},
	} {
		h := held{known: true, execState: c.exec, jobState: c.job, permitted: c.permitted}
		require.Equal(t, c.want, h.final(), c.name)
	}
}

// TestPlan: one walk of a pass. Holds are granted in order while their
// gates have room; one that is not blocks its gates for every later one
// (but not the other gates); the over are dropped; a known hold whose job
// is not sleeping yet waits; the unknown granted are listed to read; the
// next token of a blocking rate is reported; the locked states are not
// changed.
func TestPlan(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := EndpointGate("a"), EndpointGate("b")
	sleeping := func(id string, gates ...string) *held {
		return &held{Hold: db.Hold{ExecutionID: id, Gates: gates}, known: true, execState: ref("pending"), jobState: ref("scheduled")}
	}
	unknown := func(id string, gates ...string) *held { return &held{Hold: db.Hold{ExecutionID: id, Gates: gates}} }
	running := func(id string, gates ...string) *held {
		h := sleeping(id, gates...)
		h.jobState = ref("running")
		return h
	}
	gone := func(id string, gates ...string) *held {
		return &held{Hold: db.Hold{ExecutionID: id, Gates: gates}, known: true}
	}
	ids := func(hs []*held) []string {
		if len(hs) == 0 {
			return nil
		}
		return executionIDs(hs)
	}
	for _, c := range []struct {
		name    string
		holds   []*held
		locked  map[string]*gateState
		grant   []string
		unknown []string
		drop    []string
		next    time.Duration
		after   map[string]int // inflight per gate after the grants
	}{
		{
			name:   "room for two of three, in order",
			holds:  []*held{sleeping("1", a), sleeping("2", a), sleeping("3", a)},
			locked: map[string]*gateState{a: {name: a, inflight: 1, max: 3}},
			grant:  []string{"1", "2"},
			after:  map[string]int{a: 3},
		},
		{
			name:   "a blocked gate blocks later holds on it, not on another gate",
			holds:  []*held{sleeping("1", a), sleeping("2", b), sleeping("3", a)},
			locked: map[string]*gateState{a: {name: a, inflight: 2, max: 2}, b: {name: b, max: 1}},
			grant:  []string{"2"},
			after:  map[string]int{a: 2, b: 1},
		},
		{
			name:   "a hold through two gates blocks both",
			holds:  []*held{sleeping("1", a, TenantGate), sleeping("2", TenantGate)},
			locked: map[string]*gateState{a: {name: a, inflight: 1, max: 1}, TenantGate: {name: TenantGate, max: 5}},
			after:  map[string]int{a: 1, TenantGate: 0},
		},
		{
			name:   "the over are dropped and take no room",
			holds:  []*held{gone("1", a), sleeping("2", a)},
			locked: map[string]*gateState{a: {name: a, max: 1}},
			grant:  []string{"2"},
			drop:   []string{"1"},
			after:  map[string]int{a: 1},
		},
		{
			name:   "a job not yet asleep waits, and holds its gate",
			holds:  []*held{running("1", a), sleeping("2", a)},
			locked: map[string]*gateState{a: {name: a, max: 5}},
			after:  map[string]int{a: 0},
		},
		{
			name:    "unknown states are granted provisionally, to be read",
			holds:   []*held{unknown("1", a), sleeping("2", a), unknown("3", a)},
			locked:  map[string]*gateState{a: {name: a, max: 2}},
			grant:   []string{"1", "2"},
			unknown: []string{"1"},
			after:   map[string]int{a: 2},
		},
		{
			name:   "a rate: as many as tokens, and when the next one comes",
			holds:  []*held{sleeping("1", a), sleeping("2", a), sleeping("3", a)},
			locked: map[string]*gateState{a: {name: a, tokens: 1.5, rate: 10}},
			grant:  []string{"1"},
			next:   50 * time.Millisecond,
			after:  map[string]int{a: 1},
		},
		{
			name:   "a gate without a row lets everything through",
			holds:  []*held{sleeping("1", EndpointGate("gone")), sleeping("2", EndpointGate("gone"))},
			locked: map[string]*gateState{},
			grant:  []string{"1", "2"},
			after:  map[string]int{},
		},
	} {
		before := map[string]gateState{}
		for k, v := range c.locked {
			before[k] = *v
		}
		p := plan(c.holds, c.locked, now)
		require.Equal(t, c.grant, ids(p.grant), c.name)
		require.Equal(t, c.unknown, ids(p.unknown), c.name)
		require.Equal(t, c.drop, p.drop, c.name)
		var next time.Time
		if c.next > 0 {
			next = now.Add(c.next)
		}
		require.Equal(t, next, p.next, c.name)
		after := map[string]int{}
		for k, v := range p.gates {
			after[k] = v.inflight
		}
		require.Equal(t, c.after, after, c.name)
		for k, v := range c.locked {
			require.Equal(t, before[k], *v, "%s: the locked states are left as they were", c.name)
		}
	}
}

// TestSettle: grants that did not become permits give their places back;
// the granted deliveries' jobs are woken.
func TestSettle(t *testing.T) {
	t.Parallel()
	a := EndpointGate("a")
	holds := []*held{
		{Hold: db.Hold{ExecutionID: "1", Gates: []string{a, TenantGate}, JobID: 11}},
		{Hold: db.Hold{ExecutionID: "2", Gates: []string{a, TenantGate}, JobID: 12}},
		{Hold: db.Hold{ExecutionID: "3", Gates: []string{a, TenantGate}, JobID: 13}},
	}
	p := passPlan{grant: holds, gates: map[string]*gateState{
		a:          {name: a, inflight: 3, max: 5},
		TenantGate: {name: TenantGate, tokens: 2, rate: 10},
	}}
	wake := p.settle([]string{"3", "1"})
	require.Equal(t, []int64{11, 13}, wake)
	require.Equal(t, 2, p.gates[a].inflight, "the hold an admission ended gave its place back")
	require.InDelta(t, 3.0, p.gates[TenantGate].tokens, 1e-9, "and its token")
}

// TestMergeHolds: the first holds and those of the other gates, each
// once, in order (priority, slot, arrival).
func TestMergeHolds(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := func(id string, priority int, slot time.Duration, seq int64) db.Hold {
		return db.Hold{ExecutionID: id, Priority: priority, ScheduledFor: at.Add(slot), Seq: seq}
	}
	first := []db.Hold{h("a", 1, 0, 5), h("b", 2, 0, 1), h("c", 2, time.Second, 2)}
	more := []db.Hold{h("d", 1, time.Second, 9), h("b", 2, 0, 1), h("e", 2, 0, 3), h("f", 4, 0, 0)}
	require.Equal(t, []string{"a", "d", "b", "e", "c", "f"}, executionIDs(mergeHolds(first, more)))
	require.Equal(t, []string{"a", "b"}, executionIDs(mergeHolds(first[:2], nil)))
	require.Equal(t, []string{"x", "y"}, heldGates([]*held{{Hold: db.Hold{Gates: []string{"x"}}}, {Hold: db.Hold{Gates: []string{"y", "x"}}}}))
}
