package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
)

func TestWorkTrackerBusy(t *testing.T) {
	t.Parallel()
	w := NewWorkTracker()
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- w.Work(context.Background(), &rivertype.JobRow{ID: 1}, func(context.Context) error {
			close(inside)
			<-release
			return errors.New("boom")
		})
	}()
	<-inside
	require.Equal(t, []int64{1}, w.Busy(time.Minute), "being worked")
	close(release)
	require.EqualError(t, <-done, "boom", "the work's error passes through")
	require.Equal(t, []int64{1}, w.Busy(time.Minute), "finished lately")
	require.Empty(t, w.Busy(0), "finished long enough ago")
	require.Empty(t, w.Busy(time.Minute), "and forgotten")
}
