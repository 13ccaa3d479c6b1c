package tests

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/axhq/ax/db/dbtest"
)

// TestFiringAsDeployed runs ax as a user deploys it — its database reached
// over TCP on 127.0.0.1, interval tasks created through the API one after
// another without start_at — and checks the mechanism that keeps fires on
// time, by the database's own records rather than by timing: each task's
// slots are anchored on its creation time to the millisecond (so tasks
// created apart fire apart, not all at the start of a second), every fire's
// River job was fetched before its slot, and no worker started a fire
// before its slot by the database's clock.
func TestFiringAsDeployed(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.TCPURL(t)
	if !strings.Contains(dbURL, "@127.0.0.1:") && !strings.Contains(dbURL, "@localhost:") {
		t.Logf("AX_TEST_DATABASE_URL is not a TCP URL on this machine; testing with %s", strings.SplitN(dbURL, "@", 2)[0])
	}
	rcv := newReceiver(t)
	env := map[string]string{
		"AX_DATABASE_URL": dbURL, "AX_JWT_SECRET": "deployed-secret-0123456789abcdef0123456789",
		"AX_ALLOW_PRIVATE_TARGETS": "true",
	}
	p := startAx(t, env)
	tok := crashToken(t, env)
	ep := apiPost(t, p.base, tok, "/v1/endpoints", map[string]any{"name": "rcv", "url": rcv.srv.URL + "/hook"})

	const n = 40
	firsts := make([]time.Time, n)
	for i := range n {
		task := apiPost(t, p.base, tok, "/v1/tasks", map[string]any{
			"name": "deployed-" + string(rune('a'+i/26)) + string(rune('a'+i%26)), "endpoint_id": ep["id"],
			"schedule": map[string]any{"type": "interval", "interval_seconds": 1},
		})
		first, err := time.Parse(time.RFC3339Nano, task["next_run_at"].(string))
		require.NoError(t, err)
		firsts[i] = first
		time.Sleep(7 * time.Millisecond) // created apart, as a client's loop would
	}
	offsets := map[int]bool{}
	for _, f := range firsts {
		offsets[f.Nanosecond()/int(time.Millisecond)] = true
	}
	require.Greater(t, len(offsets), n/2, "slots anchored on the creation times, to the millisecond, spread over the second")

	require.Eventually(t, func() bool { return len(rcv.all()) >= 4*n }, 30*time.Second, 50*time.Millisecond)

	// What the database recorded for every scheduled fire that started: its
	// slot, when it started (now() of the start statement) and when River
	// fetched the job that carried it (attempted_at of its deliver job, or
	// of the deliver_batch job it was a member of).
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `WITH refs AS (
			SELECT j.id AS job_id, (j.args->>'execution_id')::uuid AS id, j.attempted_at FROM river_job j WHERE j.kind = 'deliver'
			UNION ALL
			SELECT j.id, split_part(m, '.', 2)::uuid, j.attempted_at
			FROM river_job j, regexp_split_to_table(j.args->>'executions', ' ') m WHERE j.kind = 'deliver_batch'
		)
		SELECT extract(epoch FROM e.started_at - e.scheduled_for) * 1000,
			extract(epoch FROM r.attempted_at - e.scheduled_for) * 1000
		FROM executions e JOIN refs r ON r.id = e.id
		WHERE e.trigger = 'schedule' AND e.started_at IS NOT NULL AND r.attempted_at IS NOT NULL
		  AND e.scheduled_for > (SELECT min(scheduled_for) FROM executions) + interval '1 second'`)
	require.NoError(t, err)
	var starts, fetches []float64
	for rows.Next() {
		var start, fetch float64
		require.NoError(t, rows.Scan(&start, &fetch))
		starts, fetches = append(starts, start), append(fetches, fetch)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(starts), 2*n, "fires past the first second were recorded")
	slices.Sort(starts)
	slices.Sort(fetches)
	// A job is due FetchAhead (110 ms) before its slot and fetched at the
	// queue's next poll: a fire whose job is fetched after its slot is late
	// by construction. Allow a few stragglers on a loaded machine.
	ahead := 0
	for _, f := range fetches {
		if f < 0 {
			ahead++
		}
	}
	require.GreaterOrEqual(t, ahead, len(fetches)*9/10, "fires' jobs are fetched before their slot (ms after the slot: %v)", fetches)
	// The worker waits for the slot by the database's clock (estimated to
	// within half a round trip), then starts the fire in a statement whose
	// now() is later still.
	require.GreaterOrEqual(t, starts[0], -5.0, "no fire starts before its slot by the database's clock (ms: %v)", starts[:min(5, len(starts))])
	require.Less(t, starts[len(starts)/2], 100.0, "fires start at their slot (median ms after it: %v)", starts[len(starts)/2])
}
