package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// templatedPayload is the templated scenario's payload: what a daily
// export sends (yesterday's business date in the schedule's zone, as a date
// and as yyyyMMdd, the slot, the execution id as a key, the round kept a
// number).
var templatedPayload = map[string]any{
	"date":   "{{ date_add .business_date -1 }}",
	"file":   `export-{{ date_format (date_add .business_date -1) "yyyyMMdd" }}.csv`,
	"slot":   "{{ .scheduled_for_local }}",
	"key":    "{{ .execution_id }}",
	"round":  "{{ .round }}",
	"static": map[string]any{"kind": "export", "rows": []any{1, 2, 3}},
}

// templated is precision with templated payloads: every fire renders its
// payload when the scheduler creates it, in the claim's transaction. Its
// lateness, against precision's at the same rate, is what templating
// costs the hot path. After the window it counts the executions whose
// rendered payload was stored (every one fired).
func templated(ctx context.Context, st *stack, o options, n int) (*result, error) {
	sh := benchShape(o)
	sh.task = func(i int, body map[string]any) {
		p := map[string]any{"i": i}
		for k, v := range templatedPayload {
			p[k] = v
		}
		body["payload"], body["payload_template"] = p, true
		body["schedule"].(map[string]any)["timezone"] = "Asia/Shanghai"
	}
	sh.after = func(ctx context.Context, s *session, res *result) {
		conn, err := pgx.Connect(ctx, s.dbURL)
		if err != nil {
			res.Notes = append(res.Notes, "count rendered payloads: "+err.Error())
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var rendered, all, failed int
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE payload IS NOT NULL), count(*),
				count(*) FILTER (WHERE last_error_class = 'template') FROM executions`).Scan(&rendered, &all, &failed); err != nil {
			res.Notes = append(res.Notes, "count rendered payloads: "+err.Error())
			return
		}
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d executions carry their rendered payload; %d failed to render",
			rendered, all, failed))
	}
	res, err := precision(ctx, st, o, "templated", n, sh)
	if res != nil {
		res.Notes = append(res.Notes, "payload_template: true; compare its lateness with precision's at the same rate")
	}
	return res, err
}
