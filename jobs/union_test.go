package jobs

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	"github.com/axhq/ax/service/schedule"
)

// TestUnionFiresEachInstantOnce: a union of every 2 s in Paris and every
// 3 s in UTC, bounded to six seconds, fires by the real scheduler and
// River: the members' slots S, S+2, S+3, S+4 and S+6, the instants both
// produce (S, S+6) once each: one execution, one request under its own
// idempotency key. A templated payload renders each fire in its member's
// zone, the lower member's (Paris) where both produce it.
func TestUnionFiresEachInstantOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t)
	// S: a second of the minute divisible by 6, far enough ahead that the
	// task is created before it.
	s := time.Now().UTC().Add(3 * time.Second).Truncate(6 * time.Second).Add(6 * time.Second)
	end := s.Add(6 * time.Second)
	task := h.task(h.endpoint(recv.srv.URL, nil).ID, templated(`{"at":"{{ .scheduled_for }}","zone":"{{ .timezone }}","local":"{{ .scheduled_for_local }}"}`,
		func(in *service.TaskInput) {
			in.MisfirePolicy = service.MisfireFireAll // a slow pass fires late, never fewer
			in.Schedule = schedule.Spec{Type: schedule.Union, StartAt: &s, EndAt: &end, Schedules: []schedule.Spec{
				{Type: schedule.Cron, Cron: "*/2 * * * * *", Timezone: "Europe/Paris"},
				{Type: schedule.Cron, Cron: "*/3 * * * * *"},
			}}
		}))
	want := []time.Time{s, s.Add(2 * time.Second), s.Add(3 * time.Second), s.Add(4 * time.Second), end}

	// The scheduler's passes, until the task has no slot left.
	deadline := time.Now().Add(60 * time.Second)
	for {
		h.tick(task, nil)
		got, err := h.tasks.Get(t.Context(), h.tenant, task.ID)
		require.NoError(t, err)
		if got.State == service.TaskCompleted {
			break
		}
		require.True(t, time.Now().Before(deadline), "the task completes after its end_at")
		time.Sleep(200 * time.Millisecond)
	}
	ids := h.tick(task, nil)
	require.Len(t, ids, len(want), "one execution per instant")
	for _, id := range ids {
		h.waitState(id, service.ExecSucceeded)
	}

	hits := recv.hitsSoFar()
	require.Len(t, hits, len(want), "the receiver sees one request per instant")
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	keys := map[string]bool{}
	byAt := map[time.Time]map[string]string{}
	for _, hit := range hits {
		keys[hit.Header.Get("Idempotency-Key")] = true
		var body map[string]string
		require.NoError(t, json.Unmarshal(hit.Body, &body))
		at, err := time.Parse(time.RFC3339Nano, body["at"])
		require.NoError(t, err)
		byAt[at.UTC()] = body
	}
	require.Len(t, keys, len(want))
	for i, at := range want {
		body, ok := byAt[at]
		require.True(t, ok, "slot %s was sent", at)
		loc := paris
		if i == 2 { // S+3: the UTC member's alone
			loc = time.UTC
		}
		require.Equal(t, loc.String(), body["zone"], "slot %s", at)
		require.Equal(t, at.In(loc).Format(time.RFC3339Nano), body["local"], "slot %s", at)
	}
}
