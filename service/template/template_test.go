package template

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

// render parses payload for scope and renders it with d (no bound but
// the default).
func render(t *testing.T, payload string, scope Scope, d Data) (string, error) {
	t.Helper()
	tpl, err := Parse([]byte(payload), scope)
	require.NoError(t, err, "payload %s parses", payload)
	out, err := tpl.Render(d, 0)
	if err == nil {
		require.True(t, json.Valid(out), "%s renders to JSON: %s", payload, out)
	}
	return string(out), err
}

// TestEveryDatum: each name of a task's data renders what Data says, in
// its JSON type when the string is exactly one action.
func TestEveryDatum(t *testing.T) {
	t.Parallel()
	d := Data{
		ScheduledFor: at(t, "2026-11-01T16:30:00Z"), Location: zone(t, "Asia/Shanghai"),
		ExecutionID: "0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e", TaskID: "0192f0c1-0000-7d2a-9a51-1f0e2b3c4d5e",
		TaskName: "report.daily", Round: 2, ShardIndex: 3, ShardCount: 4, Trigger: "backfill",
	}
	for _, c := range []struct{ tmpl, want string }{
		{`"{{ .scheduled_for }}"`, `"2026-11-01T16:30:00Z"`},
		{`"{{ .scheduled_for_local }}"`, `"2026-11-02T00:30:00+08:00"`},
		{`"{{ .business_date }}"`, `"2026-11-02"`},
		{`"{{ .timezone }}"`, `"Asia/Shanghai"`},
		{`"{{ .execution_id }}"`, `"0192f0c1-7c1e-7d2a-9a51-1f0e2b3c4d5e"`},
		{`"{{ .task_id }}"`, `"0192f0c1-0000-7d2a-9a51-1f0e2b3c4d5e"`},
		{`"{{ .task_name }}"`, `"report.daily"`},
		{`"{{ .round }}"`, `2`},
		{`"{{ .shard_index }}"`, `3`},
		{`"{{ .shard_count }}"`, `4`},
		{`"{{ .trigger }}"`, `"backfill"`},
		{`"round {{ .round }}"`, `"round 2"`},
		{`"{{- .round -}}"`, `2`},
		{`" {{ .round }}"`, `" 2"`},
	} {
		got, err := render(t, c.tmpl, Scope{}, d)
		require.NoError(t, err, c.tmpl)
		require.Equal(t, c.want, got, c.tmpl)
	}
}

// TestFunctions: date_add, date_format, json and default.
func TestFunctions(t *testing.T) {
	t.Parallel()
	d := Data{ScheduledFor: at(t, "2026-03-01T01:02:03Z"), Location: zone(t, "Europe/Paris"), TaskName: `a "b" <c>`}
	for _, c := range []struct{ tmpl, want string }{
		{`"{{ date_add .business_date -1 }}"`, `"2026-02-28"`}, // yesterday, across a month
		{`"{{ date_add .business_date 1 }}"`, `"2026-03-02"`},
		{`"{{ date_add \"2024-02-28\" 1 }}"`, `"2024-02-29"`}, // a leap day
		{`"{{ date_add \"2026-12-31\" 1 }}"`, `"2027-01-01"`},
		{`"{{ date_add .scheduled_for_local 1 }}"`, `"2026-03-02T02:02:03+01:00"`},
		{`"{{ date_format .business_date \"yyyyMMdd\" }}"`, `"20260301"`},
		{`"{{ date_format .scheduled_for_local \"yyyy-MM-dd HH:mm:ss\" }}"`, `"2026-03-01 02:02:03"`},
		{`"{{ date_format .scheduled_for \"HH:mm\" }}"`, `"01:02"`},
		{`"{{ date_format .business_date \"yyyy-MM\" }}-01"`, `"2026-03-01"`}, // the month's start
		{`"{{ date_format (date_add .business_date -1) \"dd/MM/yyyy\" }}"`, `"28/02/2026"`},
		{`"{{ json .task_name }}"`, `"\"a \\\"b\\\" <c>\""`},
		{`"q={{ json .round }}"`, `"q=0"`},
		{`"{{ .task_name | default \"x\" }}"`, `"a \"b\" <c>"`},
		{`"{{ default \"x\" \"\" }}"`, `"x"`},
		{`"{{ default 7 nil }}"`, `7`},
		{`"{{ printf \"%05d\" 42 }}"`, `"00042"`},
	} {
		got, err := render(t, c.tmpl, Scope{}, d)
		require.NoError(t, err, c.tmpl)
		require.Equal(t, c.want, got, c.tmpl)
	}
}

// TestLocalDates: the business date and local time follow the schedule's
// zone across a DST change in Europe/Paris and across midnight in
// Asia/Shanghai (where the UTC date is the day before).
func TestLocalDates(t *testing.T) {
	t.Parallel()
	paris, shanghai := zone(t, "Europe/Paris"), zone(t, "Asia/Shanghai")
	for _, c := range []struct {
		loc               *time.Location
		slot, local, date string
	}{
		{paris, "2026-03-28T23:30:00Z", "2026-03-29T00:30:00+01:00", "2026-03-29"}, // local midnight past, UTC still the 28th
		{paris, "2026-03-29T00:59:59Z", "2026-03-29T01:59:59+01:00", "2026-03-29"}, // just before the spring gap
		{paris, "2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00", "2026-03-29"}, // just after it
		{paris, "2026-03-29T22:30:00Z", "2026-03-30T00:30:00+02:00", "2026-03-30"}, // summer time: the next day starts at 22:00 UTC
		{paris, "2026-10-25T00:30:00Z", "2026-10-25T02:30:00+02:00", "2026-10-25"}, // the repeated hour, first pass
		{paris, "2026-10-25T01:30:00Z", "2026-10-25T02:30:00+01:00", "2026-10-25"}, // and second
		{paris, "2026-10-25T23:30:00Z", "2026-10-26T00:30:00+01:00", "2026-10-26"},
		{shanghai, "2026-11-01T15:59:59Z", "2026-11-01T23:59:59+08:00", "2026-11-01"},
		{shanghai, "2026-11-01T16:00:00Z", "2026-11-02T00:00:00+08:00", "2026-11-02"},
		{shanghai, "2026-12-31T16:00:00Z", "2027-01-01T00:00:00+08:00", "2027-01-01"}, // a new year, UTC's old one
	} {
		got, err := render(t, `{"local":"{{ .scheduled_for_local }}","date":"{{ .business_date }}","yesterday":"{{ date_add .business_date -1 }}","utc":"{{ .scheduled_for }}"}`,
			Scope{}, Data{ScheduledFor: at(t, c.slot), Location: c.loc})
		require.NoError(t, err)
		var v map[string]string
		require.NoError(t, json.Unmarshal([]byte(got), &v))
		require.Equal(t, c.local, v["local"], c.slot)
		require.Equal(t, c.date, v["date"], c.slot)
		require.Equal(t, c.slot, v["utc"], c.slot)
		yesterday, _ := time.Parse(time.DateOnly, c.date)
		require.Equal(t, yesterday.AddDate(0, 0, -1).Format(time.DateOnly), v["yesterday"])
	}
}

// TestTypesAndBytesKept: a single action keeps its value's JSON type
// (objects, arrays, numbers exactly, booleans, null); everything that is
// not a templated string keeps its bytes (key order, spacing, number
// spelling, escapes).
func TestTypesAndBytesKept(t *testing.T) {
	t.Parallel()
	scope := Scope{Workflow: true, Inputs: []string{"n", "big", "flag", "obj", "none", "list"}, Upstream: []string{"extract"}}
	d := Data{
		ScheduledFor: at(t, "2026-01-01T00:00:00Z"),
		Inputs: map[string]json.RawMessage{
			"n": json.RawMessage(`1.50`), "big": json.RawMessage(`12345678901234567890`),
			"flag": json.RawMessage(`true`), "obj": json.RawMessage(`{"b":1,"a":[1,2]}`), "none": json.RawMessage(`null`),
			"list": json.RawMessage(`["x","y"]`),
		},
		Nodes: map[string]Node{"extract": {Status: "succeeded", Output: json.RawMessage(`{"rows":[{"id":7}],"count":1}`)}},
	}
	payload := `{ "z" : 1.0e2, "n":"{{ .inputs.n }}", "big":"{{ .inputs.big }}", "flag":"{{ .inputs.flag }}",
  "obj":"{{ .inputs.obj }}", "none":"{{ .inputs.none }}", "rows":"{{ .nodes.extract.output.rows }}",
  "status":"{{ .nodes.extract.status }}", "text":"n={{ .inputs.n }} big={{ .inputs.big }}", "esc":"\u00e9\n", "a":[ "{{ index .inputs.list 1 }}" , false ] }`
	got, err := render(t, payload, scope, d)
	require.NoError(t, err)
	require.Equal(t, `{ "z" : 1.0e2, "n":1.50, "big":12345678901234567890, "flag":true,
  "obj":{"a":[1,2],"b":1}, "none":null, "rows":[{"id":7}],
  "status":"succeeded", "text":"n=1.50 big=12345678901234567890", "esc":"\u00e9\n", "a":[ "y" , false ] }`, got)

	again, err := render(t, payload, scope, d)
	require.NoError(t, err)
	require.Equal(t, got, again, "a render is deterministic")

	plain := `{"b": "no template here", "a": [1, 2.50]}`
	tpl, err := Parse([]byte(plain), Scope{})
	require.NoError(t, err)
	require.False(t, tpl.Templated())
	out, err := tpl.Render(Data{}, 0)
	require.NoError(t, err)
	require.Equal(t, plain, string(out), "a payload without templates is its own bytes")
}

// TestParseErrors: a template that does not parse, or names data that
// cannot exist for its scope, is an Error at its string's path.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	node := Scope{Workflow: true, Inputs: []string{"day"}, Upstream: []string{"extract"}}
	for _, c := range []struct {
		payload string
		scope   Scope
		path    string
		reason  string
	}{
		{`{"rows":"{{ .nodes.extract.output.rows"}`, Scope{}, "rows", "does not parse"},
		{`{"rows":"{{ .rows }}"}`, Scope{}, "rows", "there is no data .rows"},
		{`"{{ .nope }}"`, Scope{}, "", "there is no data .nope"},
		{`{"a":{"b":[1,"ok","{{ .business_date.year }}"]}}`, Scope{}, "a.b[2]", "is a single value"},
		{`{"x":"{{ .nodes.extract.output }}"}`, Scope{}, "x", "there is no data .nodes"}, // a task has no nodes
		{`{"x":"{{ .inputs.day }}"}`, Scope{}, "x", "there is no data .inputs"},
		{`{"x":"{{ .event.name }}"}`, Scope{}, "x", "there is no data .event"},
		{`{"x":"{{ .nodes.load.output }}"}`, node, "x", `"load" is not an upstream node`},
		{`{"x":"{{ .nodes.extract.outputs }}"}`, node, "x", "a node has .output and .status"},
		{`{"x":"{{ .nodes.extract.status.code }}"}`, node, "x", ".status is a string"},
		{`{"x":"{{ .inputs.month }}"}`, node, "x", `no input "month"`},
		{`{"x":"{{ .event.kind }}"}`, Scope{Event: true}, "x", "an event has .name, .key and .payload"},
		{`{"x":"{{ $.nope }}"}`, Scope{}, "x", "there is no data .nope"},
		{`{"x":"{{ with $x := .round }}{{ $.nope }}{{ end }}"}`, Scope{}, "x", "there is no data .nope"},
		{`{"x":"{{ (.business_date).x }}"}`, Scope{}, "x", "is a single value"},
		{`{"x":"{{ define \"t\" }}a{{ end }}{{ template \"t\" }}"}`, Scope{}, "x", "not supported"},
		{`{"x":"{{ env \"HOME\" }}"}`, Scope{}, "x", `function "env" not defined`},
		{`{"x":"{{ _ax_value 1 }}"}`, Scope{}, "x", `no function "_ax_value"`},
		{`{"a.b":{"c":"{{ .x }}"}}`, Scope{}, `["a.b"].c`, "there is no data .x"},
	} {
		_, err := Parse([]byte(c.payload), c.scope)
		var errs Errors
		require.ErrorAs(t, err, &errs, c.payload)
		require.Len(t, errs, 1, c.payload)
		require.Equal(t, c.path, errs[0].Path, c.payload)
		require.Contains(t, errs[0].Reason, c.reason, c.payload)
	}

	// Every failing string is named, in document order; a node's fields
	// sit under its own prefix.
	_, err := Parse([]byte(`{"a":"{{ .x }}","b":["{{ .round }}","{{ .y"]}`), Scope{})
	var errs Errors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, 2)
	require.Equal(t, "payload.a", errs[0].Field("payload"))
	require.Equal(t, "nodes[2].payload.b[1]", errs[1].Field("nodes[2].payload"))
	require.Equal(t, "payload", (&Error{}).Field("payload"))

	// Data of a range's or a with's own dot is what they chose: not
	// checked. The workflow's and event's names exist in their scopes.
	for _, ok := range []struct {
		payload string
		scope   Scope
	}{
		{`"{{ range .nodes.extract.output.rows }}{{ .id }}{{ end }}"`, node},
		{`"{{ with .inputs.day }}{{ . }}{{ else }}{{ .business_date }}{{ end }}"`, node},
		{`"{{ .workflow_id }} {{ .workflow_run_id }} {{ .nodes.extract.status }}"`, node},
		{`"{{ .event.payload.order.id }} {{ .event.key }}"`, Scope{Event: true}},
		{`"{{ .inputs.anything }}"`, Scope{Workflow: true}}, // Inputs nil: any name
	} {
		_, err := Parse([]byte(ok.payload), ok.scope)
		require.NoError(t, err, ok.payload)
	}

	_, err = Parse([]byte(`{"a":`), Scope{})
	require.Error(t, err)
	require.NotErrorAs(t, err, &errs, "invalid JSON is not a template error")
}

// TestRenderFailures: a render that cannot complete is a *RenderError
// naming the string: data the fire lacks, a function's error, a bound.
func TestRenderFailures(t *testing.T) {
	t.Parallel()
	node := Scope{Workflow: true, Upstream: []string{"extract"}}
	d := Data{
		ScheduledFor: at(t, "2026-01-01T00:00:00Z"), TaskName: "n",
		Nodes: map[string]Node{"extract": {Status: "succeeded", Output: json.RawMessage(`{"count":1}`)}},
	}
	for _, c := range []struct {
		payload string
		scope   Scope
		path    string
		reason  string
	}{
		{`{"rows":"{{ .nodes.extract.output.rows }}"}`, node, "rows", `map has no entry for key "rows"`},
		{`{"d":"{{ date_add .task_name 1 }}"}`, Scope{}, "d", "neither a date"},
		{`{"d":"{{ date_add .business_date \"x\" }}"}`, Scope{}, "d", "not a whole number"},
		{`{"d":"{{ date_format 5 \"yyyy\" }}"}`, Scope{}, "d", "neither a date"},
		{`{"r":"{{ range 100000 }}{{ end }}"}`, Scope{}, "r", "iterate more than 10000 times"},
		{`{"r":"{{ range 100 }}{{ range 101 }}{{ end }}{{ end }}"}`, Scope{}, "r", "iterate more than 10000 times"},
		{`{"p":"{{ printf \"%0999999999d\" 1 }}"}`, Scope{}, "p", "at most 1000"},
		{`{"p":"{{ printf \"%*d\" 9999999 1 }}"}`, Scope{}, "p", "'*' widths"},
		{`{"p":"{{ $s := \"xxxxxxxxxxxxxxxx\" }}{{ range 40 }}{{ $s = printf \"%s%s\" $s $s }}{{ end }}{{ $s }}"}`, Scope{}, "p", "too large"},
	} {
		_, err := render(t, c.payload, c.scope, d)
		var re *RenderError
		require.ErrorAs(t, err, &re, c.payload)
		require.Equal(t, c.path, re.Path, c.payload)
		require.Contains(t, re.Error(), c.reason, c.payload)
		require.NotContains(t, re.Error(), rangeFunc, "internal names stay internal")
	}

	tpl, err := Parse([]byte(`{"a":"{{ .task_name }}{{ .task_name }}"}`), Scope{})
	require.NoError(t, err)
	_, err = tpl.Render(Data{TaskName: strings.Repeat("x", 60)}, 100)
	require.ErrorIs(t, err, ErrTooLarge, "the output is bounded")
	out, err := tpl.Render(Data{TaskName: "xy"}, 100)
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"xyxy"}`, string(out))
}

// FuzzParseRender: any payload parses or is refused without a panic, and
// one that renders renders JSON.
func FuzzParseRender(f *testing.F) {
	for _, s := range []string{
		`{"a":"{{ .round }}"}`, `"{{ date_add .business_date -1 }}"`, `["{{ json . }}", 1]`,
		`{"x":"{{ range .round }}{{ . }}{{ end }}"}`, `{"k":"{{ if eq .trigger \"x\" }}a{{ else }}b{{ end }}"}`,
	} {
		f.Add(s)
	}
	d := Data{ScheduledFor: time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), Round: 3, Trigger: "schedule"}
	f.Fuzz(func(t *testing.T, payload string) {
		tpl, err := Parse([]byte(payload), Scope{})
		if err != nil {
			var errs Errors
			if json.Valid([]byte(payload)) {
				require.ErrorAs(t, err, &errs, "valid JSON is refused only for its templates")
			}
			return
		}
		out, err := tpl.Render(d, 1<<16)
		if err == nil {
			require.True(t, json.Valid(out), "%s renders to JSON: %s", payload, out)
		}
	})
}

// TestReads: the run data a node's template names, for lineage — each
// input and upstream node once, sorted, and the whole of .inputs or
// .nodes when a template reads it as a whole.
func TestReads(t *testing.T) {
	t.Parallel()
	scope := Scope{Workflow: true, Upstream: []string{"extract", "load", "clean"}}
	for _, c := range []struct {
		payload string
		want    Reads
	}{
		{`{"a": 1, "b": "plain"}`, Reads{}},
		{`{"d": "{{ .business_date }}", "id": "{{ .workflow_run_id }}"}`, Reads{}},
		{`{"date": "{{ .inputs.date }}"}`, Reads{Inputs: []string{"date"}}},
		{
			`{"rows": "{{ .nodes.extract.output.rows }}", "d": "{{ .inputs.date }}", "m": "{{ .inputs.mode }}", "again": "{{ .inputs.date }}"}`,
			Reads{Inputs: []string{"date", "mode"}, Nodes: []string{"extract"}},
		},
		{
			`["{{ if eq .nodes.load.status \"succeeded\" }}{{ .nodes.clean.output }}{{ end }}", "{{ $.nodes.extract.output }}"]`,
			Reads{Nodes: []string{"clean", "extract", "load"}},
		},
		{`{"r": "{{ range .nodes.extract.output.rows }}{{ .id }},{{ end }}"}`, Reads{Nodes: []string{"extract"}}},
		{`{"all": "{{ json .inputs }}"}`, Reads{AllInputs: true}},
		{`{"k": "{{ index .nodes \"load\" }}", "x": "{{ (.nodes).extract.output }}"}`, Reads{Nodes: []string{"extract"}, AllNodes: true}},
		{`{"d": "{{ default \"x\" .inputs.day }}"}`, Reads{Inputs: []string{"day"}}},
	} {
		tpl, err := Parse([]byte(c.payload), scope)
		require.NoError(t, err, c.payload)
		require.Equal(t, c.want, tpl.Reads(), c.payload)
		require.Equal(t, c.want.Empty(), tpl.Reads().Empty(), c.payload)
	}
	u := Reads{Inputs: []string{"b"}, Nodes: []string{"x"}}.Union(Reads{Inputs: []string{"a", "b"}, AllNodes: true})
	require.Equal(t, Reads{Inputs: []string{"a", "b"}, Nodes: []string{"x"}, AllNodes: true}, u)
}

// TestRenderReusesNothingOfAnEarlierRender: a Template keeps the state of
// its renders (its functions bound to a renderer) to reuse it; each render
// still starts afresh, alone, whatever the ones before it did, and renders
// at the same time render their own data.
func TestRenderReusesNothingOfAnEarlierRender(t *testing.T) {
	t.Parallel()
	tpl, err := Parse([]byte(`{"n":"{{ range 6000 }}{{ end }}{{ .round }}","id":"{{ .execution_id }}","t":"{{ .task_name }}"}`), Scope{})
	require.NoError(t, err)
	// 6,000 iterations a render: two renders' counts together would pass
	// RangeMax.
	for i := range 3 {
		out, err := tpl.Render(Data{Round: i + 1, ExecutionID: "e", TaskName: "t"}, 0)
		require.NoError(t, err, "render %d", i)
		require.JSONEq(t, `{"n":"`+strconv.Itoa(i+1)+`","id":"e","t":"t"}`, string(out))
	}
	// A render that fails (its output over the bound) leaves nothing behind.
	_, err = tpl.Render(Data{Round: 1, ExecutionID: "e", TaskName: strings.Repeat("x", 200)}, 100)
	require.ErrorIs(t, err, ErrTooLarge)
	out, err := tpl.Render(Data{Round: 1, ExecutionID: "e", TaskName: "t"}, 100)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":"1","id":"e","t":"t"}`, string(out))

	// A single action's value is the render's own, never an earlier one's.
	single, err := Parse([]byte(`{"r":"{{ .round }}","s":"{{ .shard_index }}"}`), Scope{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	outs := make([]string, 40)
	errs := make([]error, len(outs))
	for i := range outs {
		wg.Go(func() {
			b, err := single.Render(Data{Round: i + 1, ShardIndex: i, ShardCount: len(outs)}, 0)
			outs[i], errs[i] = string(b), err
		})
	}
	wg.Wait()
	for i := range outs {
		require.NoError(t, errs[i])
		require.JSONEq(t, `{"r":`+strconv.Itoa(i+1)+`,"s":`+strconv.Itoa(i)+`}`, outs[i])
	}
}
