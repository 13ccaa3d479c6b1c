package jobs

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/service"
	events "github.com/axhq/ax/service/event"
	"github.com/axhq/ax/service/schedule"
)

// TestDeliverEvent: an event's fire reaches its task's receiver with
// X-Ax-Event-Id, X-Ax-Scheduled-For the event's arrival and the payload
// rendered with the event's data.
func TestDeliverEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	recv := newScript(t, response{Status: http.StatusOK, Body: "ok"})
	ep := h.endpoint(recv.srv.URL+"/hook", nil)
	task := h.task(ep.ID, func(in *service.TaskInput) {
		in.Schedule = schedule.Spec{Type: schedule.Event, Event: "files.ready"}
		in.Payload, in.PayloadTemplate = []byte(`{"file": "{{ .event.payload.file }}", "date": "{{ .event.key }}"}`), true
	})
	posted := service.NewEvents(h.pool, h.enq, nil, nil)
	ev, err := posted.Post(t.Context(), h.tenant, events.Input{
		Name: "files.ready", Key: "2026-12-03", Payload: json.RawMessage(`{"file": "a.csv"}`),
	})
	require.NoError(t, err)
	require.Equal(t, 1, ev.Matched.Tasks)

	got := recv.next(t)
	require.Equal(t, ev.ID, got.Header.Get("X-Ax-Event-Id"))
	require.Equal(t, task.ID, got.Header.Get("X-Ax-Task-Id"))
	require.Equal(t, ev.ReceivedAt.Format(time.RFC3339Nano), got.Header.Get("X-Ax-Scheduled-For"))
	require.JSONEq(t, `{"file": "a.csv", "date": "2026-12-03"}`, string(got.Body))
	h.waitState(ev.Matches[0].ExecutionID, service.ExecSucceeded)
}
