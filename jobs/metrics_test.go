package jobs

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/limits"
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

// TestThrottledHelpNamesTheLimits: the throttled metric's help lists the
// delivery limits by their names in limits' table, in its order (the
// metrics leaf cannot import the table, so it spells them).
func TestThrottledHelpNamesTheLimits(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	metrics.New(reg).Throttled.WithLabelValues(limits.DeliveryNames()[0]).Inc()
	families, err := reg.Gather()
	require.NoError(t, err)
	var help string
	for _, f := range families {
		if f.GetName() == "ax_deliveries_throttled_total" {
			help = f.GetHelp()
		}
	}
	require.Contains(t, help, "("+strings.Join(limits.DeliveryNames(), ", ")+")")
}
