package db

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStateFragments: a fragment spells its state or set as SQL, in the
// lifecycle's order; a state with a quote is refused.
func TestStateFragments(t *testing.T) {
	t.Parallel()
	require.Equal(t, "'running'", execRunning)
	require.Equal(t, "('pending', 'running', 'retrying')", execUnfinished)
	require.Equal(t, "('succeeded', 'failed', 'cancelled', 'skipped')", execFinal)
	require.Equal(t, "('pending', 'running', 'blocked')", runUnfinished)
	require.Equal(t, "('available', 'pending', 'retryable', 'running', 'scheduled')", liveJobStates)
	require.Panics(t, func() { stateLit("it's") })
}
