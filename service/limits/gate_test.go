package limits

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
)

// TestBehind: a delivery queued behind a held one names the limit of the
// first gate they share, in that gate's own terms.
func TestBehind(t *testing.T) {
	t.Parallel()
	tenant := Gate{Name: TenantGate, MaxInflight: 10}
	tenantRate := Gate{Name: TenantGate, Rate: 20}
	ep := Gate{Name: EndpointGate("a"), Rate: 50}
	epConc := Gate{Name: EndpointGate("a"), MaxInflight: 5, Rate: 50}
	for _, c := range []struct {
		name       string
		gs         []Gate
		aheadGates []string
		aheadLimit string
		want       string
	}{
		{"same endpoint gate", []Gate{ep}, []string{"endpoint:a"}, RateLimitPerSecond, RateLimitPerSecond},
		{"same gate, both limits", []Gate{epConc}, []string{"endpoint:a"}, MaxConcurrency, MaxConcurrency},
		{
			"shares the tenant gate only",
			[]Gate{tenant, ep},
			[]string{"tenant", "endpoint:b"},
			RateLimitPerSecond,
			MaxInflightDeliveries,
		},
		{"tenant rate only", []Gate{tenantRate, ep}, []string{"tenant", "endpoint:b"}, MaxConcurrency, MaxDeliveriesPerSecond},
		{
			"ahead held by the tenant gate, shares the endpoint",
			[]Gate{ep},
			[]string{"tenant", "endpoint:a"},
			MaxInflightDeliveries, RateLimitPerSecond,
		},
		{
			"tenant limit named by the held one",
			[]Gate{tenant},
			[]string{"tenant"},
			MaxDeliveriesPerSecond,
			MaxDeliveriesPerSecond,
		},
		{"no gate shared", []Gate{ep}, []string{"endpoint:b"}, MaxConcurrency, MaxConcurrency},
	} {
		require.Equal(t, c.want, behind(c.gs, c.aheadGates, c.aheadLimit), c.name)
	}
}

// TestStateOf: a gate's bucket is refilled at its rate since its row's
// refill, up to a tenth of a second's worth (at least one token); a gate
// without a rate has no tokens; the count is the row's.
func TestStateOf(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	row := func(inflight int, tokens float64, ago time.Duration) db.GateRow {
		return db.GateRow{GateCount: db.GateCount{Name: "g", Inflight: inflight, Tokens: tokens}, RefilledAt: now.Add(-ago)}
	}
	for _, c := range []struct {
		name string
		gate Gate
		row  db.GateRow
		want gateState
	}{
		{
			"no rate: no tokens",
			Gate{Name: "g", MaxInflight: 3},
			row(2, 5, time.Second),
			gateState{name: "g", inflight: 2, max: 3},
		},
		{
			"refilled at the rate",
			Gate{Name: "g", Rate: 50},
			row(0, 0, 60*time.Millisecond),
			gateState{name: "g", tokens: 3, rate: 50},
		},
		{
			"capped at a tenth of a second",
			Gate{Name: "g", Rate: 50},
			row(0, 0, time.Hour),
			gateState{name: "g", tokens: 5, rate: 50},
		},
		{
			"a slow rate's bucket holds one",
			Gate{Name: "g", Rate: 2},
			row(0, 0.5, time.Hour),
			gateState{name: "g", tokens: 1, rate: 2},
		},
		{
			"in debt until a refill in the future",
			Gate{Name: "g", Rate: 1},
			row(0, 0, -time.Hour),
			gateState{name: "g", tokens: -3600, rate: 1},
		},
	} {
		got := stateOf(c.gate, c.row, now)
		require.InDelta(t, c.want.tokens, got.tokens, 1e-9, c.name)
		got.tokens = c.want.tokens
		require.Equal(t, c.want, got, c.name)
	}
}

// TestGateArithmetic: whether a gate has room, the limit it names when
// it has none, and when its rate gives its next token.
func TestGateArithmetic(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ep, tenant := EndpointGate("a"), TenantGate
	for _, c := range []struct {
		name  string
		g     gateState
		fits  bool
		limit string
		next  time.Duration // 0: none
	}{
		{"no limits", gateState{name: ep}, true, RateLimitPerSecond, 0},
		{"room in flight", gateState{name: ep, inflight: 2, max: 3}, true, MaxConcurrency, 0},
		{"full in flight", gateState{name: ep, inflight: 3, max: 3}, false, MaxConcurrency, 0},
		{"a token", gateState{name: ep, tokens: 1, rate: 10}, true, RateLimitPerSecond, 0},
		{"no token", gateState{name: ep, tokens: 0.5, rate: 10}, false, RateLimitPerSecond, 50 * time.Millisecond},
		{
			"full and no token: in flight named",
			gateState{name: ep, inflight: 3, max: 3, tokens: 0, rate: 10},
			false,
			MaxConcurrency, 100 * time.Millisecond,
		},
		{
			"room but no token: the rate named",
			gateState{name: ep, inflight: 1, max: 3, tokens: 0, rate: 10},
			false,
			RateLimitPerSecond, 100 * time.Millisecond,
		},
		{"tenant full", gateState{name: tenant, inflight: 2, max: 2}, false, MaxInflightDeliveries, 0},
		{"tenant rate", gateState{name: tenant, tokens: 0, rate: 4}, false, MaxDeliveriesPerSecond, 250 * time.Millisecond},
	} {
		require.Equal(t, c.fits, c.g.fits(), c.name)
		require.Equal(t, c.limit, c.g.limitName(), c.name)
		var want time.Time
		if c.next > 0 {
			want = now.Add(c.next)
		}
		require.Equal(t, want, c.g.nextToken(now), c.name)
	}
	g := gateState{name: ep, inflight: 1, tokens: 2, max: 3, rate: 10}
	g.take()
	require.Equal(t, gateState{name: ep, inflight: 2, tokens: 1, max: 3, rate: 10}, g)
	g.giveBack()
	require.Equal(t, gateState{name: ep, inflight: 1, tokens: 2, max: 3, rate: 10}, g)
	noRate := gateState{name: ep, inflight: 1, max: 3}
	noRate.take()
	require.Equal(t, gateState{name: ep, inflight: 2, max: 3}, noRate, "a gate without a rate spends no tokens")
}

// TestAdmission: a delivery may start when every gate has room and no
// earlier delivery waits on them; otherwise the first gate without room
// names the limit, or, queued behind waiting deliveries, its first gate.
func TestAdmission(t *testing.T) {
	t.Parallel()
	ep := Gate{Name: EndpointGate("a"), MaxInflight: 2}
	tenant := Gate{Name: TenantGate, Rate: 10}
	states := func(epInflight int, tenantTokens float64) map[string]*gateState {
		return map[string]*gateState{
			ep.Name:     {name: ep.Name, inflight: epInflight, max: 2},
			tenant.Name: {name: tenant.Name, tokens: tenantTokens, rate: 10},
		}
	}
	for _, c := range []struct {
		name    string
		gs      []Gate
		gates   map[string]*gateState
		waiting bool
		want    string
	}{
		{"room everywhere", []Gate{ep, tenant}, states(1, 1), false, ""},
		{"endpoint full", []Gate{ep, tenant}, states(2, 1), false, MaxConcurrency},
		{"tenant out of tokens", []Gate{ep, tenant}, states(0, 0.2), false, MaxDeliveriesPerSecond},
		{"both: the first gate's", []Gate{ep, tenant}, states(2, 0), false, MaxConcurrency},
		{"room, but others wait", []Gate{ep, tenant}, states(0, 1), true, MaxConcurrency},
		{"room, others wait, tenant gate first", []Gate{tenant, ep}, states(0, 1), true, MaxDeliveriesPerSecond},
		{"a gate not locked lets it through", []Gate{{Name: EndpointGate("gone")}}, states(2, 0), false, ""},
	} {
		require.Equal(t, c.want, admission(c.gs, c.gates, c.waiting), c.name)
	}
}

// TestSpend: the API budget's bucket is refilled at its rate up to its
// size; a take gets as many whole tokens as are there, up to what it
// wants, or none and the wait for the next.
func TestSpend(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		tokens  float64
		rate    float64
		elapsed time.Duration
		want    int
		took    int
		left    float64
		wait    time.Duration
	}{
		{"full bucket, a chunk", 20, 20, 0, 2, 2, 18, 0},
		{"refilled", 0, 20, 100 * time.Millisecond, 5, 2, 0, 0},
		{"capped at its size", 0, 20, time.Hour, 100, 20, 0, 0},
		{"less than wanted", 3.5, 20, 0, 10, 3, 0.5, 0},
		{"empty: the wait", 0.5, 20, 0, 2, 0, 0.5, 25 * time.Millisecond},
		{"in debt", -1, 10, 0, 1, 0, -1, 200 * time.Millisecond},
	} {
		took, left, wait := spend(c.tokens, c.rate, apiBurst(c.rate), c.elapsed, c.want)
		require.Equal(t, c.took, took, c.name)
		require.InDelta(t, c.left, left, 1e-9, c.name)
		require.InDelta(t, float64(c.wait), float64(wait), float64(time.Microsecond), c.name)
	}
	require.Equal(t, 1, apiChunk(3), "a slow rate takes one at a time")
	require.Equal(t, 100, apiChunk(1e6), "at most 100")
}
