// Package template renders templated payloads: a JSON document whose
// strings are Go text/template templates over a fire's data (its slot in
// UTC and in its schedule's zone, its business date, its ids, …).
//
// Parse checks a payload once (each string parses, and names only data
// that can exist for the resource, Scope); Render turns it into the bytes a
// fire sends. Everything outside the templated strings keeps its original
// bytes (key order, spacing, numbers); a string that is exactly one action
// is replaced by that value's JSON, so numbers, booleans, objects, arrays
// and null keep their type.
//
// A template reads the data and the package's functions (date_add,
// date_format, json, default) and text/template's built-ins, nothing of
// the process, its environment or its files. Rendering is bounded: every
// string a function makes and the output are capped (Render's max), and
// the iterations of every range, all taken together, by RangeMax.
//
// It imports nothing of ax: the service loads the task, builds Data and
// stores what Render returns.
package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"time"
)

// RangeMax bounds the iterations of every range of one render, all
// taken together (nested ranges count every inner pass).
const RangeMax = 10_000

// Internal functions the parsed trees call: valueFunc captures the value
// of a string that is exactly one action, rangeFunc counts a range's
// iterations. A template may not name them.
const (
	valueFunc    = "_ax_value"
	rangeFunc    = "_ax_range"
	internalPref = "_ax"
)

// Scope says which data a payload may read. The zero Scope is a task's:
// the slot, the ids, the round, the shard and the trigger.
type Scope struct {
	// Workflow: a workflow node's payload, which may also read
	// .workflow_id, .workflow_run_id, .inputs.<name> and
	// .nodes.<key>.output… or .nodes.<key>.status.
	Workflow bool
	// Inputs are the workflow's input names (.inputs.<name>); nil: any
	// name. With Workflow.
	Inputs []string
	// Upstream are the node keys whose .nodes.<key> the payload may
	// read: the node's upstream nodes. With Workflow.
	Upstream []string
	// Event: an event-triggered fire, which may also read .event.name,
	// .event.key and .event.payload….
	Event bool
}

// The names of the data (Data's fields as a template sees them).
const (
	NameScheduledFor      = "scheduled_for"
	NameScheduledForLocal = "scheduled_for_local"
	NameBusinessDate      = "business_date"
	NameTimezone          = "timezone"
	NameExecutionID       = "execution_id"
	NameTaskID            = "task_id"
	NameTaskName          = "task_name"
	NameRound             = "round"
	NameShardIndex        = "shard_index"
	NameShardCount        = "shard_count"
	NameTrigger           = "trigger"
	NameWorkflowID        = "workflow_id"
	NameWorkflowRunID     = "workflow_run_id"
	NameInputs            = "inputs"
	NameNodes             = "nodes"
	NameEvent             = "event"
)

// taskNames are the data of every fire: scalars.
var taskNames = []string{
	NameScheduledFor, NameScheduledForLocal, NameBusinessDate, NameTimezone, NameExecutionID,
	NameTaskID, NameTaskName, NameRound, NameShardIndex, NameShardCount, NameTrigger,
}

// Names returns the top-level names a payload of scope may read, in
// documentation order.
func (s Scope) Names() []string {
	names := append([]string(nil), taskNames...)
	if s.Workflow {
		names = append(names, NameWorkflowID, NameWorkflowRunID, NameInputs, NameNodes)
	}
	if s.Event {
		names = append(names, NameEvent)
	}
	return names
}

// Data is what one fire's payload is rendered with.
type Data struct {
	// ScheduledFor is the slot; Location its schedule's zone (nil: UTC).
	ScheduledFor time.Time
	Location     *time.Location
	ExecutionID  string
	TaskID       string
	TaskName     string
	// Round is the slot's round (1: its first fire).
	Round int
	// ShardIndex of ShardCount (0 of 1: not sharded).
	ShardIndex, ShardCount int
	// Trigger is what created the execution (schedule, manual, backfill, …).
	Trigger string

	// A workflow node's (Scope.Workflow).
	WorkflowID, WorkflowRunID string
	// Inputs are the run's inputs, each a JSON value.
	Inputs map[string]json.RawMessage
	// Nodes are the upstream nodes by key.
	Nodes map[string]Node

	// Event is an event-triggered fire's event (Scope.Event).
	Event *Event
}

// Node is an upstream node as a template sees it.
type Node struct {
	// Status is its state.
	Status string
	// Output is its output, a JSON value (nil: none, null to a template).
	Output json.RawMessage
}

// Event is the event a fire answers.
type Event struct {
	Name, Key string
	// Payload is its payload, a JSON value.
	Payload json.RawMessage
}

// Error is a template of a payload that does not parse, or names data
// that cannot exist for its resource.
type Error struct {
	// Path is where the string is in the payload: "" (the payload is a
	// string), "rows", "items[2].date".
	Path   string
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Field is e's path under prefix ("payload" → "payload.rows").
func (e *Error) Field(prefix string) string { return join(prefix, e.Path) }

// Errors are the Errors of one payload, in document order.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// RenderError is a render that failed: a function's error, data a
// template reads that this fire lacks, a bound passed.
type RenderError struct {
	// Path is the string's, as Error's ("" for the output as a whole).
	Path string
	Err  error
}

func (e *RenderError) Error() string {
	if e.Path == "" {
		return "render payload: " + e.Err.Error()
	}
	return "render payload." + e.Path + ": " + e.Err.Error()
}

func (e *RenderError) Unwrap() error { return e.Err }

// ErrTooLarge: a render made a string or an output over its bound.
var ErrTooLarge = errors.New("the rendered payload is too large")

// Template is a parsed payload. It is safe for concurrent use.
type Template struct {
	raw   []byte
	parts []part
	reads Reads
	// names are the data its parts read: a render builds only those.
	names names
	scope Scope
	// trees are the parts' parsed templates, which a part that renders
	// fast does not keep: parsed again (once) when a render of the
	// template needs text/template.
	trees     []*parse.Tree
	treesOnce sync.Once
	treesErr  error
	// execs holds *executor: one render's state with the parts' templates
	// bound to it, built once and reused, because binding functions to a
	// text/template (Funcs) costs more than executing it.
	execs sync.Pool
}

// executor renders t's parts: a renderer and, per part, a template whose
// functions are bound to it. One render at a time uses it.
type executor struct {
	r     *renderer
	tmpls []*template.Template
}

// executor returns an executor of t from its pool, or a new one.
func (t *Template) executor() (*executor, error) {
	if x, ok := t.execs.Get().(*executor); ok {
		return x, nil
	}
	t.treesOnce.Do(t.parseTrees)
	if t.treesErr != nil {
		return nil, t.treesErr
	}
	x := &executor{r: &renderer{}, tmpls: make([]*template.Template, len(t.parts))}
	fm := x.r.funcs()
	for i, p := range t.parts {
		tmpl := template.New(p.path).Option("missingkey=error").Funcs(fm)
		if _, err := tmpl.AddParseTree(p.path, t.trees[i]); err != nil {
			return nil, err
		}
		x.tmpls[i] = tmpl
	}
	return x, nil
}

// parseTrees sets t.trees: the parts' own, or parsed again.
func (t *Template) parseTrees() {
	t.trees = make([]*parse.Tree, len(t.parts))
	for i, p := range t.parts {
		if p.tree != nil {
			t.trees[i] = p.tree
			continue
		}
		var src string
		if err := json.Unmarshal(t.raw[p.start:p.end], &src); err != nil {
			t.treesErr = err
			return
		}
		again, err := parsePart(src, t.scope)
		if err != nil { // cannot happen: it parsed before
			t.treesErr = err
			return
		}
		t.trees[i] = again.tree
	}
}

// part is one templated string of the payload: raw[start:end] is its
// JSON literal.
type part struct {
	start, end int
	path       string
	tree       *parse.Tree // nil when fast renders it (Template.trees)
	single     bool        // exactly one action: its value keeps its JSON type
	reads      Reads
	names      names
	// fast renders the part without text/template when it can (nil:
	// never).
	fast *fastPart
}

// Parse checks payload, a JSON document, for scope: every string holding
// "{{" is a template that must parse and name only data of scope.
// Strings without "{{", object keys and everything else are sent as they
// are. It returns Errors (each *Error), or another error when payload is
// not JSON.
func Parse(payload []byte, scope Scope) (*Template, error) {
	if !json.Valid(payload) {
		return nil, errors.New("the payload is not valid JSON")
	}
	t := &Template{raw: payload, scope: scope}
	var errs Errors
	err := walkStrings(payload, func(start, end int, path string) {
		var src string
		lit := payload[start:end]
		if !bytes.Contains(lit, []byte("{{")) {
			return
		}
		if err := json.Unmarshal(lit, &src); err != nil { // cannot happen: payload is valid JSON
			errs = append(errs, &Error{Path: path, Reason: err.Error()})
			return
		}
		p, err := parsePart(src, scope)
		if err != nil {
			errs = append(errs, &Error{Path: path, Reason: err.Error()})
			return
		}
		p.start, p.end, p.path = start, end, path
		if p.fast != nil {
			p.tree = nil // parsed again if a render needs it
		}
		t.parts = append(t.parts, p)
		t.reads = t.reads.Union(p.reads)
		t.names |= p.names
	})
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

// Check is Parse for its errors alone.
func Check(payload []byte, scope Scope) error {
	_, err := Parse(payload, scope)
	return err
}

// Reads returns the run data (inputs, upstream nodes) t's templates
// name: what a workflow node's payload or run_if is rendered from.
func (t *Template) Reads() Reads { return t.reads }

// Size is about how many bytes t keeps (its payload, its parts and their
// compiled or parsed forms, measured for typical payloads), for a cache
// to bound what it holds.
func (t *Template) Size() int {
	n := 256 + len(t.raw)
	for _, p := range t.parts {
		n += 160 + len(p.path)
		if p.fast != nil {
			n += 12 * (p.end - p.start)
		} else {
			n += 32 * (p.end - p.start)
		}
	}
	return n
}

// Templated reports whether t has a template at all (Render then returns
// the payload's own bytes).
func (t *Template) Templated() bool { return len(t.parts) > 0 }

// Render renders t with d into at most maxBytes bytes (0: no bound but
// the payload's own): the payload's bytes with each templated string
// replaced by its rendering. It returns a *RenderError when a template
// fails.
func (t *Template) Render(d Data, maxBytes int) ([]byte, error) {
	if len(t.parts) == 0 {
		return t.raw, nil
	}
	if maxBytes <= 0 {
		maxBytes = max(len(t.raw), 1<<20)
	}
	scalars := d.scalars(t.names)
	var (
		x    *executor // the parts text/template renders: got at the first
		data map[string]any
	)
	defer func() {
		if x != nil {
			t.execs.Put(x)
		}
	}()
	out := make([]byte, 0, len(t.raw)+64)
	at := 0
	for i, p := range t.parts {
		out = append(out, t.raw[at:p.start]...)
		ok := false
		if p.fast != nil {
			out, ok = p.fast.render(out, &scalars, maxBytes)
		}
		if !ok { // no fast path, or it failed: text/template says how
			if x == nil {
				var err error
				if x, err = t.executor(); err != nil {
					return nil, &RenderError{Err: err}
				}
				*x.r = renderer{max: maxBytes}
				data = d.values(t.names, &scalars)
			}
			v, err := x.r.render(x.tmpls[i], p, data)
			if err != nil {
				return nil, &RenderError{Path: p.path, Err: err}
			}
			out = append(out, v...)
		}
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

// scalars are d's scalar data, by index, that ns names (nil: not read).
func (d Data) scalars(ns names) (v [scalarCount]any) {
	loc := d.Location
	if loc == nil {
		loc = time.UTC
	}
	if ns.has(iScheduledFor) {
		v[iScheduledFor] = d.ScheduledFor.UTC().Format(time.RFC3339Nano)
	}
	if ns.has(iScheduledForLocal) || ns.has(iBusinessDate) {
		local := d.ScheduledFor.In(loc)
		if ns.has(iScheduledForLocal) {
			v[iScheduledForLocal] = local.Format(time.RFC3339Nano)
		}
		if ns.has(iBusinessDate) {
			v[iBusinessDate] = local.Format(time.DateOnly)
		}
	}
	if ns.has(iTimezone) {
		v[iTimezone] = loc.String()
	}
	setRead(&v, ns, iExecutionID, d.ExecutionID)
	setRead(&v, ns, iTaskID, d.TaskID)
	setRead(&v, ns, iTaskName, d.TaskName)
	setRead(&v, ns, iRound, d.Round)
	setRead(&v, ns, iShardIndex, d.ShardIndex)
	setRead(&v, ns, iShardCount, max(d.ShardCount, 1))
	setRead(&v, ns, iTrigger, d.Trigger)
	setRead(&v, ns, iWorkflowID, d.WorkflowID)
	setRead(&v, ns, iWorkflowRunID, d.WorkflowRunID)
	return v
}

// setRead sets v[i] to x when ns names it (boxing x only then).
func setRead[T string | int](v *[scalarCount]any, ns names, i int, x T) {
	if ns.has(i) {
		v[i] = x
	}
}

// values is d as a template sees it: the names ns names, the scalars
// among them already built.
func (d Data) values(ns names, scalars *[scalarCount]any) map[string]any {
	m := make(map[string]any, 4)
	for i, v := range scalars {
		if ns.has(i) {
			m[dataNames[i]] = v
		}
	}
	if d.Inputs != nil && ns.has(iInputs) {
		in := make(map[string]any, len(d.Inputs))
		for k, raw := range d.Inputs {
			in[k] = decode(raw)
		}
		m[NameInputs] = in
	}
	if d.Nodes != nil && ns.has(iNodes) {
		nodes := make(map[string]any, len(d.Nodes))
		for k, n := range d.Nodes {
			nodes[k] = map[string]any{"status": n.Status, "output": decode(n.Output)}
		}
		m[NameNodes] = nodes
	}
	if d.Event != nil && ns.has(iEvent) {
		m[NameEvent] = map[string]any{"name": d.Event.Name, "key": d.Event.Key, "payload": decode(d.Event.Payload)}
	}
	return m
}

// decode is raw as a template reads it (numbers as json.Number: exact);
// nil when raw is empty or not JSON.
func decode(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// renderer is one render's state: its bounds and the value a
// single-action string captured.
type renderer struct {
	max      int
	ranged   int
	captured bool
	value    any
}

// render executes tmpl, part p's template bound to r.
func (r *renderer) render(tmpl *template.Template, p part, data map[string]any) ([]byte, error) {
	w := &limitWriter{max: r.max}
	r.captured, r.value = false, nil
	if err := tmpl.Execute(w, data); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, r.max)
		}
		return nil, cleanExecError(err)
	}
	if p.single && r.captured {
		return marshal(r.value)
	}
	return marshal(w.buf.String())
}

// cleanExecError strips text/template's location prefix, which names
// the string by its path already given.
func cleanExecError(err error) error {
	var ee template.ExecError
	if errors.As(err, &ee) {
		err = ee.Err
	}
	msg := strings.ReplaceAll(err.Error(), "error calling "+rangeFunc+": ", "")
	if i := strings.Index(msg, ": executing "); i >= 0 {
		if j := strings.Index(msg[i:], "\" at <"); j >= 0 {
			if k := strings.Index(msg[i+j:], ">: "); k >= 0 {
				return errors.New(msg[i+j+k+3:])
			}
		}
	}
	return errors.New(msg)
}

// marshal is v's JSON, without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// limitWriter keeps what is written up to max bytes, and fails past it.
type limitWriter struct {
	buf bytes.Buffer
	max int
}

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		return 0, fmt.Errorf("%w (more than %d bytes)", ErrTooLarge, w.max)
	}
	return w.buf.Write(p)
}

// parsePart parses src, checks the data it names against scope, and
// prepares its tree: each range counted, a single action's value
// captured.
func parsePart(src string, scope Scope) (part, error) {
	tmpl, err := template.New("payload").Funcs(stubFuncs).Parse(src)
	if err != nil {
		return part{}, parseError(err)
	}
	if len(tmpl.Templates()) > 1 {
		return part{}, errors.New("define and block are not supported: a payload string is one template")
	}
	tree := tmpl.Tree
	c := checker{scope: scope}
	c.list(tree.Root, true)
	if c.err != nil {
		return part{}, c.err
	}
	p := part{tree: tree, reads: c.reads, names: c.names}
	if nodes := tree.Root.Nodes; len(nodes) == 1 {
		if a, ok := nodes[0].(*parse.ActionNode); ok && len(a.Pipe.Decl) == 0 {
			p.single = true
			a.Pipe.Cmds = append(a.Pipe.Cmds, identCmd(tree, a.Pipe.Position(), valueFunc))
		}
	}
	boundRanges(tree, tree.Root)
	p.fast = compileFast(tree, p.single)
	return p, nil
}

// parseError is err without text/template's "template: payload:1:"
// prefix when it has one.
func parseError(err error) error {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "template: payload:"); ok {
		if i := strings.Index(rest, ": "); i >= 0 {
			return fmt.Errorf("does not parse: %s", rest[i+2:])
		}
	}
	return fmt.Errorf("does not parse: %s", msg)
}

func identCmd(tree *parse.Tree, pos parse.Pos, name string) *parse.CommandNode {
	return &parse.CommandNode{
		NodeType: parse.NodeCommand, Pos: pos,
		Args: []parse.Node{parse.NewIdentifier(name).SetTree(tree).SetPos(pos)},
	}
}

// boundRanges makes every range of list count its iterations (rangeFunc).
func boundRanges(tree *parse.Tree, list *parse.ListNode) {
	if list == nil {
		return
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.RangeNode:
			n.Pipe.Cmds = append(n.Pipe.Cmds, identCmd(tree, n.Pipe.Position(), rangeFunc))
			boundRanges(tree, n.List)
			boundRanges(tree, n.ElseList)
		case *parse.IfNode:
			boundRanges(tree, n.List)
			boundRanges(tree, n.ElseList)
		case *parse.WithNode:
			boundRanges(tree, n.List)
			boundRanges(tree, n.ElseList)
		}
	}
}

// join is path under prefix: "payload" + "rows" → "payload.rows",
// "payload" + "[2]" → "payload[2]".
func join(prefix, path string) string {
	switch {
	case path == "":
		return prefix
	case prefix == "":
		return strings.TrimPrefix(path, ".")
	case strings.HasPrefix(path, "["):
		return prefix + path
	default:
		return prefix + "." + path
	}
}

// walkStrings calls fn with the bounds and path of every string value of
// doc, valid JSON, in document order (object keys are not values).
func walkStrings(doc []byte, fn func(start, end int, path string)) error {
	type frame struct {
		array bool
		index int
		key   string
		path  string
	}
	var stack []frame
	path := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.array {
			return f.path + "[" + strconv.Itoa(f.index) + "]"
		}
		return join(f.path, f.key)
	}
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '{', '[':
			stack = append(stack, frame{array: c == '[', path: path()})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if f := &stack[len(stack)-1]; f.array {
				f.index++
			}
		case '"':
			end := stringEnd(doc, i)
			j := end
			for j < len(doc) && (doc[j] == ' ' || doc[j] == '\t' || doc[j] == '\n' || doc[j] == '\r') {
				j++
			}
			if j < len(doc) && doc[j] == ':' { // a key
				var key string
				if err := json.Unmarshal(doc[i:end], &key); err != nil {
					return err
				}
				stack[len(stack)-1].key = keyPath(key)
			} else {
				fn(i, end, path())
			}
			i = end - 1
		}
	}
	return nil
}

// keyPath is an object key as a path element: itself when it is a plain
// name, else quoted (items["a.b"]).
func keyPath(key string) string {
	plain := key != ""
	for _, r := range key {
		word := r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127
		if !word {
			plain = false
			break
		}
	}
	if plain {
		return key
	}
	return "[" + strconv.Quote(key) + "]"
}

// stringEnd returns the index just past the JSON string literal that
// starts at doc[start] (a '"').
func stringEnd(doc []byte, start int) int {
	for i := start + 1; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(doc)
}
