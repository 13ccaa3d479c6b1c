package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service"
)

func TestRiverConfigDefaults(t *testing.T) {
	t.Parallel()
	c := RiverConfig{}.WithDefaults()
	require.Equal(t, RiverConfig{
		DeliverWorkers: 400, BulkWorkers: 400, SlotShare: 50, AlertWorkers: 10, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond,
		BulkFetchPollInterval: 250 * time.Millisecond, JobTimeout: service.TimeoutMax + 30*time.Second, RescueStuckJobsAfter: 6 * time.Minute,
		SoftStopTimeout: 20 * time.Second, QueueWaitPoll: time.Second,
	}, c)
	require.NoError(t, c.validate())
	require.GreaterOrEqual(t, c.RescueStuckJobsAfter, c.JobTimeout)

	// A fire's job is due ahead by the poll, the cooldown and a margin, at
	// most a second.
	require.Equal(t, 160*time.Millisecond, c.FetchAhead())
	require.Equal(t, time.Second, RiverConfig{FetchPollInterval: 5 * time.Second}.FetchAhead())
	// The bulk lane polls less often, and its fires are due that much earlier;
	// never more often than the main lane.
	require.Equal(t, 310*time.Millisecond, c.BulkFetchAhead())
	require.Equal(t, 2*time.Second, RiverConfig{FetchPollInterval: 2 * time.Second}.WithDefaults().BulkFetchPollInterval)
	require.Equal(t, time.Second, RiverConfig{FetchPollInterval: 5 * time.Second}.BulkFetchAhead())

	// A long JobTimeout raises the default rescue delay with it.
	c = RiverConfig{JobTimeout: 10 * time.Minute}.WithDefaults()
	require.Equal(t, 10*time.Minute, c.RescueStuckJobsAfter)
}

func TestRiverConfigValidate(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]RiverConfig{
		"rescue below job timeout": {JobTimeout: time.Minute, RescueStuckJobsAfter: 30 * time.Second},
		"poll below cooldown":      {FetchCooldown: time.Second, FetchPollInterval: 100 * time.Millisecond},
		"too many workers":         {DeliverWorkers: 20_000},
		"a share above 100 %":      {SlotShare: 101},
		"negative soft stop":       {SoftStopTimeout: -time.Second},
	} {
		require.Error(t, c.WithDefaults().validate(), name)
	}
	pool := dbtest.Pool(t)
	enq, err := service.NewEnqueuer(pool, nil)
	require.NoError(t, err)
	_, err = NewRiverClient(enq, RiverConfig{JobTimeout: time.Minute, RescueStuckJobsAfter: time.Second}, WorkerDeps{})
	require.ErrorContains(t, err, "RescueStuckJobsAfter")
	_, err = NewRiverClient(enq, RiverConfig{}, WorkerDeps{})
	require.ErrorContains(t, err, "Deliveries and Sender")
	// Short values for tests are accepted together.
	_, err = NewRiverClient(enq, RiverConfig{JobTimeout: 2 * time.Second, RescueStuckJobsAfter: 3 * time.Second},
		WorkerDeps{Deliveries: service.NewDeliveries(pool, enq, service.DeliveriesConfig{}), Sender: NewSender(SenderConfig{})})
	require.NoError(t, err)
}

func TestStopping(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	require.False(t, stopping(ctx))
	cancel(errors.New("stop initiated"))
	require.True(t, stopping(ctx), "a client stop")

	ctx, cancel = context.WithCancelCause(context.Background())
	cancel(river.ErrJobCancelledRemotely)
	require.False(t, stopping(ctx), "a job cancel is not a stop")

	ctx, cancelTimeout := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelTimeout()
	<-ctx.Done()
	require.False(t, stopping(ctx), "a timeout is not a stop")
}
