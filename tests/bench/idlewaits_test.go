package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func num(v float64) *float64 { return &v }

// TestIdleCostMinus: the difference is taken figure by figure, rounded to
// a tenth, and unknown where either side is.
func TestIdleCostMinus(t *testing.T) {
	base := idleCost{AxCPUPercent: num(0.4), AxRSSMiB: num(30), PGCPUPercent: num(1.2), PGXactsPerSec: num(3.1), PGStmtsPerSec: num(12.5)}
	with := idleCost{AxCPUPercent: num(0.6), AxRSSMiB: num(41.25), PGCPUPercent: num(1.0), PGXactsPerSec: num(3.1), OtherCPUPercent: num(40)}
	d := with.minus(base)
	require.NotNil(t, d.AxCPUPercent)
	assert.InDelta(t, 0.2, *d.AxCPUPercent, 1e-9)
	assert.InDelta(t, 11.3, *d.AxRSSMiB, 1e-9)
	assert.InDelta(t, -0.2, *d.PGCPUPercent, 1e-9)
	assert.InDelta(t, 0, *d.PGXactsPerSec, 1e-9)
	assert.Nil(t, d.PGStmtsPerSec, "unknown with waits")
	assert.Nil(t, d.OtherCPUPercent, "unknown in the baseline")
	assert.Equal(t, "ax CPU +0.2%, ax RSS +11.3 MiB, postgres CPU -0.2%, postgres +0.0 transactions/s", d.deltaString())
}

// TestIdleWaitsVerdict: a pass needs ax's CPU within noise, statements/s
// (transactions/s without pg_stat_statements) and, when known, their
// execution time not growing; a miss says which, and an unknown CPU or
// statement rate is a miss.
func TestIdleWaitsVerdict(t *testing.T) {
	pass, why := idleWaitsVerdict(idleCost{AxCPUPercent: num(0.3), PGStmtsPerSec: num(1), PGXactsPerSec: num(99)})
	assert.True(t, pass, why)
	assert.Empty(t, why)

	pass, why = idleWaitsVerdict(idleCost{AxCPUPercent: num(0.5), PGStmtsPerSec: num(-2)})
	assert.False(t, pass)
	require.Len(t, why, 1)
	assert.Contains(t, why[0], "ax CPU grew by 0.5%")

	pass, why = idleWaitsVerdict(idleCost{AxCPUPercent: num(-1), PGStmtsPerSec: num(16.7)})
	assert.False(t, pass)
	require.Len(t, why, 1)
	assert.Contains(t, why[0], "statements/s grew by 16.7")

	pass, why = idleWaitsVerdict(idleCost{AxCPUPercent: num(0), PGXactsPerSec: num(5)})
	assert.False(t, pass, "without pg_stat_statements, transactions/s are judged")
	require.Len(t, why, 1)
	assert.Contains(t, why[0], "transactions/s grew by 5.0")

	pass, why = idleWaitsVerdict(idleCost{AxCPUPercent: num(0.1), PGStmtsPerSec: num(2), PGStmtMSPerSec: num(25.1)})
	assert.False(t, pass, "one statement a second growing with the waits")
	require.Len(t, why, 1)
	assert.Contains(t, why[0], "statement time grew by 25.1 ms/s")

	pass, why = idleWaitsVerdict(idleCost{AxCPUPercent: num(0.1), PGStmtsPerSec: num(2), PGStmtMSPerSec: num(4.9)})
	assert.True(t, pass, why)

	pass, why = idleWaitsVerdict(idleCost{})
	assert.False(t, pass)
	assert.Len(t, why, 2, "both figures unknown")
}

// TestProbeKeys: one key per every-th run, from the first, and each a
// run's own key.
func TestProbeKeys(t *testing.T) {
	assert.Equal(t, []string{"k-000000", "k-001000", "k-002000"}, probeKeys(3000, 1000))
	assert.Equal(t, []string{"k-000000", "k-001000", "k-002000"}, probeKeys(2001, 1000))
	assert.Equal(t, []string{"k-000000"}, probeKeys(10, 1000))
	assert.Empty(t, probeKeys(0, 1000))
	assert.Len(t, probeKeys(10_000, idleWaitsProbeEvery), 10)
}

// TestStmtTotalsSince: a window's statements are those whose calls grew,
// with their calls and time in the window, most time first; a statement
// new in the window counts from zero.
func TestStmtTotalsSince(t *testing.T) {
	a := stmtTotals{1: {Query: "sweep", Calls: 10, TotalMS: 5}, 2: {Query: "idle", Calls: 3, TotalMS: 1}, 3: {Query: "gauge", Calls: 1, TotalMS: 0.5}}
	b := stmtTotals{
		1: {Query: "sweep", Calls: 40, TotalMS: 20}, 2: {Query: "idle", Calls: 3, TotalMS: 1},
		3: {Query: "gauge", Calls: 2, TotalMS: 0.75}, 4: {Query: "new", Calls: 2, TotalMS: 30},
	}
	top, total := b.since(a)
	want := []stmtDelta{
		{Query: "new", Calls: 2, TotalMS: 30}, {Query: "sweep", Calls: 30, TotalMS: 15}, {Query: "gauge", Calls: 1, TotalMS: 0.25},
	}
	assert.Equal(t, want, top)
	assert.InDelta(t, 45.25, total, 1e-9)
	assert.Equal(t, "2 calls 30 ms: new | 30 calls 15 ms: sweep", idleCost{Top: top[:2]}.topString())
}
