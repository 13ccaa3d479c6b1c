package service

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service/lifecycle"
)

// TestTriggersAreLifecycles: service's trigger names are the ones the
// subpackages that create executions (payload, backfill) read from
// service/lifecycle.
func TestTriggersAreLifecycles(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{lifecycle.TriggerSchedule, lifecycle.TriggerManual, lifecycle.TriggerRetry, lifecycle.TriggerBackfill},
		[]string{TriggerSchedule, TriggerManual, TriggerRetry, TriggerBackfill})
}
