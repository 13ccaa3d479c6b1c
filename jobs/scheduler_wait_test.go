package jobs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNextWaitGathersDueTasks(t *testing.T) {
	t.Parallel()
	const (
		ceiling   = time.Second
		lookAhead = 4 * time.Second
		gather    = 500 * time.Millisecond
	)
	tests := []struct {
		name  string
		due   time.Duration
		known bool
		want  time.Duration
	}{
		{"nothing scheduled", 0, false, ceiling},
		{"far off: the poll ceiling", 10 * time.Second, true, ceiling},
		{"wakes when it is within the look-ahead plus the gathering", 4200 * time.Millisecond, true, 700 * time.Millisecond},
		{"just past the look-ahead: lets more gather", 4 * time.Second, true, gather},
		{"within the look-ahead but unclaimed: no hot loop", 3 * time.Second, true, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, nextWait(tt.due, tt.known, ceiling, lookAhead, gather))
		})
	}
}
