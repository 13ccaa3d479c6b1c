package service

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db"
	"github.com/axhq/ax/db/dbtest"
	"github.com/axhq/ax/service/audit"
	"github.com/axhq/ax/service/schedule"
)

// TestCreateAuditIsTheStoredTask: a task's create is audited in the
// insert's own statement, from the row as the insert will store it. For
// every shape of input (defaults left to the table, times finer than a
// microsecond, calendars, callbacks, labels), the recorded changes are
// exactly what the stored task gives back; without an actor nothing is
// recorded.
func TestCreateAuditIsTheStoredTask(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	require.NoError(t, db.EnsureTenant(ctx, pool, "acme"))
	ep, err := NewEndpoints(pool).Create(ctx, "acme", EndpointInput{Name: "e", URL: "https://example.com/hook"})
	require.NoError(t, err)
	tasks := NewTasks(pool, TasksConfig{OnceLateMax: time.Hour})
	cal, err := NewCalendars(pool, tasks).Create(ctx, "acme", CalendarInput{Name: "holidays", Dates: []string{"2030-01-01"}})
	require.NoError(t, err)
	fine := time.Now().Add(time.Hour).Truncate(time.Second).Add(123456789 * time.Nanosecond)
	later := fine.Add(48 * time.Hour)
	inputs := map[string]TaskInput{
		"defaults":              {Name: "defaults", EndpointID: ep.ID, Schedule: schedule.Spec{Type: "interval", IntervalSeconds: 60}},
		"once with nanoseconds": {Name: "once", EndpointID: ep.ID, Schedule: schedule.Spec{Type: "once", RunAt: &fine}},
		"bounded cron with calendars": {
			Name: "cron", EndpointID: ep.ID, Payload: []byte(`{"b": 1,  "a": [1, 2]}`),
			Schedule: schedule.Spec{
				Type: "cron", Cron: "0 0 2 ? * MON-FRI", Dialect: "quartz", Timezone: "Asia/Shanghai",
				StartAt: &fine, EndAt: &later, ExcludeCalendars: []string{strings.ToUpper(cal.ID)},
			},
		},
		"everything else": {
			Name: "all", EndpointID: ep.ID, Schedule: schedule.Spec{Type: "interval", IntervalSeconds: 5},
			Priority: 1, Timeout: 1500 * time.Millisecond, Labels: map[string]string{"team": "billing", "env": "prod"},
			Shards: 3, AlertEndpointID: ep.ID, PauseAfterFailures: 4, OverlapPolicy: "allow", MisfirePolicy: "fire_all",
			Retry:      RetryPolicy{MaxAttempts: 7, InitialBackoff: 2 * time.Second, MaxBackoff: time.Minute},
			Completion: Completion{Mode: CompletionCallback, Timeout: time.Hour, HeartbeatTimeout: time.Minute},
			SLA:        SLA{FinishWithin: 10 * time.Minute},
		},
	}
	actor := audit.WithActor(ctx, audit.Actor{Subject: "alice", RequestID: "req-1"})
	for name, in := range inputs {
		task, err := tasks.Create(actor, "acme", in)
		require.NoError(t, err, name)
		recs, err := db.ListAudit(ctx, pool, "acme", db.AuditFilter{ResourceType: ResourceTask, ResourceID: task.ID, Limit: 10})
		require.NoError(t, err, name)
		require.Len(t, recs, 1, name)
		rec := recs[0]
		require.Equal(t, []string{AuditCreate, "alice", "req-1"}, []string{rec.Action, rec.Subject, rec.RequestID}, name)
		stored, err := tasks.Get(ctx, "acme", task.ID)
		require.NoError(t, err, name)
		want, err := json.Marshal(auditCreated(stored.Input()))
		require.NoError(t, err, name)
		require.JSONEq(t, string(want), string(rec.Changes), name)
		// Only what is set: no field at its zero value.
		for _, zero := range []string{`null`, `""`, `:0,`, `:0}`, `false`, `{}`, `[]`} {
			require.NotContains(t, string(rec.Changes), zero, name)
		}
	}

	quiet, err := tasks.Create(ctx, "acme", TaskInput{
		Name: "no-actor", EndpointID: ep.ID,
		Schedule: schedule.Spec{Type: "interval", IntervalSeconds: 60},
	})
	require.NoError(t, err)
	recs, err := db.ListAudit(ctx, pool, "acme", db.AuditFilter{ResourceType: ResourceTask, ResourceID: quiet.ID, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, recs, "a change without an actor is not an API change")

	_, err = tasks.Create(actor, "acme", TaskInput{
		Name: "defaults", EndpointID: ep.ID,
		Schedule: schedule.Spec{Type: "interval", IntervalSeconds: 60},
	})
	require.ErrorIs(t, err, ErrConflict, "a duplicate name")
	n := 0
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE tenant_id = 'acme'`).Scan(&n))
	require.Equal(t, len(inputs), n, "the refused create recorded nothing")
}
