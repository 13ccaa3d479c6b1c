package template

import (
	"errors"
	"strconv"
	"strings"
	"text/template/parse"
)

// A fast part renders a templated string without text/template: text and
// actions whose pipelines read the scalar data (.round, .business_date,
// …), constants, and call date_add and date_format, which is what most
// payloads are. Executing such a template through text/template costs a
// reflected call per function and a map of the data per fire; a fast
// part calls the same functions with the same arguments and prints their
// values as text/template would. Anything else is left to text/template
// (compileFast returns nil), and so is any render that fails (an error,
// a bound passed): text/template renders it again and says why, in its
// words.
type fastPart struct {
	// segs are the string's text and actions in order; single: the
	// string is exactly one action, whose value keeps its JSON type.
	segs   []segment
	single bool
}

// segment is a text, or an action's pipeline (pipe non-nil).
type segment struct {
	text string
	pipe []expr
}

type exprOp uint8

const (
	opConst exprOp = iota // val
	opField               // the scalar datum name
	opFinal               // the value piped into the command
	opPipe                // a parenthesized pipeline: sub
	opCall                // fn(sub…)
)

// The functions a fast part calls.
const (
	fnDateAdd uint8 = iota
	fnDateFormat
)

// expr is a command of a pipeline or an argument of a call. A template
// is kept as long as its task is (the scheduler's cache): it is small.
type expr struct {
	op   exprOp
	fn   uint8
	name uint8
	val  any
	sub  []expr
}

// errSlow: this render is text/template's to do.
var errSlow = errors.New("render with text/template")

// compileFast returns the fast form of tree, a part's parsed template
// (single: its one action's pipeline ends in valueFunc), or nil when
// text/template must render it.
func compileFast(tree *parse.Tree, single bool) *fastPart {
	f := &fastPart{single: single}
	for _, n := range tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			f.segs = append(f.segs, segment{text: string(n.Text)})
		case *parse.ActionNode:
			cmds := n.Pipe.Cmds
			if single { // drop the capture: the fast part keeps the value itself
				cmds = cmds[:len(cmds)-1]
			}
			pipe, ok := compilePipe(n.Pipe, cmds)
			if !ok {
				return nil
			}
			f.segs = append(f.segs, segment{pipe: pipe})
		default:
			return nil
		}
	}
	return f
}

// compilePipe compiles cmds, pipe's commands, each one's value piped
// into the next.
func compilePipe(pipe *parse.PipeNode, cmds []*parse.CommandNode) ([]expr, bool) {
	if len(pipe.Decl) > 0 || len(cmds) == 0 {
		return nil, false
	}
	out := make([]expr, 0, len(cmds))
	for i, cmd := range cmds {
		e, ok := compileCmd(cmd, i > 0)
		if !ok {
			return nil, false
		}
		out = append(out, e)
	}
	return out, true
}

// compileCmd compiles a command; piped: a value is piped into it (its
// last argument, which only a function takes).
func compileCmd(cmd *parse.CommandNode, piped bool) (expr, bool) {
	id, ok := cmd.Args[0].(*parse.IdentifierNode)
	if !ok {
		if piped || len(cmd.Args) != 1 {
			return expr{}, false
		}
		return compileArg(cmd.Args[0])
	}
	var fn uint8
	switch id.Ident {
	case "date_add":
		fn = fnDateAdd
	case "date_format":
		fn = fnDateFormat
	default:
		return expr{}, false
	}
	args := make([]expr, 0, 2)
	for _, a := range cmd.Args[1:] {
		e, ok := compileArg(a)
		if !ok {
			return expr{}, false
		}
		args = append(args, e)
	}
	if piped {
		args = append(args, expr{op: opFinal})
	}
	if len(args) != 2 {
		return expr{}, false
	}
	if fn == fnDateFormat && args[1].op != opFinal && args[1].op != opConst {
		return expr{}, false // a layout read from the data or made by a pipeline: text/template's conversions
	}
	return expr{op: opCall, fn: fn, sub: args}, true
}

// compileArg compiles an argument: a scalar datum, a string or an int
// constant, or a parenthesized pipeline.
func compileArg(n parse.Node) (expr, bool) {
	switch n := n.(type) {
	case *parse.FieldNode:
		if len(n.Ident) != 1 {
			return expr{}, false
		}
		i := nameIndex(n.Ident[0])
		if i < 0 || i >= scalarCount {
			return expr{}, false
		}
		return expr{op: opField, name: uint8(i)}, true
	case *parse.StringNode:
		return expr{op: opConst, val: n.Text}, true
	case *parse.NumberNode:
		// text/template makes an int of an integer constant that is not
		// spelled as a float (1e3, 2.0), a hex or a rune.
		if !n.IsInt || n.IsComplex || strings.ContainsAny(n.Text, ".eEpPxX'_") {
			return expr{}, false
		}
		return expr{op: opConst, val: int(n.Int64)}, true
	case *parse.PipeNode:
		pipe, ok := compilePipe(n, n.Cmds)
		if !ok {
			return expr{}, false
		}
		return expr{op: opPipe, sub: pipe}, true
	}
	return expr{}, false
}

// render appends the part's JSON rendered with the data scalars to out;
// false (out as it was) when text/template must render it.
func (f *fastPart) render(out []byte, scalars *[scalarCount]any, maxBytes int) ([]byte, bool) {
	start := len(out)
	if f.single {
		v, err := evalPipe(f.segs[0].pipe, scalars)
		if err != nil {
			return out, false
		}
		switch v := v.(type) {
		case string:
			return appendJSONString(out, v), true
		case int:
			return strconv.AppendInt(out, int64(v), 10), true
		}
		return out, false
	}
	out = append(out, '"')
	for _, s := range f.segs {
		if s.pipe == nil {
			out = append(out, s.text...)
			continue
		}
		v, err := evalPipe(s.pipe, scalars)
		if err != nil {
			return out[:start], false
		}
		switch v := v.(type) {
		case string:
			out = append(out, v...)
		case int:
			out = strconv.AppendInt(out, int64(v), 10)
		default:
			return out[:start], false
		}
	}
	if len(out)-start-1 > maxBytes { // text/template's writer fails past the bound
		return out[:start], false
	}
	if plain(out[start+1:]) {
		return append(out, '"'), true
	}
	s := string(out[start+1:])
	b, err := marshal(s)
	if err != nil {
		return out[:start], false
	}
	return append(out[:start], b...), true
}

// evalPipe is the value of a pipeline.
func evalPipe(pipe []expr, scalars *[scalarCount]any) (any, error) {
	var final any
	for _, e := range pipe {
		v, err := eval(e, final, scalars)
		if err != nil {
			return nil, err
		}
		final = v
	}
	return final, nil
}

func eval(e expr, final any, scalars *[scalarCount]any) (any, error) {
	switch e.op {
	case opConst:
		return e.val, nil
	case opField:
		if v := scalars[e.name]; v != nil {
			return v, nil
		}
		return nil, errSlow // not built: cannot happen, the part's names are
	case opFinal:
		return final, nil
	case opPipe:
		return evalPipe(e.sub, scalars)
	}
	var args [2]any
	for i, a := range e.sub {
		v, err := eval(a, final, scalars)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	if e.fn == fnDateAdd {
		return dateAdd(args[0], args[1])
	}
	layout, ok := args[1].(string) // text/template converts only a string to a string parameter
	if !ok {
		return nil, errSlow
	}
	return dateFormat(args[0], layout)
}

// appendJSONString appends s's JSON as marshal makes it.
func appendJSONString(out []byte, s string) []byte {
	if plain([]byte(s)) {
		out = append(out, '"')
		out = append(out, s...)
		return append(out, '"')
	}
	b, _ := marshal(s) // a string always marshals
	return append(out, b...)
}

// plain reports whether b is printable ASCII that JSON spells as
// itself in a string: no quote, backslash or control character.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
