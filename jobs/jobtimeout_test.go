package jobs

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
)

// TestDeliveryCutByJobTimeout: a receiver that hangs past the job's
// timeout (AX_JOB_TIMEOUT 1 s) but within the endpoint's (10 s): the
// attempt is recorded as cut by the job timeout, in its own error class,
// not as the endpoint's timeout, and retried; in a deliver job of its own
// and as a member of a batch.
func TestDeliveryCutByJobTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{River: RiverConfig{JobTimeout: time.Second}})
	slow := func(in *service.EndpointInput) { in.Timeout = 10 * time.Second }
	const want = "cut by the job timeout (AX_JOB_TIMEOUT 1s) before the endpoint answered"

	check := func(t *testing.T, id string) {
		t.Helper()
		e := h.waitState(id, service.ExecSucceeded)
		require.Equal(t, 2, e.Attempts)
		var failed []event
		for _, ev := range h.events(id) {
			if ev.Type == service.EventAttemptFailed {
				failed = append(failed, ev)
			}
		}
		require.Len(t, failed, 1)
		require.Equal(t, ErrorClassJobTimeout, *failed[0].ErrorClass)
		require.Equal(t, want, *failed[0].Message)
		require.Less(t, *failed[0].LatencyMS, 10_000, "the job's timeout, not the endpoint's, ended it")
	}

	t.Run("deliver job", func(t *testing.T) {
		t.Parallel()
		recv := newScript(t, response{Status: -1}, response{Status: http.StatusOK}) // -1: hang
		task := h.task(h.endpoint(recv.srv.URL, slow).ID, nil)
		id := h.fire(task, fireOpts{})
		check(t, id)
		require.Len(t, recv.hitsSoFar(), 2)
	})
	t.Run("batch member", func(t *testing.T) {
		t.Parallel()
		recv := newScript(t, response{Status: -1}, response{Status: http.StatusOK})
		task := h.task(h.endpoint(recv.srv.URL, slow).ID, nil)
		ids, _ := h.fireBatch([]service.Task{task}, time.Now().UTC())
		check(t, ids[0])
		require.Len(t, recv.hitsSoFar(), 2)
	})
}
