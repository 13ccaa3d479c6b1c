package jobs

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// TestMetricsKnowServiceErrorClasses: the metrics package imports nothing
// of ax, so it spells the callback timeouts' error classes it reports at
// 0 from the start itself; they are service's.
func TestMetricsKnowServiceErrorClasses(t *testing.T) {
	t.Parallel()
	require.Equal(t, service.ErrorClassHeartbeatTimeout, metrics.ClassHeartbeatTimeout)
	require.Equal(t, service.ErrorClassCallbackTimeout, metrics.ClassCallbackTimeout)
}
