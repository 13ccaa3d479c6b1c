package template

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// referenceRender is t's render as every render was before fast parts
// and data built by need: text/template for every part, with all the
// data (fullValues), built apart from the render's own.
func referenceRender(t *Template, d Data, maxBytes int) ([]byte, error) {
	if len(t.parts) == 0 {
		return t.raw, nil
	}
	if maxBytes <= 0 {
		maxBytes = max(len(t.raw), 1<<20)
	}
	x, err := t.executor()
	if err != nil {
		return nil, &RenderError{Err: err}
	}
	defer t.execs.Put(x)
	*x.r = renderer{max: maxBytes}
	data := fullValues(d)
	out := make([]byte, 0, len(t.raw)+64)
	at := 0
	for i, p := range t.parts {
		out = append(out, t.raw[at:p.start]...)
		v, err := x.r.render(x.tmpls[i], p, data)
		if err != nil {
			return nil, &RenderError{Path: p.path, Err: err}
		}
		out = append(out, v...)
		at = p.end
		if len(out) > maxBytes {
			return nil, &RenderError{Err: fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, maxBytes)}
		}
	}
	out = append(out, t.raw[at:]...)
	if len(out) > maxBytes {
		return nil, &RenderError{Err: fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, maxBytes)}
	}
	return out, nil
}

// fullValues is every datum of d as docs/templates.md documents it.
func fullValues(d Data) map[string]any {
	loc := d.Location
	if loc == nil {
		loc = time.UTC
	}
	local := d.ScheduledFor.In(loc)
	m := map[string]any{
		"scheduled_for":       d.ScheduledFor.UTC().Format(time.RFC3339Nano),
		"scheduled_for_local": local.Format(time.RFC3339Nano),
		"business_date":       local.Format(time.DateOnly),
		"timezone":            loc.String(),
		"execution_id":        d.ExecutionID,
		"task_id":             d.TaskID,
		"task_name":           d.TaskName,
		"round":               d.Round,
		"shard_index":         d.ShardIndex,
		"shard_count":         max(d.ShardCount, 1),
		"trigger":             d.Trigger,
		"workflow_id":         d.WorkflowID,
		"workflow_run_id":     d.WorkflowRunID,
	}
	if d.Inputs != nil {
		in := map[string]any{}
		for k, raw := range d.Inputs {
			in[k] = decode(raw)
		}
		m["inputs"] = in
	}
	if d.Nodes != nil {
		nodes := map[string]any{}
		for k, n := range d.Nodes {
			nodes[k] = map[string]any{"status": n.Status, "output": decode(n.Output)}
		}
		m["nodes"] = nodes
	}
	if d.Event != nil {
		m["event"] = map[string]any{"name": d.Event.Name, "key": d.Event.Key, "payload": decode(d.Event.Payload)}
	}
	return m
}

// TestRenderAsWithAllTheData: a template renders the same bytes, or the
// same error, whether its parts render fast and its data is built for
// what it reads or text/template renders it with all the data: every
// documented datum and function, alone, in a longer string and through
// the functions, over data whose strings need escaping, for each kind of
// fire.
func TestRenderAsWithAllTheData(t *testing.T) {
	t.Parallel()
	task := Data{
		ScheduledFor: at(t, "2026-11-01T16:30:00.123456Z"), Location: zone(t, "Asia/Shanghai"),
		ExecutionID: "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e", TaskID: "0192f0c1-0000-7d2a-9a51-1f0e2b3c4d5e",
		TaskName: "report.daily", Round: 2, ShardIndex: 3, ShardCount: 4, Trigger: "backfill",
	}
	odd := task
	odd.TaskName, odd.ExecutionID, odd.Location = "a \"b\" <c> & é\n\u2028\t\\", "2026-02-29", nil
	odd.ShardCount, odd.Round = 0, 300
	flow := task
	flow.WorkflowID, flow.WorkflowRunID = "0192f0c1-1111-7d2a-9a51-1f0e2b3c4d5e", "0192f0c1-2222-7d2a-9a51-1f0e2b3c4d5e"
	flow.Inputs = map[string]json.RawMessage{"n": json.RawMessage(`12345678901234567890`), "s": json.RawMessage(`"x<y"`)}
	flow.Nodes = map[string]Node{"extract": {Status: "succeeded", Output: json.RawMessage(`{"rows":[1,2],"day":"2026-10-31"}`)}}
	event := task
	event.Event = &Event{Name: "file.landed", Key: "k-1", Payload: json.RawMessage(`{"path":"/in/a.csv","size":3}`)}
	fires := map[string]Data{"task": task, "odd": odd, "workflow": flow, "event": event}
	scope := Scope{Workflow: true, Inputs: []string{"n", "s"}, Upstream: []string{"extract"}, Event: true}

	var tmpls []string
	for _, name := range scope.Names() {
		tmpls = append(tmpls,
			fmt.Sprintf(`{{ .%s }}`, name), fmt.Sprintf(`<{{ .%s }}>`, name), fmt.Sprintf(`{{- $.%s -}}`, name),
			fmt.Sprintf(`{{ json .%s }}`, name), fmt.Sprintf(`{{ .%s | default "none" }}`, name),
			fmt.Sprintf(`{{ date_add .%s -1 }}`, name), fmt.Sprintf(`{{ date_format .%s "yyyy-MM-dd HH:mm:ss" }}`, name))
	}
	tmpls = append(tmpls,
		// The functions, as the docs show them.
		`{{ date_add .business_date -1 }}`, `{{ date_add .business_date 1 }}`, `{{ date_add .scheduled_for_local 31 }}`,
		`{{ date_add .scheduled_for -400 }}`, `{{ date_add "2024-02-28" 1 }}`, `{{ date_add .business_date "2" }}`,
		`{{ date_add .business_date .round }}`, `{{ date_add .business_date 0x1F }}`, `{{ date_add .business_date 1e3 }}`,
		`{{ date_add .business_date 2.0 }}`, `{{ date_add .business_date 'a' }}`, `{{ date_add .business_date 2000000 }}`,
		`{{ date_add .business_date }}`, `{{ date_add .business_date -1 2 }}`, `{{ .business_date | date_add -1 }}`,
		`{{ date_format .business_date "yyyyMMdd" }}`, `{{ date_format .scheduled_for_local "yyyy-MM-dd HH:mm:ss" }}`,
		`{{ date_format .scheduled_for "HH:mm" }}`, `{{ date_format .business_date "yyyy-MM" }}-01`,
		`{{ date_format (date_add .business_date -1) "dd/MM/yyyy" }}`, `{{ date_format (date_add .business_date -800000) "yyyy" }}`,
		`{{ date_format (date_add "0003-01-01" -1) "yyyy-MM-dd" }}`, `{{ date_format .business_date .timezone }}`,
		`{{ date_format .business_date 7 }}`, `{{ .business_date | date_format "yyyyMMdd" }}`,
		`{{ "yyyyMMdd" | date_format .business_date }}`, `{{ .round | date_format .business_date }}`,
		`{{ date_format .business_date "a\"b<c>é\\" }}`, `{{ date_format .business_date "" }}`,
		`{{ date_format (date_add (printf "%s-01" (date_format .business_date "yyyy-MM")) -1) "yyyy-MM" }}-01`,
		`export-{{ date_format (date_add .business_date -1) "yyyyMMdd" }}.csv`,
		`{{ json .round }}`, `q={{ json .task_name }}`, `{{ default "x" "" }}`, `{{ default 7 nil }}`,
		`{{ printf "%05d" .round }}`, `{{ print .task_name .round }}`, `{{ println .round }}`, `{{ html .task_name }}`,
		`{{ js .task_name }}`, `{{ urlquery .task_name }}`, `{{ len .task_id }}`, `{{ index .inputs "n" }}`,
		`{{ eq .trigger "backfill" }}`, `{{ if gt .round 1 }}again{{ else }}first{{ end }}`, `{{ and .round .trigger }}`,
		`{{ not .round }}`, `{{ slice .task_id 0 8 }}`,
		// Constants, text and every datum in one string.
		`{{ "a" }}`, `{{ 42 }}`, `{{ -7 }}`, `{{ 010 }}`, `{{ 1.5 }}`, `{{ true }}`, `{{ nil }}`, `a{{ 1 }}b{{ "c" }}`,
		`{{ .scheduled_for }} {{ .scheduled_for_local }} {{ .business_date }} {{ .timezone }} {{ .execution_id }} `+
			`{{ .task_id }} {{ .task_name }} {{ .round }} {{ .shard_index }}/{{ .shard_count }} {{ .trigger }}`,
		`{{ .round }}{{ .shard_index }}`, `{{/* a comment */}}{{ .round }}`, `{{ .round -}} {{- .trigger }}`,
		// The data as a whole, and through variables, ranges and withs.
		`{{ json . }}`, `{{ . }}`, `{{ json $ }}`, `{{ range $k, $v := . }}{{ $k }}={{ $v }};{{ end }}`, `{{ index . "task_name" }}`,
		`{{ with .task_name }}{{ . }}{{ $.round }}{{ end }}`, `{{ $x := .round }}{{ $x }}`, `{{ with $ }}{{ .trigger }}{{ end }}`,
		`{{ range .inputs }}{{ . }}{{ end }}`, `{{ with .nodes.extract }}{{ .status }}{{ end }}`,
		`{{ .inputs.n }}`, `{{ .inputs.s }}`, `{{ .nodes.extract.output.rows }}`, `{{ .nodes.extract.status }}`,
		`{{ date_add .nodes.extract.output.day -1 }}`, `{{ .event.name }}/{{ .event.key }}`, `{{ .event.payload.size }}`,
		`{{ (.event).key }}`, `{{ (.).round }}`,
		// Bounds.
		`{{ range 3 }}{{ $.task_name }}{{ end }}`, strings.Repeat("x", 90)+`{{ .round }}`, `{{ .task_name }}{{ .task_name }}`,
	)

	for _, src := range tmpls {
		for _, payload := range []string{
			`{"v": ` + strconvQuote(src) + `}`,
			`[` + strconvQuote(src) + `, "{{ .round }}", {"k": ` + strconvQuote("pre "+src) + `}]`,
		} {
			tpl, err := Parse([]byte(payload), scope)
			if err != nil {
				continue // a template that does not parse has no render to compare
			}
			for fire, d := range fires {
				for _, limit := range []int{0, 120} {
					got, gotErr := tpl.Render(d, limit)
					want, wantErr := referenceRender(tpl, d, limit)
					require.Equal(t, fmt.Sprint(wantErr), fmt.Sprint(gotErr), "%s (%s fire, bound %d)", payload, fire, limit)
					require.Equal(t, string(want), string(got), "%s (%s fire, bound %d)", payload, fire, limit)
				}
			}
		}
	}
}

// TestFastParts: the payloads the docs show render without text/template;
// the data read as a whole, a function other than date_add and
// date_format, a variable, a branch do not.
func TestFastParts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src  string
		fast bool
	}{
		{`{{ .round }}`, true},
		{`{{ date_add .business_date -1 }}`, true},
		{`export-{{ date_format (date_add .business_date -1) "yyyyMMdd" }}.csv`, true},
		{`{{ .business_date | date_format "yyyyMMdd" }}`, true}, // compiled; its render fails (the date is its layout) and falls back
		{`{{ .business_date | date_add -1 }}`, true},
		{`{{ json .round }}`, false},
		{`{{ $.round }}`, false},
		{`{{ if .round }}x{{ end }}`, false},
		{`{{ .inputs.n }}`, false},
		{`{{ date_format .business_date .timezone }}`, false},
	} {
		tpl, err := Parse([]byte(strconvQuote(c.src)), Scope{Workflow: true})
		require.NoError(t, err, c.src)
		require.Equal(t, c.fast, tpl.parts[0].fast != nil, c.src)
	}
}

func strconvQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
