package jobs_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/jobs"
	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/metrics"
)

// lockedBuffer is a log destination safe for the loop's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHeartbeatReportsClockDrift: each heartbeat sets
// ax_clock_offset_seconds from the clock estimate, and a drift above
// 200 ms is logged as a warning, once per minute however many passes.
func TestHeartbeatReportsClockDrift(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	m := metrics.New(prometheus.NewRegistry())
	clock := new(service.DBClock)
	log := new(lockedBuffer)
	id := service.NewID()
	r := jobs.NewReplica(service.NewReplicas(pool), jobs.ReplicaConfig{
		ID: id, RiverClientID: id, Metrics: m, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, r.Register(t.Context()))
	loop := r.HeartbeatLoop()

	// In step with the database: reported, not logged.
	now := time.Now()
	clock.Observe(now, now.Add(-30*time.Millisecond), now)
	_, err := loop.Pass(t.Context())
	require.NoError(t, err)
	require.InDelta(t, 0.030, testutil.ToFloat64(m.ClockOffset), 0.0005)
	require.NotContains(t, log.String(), "drifts")

	// 450 ms ahead: reported and logged, once for two passes.
	now = time.Now()
	clock.Observe(now, now.Add(-450*time.Millisecond), now)
	for range 2 {
		_, err = loop.Pass(t.Context())
		require.NoError(t, err)
	}
	require.InDelta(t, 0.450, testutil.ToFloat64(m.ClockOffset), 0.0005)
	require.Equal(t, 1, bytes.Count([]byte(log.String()), []byte("drifts from the database's by more than 200ms")), log.String())
	require.Contains(t, log.String(), "drift_ms=450")
}
