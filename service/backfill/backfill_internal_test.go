package backfill

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/service/lifecycle"
)

// TestBackfillRoom: the one concurrency check of a backfill, task's or
// workflow's (TestBackfillConcurrency runs it through both).
func TestBackfillRoom(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		max        int32
		unfinished int
		paused     bool
		want       int
	}{
		{4, 0, false, 4},
		{4, 3, false, 1},
		{4, 4, false, 0},
		{4, 6, false, 0}, // lowered below what runs: nothing more, never negative
		{4, 0, true, 0},
		{1, 0, false, 1},
	} {
		require.Equal(t, tt.want, room(tt.max, tt.unfinished, tt.paused), "%+v", tt)
	}
	require.Equal(t, lifecycle.BackfillSucceeded, outcome(db.BackfillCounts{Succeeded: 3}))
	require.Equal(t, lifecycle.BackfillFailed, outcome(db.BackfillCounts{Succeeded: 3, Failed: 1}))
}
