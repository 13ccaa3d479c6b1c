package main

import (
	"context"
	"fmt"
	"time"
)

// killTracker measures, after a SIGKILL, how long ax takes to resume every
// delivery the killed replica held: the executions carried by the River
// jobs (deliver, deliver_batch) its client was running when it died that
// were not final. One is resumed when a newer attempt owns it (its
// lease_attempt moved on) or it is final; delivered when it is final.
type killTracker struct {
	name      string
	replicaID string
	killedAt  time.Time
	done      chan struct{}

	jobs, held int
	resumed    time.Duration // until the last was resumed; -1: not within the deadline
	delivered  time.Duration // until the last was final; -1: not within the deadline
	err        error
}

const trackDeadline = 5 * time.Minute

func trackKill(ctx context.Context, e *env, name, replicaID string) *killTracker {
	t := &killTracker{name: name, replicaID: replicaID, killedAt: time.Now(), done: make(chan struct{}), resumed: -1, delivered: -1}
	go func() {
		defer close(t.done)
		t.run(context.WithoutCancel(ctx), e)
	}()
	return t
}

func (t *killTracker) wait() { <-t.done }

// heldSQL lists the unfinished executions carried by the running delivery
// jobs of a River client, with their lease.
const heldSQL = `
WITH j AS (
    SELECT id, kind, args FROM river_job
    WHERE state = 'running' AND kind IN ('deliver', 'deliver_batch') AND attempted_by[array_upper(attempted_by, 1)] = $1
), x AS (
    SELECT (args->>'execution_id')::uuid AS id FROM j WHERE kind = 'deliver'
    UNION
    SELECT split_part(m, '.', 2)::uuid FROM j, regexp_split_to_table(j.args->>'executions', ' ') m WHERE kind = 'deliver_batch'
)
SELECT (SELECT count(*) FROM j), e.id::text, e.lease_attempt
FROM x JOIN executions e ON e.id = x.id
WHERE e.state IN ('pending', 'running', 'retrying')`

func (t *killTracker) run(ctx context.Context, e *env) {
	deadline := t.killedAt.Add(trackDeadline)
	held := map[string]int{}
	// The killed replica's jobs stay running until another replica
	// declares it dead; PostgreSQL may be down for a moment.
	for {
		rows, err := e.pool.Query(ctx, heldSQL, t.replicaID)
		if err == nil {
			for rows.Next() {
				var id string
				var lease int
				if err = rows.Scan(&t.jobs, &id, &lease); err != nil {
					break
				}
				held[id] = lease
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.err = fmt.Errorf("read what it held: %w", err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.held = len(held)
	if t.held == 0 {
		t.resumed, t.delivered = 0, 0
		return
	}
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	for time.Now().Before(deadline) {
		rows, err := e.pool.Query(ctx, `SELECT id::text, lease_attempt, state IN ('pending', 'running', 'retrying')
			FROM executions WHERE id = ANY ($1::uuid[])`, ids)
		if err == nil {
			now := time.Since(t.killedAt)
			notResumed, notFinal := 0, 0
			for rows.Next() {
				var id string
				var lease int
				var unfinished bool
				if rows.Scan(&id, &lease, &unfinished) != nil {
					continue
				}
				if unfinished {
					notFinal++
					if lease == held[id] {
						notResumed++
					}
				}
			}
			rows.Close()
			if rows.Err() == nil {
				if notResumed == 0 && t.resumed < 0 {
					t.resumed = now
				}
				if notFinal == 0 {
					t.delivered = now
					return
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (t *killTracker) String() string {
	if t.err != nil {
		return fmt.Sprintf("%s: %v", t.name, t.err)
	}
	return fmt.Sprintf("%s at %s: held %d jobs, %d deliveries; all resumed %s, all final %s after the kill",
		t.name, t.killedAt.UTC().Format("15:04:05"), t.jobs, t.held, fmtDur(t.resumed), fmtDur(t.delivered))
}

func fmtDur(d time.Duration) string {
	if d < 0 {
		return "not within " + trackDeadline.String()
	}
	return d.Round(10 * time.Millisecond).String()
}
