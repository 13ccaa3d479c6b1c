package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// retentionAge is ax's default AX_EXECUTION_RETENTION: the seeded history
// lies a day beyond it.
const retentionAge = 30 * 24 * time.Hour

// retention measures firing precision while ax's retention removes expired
// history: -history finished executions (with a timeline of failures for
// one in ten) are seeded in SQL a day beyond AX_EXECUTION_RETENTION, ax is
// restarted so that its first sweep starts at once, and the precision
// scenario's n tasks fire once a second while the sweep deletes at full
// speed (it runs every second while it has work left). The history only
// has to outlast the window — the sweep's pace, not the amount, is what
// the deliveries compete with — and the report says how much was deleted
// and what was left.
func retention(ctx context.Context, st *stack, o options, n int) (*result, error) {
	var (
		restarted time.Time
		floor     [16]byte
	)
	sh := benchShape(o)
	sh.prepare = func(ctx context.Context, s *session, res *result) error {
		conn, err := pgx.Connect(ctx, s.dbURL)
		if err != nil {
			return err
		}
		defer conn.Close(context.WithoutCancel(ctx))
		span := time.Duration(o.history/1000+1) * time.Second
		base := time.Now().Add(-retentionAge - 24*time.Hour - span).Truncate(time.Second)
		floor = idFloor(time.Now().Add(-retentionAge))
		start := time.Now()
		const chunk = 250_000
		for lo := 0; lo < o.history; lo += chunk {
			hi := min(lo+chunk, o.history) - 1
			// 1,000 tasks firing once a second; ids are UUIDv7 of the slot
			// (as ax mints them), so the sweep's key range finds them.
			if _, err := conn.Exec(ctx, `
INSERT INTO executions (tenant_id, id, task_id, scheduled_for, trigger, state, attempts, lease_attempt,
	last_status_code, last_latency_ms, implicit_events, created_at, started_at, first_started_at, finished_at)
SELECT 'bench',
	(lpad(to_hex((extract(epoch FROM x.ts) * 1000)::bigint), 12, '0') || '7' || substr(x.h, 1, 3) || '8' ||
	 substr(x.h, 4, 15))::uuid,
	('00000000-0000-4000-8000-' || lpad(to_hex(g % 1000), 12, '0'))::uuid,
	x.ts, 'schedule', 'succeeded', CASE WHEN g % 10 = 0 THEN 2 ELSE 1 END, CASE WHEN g % 10 = 0 THEN 2 ELSE 1 END,
	200, 5, CASE WHEN g % 10 = 0 THEN 0 ELSE 7 END,
	x.ts - interval '10 seconds', x.ts, x.ts, x.ts + interval '20 milliseconds'
FROM generate_series($1::bigint, $2::bigint) g,
	LATERAL (SELECT $3::timestamptz + (g / 1000) * interval '1 second' AS ts, md5(g::text) AS h) x`,
				lo, hi, base); err != nil {
				return fmt.Errorf("seed executions %d-%d: %w", lo, hi, err)
			}
			st.logf("retention: %d/%d executions seeded", hi+1, o.history)
		}
		// A timeline for the executions that needed a retry.
		if _, err := conn.Exec(ctx, `
INSERT INTO execution_events (tenant_id, execution_id, type, at, attempt, status_code, latency_ms, error_class, message)
SELECT e.tenant_id, e.id, v.type, e.scheduled_for + v.off, v.attempt, v.code, 5, v.class, v.msg
FROM executions e, (VALUES
	('fired', interval '0', NULL::int, NULL::int, NULL, NULL),
	('attempt_started', interval '1 millisecond', 1, NULL, NULL, NULL),
	('attempt_failed', interval '6 milliseconds', 1, 503, 'http_5xx', 'HTTP 503'),
	('attempt_started', interval '1 second', 2, NULL, NULL, NULL),
	('attempt_succeeded', interval '1.005 seconds', 2, 200, NULL, NULL),
	('succeeded', interval '1.005 seconds', NULL, NULL, NULL, NULL)) AS v(type, off, attempt, code, class, msg)
WHERE e.tenant_id = 'bench' AND e.attempts = 2 AND e.id < $1::uuid`, floor); err != nil {
			return fmt.Errorf("seed timelines: %w", err)
		}
		for _, q := range []string{"VACUUM ANALYZE executions", "VACUUM ANALYZE execution_events", "CHECKPOINT"} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		res.Notes = append(res.Notes, fmt.Sprintf("seeded %d expired executions (%d with a 6-event timeline) in %.1f s",
			o.history, o.history/10, time.Since(start).Seconds()))
		// A fresh process sweeps at once (and every second while work is
		// left) instead of at its next minute.
		s.ax.stop()
		if s.ax, err = st.startAx(ctx, s.name, s.dbURL); err != nil {
			return err
		}
		restarted = time.Now()
		return nil
	}
	sh.after = func(ctx context.Context, s *session, res *result) {
		conn, err := pgx.Connect(ctx, s.dbURL)
		if err != nil {
			res.Notes = append(res.Notes, "count what retention left: "+err.Error())
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM executions WHERE tenant_id = 'bench' AND id < $1::uuid`,
			floor).Scan(&left); err != nil {
			res.Notes = append(res.Notes, "count what retention left: "+err.Error())
			return
		}
		gone := o.history - left
		secs := time.Since(restarted).Seconds()
		res.Notes = append(res.Notes, fmt.Sprintf("retention deleted %d expired executions in the %.0f s since ax started "+
			"(%.0f/s); %d left", gone, secs, math.Round(float64(gone)/secs), left))
		if left == 0 {
			res.Notes = append(res.Notes, "the history ran out before the window ended: raise -history to measure a sweep "+
				"busy throughout")
		}
	}
	return precision(ctx, st, o, "retention", n, sh)
}

// idFloor is the smallest UUIDv7 minted at t (to the millisecond), as ax's
// retention computes its horizon.
func idFloor(t time.Time) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], uint64(t.UnixMilli())<<16) // times after 1970
	return id
}
